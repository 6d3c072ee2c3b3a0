# `python -m attention_jax.main` (a README command) runs attention_jax/commands/main.py.
from absl import app, flags

from attention_jax.commands import config_errors, main

__doc__ = main.__doc__  # What --help prints, with the command's flags:

if __name__ == "__main__":
    flags.adopt_module_key_flags(main)
    app.run(main.main, flags_parser=config_errors.parse_flags_or_exit)

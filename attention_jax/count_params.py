# `python -m attention_jax.count_params` (a README command) runs attention_jax/commands/count_params.py.
from absl import app, flags

from attention_jax.commands import count_params

__doc__ = count_params.__doc__  # What --help prints, with the command's flags:

if __name__ == "__main__":
    flags.adopt_module_key_flags(count_params)
    app.run(count_params.main)

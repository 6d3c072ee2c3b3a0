# `python -m attention_jax.translate` (a README command) runs attention_jax/commands/translate.py.
from absl import app, flags

from attention_jax.commands import translate

__doc__ = translate.__doc__  # What --help prints, with the command's flags:

if __name__ == "__main__":
    flags.adopt_module_key_flags(translate)
    app.run(translate.main)

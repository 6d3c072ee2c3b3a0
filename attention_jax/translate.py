# `python -m attention_jax.translate` (a README command) runs attention_jax/commands/translate.py.
from absl import app

from attention_jax.commands import translate

__doc__ = translate.__doc__  # What --help prints.

if __name__ == "__main__":
    app.run(translate.main)

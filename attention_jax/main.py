# `python -m attention_jax.main` (a README command) runs attention_jax/commands/main.py.
from absl import app

from attention_jax.commands import main

__doc__ = main.__doc__  # What --help prints.

if __name__ == "__main__":
    app.run(main.main)

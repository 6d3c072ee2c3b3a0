# `python -m attention_jax.count_params` (a README command) runs attention_jax/commands/count_params.py.
from absl import app

from attention_jax.commands import count_params

__doc__ = count_params.__doc__  # What --help prints.

if __name__ == "__main__":
    app.run(count_params.main)

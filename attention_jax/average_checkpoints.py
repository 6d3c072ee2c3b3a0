# `python -m attention_jax.average_checkpoints` (a README command) runs attention_jax/commands/average_checkpoints.py.
from absl import app

from attention_jax.commands import average_checkpoints

__doc__ = average_checkpoints.__doc__  # What --help prints.

if __name__ == "__main__":
    app.run(average_checkpoints.main)

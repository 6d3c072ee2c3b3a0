# `python -m attention_jax.evaluate` (a README command) runs attention_jax/commands/evaluate.py.
from absl import app

from attention_jax.commands import evaluate

__doc__ = evaluate.__doc__  # What --help prints.

if __name__ == "__main__":
    app.run(evaluate.main)

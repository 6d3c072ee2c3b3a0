# `python -m attention_jax.plot_attention` (a README command) runs attention_jax/commands/plot_attention.py.
from absl import app

from attention_jax.commands import plot_attention

__doc__ = plot_attention.__doc__  # What --help prints.

if __name__ == "__main__":
    app.run(plot_attention.main)

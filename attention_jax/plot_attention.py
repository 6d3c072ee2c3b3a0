# `python -m attention_jax.plot_attention` (a README command) runs attention_jax/commands/plot_attention.py.
from absl import app, flags

from attention_jax.commands import plot_attention

__doc__ = plot_attention.__doc__  # What --help prints, with the command's flags:

if __name__ == "__main__":
    flags.adopt_module_key_flags(plot_attention)
    app.run(plot_attention.main)

# `python -m attention_jax.plot_attention` (a README command) and `attention-jax-plot-attention` run
# attention_jax/commands/plot_attention.py.
from attention_jax.commands import entry_points, plot_attention

__doc__ = plot_attention.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-plot-attention``: the same as ``python -m attention_jax.plot_attention``."""
    entry_points.run_command(plot_attention)


if __name__ == "__main__":
    run()

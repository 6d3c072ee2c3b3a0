"""``python -m attention_jax.plot_attention`` and ``attention-jax-plot-attention``.

Both run :mod:`attention_jax.commands.plot_attention`.
"""
from attention_jax.commands import entry_points, plot_attention

__doc__ = plot_attention.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-plot-attention``: the same as ``python -m attention_jax.plot_attention``."""
    entry_points.run_command(plot_attention)


if __name__ == "__main__":
    run()

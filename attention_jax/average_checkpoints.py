"""``python -m attention_jax.average_checkpoints`` and ``attention-jax-average-checkpoints``.

Both run :mod:`attention_jax.commands.average_checkpoints`.
"""
from attention_jax.commands import average_checkpoints, entry_points

__doc__ = average_checkpoints.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-average-checkpoints``: the same as ``python -m attention_jax.average_checkpoints``."""
    entry_points.run_command(average_checkpoints)


if __name__ == "__main__":
    run()

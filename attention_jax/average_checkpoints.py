# `python -m attention_jax.average_checkpoints` (a README command) and `attention-jax-average-checkpoints` run
# attention_jax/commands/average_checkpoints.py.
from attention_jax.commands import average_checkpoints, entry_points

__doc__ = average_checkpoints.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-average-checkpoints``: the same as ``python -m attention_jax.average_checkpoints``."""
    entry_points.run_command(average_checkpoints)


if __name__ == "__main__":
    run()

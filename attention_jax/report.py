"""``python -m attention_jax.report`` and ``attention-jax-report`` run :mod:`attention_jax.commands.report`."""
from attention_jax.commands import entry_points, report

__doc__ = report.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-report``: the same as ``python -m attention_jax.report``."""
    entry_points.run_command(report)


if __name__ == "__main__":
    run()

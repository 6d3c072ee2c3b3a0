"""``python -m attention_jax.export`` and ``attention-jax-export`` run :mod:`attention_jax.commands.export`."""
from attention_jax.commands import entry_points, export

__doc__ = export.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-export``: the same as ``python -m attention_jax.export``."""
    entry_points.run_command(export)


if __name__ == "__main__":
    run()

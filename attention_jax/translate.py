"""``python -m attention_jax.translate`` and ``attention-jax-translate`` run :mod:`attention_jax.commands.translate`."""
from attention_jax.commands import entry_points, translate

__doc__ = translate.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-translate``: the same as ``python -m attention_jax.translate``."""
    entry_points.run_command(translate)


if __name__ == "__main__":
    run()

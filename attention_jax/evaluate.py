"""``python -m attention_jax.evaluate`` and ``attention-jax-evaluate`` run :mod:`attention_jax.commands.evaluate`."""
from attention_jax.commands import entry_points, evaluate

__doc__ = evaluate.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-evaluate``: the same as ``python -m attention_jax.evaluate``."""
    entry_points.run_command(evaluate)


if __name__ == "__main__":
    run()

"""``python -m attention_jax.generate`` and ``attention-jax-generate`` run :mod:`attention_jax.commands.generate`."""
from attention_jax.commands import entry_points, generate

__doc__ = generate.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-generate``: the same as ``python -m attention_jax.generate``."""
    entry_points.run_command(generate)


if __name__ == "__main__":
    run()

# `python -m attention_jax.generate` (a README command) and `attention-jax-generate` run
# attention_jax/commands/generate.py.
from attention_jax.commands import entry_points, generate

__doc__ = generate.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-generate``: the same as ``python -m attention_jax.generate``."""
    entry_points.run_command(generate)


if __name__ == "__main__":
    run()

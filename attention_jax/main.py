"""``python -m attention_jax.main`` and ``attention-jax-train`` run :mod:`attention_jax.commands.train`."""
from attention_jax.commands import config_errors, entry_points, train

__doc__ = train.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-train``: the same as ``python -m attention_jax.main``."""
    entry_points.run_command(train, flags_parser=config_errors.parse_flags_or_exit, name="attention_jax.main")


if __name__ == "__main__":
    run()

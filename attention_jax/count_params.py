"""``python -m attention_jax.count_params`` and ``attention-jax-count-params``.

Both run :mod:`attention_jax.commands.count_params`.
"""
from attention_jax.commands import config_errors, count_params, entry_points

__doc__ = count_params.__doc__  # What --help prints, above the command's flags.


def run() -> None:
    """``attention-jax-count-params``: the same as ``python -m attention_jax.count_params``."""
    entry_points.run_command(count_params, flags_parser=config_errors.parse_flags_or_exit)


if __name__ == "__main__":
    run()

"""``attention-jax-sweep`` and ``python -m attention_jax.sweep``: the sweep launcher from any directory.

Runs ``launch.sweep`` (not installed) from the checkout this package was installed from.
"""

from __future__ import annotations

import importlib

from attention_jax.commands import entry_points, shipped_configs
from attention_jax.foundation.user_errors import UserInputError, exit_with_error


def run() -> None:
    """Run ``attention-jax-sweep``: ``launch.sweep`` (its flags, its exit status) from this attention_jax's checkout."""
    try:
        shipped_configs.use_checkout("attention-jax-sweep")
    except UserInputError as error:
        exit_with_error("attention_jax.sweep", str(error))
    launcher = importlib.import_module("launch.sweep")
    entry_points.show_in_help(launcher, replace_doc=True)  # --help: the launcher's usage and flags, not this shim's.
    launcher.run()


if __name__ == "__main__":
    run()

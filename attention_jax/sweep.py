"""``attention-jax-sweep`` and ``python -m attention_jax.sweep``: the sweep launcher from any directory.

The launcher lives in the repository's ``launch/`` folder (``python -m launch.sweep``, its alias inside
the checkout), which is not installed (``pyproject.toml`` installs ``attention_jax`` alone, so that no top-level
``launch`` package lands in site-packages). This thin entry point puts the checkout that ``attention_jax``
was installed from (``pip install -e .``) on ``sys.path`` and runs ``launch.sweep`` with the same flags,
so a sweep file in any directory runs from there::

    attention-jax-sweep --config=my_sweep.py --executor=local --root=runs/my_sweep --seeds=2

Without a checkout (a wheel install) it fails in one line that says what to do, exit status 2.
"""

from __future__ import annotations

import importlib

from attention_jax.commands import entry_points, shipped_configs
from attention_jax.foundation.user_errors import UserInputError, exit_with_error


def run() -> None:
    """``attention-jax-sweep``: ``launch.sweep`` (its flags, exit status) from the checkout of this attention_jax."""
    try:
        shipped_configs.use_checkout("attention-jax-sweep")
    except UserInputError as error:
        exit_with_error("attention_jax.sweep", str(error))
    launcher = importlib.import_module("launch.sweep")
    entry_points.show_in_help(launcher, replace_doc=True)  # --help: the launcher's usage and flags, not this shim's.
    launcher.run()


if __name__ == "__main__":
    run()

"""``python -m attention_jax.reports.step_budgets``: a sweep's rows judged at several step budgets (flags, ``main``)."""

from __future__ import annotations

import os

from absl import flags

from attention_jax.commands import entry_points
from attention_jax.foundation.user_errors import UserInputError, exit_with_error
from attention_jax.reports.comparison_report import resolve_reference
from attention_jax.reports.step_budgets import budget_markdown, plot_changes, read_sweep
from attention_jax.reports.sweep_rows import read_sweep_rows


def _define_flags() -> dict[str, flags.FlagHolder]:
    """The command's flags, defined only when it runs as a command (importing it defines none)."""
    return {
        "root": flags.DEFINE_string("root", None, "Sweep root (ROOT/<row>/seed_<k>), e.g. runs/table2_pilot."),
        "budgets": flags.DEFINE_list("budgets", ["3000", "4500", "6000"], "Steps at which to judge the rows."),
        "out": flags.DEFINE_string("out", None, "Directory for step_budgets.md and step_budgets.png (default: ROOT)."),
        "window": flags.DEFINE_integer("window", 500, "Steps over which training perplexity is averaged."),
    }


_FLAGS: dict[str, flags.FlagHolder] = {}


_PROGRAM = "attention_jax.reports.step_budgets"  # Its error lines' prefix in-process.


def _fail(message: str) -> None:
    exit_with_error(_PROGRAM, message)


def main(argv: list[str]) -> None:
    """Write the step-budget report of ``--root``.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line.
    """
    del argv
    if not _FLAGS['root'].value or not os.path.exists(os.path.join(_FLAGS['root'].value, "sweep.json")):
        _fail(f"--root={_FLAGS['root'].value!r} holds no sweep.json; point it at a sweep root.")
    try:
        budgets = [int(value) for value in _FLAGS['budgets'].value]
    except ValueError:
        budgets = []
        _fail(f"--budgets={','.join(_FLAGS['budgets'].value)} must be integers, e.g. 3000,6000.")
    try:
        runs = read_sweep(_FLAGS['root'].value)
    except UserInputError as error:  # A damaged JSON file or a config the schema refuses (ConfigError).
        _fail(str(error))
    reference = resolve_reference(*read_sweep_rows(_FLAGS['root'].value, all_rows=True))[0]
    if reference not in runs:
        _fail(f"the sweep has no {reference} run with metrics yet.")
    out = _FLAGS['out'].value or _FLAGS['root'].value
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "step_budgets.md"), "w") as report_file:
        report_file.write(budget_markdown(runs, budgets, _FLAGS['window'].value, reference))
    plot_changes(runs, os.path.join(out, "step_budgets.png"), reference)
    print(f"Wrote {os.path.join(out, 'step_budgets.md')} and step_budgets.png")


def run() -> None:
    """Define the flags, then run :func:`main`, a mistake in one line."""
    _FLAGS.update(_define_flags())
    entry_points.run_in_one_line(_PROGRAM, main)

"""Paper-direction verdicts: each row's paired change of dev perplexity against the paper's direction.

For a sweep file with ``get_paper_figures()``: ``reproduced`` / ``opposite`` when the change is beyond the seeds'
spread (:func:`attention_jax.reports.comparison.beyond_spread`) with / against the paper's sign, else ``within
noise``; where the paper shows no difference, ``reproduced`` means within noise and ``differs`` beyond it. One
paired seed: the sign alone. A row with a diverged seed is ``unstable``, the other seeds' verdict in its basis; the
diverged seed is left out of its means (:func:`attention_jax.reports.comparison.counted_runs`).
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import TYPE_CHECKING, Sequence

from attention_jax.reports import comparison
from attention_jax.reports.comparison import SPREAD_FACTOR, beyond_spread

if TYPE_CHECKING:  # Only for annotations.
    from attention_jax.reports.sweep_rows import RowReport

__all__ = ["SPREAD_FACTOR", "aggregate", "paper_change", "sign",
           "verdict"]
PAPER_METRICS = tuple(metric for metric in comparison.METRICS if metric.name in ("dev_ppl", "dev_bleu"))


def sign(value: float) -> int:
    """-1, 0 or 1: the direction of a change (the paper's, for :func:`verdict`).

    Parameters
    ----------
    value : float
        A change.

    Returns
    -------
    int
        Its sign.
    """
    return (value > 0) - (value < 0)


@dataclasses.dataclass(frozen=True)
class RowStats:
    """A row's figures over its finished seeds, and its verdict against the paper."""

    row: str
    seeds: int
    pending: int
    dev_ppl: tuple[float, ...]
    dev_ppl_mean: float | None
    dev_ppl_std: float | None
    dev_bleu_mean: float | None
    dev_bleu_std: float | None
    changes: tuple[float, ...]
    change_mean: float | None
    change_std: float | None
    change_se: float | None
    paper_change: float | None
    verdict: str
    verdict_basis: str
    diverged_seeds: tuple[int | None, ...] = ()
    dev_ppl_se: float | None = None
    dev_bleu_se: float | None = None


def verdict(changes: Sequence[float], paper_direction: int, reference: str = "base") -> tuple[str, str]:
    """Judge paired changes of dev perplexity against the paper's direction.

    Parameters
    ----------
    changes : Sequence[float]
        Relative changes against the reference, one per paired seed.
    paper_direction : int
        Sign of the paper's change: 1 (perplexity up), -1 (down), 0 (no difference, row E).
    reference : str
        The reference row's name, for the basis of a pending verdict (the paper's reference row, ``base``, by default).

    Returns
    -------
    tuple[str, str]
        The verdict and its basis (module docstring): with two or more seeds the change is beyond the spread when
        ``|mean| > SPREAD_FACTOR x standard error`` (a nonzero mean with zero spread counts as beyond it); with one seed
        only its sign counts.
    """
    count = len(changes)
    if count == 0:
        return "pending", f"no seed finished in both the row and {reference}"
    mean = statistics.fmean(changes)
    if count == 1:
        if paper_direction == 0:
            return "undecided", "1 seed: no spread to compare with"
        return ("reproduced" if sign(mean) == paper_direction else "opposite"), "sign only, 1 seed"
    beyond, basis = beyond_spread(changes)
    if paper_direction == 0:
        return ("differs" if beyond else "reproduced"), basis
    if not beyond:
        return "within noise", basis
    return ("reproduced" if sign(mean) == paper_direction else "opposite"), basis


def diverged_label(diverged_seeds: Sequence[int | None]) -> str:
    """Return ``"seed 1"``, ``"seeds 0, 2"``, or ``"the run"`` for a run without a seed directory.

    Parameters
    ----------
    diverged_seeds : Sequence[int or None]
        The seeds that diverged.

    Returns
    -------
    str
        The label.
    """
    seeds = [str(seed) for seed in diverged_seeds if seed is not None]
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}" if seeds else "the run"


def _unstable_verdict(diverged_seeds: Sequence[int | None], healthy_changes: Sequence[float],
                     paper_direction: int, reference: str = "base") -> tuple[str, str]:
    """The verdict of a row with diverged seeds: ``unstable``, with the other seeds' verdict as basis."""
    others = verdict(healthy_changes, paper_direction, reference)
    return "unstable", (f"{diverged_label(diverged_seeds)} diverged (a non-finite loss, or last dev PPL > "
                        f"{comparison.DIVERGED_FACTOR:g}x its best); the other seeds: {others[0]} ({others[1]})")


def paper_change(row: RowReport, reference: RowReport | None, key: str = "dev_ppl",
                 relative: bool = True) -> float | None:
    """The paper's change of one figure from the reference row to ``row`` (None without both figures).

    Parameters
    ----------
    row : RowReport
        The row.
    reference : RowReport or None
        The reference row (None: no reference reported).
    key : str
        The figure (``dev_ppl``, ``dev_bleu``).
    relative : bool
        ``paper(row) / paper(reference) - 1`` rather than ``paper(row) - paper(reference)``.

    Returns
    -------
    float or None
        The change; None for the reference itself, without both figures, or a relative change from zero.
    """
    if reference is None or row is reference:
        return None
    value, reference_value = row.paper.get(key), reference.paper.get(key)
    if value is None or reference_value is None or (relative and not reference_value):
        return None
    return value / reference_value - 1 if relative else value - reference_value


def aggregate(rows: Sequence[RowReport], reference: str | None = None) -> dict[str, RowStats]:
    """Aggregate every row's finished seeds and judge it against the reference row and the paper.

    Parameters
    ----------
    rows : Sequence[RowReport]
        The rows.
    reference : str, optional
        The reference row (``base`` in Table 2; :func:`attention_jax.reports.comparison_report.resolve_reference`);
        None: the first row.

    Returns
    -------
    dict[str, RowStats]
        Row name -> its statistics (see the module docstring for the rules), the means, spreads and paired changes being
        :func:`attention_jax.reports.comparison.compare`'s.
    """
    by_name = {row.row: row for row in rows}
    reference = reference if reference is not None else (rows[0].row if rows else None)
    reference_row = by_name.get(reference) if reference is not None else None
    compared = comparison.compare("", rows, reference_row.row if reference_row else rows[0].row, PAPER_METRICS) \
        if rows else {}
    stats = {}
    for row in rows:
        ppl, bleu = compared[row.row]["dev_ppl"], compared[row.row]["dev_bleu"]
        changes = ppl.changes if reference_row is not None else {}
        diverged_seeds = tuple(run.seed for run in row.runs if comparison.diverged(run))  # A NaN stop too.
        paper_figure_change = paper_change(row, reference_row)
        if row is reference_row or reference_row is None:
            judged = ("", "reference row" if row is reference_row else "no reference row")
        elif paper_figure_change is None:
            judged = ("", "no paper figures")
        elif diverged_seeds:
            healthy = [change for seed, change in changes.items() if seed not in diverged_seeds]
            judged = _unstable_verdict(diverged_seeds, healthy, sign(paper_figure_change), reference_row.row)
        else:
            judged = verdict(list(changes.values()), sign(paper_figure_change), reference_row.row)
        paired = reference_row is not None and row is not reference_row
        stats[row.row] = RowStats(
            row=row.row, seeds=len(comparison.counted_runs(row)), pending=len(row.pending),
            dev_ppl=tuple(ppl.values.values()),
            dev_ppl_mean=ppl.mean, dev_ppl_std=ppl.std, dev_bleu_mean=bleu.mean, dev_bleu_std=bleu.std,
            changes=tuple(changes.values()), change_mean=ppl.change_mean if paired else None,
            change_std=ppl.change_std if paired else None, change_se=ppl.change_se if paired else None,
            paper_change=paper_figure_change, verdict=judged[0], verdict_basis=judged[1], diverged_seeds=diverged_seeds,
            dev_ppl_se=ppl.se, dev_bleu_se=bleu.se)
    return stats

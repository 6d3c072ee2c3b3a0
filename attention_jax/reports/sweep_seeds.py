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
from attention_jax.reports.comparison import SPREAD_FACTOR, MetricStats, beyond_spread

if TYPE_CHECKING:  # Only for annotations.
    from attention_jax.reports.sweep_rows import RowReport

__all__ = ["SPREAD_FACTOR", "aggregate", "paper_change", "sign", "verdict"]
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
class PaperRow:
    """A row's dev perplexity and BLEU as the comparison core gives them, and its verdict against the paper."""

    ppl: MetricStats  # Its change is against the reference row (none for the reference itself).
    bleu: MetricStats
    paper_change: float | None  # The paper's relative change of dev PPL against its reference row.
    verdict: str  # "" for the reference row and a row without the paper's figures.
    verdict_basis: str


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


def _paper_verdict(ppl: MetricStats, paper_figure_change: float | None, reference: str) -> tuple[str, str]:
    """A row's verdict and basis against the paper (module docstring); ``("", "no paper figures")`` without them."""
    if paper_figure_change is None:
        return "", "no paper figures"
    changes = list(ppl.changes.values())
    if not ppl.diverged:
        return verdict(changes, sign(paper_figure_change), reference)
    others = verdict([change for seed, change in ppl.changes.items() if seed not in ppl.diverged],
                     sign(paper_figure_change), reference)
    return "unstable", (f"{diverged_label(ppl.diverged)} diverged (a non-finite loss, or last dev PPL > "
                        f"{comparison.DIVERGED_FACTOR:g}x its best); the other seeds: {others[0]} ({others[1]})")


def aggregate(rows: Sequence[RowReport], reference: str | None = None) -> dict[str, PaperRow]:
    """Compare every row's dev perplexity and BLEU with the reference row's, and judge it against the paper.

    Parameters
    ----------
    rows : Sequence[RowReport]
        The rows.
    reference : str, optional
        The reference row (``base`` in Table 2; :func:`attention_jax.reports.comparison_report.resolve_reference`);
        None: the first row.

    Returns
    -------
    dict[str, PaperRow]
        Row name -> its figures (:func:`attention_jax.reports.comparison.compare`'s, over the seeds it counts) and its
        verdict (the module docstring's rules).
    """
    if not rows:
        return {}
    reference_row = {row.row: row for row in rows}[reference or rows[0].row]
    compared = comparison.compare("", rows, reference_row.row, PAPER_METRICS)
    stats = {}
    for row in rows:
        ppl, change = compared[row.row]["dev_ppl"], paper_change(row, reference_row)
        judged = ("", "reference row") if row is reference_row else _paper_verdict(ppl, change, reference_row.row)
        stats[row.row] = PaperRow(ppl, compared[row.row]["dev_bleu"], change, *judged)
    return stats

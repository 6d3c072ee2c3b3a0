"""Seeds of a sweep row, aggregated: mean and spread, the change against base paired by seed, a verdict.

A sweep launched with seeds (``launch.sweep --seeds=K``) has one run per row and seed in
``ROOT/<row>/seed_<k>/``; ``sweep.json`` lists the seeds. The report aggregates the finished seeds of
each row (:func:`aggregate`):

- dev perplexity (:func:`reported_ppl`) and BLEU (:func:`reported_bleu`): the mean and the sample
  standard deviation (``ddof=1``; empty with one seed) over the row's finished seeds;
- the change against base *paired by seed*: for every seed k finished in both the row and base,
  ``c_k = ppl(row, k) / ppl(base, k) - 1``; its mean ``m``, sample standard deviation ``s`` and
  standard error ``se = s / sqrt(n)`` over the ``n`` paired seeds. Pairing removes what the runs of
  seed k share: the same order of training batches in every row that batches the corpus alike, and
  the same initial parameters in rows of the same shapes;
- a verdict against the paper's direction ``d = sign(paper ppl(row) - paper ppl(base))``. The change is
  *beyond the seeds' spread* when ``n >= 2`` and ``|m| > 2 se`` (:data:`SPREAD_FACTOR`; with 3 seeds
  that is a t statistic above 2 on 2 degrees of freedom, a two-sided p of about 0.18, so a loose
  bar: read the spread beside it). Then:

  - ``reproduced``: beyond the spread, with the paper's sign;
  - ``opposite``: beyond the spread, against the paper's sign;
  - ``within noise``: not beyond the spread.

  Where the paper shows no difference (row E: 4.92 against base's 4.92, ``d = 0``) ``reproduced``
  means within noise, and a change beyond the spread is ``differs``. With one paired seed there is no
  spread: the verdict follows the sign of the change alone (``verdict_basis`` says so), and a row
  where the paper shows no difference is ``undecided``. A row without a paired seed yet is
  ``pending``; base and rows without the paper's figures get no verdict.

  A row with a seed that *diverged* (:func:`diverged`: its last dev perplexity more than
  :data:`DIVERGED_FACTOR` times its best and its dev accuracy collapsed, where a run that overfits
  keeps its accuracy) is ``unstable``: a mean over a run that fell apart says nothing about the row's
  direction, and that one seed in K fails is itself the finding. ``verdict_basis`` names the seeds
  and gives the verdict of the others. The diverged seed stays in the means and spreads, so they
  show what the row costs to train.

A row whose seeds have not all finished shows the finished ones and how many are pending (status
``partial``). Roots without seeds (one run per row in ``ROOT/<row>/``, e.g. ``docs/table2_small_subset/``)
are read as one seed per row, paired with base's one run.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import TYPE_CHECKING, Sequence

from attention_jax.training.early_stopping import STOPPED_EARLY

if TYPE_CHECKING:  # Only for annotations.
    from attention_jax.reports.sweep_rows import RowReport, SeedRun

SPREAD_FACTOR = 2.0
"""A paired change is beyond the seeds' spread when ``|mean| > SPREAD_FACTOR x standard error``."""

DIVERGED_FACTOR = 2.0
"""A run diverged when its last dev perplexity is more than ``DIVERGED_FACTOR`` times its best ..."""

ACCURACY_COLLAPSE = 0.5
"""... and its last dev accuracy is below ``ACCURACY_COLLAPSE`` times the accuracy at its best.

Together the two tell a run that blew up (perplexity up, accuracy collapsed) from one that overfits
(perplexity up, accuracy held: a model still predicting as well, only more confidently wrong). The
subset sweep's examples of each: ``docs/table2.md``, "The subset sweep"."""


def reported_bleu(results: dict) -> float | None:
    """A row's BLEU for the report: of the whole dev split when training ended, else the sampled one.

    Parameters
    ----------
    results : dict
        The row's ``results.json``.

    Returns
    -------
    float or None
        ``dev_bleu`` (beam search on the whole dev split, ``config.final_bleu``) when the run has it,
        else ``bleu`` (the ``num_bleu_examples`` dev sentences decoded at the last evaluation), else None.
    """
    full = results.get("dev_bleu")
    return full if full is not None else results.get("bleu")


def reported_ppl(results: dict) -> float | None:
    """A run's dev perplexity for the report: of the parameters whose BLEU is reported.

    Parameters
    ----------
    results : dict
        The run's ``results.json``.

    Returns
    -------
    float or None
        ``dev_ppl`` (the whole dev split, with the parameters of ``dev_bleu``) when the run has it; else
        ``best_eval_ppl`` when the run stopped early (its best checkpoint is the model kept); else
        ``eval_ppl`` (the last evaluation); None when none is known.
    """
    for key in ("dev_ppl",) + (("best_eval_ppl",) if results.get("stop_reason") == STOPPED_EARLY else ()):
        if results.get(key) is not None:
            return results[key]
    return results.get("eval_ppl")


def diverged(run: SeedRun) -> bool:
    """Whether a finished run blew up after its best evaluation.

    Parameters
    ----------
    run : SeedRun
        The run (its ``results.json`` and its dev accuracy at the best evaluation).

    Returns
    -------
    bool
        True when ``eval_ppl`` (the last evaluation) is more than :data:`DIVERGED_FACTOR` times
        ``best_eval_ppl`` and ``eval_accuracy`` is below :data:`ACCURACY_COLLAPSE` times the accuracy at
        the best evaluation (the perplexity test alone when that accuracy is unknown: a run without
        ``metrics.jsonl``); False when either perplexity is missing.
    """
    best, last = run.results.get("best_eval_ppl"), run.results.get("eval_ppl")
    if best is None or last is None or best <= 0 or last <= DIVERGED_FACTOR * best:
        return False
    last_accuracy = run.results.get("eval_accuracy")
    if run.dev_accuracy_at_best is None or last_accuracy is None:
        return True
    return last_accuracy < ACCURACY_COLLAPSE * run.dev_accuracy_at_best


def mean_or_none(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    """Sample standard deviation (ddof=1); None for fewer than two values."""
    return statistics.stdev(values) if len(values) >= 2 else None


def _sign(value: float) -> int:
    return (value > 0) - (value < 0)


@dataclasses.dataclass(frozen=True)
class RowStats:
    """A row's figures over its finished seeds, and its verdict against the paper.

    Attributes
    ----------
    row : str
        Row name.
    seeds : int
        Finished runs (seeds) of the row.
    pending : int
        Runs not finished (failed, running, queued or never started).
    dev_ppl : tuple[float, ...]
        :func:`reported_ppl` of each finished seed that has one, in seed order.
    dev_ppl_mean, dev_ppl_std : float or None
        Their mean and sample standard deviation (ddof=1; None with fewer than two).
    dev_bleu_mean, dev_bleu_std : float or None
        The same for :func:`reported_bleu`.
    changes : tuple[float, ...]
        Relative change of dev perplexity against base, paired by seed: ``ppl(row, k) / ppl(base, k) - 1``
        for every seed k finished in both (a fraction; empty for base itself).
    change_mean, change_std, change_se : float or None
        Mean, sample standard deviation (ddof=1) and standard error ``std / sqrt(n)`` of ``changes``.
    paper_change : float or None
        The paper's relative change of dev perplexity against base (None without its figures).
    verdict : str
        ``reproduced``, ``opposite``, ``within noise``, ``differs``, ``undecided``, ``unstable``,
        ``pending`` or ``""`` (base, or no paper figures); see the module docstring.
    verdict_basis : str
        How the verdict was reached, e.g. ``"|mean| > 2 x SE, 3 paired seeds"`` or ``"sign only, 1 seed"``.
    diverged_seeds : tuple
        Seeds of the finished runs that :func:`diverged`, in seed order.
    """

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


def beyond_spread(changes: Sequence[float]) -> tuple[bool, str]:
    """Whether paired changes are beyond their seeds' spread: ``|mean| > SPREAD_FACTOR x standard error``.

    Parameters
    ----------
    changes : Sequence[float]
        Paired changes, one per seed; at least two.

    Returns
    -------
    tuple[bool, str]
        The test and its basis, e.g. ``(True, "|mean| > 2 x SE, 3 paired seeds")``.

    Notes
    -----
    A nonzero mean with zero spread counts as beyond it. :func:`verdict` judges rows against the paper
    with it, and :mod:`attention_jax.reports.attention_function_report` compares attention functions.
    Raises ``ValueError`` for fewer than two changes (no spread to compare with).
    """
    count = len(changes)
    if count < 2:
        raise ValueError(f"a spread needs two or more paired changes, got {count}.")
    mean = statistics.fmean(changes)
    se = statistics.stdev(changes) / math.sqrt(count)
    beyond = abs(mean) > SPREAD_FACTOR * se if se > 0 else mean != 0
    return beyond, f"|mean| {'>' if beyond else '<='} {SPREAD_FACTOR:g} x SE, {count} paired seeds"


def verdict(changes: Sequence[float], paper_direction: int) -> tuple[str, str]:
    """Judge paired changes of dev perplexity against the paper's direction.

    Parameters
    ----------
    changes : Sequence[float]
        Relative changes against base, one per paired seed.
    paper_direction : int
        Sign of the paper's change: 1 (perplexity up), -1 (down), 0 (no difference, row E).

    Returns
    -------
    tuple[str, str]
        The verdict and its basis (module docstring): with two or more seeds the change is beyond the
        spread when ``|mean| > SPREAD_FACTOR x standard error`` (a nonzero mean with zero spread counts
        as beyond it); with one seed only its sign counts.
    """
    count = len(changes)
    if count == 0:
        return "pending", "no seed finished in both the row and base"
    mean = statistics.fmean(changes)
    if count == 1:
        if paper_direction == 0:
            return "undecided", "1 seed: no spread to compare with"
        return ("reproduced" if _sign(mean) == paper_direction else "opposite"), "sign only, 1 seed"
    beyond, basis = beyond_spread(changes)
    if paper_direction == 0:
        return ("differs" if beyond else "reproduced"), basis
    if not beyond:
        return "within noise", basis
    return ("reproduced" if _sign(mean) == paper_direction else "opposite"), basis


def _paired_ppl(row: RowReport) -> dict[int | None, float]:
    return {run.seed: ppl for run in row.finished if (ppl := reported_ppl(run.results)) is not None}


def diverged_label(diverged_seeds: Sequence[int | None]) -> str:
    """``"seed 1"``, ``"seeds 0, 2"``, or ``"the run"`` for a run without a seed directory.

    Parameters
    ----------
    diverged_seeds : Sequence[int or None]
        Seeds that diverged.

    Returns
    -------
    str
        Who diverged, as the verdict cell and the verdict basis name them.

    Notes
    -----
    A seed of ``None`` is a run without a seed directory; it is named only when no seed is.
    """
    seeds = [str(seed) for seed in diverged_seeds if seed is not None]
    return f"seed{'s' if len(seeds) > 1 else ''} {', '.join(seeds)}" if seeds else "the run"


def unstable_verdict(diverged_seeds: Sequence[int | None], healthy_changes: Sequence[float],
                     paper_direction: int) -> tuple[str, str]:
    """The verdict of a row with diverged seeds: ``unstable``, with the other seeds' verdict as basis.

    Parameters
    ----------
    diverged_seeds : Sequence[int or None]
        Seeds that diverged (None for an unseeded run).
    healthy_changes : Sequence[float]
        Paired changes against base of the row's other seeds.
    paper_direction : int
        Sign of the paper's change (see :func:`verdict`).

    Returns
    -------
    tuple[str, str]
        E.g. ``("unstable", "seed 1 diverged (last dev PPL > 2x its best); the other seeds: reproduced
        (sign only, 1 seed)")``.
    """
    others = verdict(healthy_changes, paper_direction)
    return "unstable", (f"{diverged_label(diverged_seeds)} diverged (last dev PPL > {DIVERGED_FACTOR:g}x its "
                        f"best); the other seeds: {others[0]} ({others[1]})")


def aggregate(rows: Sequence[RowReport]) -> dict[str, RowStats]:
    """Aggregate every row's finished seeds and judge it against base and the paper.

    Parameters
    ----------
    rows : Sequence[RowReport]
        The rows (``base`` among them for the paired changes and verdicts).

    Returns
    -------
    dict[str, RowStats]
        Row name -> its statistics (see the module docstring for the rules).
    """
    base = next((row for row in rows if row.row == "base"), None)
    base_ppl = _paired_ppl(base) if base is not None else {}
    paper_base = base.paper.get("dev_ppl") if base is not None else None
    stats = {}
    for row in rows:
        ppl = _paired_ppl(row)
        diverged_seeds = tuple(run.seed for run in row.finished if diverged(run))
        bleu = [value for value in (reported_bleu(run.results) for run in row.finished) if value is not None]
        change_by_seed = {} if row is base else {seed: ppl[seed] / base_ppl[seed] - 1 for seed in ppl
                                                  if seed in base_ppl and base_ppl[seed] > 0}
        changes = list(change_by_seed.values())
        paper_row = row.paper.get("dev_ppl")
        paper_change = (None if row is base or paper_row is None or not paper_base
                        else paper_row / paper_base - 1)
        if row is base or base is None:
            judged = ("", "reference row" if row is base else "no base row")
        elif paper_change is None:
            judged = ("", "no paper figures")
        elif diverged_seeds:
            healthy = [change for seed, change in change_by_seed.items() if seed not in diverged_seeds]
            judged = unstable_verdict(diverged_seeds, healthy, _sign(paper_change))
        else:
            judged = verdict(changes, _sign(paper_change))
        std = _std(changes)
        stats[row.row] = RowStats(
            row=row.row, seeds=len(row.finished), pending=len(row.pending), dev_ppl=tuple(ppl.values()),
            dev_ppl_mean=mean_or_none(list(ppl.values())), dev_ppl_std=_std(list(ppl.values())),
            dev_bleu_mean=mean_or_none(bleu), dev_bleu_std=_std(bleu), changes=tuple(changes),
            change_mean=mean_or_none(changes), change_std=std,
            change_se=None if std is None else std / math.sqrt(len(changes)),
            paper_change=paper_change, verdict=judged[0], verdict_basis=judged[1],
            diverged_seeds=diverged_seeds)
    return stats

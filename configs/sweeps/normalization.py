"""Normalisation and residual connections (Section 3.1; issue 76), small-corpus scale, 3 seeds a row.

The paper wraps every sublayer as ``LayerNorm(x + Sublayer(x))`` (Section 3.1). The material this
project is built from claims that LayerNorm, not BatchNorm, is the right norm for language ("Batch
Normalization has shown to perform particularly bad in language, as the features of words tend to have
a much higher variance"), that LayerNorm "enables faster training and provides small regularization",
and that "the residual connections are crucial for enabling a smooth gradient flow"; Xiong et al. (2020)
add that post-LN needs the learning-rate warm-up and pre-LN trains without it. This sweep tests each.

Rows (10), each with seeds 0, 1, 2 (``get_seeds``), the same steps for every row:

- ``base``: post-LN LayerNorm, the paper's (the reference row of the report's changes and verdicts);
- ``pre_layer_norm``: ``x + Sublayer(LayerNorm(x))`` and a final LayerNorm per stack (Xiong et al.);
- ``pre_rms_norm``: pre-LN with RMSNorm (Zhang and Sennrich, 2019);
- ``post_batch_norm``: post-LN with BatchNorm over the batch's real tokens (running averages at
  evaluation; ``attention_jax/models/normalization.py``);
- ``no_normalization``: ``x + Sublayer(x)`` with no norm at all;
- ``no_residual``: post-LN LayerNorm without the residual connections, ``LayerNorm(Sublayer(x))``;
- ``post_no_warmup``, ``pre_no_warmup``: ``base`` and ``pre_layer_norm`` without warm-up at the same peak;
- ``post_warmup_1_17x_peak``, ``pre_warmup_1_17x_peak``: ``base`` and ``pre_layer_norm`` with ``warmup_steps = 1``.

**Without warm-up, the same peak and decay.** The schedule is the paper's Equation 3, ``scale d_model^-0.5
min(step^-0.5, step warmup^-1.5)``, peaking at step ``warmup`` = 300. The ``*_no_warmup`` rows use
``lr_schedule = "constant_then_inverse_sqrt"``: that peak from step 1 to 300, the same curve after; they
differ from theirs in the first 300 steps only, the comparison Xiong et al. (2020) make. The
``*_warmup_1_17x_peak`` rows keep the paper's schedule at ``warmup_steps = 1``: ``scale d_model^-0.5
step^-0.5`` from step 1, the inverse square root continued backwards before step 300 (step 1: ``sqrt(300)``
= 17x the peak, step 75: 2x); they test a too-high rate, not the absence of warm-up.

Everything else is ``configs/small_corpus.py`` (N=3, d_model=128, d_ff=512, h=4, 4,000 BPE pieces,
1,700 steps of 4,096 padded target tokens, warmup 300, last checkpoint, beam 4) on the real
English-German corpus ``../shared/data/messages_en_de``, final BLEU on the dev split only, with one
change: a dev evaluation every ``EVAL_EVERY_STEPS`` = 100 steps (the recipe's 500 gives three points of the
curve; the step at which a row first reaches a fixed dev perplexity, the speed-of-training claim, needs
more). Run it (from a fixed commit, the root outside the work tree; two runs at a time, each pinned to
one core; every row at seed 0 first)::

    python -m attention_jax.sweep --config=configs/sweeps/normalization.py --executor=local --parallel=2 \\
        --root=../runs/normalization
    python -m attention_jax.report ../runs/normalization          # also from a partial sweep (normalization.md too)
    python -m launch.export_results --root=../runs/normalization --to=docs/normalization

On the second corpus, ``gnome_help_en_de`` (its recipe: ``attention_jax/data/corpora.py``), in a
root of its own; the file declares no ``get_corpora()``, so the commands above keep the committed layout
(``docs/normalization/<row>/seed_<k>``) and this export lands beside it in ``docs/normalization/gnome_help_en_de/``::

    attention-jax-sweep --config=configs/sweeps/normalization.py --corpora=gnome_help_en_de --executor=local \\
        --parallel=2 --root=../runs/normalization_gnome
    python -m attention_jax.report ../runs/normalization_gnome/gnome_help_en_de
    python -m launch.export_results --root=../runs/normalization_gnome --to=docs/normalization

or one row::

    python -m attention_jax.main --config=configs/sweeps/normalization.py:post_batch_norm \\
        --workdir=runs/post_batch_norm --config.seed=0

The design, the commands and the results: ``docs/normalization.md``.
"""

from __future__ import annotations

import ml_collections

from configs import small_corpus

SEEDS = (0, 1, 2)
DATASET = "tsv:../shared/data/messages_en_de"
EVAL_EVERY_STEPS = 100
WARMUP_1 = dict(warmup_steps=1)  # The paper's schedule at warmup 1: scale d_model^-0.5 step^-0.5 from step 1.
NO_WARMUP = dict(lr_schedule="constant_then_inverse_sqrt")  # The recipe's peak from step 1, its decay after.
ROWS: dict[str, dict] = {
    "base": {},
    "pre_layer_norm": dict(layer_norm_position="pre"),
    "pre_rms_norm": dict(layer_norm_position="pre", normalization="rms_norm"),
    "post_batch_norm": dict(normalization="batch_norm"),
    "no_normalization": dict(normalization="none"),
    "no_residual": dict(residual_connections=False),
    "post_no_warmup": dict(NO_WARMUP),
    "pre_no_warmup": dict(layer_norm_position="pre", **NO_WARMUP),
    "post_warmup_1_17x_peak": dict(WARMUP_1),
    "pre_warmup_1_17x_peak": dict(layer_norm_position="pre", **WARMUP_1),
}
"""Row name -> the fields it changes from the recipe (``base`` changes none)."""


def get_seeds() -> tuple[int, ...]:
    """Return the seeds every row runs with (``launch.sweep`` reads them; ``--seeds=K`` overrides).

    Returns
    -------
    tuple[int, ...]
        ``(0, 1, 2)``.
    """
    return SEEDS


def get_sweep() -> dict[str, dict]:
    """Return the rows, ``base`` (post-LN LayerNorm, the paper's) first.

    Returns
    -------
    dict[str, dict]
        Row name -> its overrides of the recipe (:data:`ROWS`).
    """
    return {row: dict(changes) for row, changes in ROWS.items()}


def get_config(row: str = "base") -> ml_collections.ConfigDict:
    """Return the small-corpus recipe with row ``row``'s normalisation, residuals and warm-up.

    Parameters
    ----------
    row : str
        A key of :func:`get_sweep`.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name`` is the row.

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    rows = get_sweep()
    if row not in rows:
        raise ValueError(f"unknown row {row!r}; choose one of {', '.join(rows)}.")
    config = small_corpus.get_config()
    config.dataset = DATASET
    config.final_bleu_splits = ("dev",)  # A dev-set table, as Table 2's.
    config.eval_every_steps = EVAL_EVERY_STEPS
    config.update(rows[row])
    config.name = row
    return config


def get_report() -> dict:
    """Return what the report adds: steps to a target perplexity and gradient norms per module.

    Returns
    -------
    dict
        See :func:`attention_jax.reports.sweep_rows.declared_report`.
    """
    from attention_jax.reports import training_speed  # Only when reporting.

    return dict(extras=[training_speed.write])

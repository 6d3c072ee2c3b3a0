"""The feed-forward sublayer (Section 3.3, Eq. 2; Shazeer, 2020; issue 86), small-corpus scale, 3 seeds a row.

The paper's position-wise feed-forward network is ``max(0, x W1 + b1) W2 + b2``. Shazeer (2020, "GLU
Variants Improve Transformer") replaces the ReLU by GELU or Swish, or gates it: ``(act(x W) * (x V)) W2``,
the hidden width shrunk to 2/3 d_ff so that the parameters stay the same (``config.feed_forward_match_params``;
here 344 for d_ff 512, within 1% of Eq. 2's count). This sweep asks whether the gated variants train to a
lower dev perplexity than the paper's at the same parameters and steps, and whether the LLaMA-style
block that combines them with pre-LN RMSNorm and rotary positions does.

Rows (6), each with seeds 0, 1, 2 (``get_seeds``), the same steps for every row:

- ``relu``: Eq. 2, the paper's (the reference row of the report's changes and verdicts);
- ``gelu``: GELU, exact (erf), in place of the ReLU;
- ``reglu``, ``geglu``, ``swiglu``: Shazeer's gated variants, with biases as Eq. 2 has them;
- ``modern_block``: ``swiglu`` with ``layer_norm_position="pre"``, ``normalization="rms_norm"`` and
  ``positional_encoding="rotary"`` (the LLaMA block, biases aside).

Everything else is ``configs/small_corpus.py`` (N=3, d_model=128, d_ff=512, h=4, 4,000 BPE pieces, 1,700
steps of 4,096 padded target tokens, warmup 300, last checkpoint, beam 4) on the real English-German corpus
``../shared/data/messages_en_de``, final BLEU on the dev split only, with a dev evaluation every
``EVAL_EVERY_STEPS`` = 100 steps. Run it (from a fixed commit; two runs at a time)::

    attention-jax-sweep --config=configs/sweeps/feed_forward.py --executor=local --parallel=2 \\
        --root=../runs/feed_forward
    python -m attention_jax.report ../runs/feed_forward

or one row::

    python -m attention_jax.main --config=configs/sweeps/feed_forward.py:swiglu --workdir=runs/swiglu \\
        --config.seed=0
"""

from __future__ import annotations

import ml_collections

from configs import small_corpus

SEEDS = (0, 1, 2)
DATASET = "tsv:../shared/data/messages_en_de"
EVAL_EVERY_STEPS = 100
ROWS: dict[str, dict] = {
    "relu": {},
    "gelu": dict(feed_forward="gelu"),
    "reglu": dict(feed_forward="reglu"),
    "geglu": dict(feed_forward="geglu"),
    "swiglu": dict(feed_forward="swiglu"),
    "modern_block": dict(layer_norm_position="pre", normalization="rms_norm", feed_forward="swiglu",
                         positional_encoding="rotary"),
}
"""Row name -> the fields it changes from the recipe (``relu`` changes none)."""


def get_seeds() -> tuple[int, ...]:
    """Return the seeds every row runs with (``launch.sweep`` reads them; ``--seeds=K`` overrides).

    Returns
    -------
    tuple[int, ...]
        ``(0, 1, 2)``.
    """
    return SEEDS


def get_sweep() -> dict[str, dict]:
    """Return the rows, ``relu`` (the paper's) first.

    Returns
    -------
    dict[str, dict]
        Row name -> its overrides of the recipe (:data:`ROWS`).
    """
    return {row: dict(changes) for row, changes in ROWS.items()}


def get_config(row: str = "relu") -> ml_collections.ConfigDict:
    """Return the small-corpus recipe with row ``row``'s feed-forward sublayer (and block).

    Parameters
    ----------
    row : str
        A key of :func:`get_sweep`.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name`` is the row.

    Raises
    ------
    ValueError
        For an unknown row, listing the rows.
    """
    rows = get_sweep()
    if row not in rows:
        raise ValueError(f"unknown row {row!r}; choose one of {', '.join(rows)}.")
    config = small_corpus.get_config()
    config.dataset = DATASET
    config.final_bleu_splits = ("dev",)
    config.eval_every_steps = EVAL_EVERY_STEPS
    config.update(rows[row])
    config.name = row
    return config


def get_report() -> dict:
    """Return what the report adds: steps to a target perplexity and gradient norms per module (a row changes the norm).

    Returns
    -------
    dict
        See :func:`attention_jax.reports.sweep_rows.declared_report`.
    """
    from attention_jax.reports import training_speed  # Only when reporting.

    return dict(
        extras=[training_speed.TrainingSpeed(("normalization", "residual_connections")).write])

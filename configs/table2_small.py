"""Table 2 scaled down to 2 CPU cores: every row of the paper, widths / 8, on messages_en_de.

Each row of ``configs/table2.py`` is kept as a *relative* change of the base model and scaled the same
way: d_model, d_ff, d_k and d_v divided by ``WIDTH_DIVISOR`` (8), the number of heads and layers kept,
so row A still holds h * d_k constant, row B still shrinks d_k alone, row C still varies N, d_model and
d_ff by the paper's factors, and rows D, E and big change what the paper changes. The data is the real
English-German corpus ``../shared/data/messages_en_de`` (37,759 training pairs; see its README), the
budget a fixed number of steps per row. The paper's figures travel with each row for the report.

Run (from the repository root; two rows at a time on 2 CPU cores, 5 to 17 minutes per row, 1 h 51 min
for all 20 rows)::

    python -m launch.sweep --config=configs/table2_small.py --rows=all --executor=local --parallel=2 \
        --root=runs/table2_small
    python -m attention_jax.report runs/table2_small

The budget: 700 steps of at most 2,048 tokens per side (about 1.3 epochs of the corpus), warmup 150.
The paper's schedule at d_model = 64 and warmup 150 would peak at 1.0e-2; ``learning_rate_scale = 0.1``
brings the peak to 1.0e-3, near the paper's 7.0e-4 for the base model. Probes of the base row at 600
steps (scale 0.5 / 0.2 / 0.1): the first stays on the unigram plateau (loss 6.7 at step 250), the last
learns fastest (dev perplexity 311 against 399 for 0.2).

Expected: not the paper's numbers (a 37k-pair corpus of software messages, 1/8 of the width, minutes
of training), but a table in which to look for the paper's trends; ``README.md`` says which hold at this
scale; ``docs/table2_small/`` holds the committed result.
"""

from __future__ import annotations

import ml_collections

from configs import base, table2

WIDTH_DIVISOR = 8
TRAIN_SPLIT = "train[:4000]"
_WIDTH_FIELDS = ("d_model", "d_ff", "key_dim", "value_dim")


def _small_base() -> ml_collections.ConfigDict:
    """The base model at 1/8 width, on a corpus subset small enough to train until dev stops improving."""
    config = base.get_config()
    for field in _WIDTH_FIELDS:
        config[field] = config[field] // WIDTH_DIVISOR  # 64, 256, 8, 8
    config.dataset = "tsv:../shared/data/messages_en_de"
    config.train_split = TRAIN_SPLIT
    config.vocab_size = 1000
    config.max_len = 32
    config.tokens_per_batch = 1024  # Real tokens per side (the paper's unit), in packed rows.
    config.tokens_per_batch_unit = "real"
    config.packing = True
    config.num_train_steps = 3000  # A cap; early stopping ends the runs (base: ~2,500 steps).
    config.warmup_steps = 800
    config.learning_rate_scale = 0.5  # Peak 2.2e-3 at step 800 for d_model 64.
    config.early_stopping_patience = 2
    config.early_stopping_min_improvement = 0.01  # Two evaluations in a row each under 1% better: stop.
    config.eval_every_steps = 100
    config.num_bleu_examples = 0  # The final whole-dev BLEU counts; no sampled BLEU on the way.
    config.final_bleu_splits = ("dev",)  # Table 2 is a dev-set table.
    config.average_last_checkpoints = 1  # The best checkpoint.
    config.checkpoint_every_steps = 100
    config.keep_checkpoints = 2
    config.log_every_steps = 100
    return config


def _scaled(overrides: dict) -> dict:
    """A row's overrides with its widths divided like the base's."""
    return {key: value // WIDTH_DIVISOR if key in _WIDTH_FIELDS else value
            for key, value in overrides.items() if key not in ("num_train_steps", "keep_checkpoints",
                                                                "average_last_checkpoints")}


def get_sweep() -> dict[str, dict]:
    """Return the 20 rows of Table 2, scaled: row name -> overrides of the small base.

    Returns
    -------
    dict[str, dict]
        In the paper's order. The big row keeps the small step budget (the paper's 300k steps are
        the one change not scaled: every row gets the same budget here).
    """
    return {name: _scaled(overrides) for name, overrides, _ in table2.ROWS}


def get_config(row: str = "base") -> ml_collections.ConfigDict:
    """Return the small base with row ``row`` applied and the paper's figures attached.

    Parameters
    ----------
    row : str
        One of ``configs.table2.ROW_NAMES``.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name`` is the row; ``config.paper`` the paper's dev PPL, BLEU and params (millions).

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    paper_row = table2.get_config(row)  # Validates the row name and carries the paper's figures.
    config = _small_base()
    config.update(get_sweep()[row])
    config.name = row
    config.paper = paper_row.paper
    return config

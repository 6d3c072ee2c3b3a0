"""Table 2 scaled down to 2 CPU cores: every row of the paper, widths / 8, on messages_en_de.

Each row of ``configs/table2.py`` is kept as a *relative* change of the base model and scaled the same
way: d_model, d_ff, d_k and d_v divided by ``WIDTH_DIVISOR`` (8), the number of heads and layers kept,
so row A still holds h * d_k constant, row B still shrinks d_k alone, row C still varies N, d_model and
d_ff by the paper's factors, and rows D, E and big change what the paper changes. The data is the real
English-German corpus ``../shared/data/messages_en_de`` (37,759 training pairs; see its README), the
budget a fixed number of steps per row. The paper's figures travel with each row for the report.

Run (from the repository root, about 2-3 minutes per row on 2 CPU cores)::

    python -m launch.sweep --config=configs/table2_small.py --rows=all --executor=local \\
        --root=runs/table2_small --config.dataset=tsv:../shared/data/messages_en_de
    python -m attention_jax.report runs/table2_small

Expected: not the paper's numbers (a 37k-pair corpus of short UI strings, 1/8 of the width, a few
minutes of training), but a table in which to look for the paper's trends; ``README.md`` says which
hold at this scale.
"""

from __future__ import annotations

import ml_collections

from configs import base, table2

WIDTH_DIVISOR = 8
_WIDTH_FIELDS = ("d_model", "d_ff", "key_dim", "value_dim")


def _small_base() -> ml_collections.ConfigDict:
    """The base model at 1/8 width with a budget that fits a CPU."""
    config = base.get_config()
    for field in _WIDTH_FIELDS:
        config[field] = config[field] // WIDTH_DIVISOR  # 64, 256, 8, 8
    config.dataset = "tsv:../shared/data/messages_en_de"
    config.vocab_size = 4000
    config.max_len = 64
    config.tokens_per_batch = 4096
    config.num_train_steps = 1500
    config.warmup_steps = 400
    config.learning_rate_scale = 1.0
    config.checkpoint_every_steps = 500
    config.keep_checkpoints = 3
    config.average_last_checkpoints = 3
    config.log_every_steps = 100
    config.eval_every_steps = 500
    config.num_bleu_examples = 500
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

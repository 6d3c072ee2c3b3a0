"""Table 2 scaled down to 2 CPU cores in the paper's regime: the whole corpus, the same steps for every row.

Each row of ``configs/table2.py`` is kept as a *relative* change of the base model and scaled the same
way: d_model, d_ff, d_k and d_v divided by ``WIDTH_DIVISOR`` (4), the number of heads and layers kept,
so row A still holds h * d_k constant, row B still shrinks d_k alone, row C still varies N, d_model and
d_ff by the paper's factors, and rows D, E and big change what the paper changes. The paper's figures
travel with each row for the report. Run it with seeds (from the repository root; two runs at a time,
each pinned to one core; all rows of seed 0 first, so a stopped sweep already holds whole tables)::

    python -m attention_jax.sweep --config=configs/table2_small.py --rows=all --seeds=3 --executor=local \
        --parallel=2 --root=runs/table2_small
    python -m attention_jax.report runs/table2_small        # also from a partial sweep
    python -m launch.export_results --root=runs/table2_small --to=docs/table2_small   # what we commit

**The protocol is the paper's** (Section 6.2), scaled: every row trains for the same
``NUM_TRAIN_STEPS`` steps at the same batch (1,024 real tokens per side in packed rows) on the whole
training split of the real English-German corpus ``../shared/data/messages_en_de`` (37,759 pairs;
``max_len`` 64 keeps 97.5% of them), with no early stopping, and is scored on its final checkpoint
(no averaging, as for the paper's Table 2): perplexity per wordpiece and beam-search BLEU (beam 4,
alpha 0.6) on the whole 2,000-pair dev split, with the params column. The big row keeps the common
budget (the paper gives it 3x the steps): the table says so. The schedule does not depend on
``num_train_steps``, so a run continued to more steps is the same run as one started with them: the
pilot (``docs/table2_pilot/``) reads several budgets off one run's dev curve.

Results, and why this width, budget and schedule: ``docs/table2.md`` (runs in ``docs/table2_small/``;
the pilot that chose them: ``docs/table2_pilot/README.md``).
"""

from __future__ import annotations

import ml_collections

from configs import base, table2

WIDTH_DIVISOR = 4  # d_model 128, d_ff 512, d_k = d_v = 16 (the pilot's choice over 1/8).
TRAIN_SPLIT = "train"
NUM_TRAIN_STEPS = 3000  # Every row; the pilot (docs/table2_pilot/README.md) chose it for the budget.
_WIDTH_FIELDS = ("d_model", "d_ff", "key_dim", "value_dim")
_UNSCALED_FIELDS = ("num_train_steps", "keep_checkpoints", "average_last_checkpoints")


def small_base(width_divisor: int = WIDTH_DIVISOR, num_train_steps: int = NUM_TRAIN_STEPS) -> ml_collections.ConfigDict:
    """The base model at 1/``width_divisor`` width on the whole training split, for a fixed number of steps.

    Parameters
    ----------
    width_divisor : int
        What d_model, d_ff, d_k and d_v are divided by.
    num_train_steps : int
        Every row's step budget (the pilot's configs: 6,000).

    Returns
    -------
    ml_collections.ConfigDict
        The protocol of this module's docstring, before any row (``configs/table2_small_subset.py``
        overrides its data, schedule and early stopping).
    """
    config = base.get_config()
    for field in _WIDTH_FIELDS:
        config[field] = config[field] // width_divisor  # 1/4: 128, 512, 16, 16
    config.dataset = "tsv:../shared/data/messages_en_de"
    config.train_split = TRAIN_SPLIT
    config.vocab_size = 1000
    config.max_len = 64  # Keeps 97.5% of the training pairs (32 kept 87%).
    config.tokens_per_batch = 1024  # Real tokens per side (the paper's unit), in packed rows.
    config.tokens_per_batch_unit = "real"
    config.packing = True
    config.num_train_steps = num_train_steps
    config.warmup_steps = 1500
    config.learning_rate_scale = 0.5  # Peak 1.1e-3 at step 1,500 for d_model 128 (1.6e-3 for 64).
    config.early_stopping_patience = 0  # The paper's protocol: every row trains all its steps.
    config.eval_every_steps = 500
    config.num_bleu_examples = 0  # The final whole-dev BLEU counts; no sampled BLEU on the way.
    config.final_bleu_splits = ("dev",)  # Table 2 is a dev-set table.
    config.average_last_checkpoints = 1  # The final checkpoint, not an average (Table 2).
    config.checkpoint_every_steps = 500
    config.keep_checkpoints = 2
    config.log_every_steps = 100
    return config


def _scaled(overrides: dict, width_divisor: int) -> dict:
    """A row's overrides with its widths divided like the base's, without the paper's step budget."""
    return {key: value // width_divisor if key in _WIDTH_FIELDS else value
            for key, value in overrides.items() if key not in _UNSCALED_FIELDS}


get_report = table2.get_report  # The rows' groups (configs/table2.py).


def get_paper_figures() -> dict[str, dict[str, float | None]]:
    """Return the paper's figures of every row (:func:`configs.table2.get_paper_figures`).

    Returns
    -------
    dict[str, dict[str, float | None]]
        Row -> the paper's dev PPL, BLEU and parameters (millions): the report's paper columns and verdict.
    """
    return table2.get_paper_figures()


def get_sweep(width_divisor: int = WIDTH_DIVISOR) -> dict[str, dict]:
    """Return the 20 rows of Table 2, scaled: row name -> overrides of the small base.

    Parameters
    ----------
    width_divisor : int
        What d_model, d_ff, d_k and d_v are divided by (the pilot's ``configs/table2_pilot.py``: 8).

    Returns
    -------
    dict[str, dict]
        In the paper's order. The big row keeps the common step budget (the paper's 300k steps are
        the one change not scaled: every row gets the same budget here).
    """
    return {name: _scaled(overrides, width_divisor) for name, overrides, _ in table2.ROWS}


def get_config(row: str = "base", width_divisor: int = WIDTH_DIVISOR,
               num_train_steps: int = NUM_TRAIN_STEPS) -> ml_collections.ConfigDict:
    """Return the small base with row ``row`` applied and the paper's figures attached.

    Parameters
    ----------
    row : str
        One of ``configs.table2.ROW_NAMES``.
    width_divisor : int
        What the widths are divided by (see :func:`get_sweep`).
    num_train_steps : int
        Every row's step budget.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name`` is the row; ``config.paper`` the paper's dev PPL, BLEU and params (millions).

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    return apply_row(small_base(width_divisor, num_train_steps), row, width_divisor)


def apply_row(config: ml_collections.ConfigDict, row: str, width_divisor: int) -> ml_collections.ConfigDict:
    """Apply row ``row`` of Table 2, scaled, to a small base and attach the paper's figures.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        A small base (:func:`small_base`, or the subset's); updated in place.
    row : str
        One of ``configs.table2.ROW_NAMES``.
    width_divisor : int
        What the row's widths are divided by (see :func:`get_sweep`).

    Returns
    -------
    ml_collections.ConfigDict
        ``config``, with ``config.name`` the row and ``config.paper`` the paper's dev PPL, BLEU and params
        (millions).

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    paper_row = table2.get_config(row)  # Validates the row name and carries the paper's figures.
    config.update(get_sweep(width_divisor)[row])
    config.name = row
    config.paper = paper_row.paper
    return config

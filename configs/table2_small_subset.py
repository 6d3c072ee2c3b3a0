"""Table 2 scaled down to 2 CPU cores: every row of the paper at 1/8 width, each trained until dev stops improving.

Each row of ``configs/table2.py`` is kept as a *relative* change of the base model and scaled the same
way: d_model, d_ff, d_k and d_v divided by ``WIDTH_DIVISOR`` (8), the number of heads and layers kept,
so row A still holds h * d_k constant, row B still shrinks d_k alone, row C still varies N, d_model and
d_ff by the paper's factors, and rows D, E and big change what the paper changes. The paper's figures
travel with each row for the report. Run it with seeds (from the repository root; two runs at a time)::

    python -m attention_jax.sweep --config=configs/table2_small_subset.py --rows=all --seeds=3 --executor=local \
        --parallel=2 --root=runs/table2_small_subset
    python -m attention_jax.report runs/table2_small_subset        # also from a partial sweep
    python -m launch.export_results --root=runs/table2_small_subset --to=docs/table2_small_subset   # what we commit

The protocol: every row trains until its dev perplexity stops improving (early stopping: two
evaluations in a row, 100 steps apart, each lowering the best dev perplexity by less than 1%;
``early_stopping_min_improvement``, counted from step 1,500 on; ``early_stopping_min_steps``), with a cap
of 3,000 steps, and is judged on its best checkpoint. The training data is the first 4,000 pairs of the
real English-German corpus ``../shared/data/messages_en_de`` (``max_len`` 32, a 1,000-piece shared BPE
vocabulary), batches of 1,024 real tokens per side in packed rows, and the whole 2,000-pair dev split
for perplexity and, at the end, beam-search BLEU. Warmup 800 steps at ``learning_rate_scale`` 0.5.
Expected: not the paper's numbers, but a table in which to look for the paper's trends, with the seeds'
spread to tell a trend from noise.

Results, why this scale and the probes behind it: ``docs/table2_small_subset/README.md`` (read beside the
paper-regime sweep in ``docs/table2.md``).
"""

from __future__ import annotations

import ml_collections

from configs import table2_small

WIDTH_DIVISOR = 8
TRAIN_SPLIT = "train[:4000]"


def _small_base() -> ml_collections.ConfigDict:
    """The base model at 1/8 width, on a corpus subset small enough to train until dev stops improving.

    Returns
    -------
    ml_collections.ConfigDict
        ``configs/table2_small.py``'s base (the same model, vocabulary, batches and final whole-dev BLEU)
        with this subset's data, schedule and early stopping.
    """
    config = table2_small.small_base(WIDTH_DIVISOR)  # 64, 256, 8, 8
    config.train_split = TRAIN_SPLIT
    config.max_len = 32
    config.num_train_steps = 3000  # A cap; early stopping ends the runs.
    config.warmup_steps = 800
    config.learning_rate_scale = 0.5  # Peak 2.2e-3 at step 800 for d_model 64.
    config.early_stopping_patience = 2
    config.early_stopping_min_improvement = 0.01  # Two evaluations in a row each under 1% better: stop.
    config.early_stopping_min_steps = 1500  # Not on the plateau deep stacks sit on until warmup ends.
    config.eval_every_steps = 100
    config.average_last_checkpoints = 1  # The best checkpoint.
    config.checkpoint_every_steps = 100
    return config


get_paper_figures = table2_small.get_paper_figures  # The paper's figures of every row (configs/table2.py).
get_report = table2_small.get_report


def get_sweep() -> dict[str, dict]:
    """Return the 20 rows of Table 2, scaled: row name -> overrides of the small base.

    Returns
    -------
    dict[str, dict]
        In the paper's order (:func:`configs.table2_small.get_sweep` at 1/8 width). The big row keeps the
        small step budget (the paper's 300k steps are the one change not scaled: every row gets the same
        budget here).
    """
    return table2_small.get_sweep(WIDTH_DIVISOR)


def get_config(row: str = "base") -> ml_collections.ConfigDict:
    """Return the small base with row ``row`` applied and the paper's figures attached.

    Parameters
    ----------
    row : str
        One of ``configs.table2.ROW_NAMES``.

    Returns
    -------
    ml_collections.ConfigDict
        As :func:`configs.table2_small.apply_row` makes it (the row's name and the paper's figures; a
        ``ValueError`` for an unknown row), on this subset's base.
    """
    return table2_small.apply_row(_small_base(), row, WIDTH_DIVISOR)

"""The Table 2 pilot's first regime: ``configs/table2_small.py``'s protocol at 1/8 width for 6,000 steps.

d_model 64, d_ff 256, h 8, d_k = d_v = 8, every row 6,000 steps on the whole ``messages_en_de`` training
split, the final checkpoint scored; ``configs/table2_small_quarter.py`` is the pilot's second width.
Rerun it with::

    python -m attention_jax.sweep --config=configs/table2_pilot.py --rows=base,A1,C1,C5,C7 --seeds=1 \
        --executor=local --parallel=2 --root=runs/table2_pilot

Results, and how they chose ``configs/table2_small.py``'s regime: ``docs/table2_pilot/README.md``.
"""

from __future__ import annotations

import ml_collections

from configs import table2_small

WIDTH_DIVISOR = 8
NUM_TRAIN_STEPS = 6000


get_paper_figures = table2_small.get_paper_figures  # The paper's figures of every row (configs/table2.py).
get_report = table2_small.get_report


def get_sweep() -> dict[str, dict]:
    """Return the 20 rows of Table 2 at 1/8 width: row name -> overrides of the 1/8-width base.

    Returns
    -------
    dict[str, dict]
        In the paper's order (see :func:`configs.table2_small.get_sweep`).
    """
    return table2_small.get_sweep(WIDTH_DIVISOR)


def get_config(row: str = "base") -> ml_collections.ConfigDict:
    """Return row ``row`` at 1/8 width, 6,000 steps, with the paper's figures attached.

    Parameters
    ----------
    row : str
        One of ``configs.table2.ROW_NAMES``.

    Returns
    -------
    ml_collections.ConfigDict
        As :func:`configs.table2_small.get_config` at 1/8 width and the pilot's 6,000 steps.
    """
    return table2_small.get_config(row, WIDTH_DIVISOR, NUM_TRAIN_STEPS)

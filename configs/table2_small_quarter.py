"""``configs/table2_small.py`` at 1/4 of the paper's width instead of 1/8: the pilot's width probe.

At 1/8 width the base model's 8 heads have d_k = d_v = 8, and the pilot found one head of d_k = 64 (row
A1) and two layers (C1) both far ahead of base after 6,000 steps, against the paper's directions
(``docs/table2_pilot/README.md``). At 1/4 width (d_model 128, d_ff 512, d_k = d_v = 16) every head is
twice as wide; this config asks whether that brings base back in front. Everything else is
``configs/table2_small.py``'s protocol: the whole training split, the same steps for every row, the final
checkpoint. Run the rows the pilot needs, e.g.::

    python -m launch.sweep --config=configs/table2_small_quarter.py --rows=base,A1,C1 --seeds=1 \
        --executor=local --parallel=2 --root=runs/table2_pilot_quarter
"""

from __future__ import annotations

import ml_collections

from configs import table2_small

WIDTH_DIVISOR = 4
NUM_TRAIN_STEPS = table2_small.NUM_TRAIN_STEPS


def get_sweep() -> dict[str, dict]:
    """Return the 20 rows of Table 2 at 1/4 width: row name -> overrides of the quarter-width base.

    Returns
    -------
    dict[str, dict]
        In the paper's order (see :func:`configs.table2_small.get_sweep`).
    """
    return table2_small.get_sweep(WIDTH_DIVISOR)


def get_config(row: str = "base") -> ml_collections.ConfigDict:
    """Return row ``row`` at 1/4 width with the paper's figures attached.

    Parameters
    ----------
    row : str
        One of ``configs.table2.ROW_NAMES``.

    Returns
    -------
    ml_collections.ConfigDict
        As :func:`configs.table2_small.get_config`, with d_model, d_ff, d_k and d_v twice as wide.
    """
    return table2_small.get_config(row, WIDTH_DIVISOR)

"""The Table 2 pilot's width probe: ``configs/table2_small.py``'s protocol at 1/4 width for 6,000 steps.

At 1/4 width (d_model 128, d_ff 512, d_k = d_v = 16) every head is twice as wide as at the pilot's 1/8
(``configs/table2_pilot.py``); this config asks whether that brings base back in front of rows A1 and C1.
``configs/table2_small.py`` runs this width for 3,000 steps; this file keeps the probe's 6,000 so that its
runs can be repeated::

    python -m attention_jax.sweep --config=configs/table2_small_quarter.py --rows=base,A1,C1 --seeds=1 \
        --executor=local --parallel=2 --root=runs/table2_pilot_quarter

Results: ``docs/table2_pilot/README.md`` (runs in ``docs/table2_pilot_quarter/``).
"""

from __future__ import annotations

import ml_collections

from configs import table2_small

WIDTH_DIVISOR = 4
NUM_TRAIN_STEPS = 6000


get_paper_figures = table2_small.get_paper_figures  # The paper's figures of every row (configs/table2.py).
get_report = table2_small.get_report


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
        As :func:`configs.table2_small.get_config`, for the probe's 6,000 steps.
    """
    return table2_small.get_config(row, WIDTH_DIVISOR, NUM_TRAIN_STEPS)

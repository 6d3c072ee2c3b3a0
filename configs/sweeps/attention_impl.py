"""Example user sweep: einsum vs fused attention on the tiny config, two seeds each.

How to add your own sweep: copy this file, start from any config (here ``configs/tiny.py``), and list
the rows as named overrides in ``get_sweep()``; ``get_config(row)`` builds one row. The rows should
reach the same loss: the two attention implementations compute the same function (Eq. 1), so any
difference beyond seed noise is a bug.

Run the whole sweep locally (about 4 x the tiny run), then the report::

    python -m attention_jax.sweep --config=configs/sweeps/attention_impl.py --executor=local \\
        --root=runs/attention_impl
    python -m attention_jax.report runs/attention_impl

or one row::

    python -m attention_jax.main --config=configs/sweeps/attention_impl.py:fused_seed1 \\
        --workdir=runs/fused_seed1
"""

from __future__ import annotations

import ml_collections

from configs import tiny

IMPLEMENTATIONS = ("einsum", "fused")
SEEDS = (0, 1)


def get_sweep() -> dict[str, dict]:
    """Return the rows: every attention implementation with every seed.

    Returns
    -------
    dict[str, dict]
        ``"<implementation>_seed<seed>"`` -> overrides of the tiny config.
    """
    return {f"{implementation}_seed{seed}": dict(attention_implementation=implementation, seed=seed)
            for implementation in IMPLEMENTATIONS for seed in SEEDS}


def get_config(row: str = "einsum_seed0") -> ml_collections.ConfigDict:
    """Return the tiny config with row ``row``'s overrides.

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
    config = tiny.get_config()
    config.update(rows[row])
    config.name = row
    return config

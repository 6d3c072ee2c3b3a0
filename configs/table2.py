"""Table 2 of Vaswani et al. (2017): variations on the base model, one row per call.

Each row is the base config (``configs/base.py``) plus that row's overrides; the paper's dev figures
(newstest2013 perplexity per wordpiece, BLEU, parameters x 10^6) travel with the row as ``config.paper``.
Rows, in the paper's order: base, A1-A4 (heads, with h * d_k constant), B1-B2 (d_k alone), C1-C7 (size),
D1-D4 (dropout, label smoothing), E (learned positional encoding), big.

Run one row::

    python -m attention_jax.main --config=configs/table2.py:B1 --workdir=runs/table2/B1

or the whole table as a sweep::

    python -m attention_jax.sweep --config=configs/table2.py --rows=all --executor=local --root=runs/table2

Expected: the paper's figures in ``ROWS`` below (full WMT14 EN-DE, 100k steps; big 300k).
"""

from __future__ import annotations

import re

import ml_collections

from configs import base, big

# (row, overrides, (dev PPL, dev BLEU, params in millions or None)); Table 2, in the paper's order.
ROWS: list[tuple[str, dict, tuple[float, float, float | None]]] = [
    ("base", {}, (4.92, 25.8, 65)),
    ("A1", dict(num_heads=1, key_dim=512, value_dim=512), (5.29, 24.9, None)),
    ("A2", dict(num_heads=4, key_dim=128, value_dim=128), (5.00, 25.5, None)),
    ("A3", dict(num_heads=16, key_dim=32, value_dim=32), (4.91, 25.8, None)),
    ("A4", dict(num_heads=32, key_dim=16, value_dim=16), (5.01, 25.4, None)),
    ("B1", dict(key_dim=16), (5.16, 25.1, 58)),
    ("B2", dict(key_dim=32), (5.01, 25.4, 60)),
    ("C1", dict(num_layers=2), (6.11, 23.7, 36)),
    ("C2", dict(num_layers=4), (5.19, 25.3, 50)),
    ("C3", dict(num_layers=8), (4.88, 25.5, 80)),
    ("C4", dict(d_model=256, key_dim=32, value_dim=32), (5.75, 24.5, 28)),
    ("C5", dict(d_model=1024, key_dim=128, value_dim=128), (4.66, 26.0, 168)),
    ("C6", dict(d_ff=1024), (5.12, 25.4, 53)),
    ("C7", dict(d_ff=4096), (4.75, 26.2, 90)),
    ("D1", dict(dropout_rate=0.0), (5.77, 24.6, None)),
    ("D2", dict(dropout_rate=0.2), (4.95, 25.5, None)),
    ("D3", dict(label_smoothing=0.0), (4.67, 25.3, None)),
    ("D4", dict(label_smoothing=0.2), (5.47, 25.7, None)),
    ("E", dict(positional_encoding="learned"), (4.92, 25.7, None)),
    ("big", dict(big.BIG_OVERRIDES), (4.33, 26.4, 213)),
]
ROW_NAMES = tuple(name for name, _, _ in ROWS)


def get_sweep() -> dict[str, dict]:
    """Return the rows as a sweep: row name -> overrides of the base config.

    Returns
    -------
    dict[str, dict]
        Ordered as in the paper; ``launch/`` turns each entry into one job.

    Notes
    -----
    Overrides given on the command line (``--config.key=value``) apply on top of every row.
    """
    return {name: dict(overrides) for name, overrides, _ in ROWS}


def get_paper_figures() -> dict[str, dict[str, float | None]]:
    """Return the paper's dev figures of every row: the report's paper columns and paper-direction verdict.

    Returns
    -------
    dict[str, dict[str, float | None]]
        Row -> ``dev_ppl`` (newstest2013, per wordpiece), ``dev_bleu`` and ``params_millions`` (None where
        the paper gives none), from ``ROWS``.

    Notes
    -----
    ``launch.sweep`` records them in ``sweep.json`` (``paper_figures``); only a sweep file that defines this
    hook gets the paper's columns in ``python -m attention_jax.report``'s tables (the sweep files built on this one
    return the same figures). The reference row of the paper's changes is the first row, ``base``.
    """
    return {name: dict(dev_ppl=ppl, dev_bleu=bleu, params_millions=params)
            for name, _, (ppl, bleu, params) in ROWS}


def group_of(row: str) -> str:
    """Return the Table 2 group of a row: the report's group column and plot panels.

    Parameters
    ----------
    row : str
        Row name, e.g. ``"C4"``.

    Returns
    -------
    str
        ``"A"``..``"E"`` for ``A1``..``E``; the name itself for ``base`` and ``big``; ``""`` otherwise.
    """
    match = re.fullmatch(r"([A-E])\d*", row)
    return match.group(1) if match else row if row in ("base", "big") else ""


def get_report() -> dict:
    """Return what the report adds: the rows' groups (the sweep files built on this one return the same).

    Returns
    -------
    dict
        See :func:`attention_jax.reports.sweep_rows.declared_report`.
    """
    return dict(group_of=group_of)


def get_config(row: str = "base") -> ml_collections.ConfigDict:
    """Return the base config with Table 2 row ``row`` applied.

    Parameters
    ----------
    row : str
        One of ``ROW_NAMES``.

    Returns
    -------
    ml_collections.ConfigDict
        The row's full config; ``config.name`` is the row and ``config.paper`` holds the paper's dev
        perplexity, BLEU and parameter count (millions, ``None`` where the paper gives none).

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    by_name = {name: (overrides, paper) for name, overrides, paper in ROWS}
    if row not in by_name:
        raise ValueError(f"unknown Table 2 row {row!r}; choose one of {', '.join(ROW_NAMES)}.")
    overrides, (ppl, bleu, params_millions) = by_name[row]
    config = base.get_config()
    config.update(overrides)
    config.name = row
    config.paper = ml_collections.ConfigDict(
        dict(dev_ppl=ppl, dev_bleu=bleu, params_millions=params_millions)
    )
    return config

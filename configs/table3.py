"""Table 3 of Vaswani et al. (2017): base and big on WMT 2014 EN-DE and EN-FR, BLEU and training cost.

Rows: ``base_en_de`` (= ``configs/base.py``), ``big_en_de`` (= ``configs/big.py``), ``base_en_fr`` and
``big_en_fr``. EN-FR is "the significantly larger WMT 2014 English-French dataset consisting of 36M
sentences", split "into a 32000 word-piece vocabulary" (Section 5.1); "the Transformer (big) model
trained for English-to-French used dropout rate P_drop = 0.1, instead of 0.3" (Section 6.1). The paper's
figures travel with each row as ``config.paper``: newstest2014 BLEU and the training cost, which the
paper estimates as training time x number of GPUs x sustained single-precision FLOP/s (footnote 5: 9.5
TFLOPS per P100; base 12 hours, big 3.5 days, on 8 P100s).

Run one row::

    python -m attention_jax.main --config=configs/table3.py:base_en_fr --workdir=runs/table3/base_en_fr

or the table as a sweep, then its report (``ROOT/table3.md``, ``.csv``)::

    python -m attention_jax.sweep --config=configs/table3.py --rows=all --executor=local --root=runs/table3
    python -m attention_jax.report runs/table3

(WMT14 EN-FR must be prepared by TFDS first, as for EN-DE:
``tfds.builder('wmt14_translate/fr-en', file_format='array_record').download_and_prepare()``).
Expected: the paper's BLEU below (27.3, 28.4, 38.1, 41.8).
"""

from __future__ import annotations

import ml_collections

from configs import base, big

P100_TFLOPS = 9.5  # Sustained single precision, the paper's footnote 5.
EN_FR = dict(dataset="wmt14_translate/fr-en", source_lang="en", target_lang="fr", vocab_size=32000)

# (row, overrides, paper figures); Table 3's Transformer rows. Training time and GPUs: Section 5.2.
ROWS: list[tuple[str, dict, dict]] = [
    ("base_en_de", {}, dict(test_bleu=27.3, train_flops=3.3e18, train_hours=12.0, num_gpus=8, dev_ppl=4.92,
                            dev_bleu=25.8, params_millions=65)),
    ("big_en_de", dict(big.BIG_OVERRIDES), dict(test_bleu=28.4, train_flops=2.3e19, train_hours=84.0, num_gpus=8,
                                                dev_ppl=4.33, dev_bleu=26.4, params_millions=213)),
    ("base_en_fr", dict(EN_FR), dict(test_bleu=38.1, train_flops=3.3e18, train_hours=12.0, num_gpus=8)),
    ("big_en_fr", dict(big.BIG_OVERRIDES, **EN_FR, dropout_rate=0.1),
     dict(test_bleu=41.8, train_flops=2.3e19, train_hours=84.0, num_gpus=8)),
]
ROW_NAMES = tuple(name for name, _, _ in ROWS)


def get_sweep() -> dict[str, dict]:
    """Return the rows as a sweep: row name -> overrides of the base config.

    Returns
    -------
    dict[str, dict]
        In Table 3's order; ``launch/`` turns each entry into one job.
    """
    return {name: dict(overrides) for name, overrides, _ in ROWS}


def get_config(row: str = "base_en_de") -> ml_collections.ConfigDict:
    """Return the base config with Table 3 row ``row`` applied.

    Parameters
    ----------
    row : str
        One of ``ROW_NAMES``.

    Returns
    -------
    ml_collections.ConfigDict
        The row's full config; ``config.paper`` holds the paper's test BLEU, its training cost as printed
        (``train_flops``), the training hours, GPUs and sustained TFLOPS per GPU it came from, plus Table
        2's dev figures for the EN-DE rows.

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    by_name = {name: (overrides, paper) for name, overrides, paper in ROWS}
    if row not in by_name:
        raise ValueError(f"unknown Table 3 row {row!r}; choose one of {', '.join(ROW_NAMES)}.")
    overrides, paper = by_name[row]
    config = base.get_config()
    config.update(overrides)
    config.name = row
    figures = dict(dict(dev_ppl=None, dev_bleu=None, params_millions=None), **paper, gpu_tflops=P100_TFLOPS)
    config.paper = ml_collections.ConfigDict(figures)
    return config


def get_report() -> dict:
    """Return what the report adds: test BLEU and training cost beside the paper's (table3.md).

    Returns
    -------
    dict
        See :func:`attention_jax.reports.sweep_rows.declared_report`.
    """
    from attention_jax.reports import training_cost  # Only when reporting.

    return dict(extras=[training_cost.write])

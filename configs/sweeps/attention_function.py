"""Attention functions at three key sizes (Section 3.2.1, footnote 4; issue 37), small-corpus scale, 3 seeds.

The paper scales dot products by ``1/sqrt(d_k)`` because "for large values of d_k, the dot products
grow large in magnitude, pushing the softmax function into regions where it has extremely small
gradients", and cites that "additive attention outperforms dot product attention without scaling for
larger values of d_k" (Britz et al., 2017). This sweep asks, on a real corpus: does unscaled dot-product
attention degrade as ``d_k`` grows, and where does additive attention stand? Linear attention
(``phi = elu + 1``, no softmax) runs once, at the recipe's ``d_k``.

Rows (10), each with seeds 0, 1, 2 (``get_seeds``):

- ``base``: the paper's scaled dot product at the recipe's ``d_k = 32`` (the reference row of the
  report's changes and verdicts);
- ``scaled_dot_product_dk{8,128}``, ``dot_product_dk{8,32,128}``, ``additive_dk{8,32,128}``;
- ``linear``: linear attention at ``d_k = 32``.

**How d_k varies: d_model stays, the query/key projections absorb the difference.** The recipe's
``d_model = 128`` and ``h = 4`` are fixed; only ``d_k`` changes, so ``W^Q`` and ``W^K`` map 128 to
``h d_k`` = 32, 128 or 512 columns, while ``d_v = 32``, ``W^V`` and ``W^O`` stay as they are (as Table 2
row B varies ``d_k`` alone). Growing ``d_model = h d_k`` instead would change every layer's width
and the model's capacity with it (d_model 32 to 512), and the comparison would no longer isolate the
scores. The price: rows differ in parameter count by the ``2 x 128 x h d_k`` projection weights (and
additive attention's ``h d_k`` score vector), which the report's params column shows.

Everything else is ``configs/small_corpus.py`` (N=3, d_model=128, d_ff=512, h=4, 4,000 BPE pieces,
1,700 steps of 4,096 padded target tokens, warmup 300, last checkpoint, beam 4) on the real
English-German corpus ``../shared/data/messages_en_de``, with the final BLEU on the dev split only
(the report's table is a dev-set table, like Table 2's). Run it (from the repository root; two runs
at a time, each pinned to one core; every row at seed 0 first)::

    python -m attention_jax.sweep --config=configs/sweeps/attention_function.py --executor=local --parallel=2 \\
        --root=runs/attention_function
    python -m attention_jax.report runs/attention_function          # also from a partial sweep
    python -m launch.export_results --root=runs/attention_function --to=docs/attention_functions

On the second corpus, ``gnome_help_en_de`` (its recipe: ``attention_jax/data/corpora.py``), in a
root of its own; the file declares no ``get_corpora()``, so the commands above keep the committed layout
(``docs/attention_functions/<row>/seed_<k>``) and this export lands beside it, in
``docs/attention_functions/gnome_help_en_de/``::

    attention-jax-sweep --config=configs/sweeps/attention_function.py --corpora=gnome_help_en_de --executor=local \\
        --parallel=2 --root=runs/attention_function_gnome
    python -m attention_jax.report runs/attention_function_gnome/gnome_help_en_de
    python -m launch.export_results --root=runs/attention_function_gnome --to=docs/attention_functions

or one row::

    python -m attention_jax.main --config=configs/sweeps/attention_function.py:dot_product_dk128 \\
        --workdir=runs/dot_product_dk128 --config.seed=0

Additive attention at d_k = 128 is the costly row (``[B, T, S, H, d_k]`` tanh evaluations per layer, see
``attention_jax/models/attention_functions.py``). Results, the cost of each row and the reading:
``docs/attention_functions.md``.
"""

from __future__ import annotations

import ml_collections

from configs import small_corpus

KEY_DIMS = (8, 32, 128)
RECIPE_KEY_DIM = 32  # configs/small_corpus.py: d_model / h = 128 / 4.
SOFTMAX_FUNCTIONS = ("scaled_dot_product", "dot_product", "additive")
SEEDS = (0, 1, 2)
DATASET = "tsv:../shared/data/messages_en_de"


def get_seeds() -> tuple[int, ...]:
    """Return the seeds every row runs with (``launch.sweep`` reads them; ``--seeds=K`` overrides).

    Returns
    -------
    tuple[int, ...]
        ``(0, 1, 2)``.
    """
    return SEEDS


def _row_name(function: str, key_dim: int) -> str:
    if function == "scaled_dot_product" and key_dim == RECIPE_KEY_DIM:
        return "base"
    return f"{function}_dk{key_dim}"


def get_sweep() -> dict[str, dict]:
    """Return the rows: three softmax functions at three ``d_k``, then linear attention.

    Returns
    -------
    dict[str, dict]
        Row name -> overrides of the small-corpus recipe (``attention_function``, ``key_dim``); ``base``
        (scaled dot product, ``d_k = 32``) first.
    """
    rows = {"base": dict(attention_function="scaled_dot_product", key_dim=RECIPE_KEY_DIM)}
    for function in SOFTMAX_FUNCTIONS:
        for key_dim in KEY_DIMS:
            rows.setdefault(_row_name(function, key_dim), dict(attention_function=function, key_dim=key_dim))
    rows["linear"] = dict(attention_function="linear", key_dim=RECIPE_KEY_DIM)
    return rows


def get_config(row: str = "base") -> ml_collections.ConfigDict:
    """Return the small-corpus recipe on messages_en_de with row ``row``'s attention function and ``d_k``.

    Parameters
    ----------
    row : str
        A key of :func:`get_sweep`.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name`` is the row; ``value_dim`` stays 32 and ``d_model`` 128 in every row.

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    rows = get_sweep()
    if row not in rows:
        raise ValueError(f"unknown row {row!r}; choose one of {', '.join(rows)}.")
    config = small_corpus.get_config()
    config.dataset = DATASET
    config.final_bleu_splits = ("dev",)  # The report compares rows on the dev split.
    config.value_dim = RECIPE_KEY_DIM  # d_v and W^O stay; only the scores change with d_k.
    config.update(rows[row])
    config.name = row
    return config


def get_report() -> dict:
    """Return what the report adds: each attention function against scaled dot product at the same d_k.

    Returns
    -------
    dict
        See :func:`attention_jax.reports.sweep_rows.declared_report`.
    """
    from attention_jax.reports import within_groups  # Only when reporting.

    return dict(extras=[within_groups.write])

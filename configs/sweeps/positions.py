"""Positional encodings beyond the training lengths (Section 3.5; issue 62), small-corpus scale, 3 seeds.

The paper chose the sinusoidal encoding over learned positions (Table 2 row E: the same perplexity)
"because it may allow the model to extrapolate to sequence lengths longer than the ones encountered
during training". This sweep tests that claim, and places the encodings proposed since beside it:
every row trains on the pairs of ``messages_en_de`` whose target has at most ``CAP`` = 12 words, then
is scored on held-apart pairs in four buckets of target length (within the cap, up to 1.5x, up to 2x,
beyond; ``attention_jax/data/length_buckets.py``): perplexity per target piece and beam-search BLEU.

Rows (6), each with seeds 0, 1, 2 (``get_seeds``); only ``config.positional_encoding`` changes:

- ``sinusoidal``: the paper's fixed encoding (the reference row of the report's changes and verdicts);
- ``learned``: a learned vector per position (Table 2 row E);
- ``none``: no positions (the decoder's causal mask is its only order information);
- ``relative``, ``rotary``, ``alibi``: encodings inside attention (Shaw et al., 2018; Su et al., 2021;
  Press et al., 2022).

Everything else is ``configs/small_corpus.py`` (N=3, d_model=128, d_ff=512, h=4, 4,000 BPE pieces, the
same 1,700 steps of 4,096 padded target tokens for every row, warmup 300, last checkpoint, beam 4,
alpha 0.6), final BLEU on the capped dev split only, with one change: ``max_len = 256`` pieces (the
recipe's 64 would leave out the long buckets). The position table has ``max_len + max_decode_extra_len``
= 306 rows, and the longest bucket pair has 211 pieces (``docs/positions.md``), so every pair of every
bucket is scored whole; training pairs are capped by words, so the learned table's rows beyond the
training lengths (99% of training targets have at most 31 pieces) see almost no gradient, which is
what the experiment asks about.

Run it (from the repository root; two runs at a time, each pinned to one core; every row at seed 0
first; the split and the scores are deterministic, so a stopped sweep resumes with the same commands)::

    python -m attention_jax.data.length_buckets --corpus=../shared/data/messages_en_de --cap=12 \\
        --out=runs/positions_corpus
    python -m attention_jax.sweep --config=configs/sweeps/positions.py --executor=local --parallel=2 \\
        --root=runs/positions
    python -m attention_jax.evaluation.length_bucket_evaluation --root=runs/positions \\
        --buckets=runs/positions_corpus            # after the sweep; or beside it with --wait (a third process)
    python -m attention_jax.report runs/positions  # also from a partial sweep: writes positions.md/.csv/.png

On the second corpus (``--corpora``, ``attention_jax/data/corpora.py``): its recipe's cap (26 words),
its own split in ``runs/positions_corpora/<corpus>`` (:func:`get_corpus_overrides`), its own root; the
messages runs above stay where they are (``docs/positions/<row>/seed_<k>``)::

    python -m attention_jax.data.length_buckets --corpus=../shared/data/gnome_help_en_de --cap=26 \
        --out=runs/positions_corpora/gnome_help_en_de
    attention-jax-sweep --config=configs/sweeps/positions.py --corpora=gnome_help_en_de --executor=local \
        --parallel=2 --root=runs/positions_gnome
    python -m attention_jax.evaluation.length_bucket_evaluation --root=runs/positions_gnome/gnome_help_en_de \
        --buckets=runs/positions_corpora/gnome_help_en_de
    python -m attention_jax.report runs/positions_gnome/gnome_help_en_de
    python -m launch.export_results --root=runs/positions_gnome --to=docs/positions  # docs/positions/gnome_help_en_de/
    python -m attention_jax.report docs/positions  # Both corpora's reports, and transfer.md (the trend among them)

or one row::

    python -m attention_jax.main --config=configs/sweeps/positions.py:learned --workdir=runs/learned \\
        --config.seed=0
    python -m attention_jax.evaluation.length_bucket_evaluation --workdir=runs/learned \\
        --buckets=runs/positions_corpus

The design, the buckets' sizes, the cost and the results: ``docs/positions.md``.
"""

from __future__ import annotations

from typing import Any

import ml_collections

from attention_jax.data import corpora
from configs import small_corpus

ENCODINGS = ("sinusoidal", "learned", "none", "relative", "rotary", "alibi")
SEEDS = (0, 1, 2)
CAP = corpora.MESSAGES_EN_DE.positions_cap  # Target words; chosen in docs/positions.md.
CORPUS = corpora.MESSAGES_EN_DE.directory  # What the split is made from.
SPLIT_DIR = "runs/positions_corpus"  # python -m attention_jax.data.length_buckets --cap=CAP --out=SPLIT_DIR
CORPUS_SPLITS_DIR = "runs/positions_corpora"  # With --corpora: <dir>/<corpus>, each at its recipe's cap.
MAX_LEN_FACTOR = 4  # max_len over the recipe's (messages: 4 x 64 = 256).
MAX_LEN = MAX_LEN_FACTOR * corpora.MESSAGES_EN_DE.max_len  # Above the longest bucket pair (211), none cut.


def get_corpus_overrides(corpus: str) -> dict[str, object]:
    """Return what replaces a corpus recipe's fields here: its capped split, and a longer ``max_len``.

    Parameters
    ----------
    corpus : str
        A registered corpus (``launch.sweep --corpora``).

    Returns
    -------
    dict[str, object]
        ``dataset`` (``tsv:runs/positions_corpora/<corpus>``) and ``max_len`` (``MAX_LEN_FACTOR`` x the recipe's).
    """
    return dict(dataset=f"tsv:{CORPUS_SPLITS_DIR}/{corpus}", max_len=MAX_LEN_FACTOR * corpora.CORPORA[corpus].max_len)


def get_seeds() -> tuple[int, ...]:
    """Return the seeds every row runs with (``launch.sweep`` reads them; ``--seeds=K`` overrides).

    Returns
    -------
    tuple[int, ...]
        ``(0, 1, 2)``.
    """
    return SEEDS


def get_sweep() -> dict[str, dict]:
    """Return the rows: one per positional encoding, sinusoidal first.

    Returns
    -------
    dict[str, dict]
        Row name (the encoding's name) -> ``{"positional_encoding": name}``.
    """
    return {encoding: dict(positional_encoding=encoding) for encoding in ENCODINGS}


def get_config(row: str = "sinusoidal") -> ml_collections.ConfigDict:
    """Return the small-corpus recipe on the capped corpus with row ``row``'s positional encoding.

    Parameters
    ----------
    row : str
        A key of :func:`get_sweep`.

    Returns
    -------
    ml_collections.ConfigDict
        ``config.name`` is the row; ``config.dataset`` is ``tsv:runs/positions_corpus``.

    Notes
    -----
    Raises ``ValueError`` listing the valid rows for an unknown one.
    """
    rows = get_sweep()
    if row not in rows:
        raise ValueError(f"unknown row {row!r}; choose one of {', '.join(rows)}.")
    config = small_corpus.get_config()
    config.dataset = f"tsv:{SPLIT_DIR}"
    config.final_bleu_splits = ("dev",)  # The capped dev split; the buckets are scored afterwards.
    config.max_len = MAX_LEN
    config.update(rows[row])
    config.name = row
    return config


def get_report() -> dict:
    """Return what the report adds: each encoding against sinusoidal per length bucket, and the trend with length.

    Returns
    -------
    dict
        See :func:`attention_jax.reports.sweep_rows.declared_report`.
    """
    from attention_jax.reports import within_groups  # Only when reporting.

    return dict(extras=[bucket_comparison().write], headline_measures=[within_groups.LENGTH_TREND])


def bucket_comparison() -> Any:
    """Return the length-bucket report's declaration: every encoding against sinusoidal, bucket by bucket.

    Returns
    -------
    attention_jax.reports.within_groups.BucketComparison
        Its files are ``positions_by_length.md``, ``.csv`` and ``.png``.
    """
    from attention_jax.reports import within_groups  # Only when reporting.

    return within_groups.BucketComparison(
        field="positional_encoding", reference="sinusoidal", label="encoding", reference_basis="the paper's encoding",
        stem="positions_by_length", title="Positional encodings on length buckets",
        plot_title="positional encodings by target length")

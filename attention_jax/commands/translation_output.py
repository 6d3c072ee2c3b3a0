"""What ``translate`` prints for one input line: a plain translation, fairseq-like tagged lines, or JSON.

Three layouts (``docs/quickstart.md``, "Translating"):

- plain (``--format=text`` without ``--nbest`` or ``--alignment``): the best translation, one line per
  input line;
- tagged (``--format=text`` with ``--nbest`` or ``--alignment``), for input line ``i`` counted from 0 as
  fairseq numbers its sentences: one ``H-i<TAB>normalized_score<TAB>score<TAB>translation`` line per
  hypothesis, best first, each followed with ``--print_scores`` by ``P-i<TAB>lp lp ...`` (each token's
  log-probability, EOS's last) and with ``--alignment`` by ``A-i<TAB>j-t j-t ...``; an empty input line
  has no hypothesis and prints nothing;
- ``--format=jsonl``: one JSON object per input line.

Scores are natural logs: ``score`` is ``log P(Y | X)`` (the sum of the token log-probabilities),
``normalized_score`` is ``score / lp(|Y|)`` with the run's length penalty, what beam search ranks by.
(fairseq prints its ``P-`` values in base 2; these are natural logs, as the ``H-`` scores.)
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from attention_jax.decoding.alignment import Alignment, format_pairs
from attention_jax.decoding.decode import Hypothesis


@dataclasses.dataclass(frozen=True)
class LineResult:
    """Everything printed for one input line.

    Attributes
    ----------
    index : int
        The input line's number, from 0.
    source : str
        The line as read.
    hypotheses : list[Hypothesis]
        Best first; empty for an empty line.
    alignments : list[Alignment], optional
        With ``--alignment``: one per hypothesis.
    source_pieces : list[str], optional
        With ``--alignment``: the source's pieces (no EOS), which the alignment's source indices count.
    hypothesis_pieces : list[list[str]], optional
        With ``--alignment``: each hypothesis's pieces (no EOS), which the target indices count.
    token_log_probs : list[list[float]], optional
        With ``--print_scores``: each hypothesis's token log-probabilities (natural logs, EOS's last).
    """

    index: int
    source: str
    hypotheses: list[Hypothesis]
    alignments: list[Alignment] | None = None
    source_pieces: list[str] | None = None
    hypothesis_pieces: list[list[str]] | None = None
    token_log_probs: list[list[float]] | None = None


def _one_line(text: str) -> str:
    """``text`` without line breaks or tabs, so that it stays one field of one line."""
    return text.replace("\r", " ").replace("\n", " ").replace("\t", " ")


def plain_line(result: LineResult) -> str:
    """The best translation of the line (``""`` for an empty line), without its newline.

    Parameters
    ----------
    result : LineResult
        The line's hypotheses.

    Returns
    -------
    str
        One line of text.
    """
    return result.hypotheses[0].text.replace("\n", " ") if result.hypotheses else ""


def tagged_lines(result: LineResult) -> list[str]:
    """The line's ``H-`` (and ``A-``) lines, best hypothesis first, without newlines.

    Parameters
    ----------
    result : LineResult
        The line's hypotheses and, with ``--alignment``, their alignments.

    Returns
    -------
    list[str]
        ``H-<index>\\t<normalized_score>\\t<score>\\t<translation>`` per hypothesis (scores with four
        decimals), each followed by ``P-<index>\\t<token log-probabilities>`` when they are given and by
        ``A-<index>\\t<source-target pairs>`` when alignments are given.
    """
    lines = []
    for number, hypothesis in enumerate(result.hypotheses):
        lines.append(f"H-{result.index}\t{hypothesis.normalized_score:.4f}\t{hypothesis.score:.4f}\t"
                     f"{_one_line(hypothesis.text)}")
        if result.token_log_probs is not None:
            values = " ".join(f"{value:.4f}" for value in result.token_log_probs[number])
            lines.append(f"P-{result.index}\t{values}")
        if result.alignments is not None:
            lines.append(f"A-{result.index}\t{format_pairs(result.alignments[number])}")
    return lines


def json_line(result: LineResult, *, nbest: bool) -> str:
    """The line as one JSON object (UTF-8 text, not ASCII-escaped), without its newline.

    Parameters
    ----------
    result : LineResult
        The line's hypotheses and, with ``--alignment``, their alignments and pieces.
    nbest : bool
        Add the ``nbest`` list (``--nbest`` given).

    Returns
    -------
    str
        ``{"source", "translation", "score", "normalized_score"}`` of the best hypothesis (scores
        ``null`` for an empty line); with ``nbest`` a list ``"nbest"`` of ``{"translation", "score",
        "normalized_score"}`` per hypothesis; with alignments ``"alignment"`` (``[source, target]``
        pairs of the best hypothesis), ``"source_pieces"`` and ``"translation_pieces"``, and in each
        ``nbest`` entry its own ``"alignment"`` and ``"translation_pieces"``; with token log-probabilities
        ``"token_log_probs"`` of the best hypothesis, and of each ``nbest`` entry in it.
    """
    best = result.hypotheses[0] if result.hypotheses else None
    record: dict[str, Any] = {
        "source": result.source,
        "translation": best.text if best else "",
        "score": best.score if best else None,
        "normalized_score": best.normalized_score if best else None,
    }
    entries = [{"translation": hypothesis.text, "score": hypothesis.score,
                "normalized_score": hypothesis.normalized_score} for hypothesis in result.hypotheses]
    if result.alignments is not None:
        pieces = result.hypothesis_pieces or [[] for _ in result.hypotheses]
        for entry, pairs, hypothesis_pieces in zip(entries, result.alignments, pieces):
            entry["alignment"] = [list(pair) for pair in pairs]
            entry["translation_pieces"] = hypothesis_pieces
        record["alignment"] = entries[0]["alignment"] if entries else []
        record["source_pieces"] = result.source_pieces or []
        record["translation_pieces"] = entries[0]["translation_pieces"] if entries else []
    if result.token_log_probs is not None:
        for entry, values in zip(entries, result.token_log_probs):
            entry["token_log_probs"] = list(values)
        record["token_log_probs"] = entries[0]["token_log_probs"] if entries else []
    if nbest:
        record["nbest"] = entries
    return json.dumps(record, ensure_ascii=False)

"""What ``translate`` prints for one input line: plain, fairseq-like tagged lines, or JSON (docs/quickstart.md)."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from attention_jax.decoding.decode import Hypothesis

if TYPE_CHECKING:  # Alignments import Flax: only --alignment needs them.
    from attention_jax.decoding.alignment import Alignment


@dataclasses.dataclass(frozen=True)
class _LineResult:
    """Everything printed for one input line."""

    index: int  # From 0.
    source: str
    hypotheses: list[Hypothesis]  # Best first; empty for an empty line.
    alignments: list[Alignment] | None = None  # --alignment: one per hypothesis.
    source_pieces: list[str] | None = None  # --alignment: the pieces (no EOS) the alignment counts.
    hypothesis_pieces: list[list[str]] | None = None  # --alignment: each hypothesis's pieces (no EOS).
    token_log_probs: list[list[float]] | None = None  # --print_scores: per hypothesis, EOS's last.


def _one_line(text: str) -> str:
    """Return ``text`` without line breaks or tabs, one field of one line."""
    return text.replace("\r", " ").replace("\n", " ").replace("\t", " ")


def _plain_line(result: _LineResult) -> str:
    """Return the best translation of the line (``""`` for an empty line), without its newline."""
    return result.hypotheses[0].text.replace("\n", " ") if result.hypotheses else ""


def _tagged_lines(result: _LineResult) -> list[str]:
    r"""Return the line's ``H-``, ``P-`` and ``A-`` lines, best hypothesis first, without newlines."""
    lines = []
    for number, hypothesis in enumerate(result.hypotheses):
        lines.append(f"H-{result.index}\t{hypothesis.normalized_score:.4f}\t{hypothesis.score:.4f}\t"
                     f"{_one_line(hypothesis.text)}")
        if result.token_log_probs is not None:
            values = " ".join(f"{value:.4f}" for value in result.token_log_probs[number])
            lines.append(f"P-{result.index}\t{values}")
        if result.alignments is not None:
            from attention_jax.decoding.alignment import format_pairs

            lines.append(f"A-{result.index}\t{format_pairs(result.alignments[number])}")
    return lines


def _json_line(result: _LineResult, *, nbest: bool) -> str:
    """Return the line as one JSON object (UTF-8, not ASCII-escaped), without its newline."""
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

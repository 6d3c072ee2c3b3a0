"""Translation quality: sacrebleu BLEU, chrF and TER (signed, detokenized) and teacher-forced perplexity (Section 6).

Perplexity: ``exp`` of the unsmoothed cross-entropy over non-pad target tokens, EOS included (Table 2).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, cast

import jax
import jax.numpy as jnp
import numpy as np

from attention_jax.decoding import decode
from attention_jax.evaluation import progress
from attention_jax.evaluation.sacrebleu_scores import (  # noqa: F401 (CorpusScores, corpus_bleu: re-exported)
    DEFAULT_BLEU_TOKENIZER,
    CorpusScores,
    corpus_bleu,
    corpus_scores,
)
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.foundation import run_files
from attention_jax.models.model import PAD_ID, Transformer

Array = jax.Array


@functools.partial(jax.jit, static_argnames=("model_config",))
def _cross_entropy_sum(params: Any, inputs: Array, targets: Array, *,
                       model_config: TransformerConfig) -> tuple[Array, Array]:
    """Return the summed ``-log p(target)`` over non-pad target tokens, and their count."""
    logits = cast(Array, Transformer(model_config).apply({"params": params}, inputs, targets))  # [B,T,V]
    log_probs = jax.nn.log_softmax(logits)
    target_log_probs = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # [B,T]
    valid = targets != PAD_ID
    return -jnp.sum(jnp.where(valid, target_log_probs, 0.0)), jnp.sum(valid)


@dataclasses.dataclass(frozen=True)
class _CrossEntropy:
    """Teacher-forced cross-entropy of a set of pairs."""

    mean: float  # Nats per target token, EOS included.
    num_tokens: int
    num_pairs: int
    num_skipped: int  # Pairs with a side over the length limit.

    @property
    def perplexity(self) -> float:
        """Return ``exp(mean)``; NaN without tokens."""
        return math.exp(self.mean) if self.num_tokens else float("nan")


def _cross_entropy(model_config: TransformerConfig, params: Any, tokenizer: decode.TextCodec,
                   pairs: Sequence[tuple[str, str]], *, max_len: int, batch_size: int = 64) -> _CrossEntropy:
    """Return the mean unsmoothed cross-entropy per target token of ``pairs``, teacher-forced; longer pairs skipped."""
    encoded, kept = _encode_within(tokenizer, pairs, max_len)
    total, count = 0.0, 0
    for inputs, targets in _padded_batches(kept, max_len, batch_size):
        batch_total, batch_count = _cross_entropy_sum(params, inputs, targets, model_config=model_config)
        total += float(batch_total)
        count += int(batch_count)
    mean = total / count if count else float("nan")
    return _CrossEntropy(mean=mean, num_tokens=count, num_pairs=len(kept), num_skipped=len(encoded) - len(kept))


@functools.partial(jax.jit, static_argnames=("model_config",))
def _batch_cross_entropy_by_position(params: Any, inputs: Array, targets: Array, *,
                                     model_config: TransformerConfig) -> tuple[Array, Array]:
    """Return per target position ``[T]`` the summed ``-log p(target)`` and the token count."""
    logits = cast(Array, Transformer(model_config).apply({"params": params}, inputs, targets))  # [B,T,V]
    log_probs = jax.nn.log_softmax(logits)
    target_log_probs = jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]  # [B,T]
    valid = targets != PAD_ID
    return -jnp.sum(jnp.where(valid, target_log_probs, 0.0), axis=0), jnp.sum(valid, axis=0)


def _cross_entropy_by_position(model_config: TransformerConfig, params: Any, tokenizer: decode.TextCodec,
                              pairs: Sequence[tuple[str, str]], *, max_len: int,
                              batch_size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Return :func:`_cross_entropy`'s summed nats and token counts by target position, float64 and int64 ``[max_len]``.
    """
    _, kept = _encode_within(tokenizer, pairs, max_len)
    sums, counts = np.zeros(max_len, np.float64), np.zeros(max_len, np.int64)
    for inputs, targets in _padded_batches(kept, max_len, batch_size):
        batch_sums, batch_counts = _batch_cross_entropy_by_position(params, inputs, targets, model_config=model_config)
        sums[:targets.shape[1]] += np.asarray(batch_sums, np.float64)
        counts[:targets.shape[1]] += np.asarray(batch_counts, np.int64)
    return sums, counts


def _encode_within(tokenizer: decode.TextCodec, pairs: Sequence[tuple[str, str]], max_len: int
                   ) -> tuple[list[tuple[list[int], list[int]]], list[tuple[list[int], list[int]]]]:
    """Return every pair's ids, and those whose sides fit ``max_len`` sorted by length."""
    encoded = [(tokenizer.encode(source), tokenizer.encode(target)) for source, target in pairs]
    kept = [pair for pair in encoded if len(pair[0]) <= max_len and len(pair[1]) <= max_len]
    kept.sort(key=lambda pair: max(len(pair[0]), len(pair[1])))
    return encoded, kept


def _padded_batches(kept: Sequence[tuple[Sequence[int], Sequence[int]]], max_len: int,
                    batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(inputs, targets)`` int32 batches of ``kept``, padded to power-of-two rows and lengths."""
    for start in range(0, len(kept), batch_size):
        chunk = kept[start: start + batch_size]
        rows = decode.bucket_rows(len(chunk), batch_size)
        yield _pad([source for source, _ in chunk], rows, max_len), _pad([target for _, target in chunk], rows, max_len)



def _pad(sequences: Sequence[Sequence[int]], rows: int, max_len: int) -> np.ndarray:
    length = decode.bucket_length(max(len(ids) for ids in sequences), max_len)
    padded = np.full((rows, length), PAD_ID, np.int32)
    for row, ids in enumerate(sequences):
        padded[row, : len(ids)] = ids
    return padded


@dataclasses.dataclass(frozen=True)
class EvaluationResult:
    """BLEU, chrF, TER and perplexity of a model on a split or a parallel text."""

    bleu: float  # sacrebleu corpus BLEU, detokenized; the signature says how.
    bleu_signature: str
    chrf: float  # chrF2.
    chrf_signature: str
    ter: float  # Lower is better.
    ter_signature: str
    perplexity: float  # Teacher forced, no label smoothing.
    cross_entropy: float  # Nats per token.
    num_examples: int  # Pairs translated.
    num_target_tokens: int  # Tokens in the perplexity.
    num_skipped_for_perplexity: int  # Pairs too long for the perplexity batches.
    hypotheses: list[str]  # In split order.

    def summary(self) -> dict[str, Any]:
        """Return every field but the hypotheses.

        Returns
        -------
        dict[str, Any]
            JSON-serializable figures.
        """
        fields = dataclasses.asdict(self)
        del fields["hypotheses"]
        return fields


class EvaluationStopped(Exception):
    """A stop request (SIGTERM, Ctrl-C) came while a split was being translated; the message says how far."""


def _decoding_batches(encoded_sources: Sequence[Sequence[int]], batch_size: int, *,
                     sort_by_length: bool = True) -> list[list[int]]:
    """Return the non-empty sources' indices in decoding batches, longest first unless ``sort_by_length=False``."""
    order = [index for index, ids in enumerate(encoded_sources) if ids]
    if sort_by_length:
        order.sort(key=lambda index: -len(encoded_sources[index]))
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def translate_stoppably(translator: decode.Translator, sources: Sequence[str], *,
                        should_stop: Callable[[], bool] | None = None,
                        report_progress: Callable[[int], None] | None = None,
                        sort_by_length: bool = True) -> list[str]:
    """Translate like ``translator.translate``, one batch at a time, checking for a stop request between.

    Parameters
    ----------
    translator : decode.Translator
        The translator.
    sources : Sequence[str]
        Source sentences.
    should_stop : Callable[[], bool], optional
        Asked before each batch.
    report_progress : Callable[[int], None], optional
        Called with the sentences translated so far.
    sort_by_length : bool
        False: input order (the unsorted baseline of docs/benchmarks.md).

    Returns
    -------
    list[str]
        The translations in input order.

    Raises
    ------
    EvaluationStopped
        When ``should_stop`` returns True.
    """
    encoded = translator.encode_sources(sources)
    batches = _decoding_batches(encoded, translator.batch_size, sort_by_length=sort_by_length)
    outputs = [""] * len(sources)
    done = len(sources) - sum(len(indices) for indices in batches)  # Empty sources translate to "".
    for indices in batches:
        if should_stop is not None and should_stop():
            raise EvaluationStopped(f"{done} of {len(sources)} sentences translated")
        for index, ids in zip(indices, translator.translate_ids([encoded[i] for i in indices])):
            outputs[index] = translator.tokenizer.decode(ids) if ids else ""
        done += len(indices)
        if report_progress is not None:
            report_progress(done)
    return outputs


def evaluate(translator: decode.Translator, pairs: Sequence[tuple[str, str]], *,
             should_stop: Callable[[], bool] | None = None,
             report_progress: Callable[[int], None] | None = None,
             bleu_tokenizer: str = DEFAULT_BLEU_TOKENIZER, progress_name: str = "evaluation") -> EvaluationResult:
    """Translate every source of ``pairs`` and score it; also the perplexity of the references.

    Parameters
    ----------
    translator : decode.Translator
        Model, parameters, tokenizer and decoding settings.
    pairs : Sequence[tuple[str, str]]
        ``(source, reference)`` text, at least one.
    should_stop : Callable[[], bool], optional
        Asked between batches.
    report_progress : Callable[[int], None], optional
        Called with the sentences translated so far.
    bleu_tokenizer, progress_name : str
        sacrebleu's BLEU tokenizer; the perplexity progress lines' name (``"final test"``).

    Returns
    -------
    EvaluationResult
        Scores over all pairs; perplexity over those that fit ``translator.max_source_len``.

    Raises
    ------
    ValueError
        For no pairs.
    EvaluationStopped
        When ``should_stop`` returns True.
    """
    if not pairs:
        raise ValueError("evaluate needs at least one (source, reference) pair; the split is empty.")
    sources = [source for source, _ in pairs]
    references = [reference for _, reference in pairs]
    hypotheses = translate_stoppably(translator, sources, should_stop=should_stop,
                                     report_progress=report_progress)
    if should_stop is not None and should_stop():
        raise EvaluationStopped(f"all {len(sources)} sentences translated, perplexity not computed")
    scores = corpus_scores(hypotheses, references, bleu_tokenizer=bleu_tokenizer)
    with progress.timed_phase(f"{progress_name} perplexity", len(pairs), unit="reference pairs"):
        entropy = _cross_entropy(translator.model_config, translator.params, translator.tokenizer, pairs,
                                max_len=translator.max_source_len, batch_size=translator.batch_size)
    return EvaluationResult(
        **dataclasses.asdict(scores),
        perplexity=entropy.perplexity,
        cross_entropy=entropy.mean,
        num_examples=len(pairs),
        num_target_tokens=entropy.num_tokens,
        num_skipped_for_perplexity=entropy.num_skipped,
        hypotheses=hypotheses,
    )


def write_report(path: str, report: dict[str, Any], hypotheses: Sequence[str],
                 pairs: Sequence[tuple[str, str]] | None = None) -> list[str]:
    """Write a report as JSON (non-finite figures as ``null``), the hypotheses beside it, and with ``pairs`` all three.

    Parameters
    ----------
    path : str
        JSON file, e.g. ``WORKDIR/eval_test.json``.
    report : dict
        JSON-serializable figures.
    hypotheses : Sequence[str]
        Written to ``<path stem>.hypotheses.txt``.
    pairs : Sequence[tuple[str, str]], optional
        ``(source, reference)`` per hypothesis, for ``<path stem>.translations.jsonl``.

    Returns
    -------
    list[str]
        The files written beside the report.

    Raises
    ------
    ValueError
        When ``pairs`` and ``hypotheses`` differ in length, before anything is written.
    """
    if pairs is not None and len(pairs) != len(hypotheses):
        raise ValueError(f"write_report needs one (source, reference) pair per hypothesis; got {len(pairs)} "
                         f"pairs and {len(hypotheses)} hypotheses.")
    with open(path, "w", encoding="utf-8") as report_file:
        json.dump(_finite_or_none(report), report_file, indent=2, allow_nan=False)  # NaN: not JSON, so null.
        report_file.write("\n")
    written = [run_files.hypotheses_path(path)]
    with open(written[0], "w", encoding="utf-8") as hypotheses_file:
        hypotheses_file.writelines(hypothesis.replace("\n", " ") + "\n" for hypothesis in hypotheses)
    if pairs is not None:
        written.append(run_files.translations_path(path))
        with open(written[1], "w", encoding="utf-8") as translations_file:
            for (source, reference), hypothesis in zip(pairs, hypotheses):
                line = {"source": source, "reference": reference, "hypothesis": hypothesis}
                translations_file.write(json.dumps(line, ensure_ascii=False) + "\n")
    return written


def _finite_or_none(value: Any) -> Any:
    """Replace every NaN or infinite float by None, in nested dicts and lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite_or_none(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(item) for item in value]
    return value


def perplexity_line(result: EvaluationResult) -> str:
    """Return the perplexity line ``evaluate`` prints, with the pairs it could not score.

    Parameters
    ----------
    result : EvaluationResult
        An evaluation's figures.

    Returns
    -------
    str
        ``perplexity = P  (cross-entropy H nats/token, N tokens)``, P = exp(H) to 3 decimals.
    """
    skipped, total = result.num_skipped_for_perplexity, result.num_examples
    if result.num_target_tokens == 0:
        return (f"perplexity = none: no pair could be scored ({skipped} of {total} pairs skipped: a side longer "
                f"than the model takes); the report holds null.")
    line = (f"perplexity = {result.perplexity:.3f}  (cross-entropy {result.cross_entropy:.4f} nats/token, "
            f"{result.num_target_tokens} tokens)")
    return line + (f"; {skipped} of {total} pairs skipped: a side longer than the model takes" if skipped else "")

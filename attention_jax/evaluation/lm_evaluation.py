"""Per-token perplexity and bits per byte of a trained language model, each document in context.

Bits per byte (NLL over ``ln 2`` and UTF-8 bytes) compares across vocabularies (docs/language_models.md). Strided
scoring windows score every token once; a later window's scored tokens see at least ``L - S + 1`` tokens before
them (Hugging Face's recipe).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, cast

import jax
import numpy as np

from attention_jax.experiment.sections import TransformerConfig
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import metrics, model
from attention_jax.models.language_model import LanguageModel

# Shapes: R rows, L window (the model's row length, config.max_len), S stride.
METHOD = "strided_window"  # The evaluation's name in lm_eval_<split>.json.


@dataclasses.dataclass(frozen=True)
class _ScoringWindow:
    """One window of one document: the inputs it reads and which predictions count."""

    document: int  # Index in its split.
    start: int  # First input's index in [BOS, t_0, ..]: predicts t_start .. t_{start + length - 1}.
    length: int  # L, or the whole document when shorter.
    first_scored: int  # Offset of the first prediction that counts; those before are context.


def _document_windows(document: int, num_tokens: int, window: int, stride: int) -> list[_ScoringWindow]:
    """Return the windows scoring each of a document's ``num_tokens`` tokens once, in document order."""
    if num_tokens <= window:
        return [_ScoringWindow(document, 0, num_tokens, 0)]
    windows = [_ScoringWindow(document, 0, window, 0)]
    scored_end = window  # t_0 .. t_{scored_end - 1} are scored.
    while scored_end < num_tokens:
        end = min(scored_end + stride, num_tokens)
        start = end - window
        windows.append(_ScoringWindow(document, start, window, scored_end - start))
        scored_end = end
    return windows


@dataclasses.dataclass(frozen=True)
class _WindowRows:
    """Every window of a split packed into rows of ``L``."""

    inputs: np.ndarray  # int32 [R, L], 0 in padding.
    scored_targets: np.ndarray  # int32 [R, L]: the id predicted where the prediction counts, else 0.
    segmentation: np.ndarray  # int32 [R, L]: a row's windows numbered 1, 2, ..; 0 in padding.
    positions: np.ndarray  # int32 [R, L]: 0 .. length - 1 in each window.
    windows: list[_ScoringWindow]  # In packing order.

    @property
    def num_rows(self) -> int:
        """Return ``R``."""
        return self.inputs.shape[0]

    def batches(self, rows_per_batch: int) -> list[dict[str, np.ndarray]]:
        """Return the rows in batches of ``B`` rows, int32 ``[B, L]`` each, the last padded with empty rows."""
        names = ("inputs", "scored_targets", "segmentation", "positions")
        num_batches = -(-self.num_rows // rows_per_batch)
        padding_rows = num_batches * rows_per_batch - self.num_rows
        padded = {name: np.pad(getattr(self, name), ((0, padding_rows), (0, 0))) for name in names}
        return [{name: array[index * rows_per_batch:(index + 1) * rows_per_batch] for name, array in padded.items()}
                for index in range(num_batches)]


def _pack_windows(documents: Sequence[np.ndarray], window: int, stride: int) -> _WindowRows:
    """Cut each document (ids, EOS included) into its scoring windows and pack them, in order, into rows of ``L``."""
    windows = [piece for index, tokens in enumerate(documents)
               for piece in _document_windows(index, len(tokens), window, stride)]
    row_of, column_of = [], []
    row, column = 0, 0
    for piece in windows:  # Next fit: a window that does not fit in this row starts the next.
        if column + piece.length > window:
            row, column = row + 1, 0
        row_of.append(row)
        column_of.append(column)
        column += piece.length
    num_rows = row + 1
    inputs = np.zeros((num_rows, window), np.int32)
    scored_targets = np.zeros((num_rows, window), np.int32)
    segmentation = np.zeros((num_rows, window), np.int32)
    positions = np.zeros((num_rows, window), np.int32)
    for piece, row, column in zip(windows, row_of, column_of):
        tokens = np.asarray(documents[piece.document], np.int32)
        document_inputs = np.concatenate([[model.BOS_ID], tokens[:-1]])  # x_i predicts t_i.
        slots = slice(column, column + piece.length)
        inputs[row, slots] = document_inputs[piece.start:piece.start + piece.length]
        targets = tokens[piece.start:piece.start + piece.length].copy()
        targets[:piece.first_scored] = model.PAD_ID  # Context only: not scored.
        scored_targets[row, slots] = targets
        segmentation[row, slots] = segmentation[row].max() + 1
        positions[row, slots] = np.arange(piece.length)
    return _WindowRows(inputs, scored_targets, segmentation, positions, windows)



def resolve_stride(stride: int, window: int) -> int:
    """Return ``stride`` (``--eval_stride``), or half the window ``L`` (at least 1) when it is 0.

    Parameters
    ----------
    stride, window : int
        The stride asked for; ``L``, the model's row length.

    Returns
    -------
    int
        ``S`` in ``[1, L]``.

    Raises
    ------
    UserInputError
        For a stride outside ``[0, L]``.
    """
    if stride == 0:
        return max(1, window // 2)
    if not 1 <= stride <= window:
        raise UserInputError(f"--eval_stride={stride} must lie in [1, {window}] (the model's rows hold {window} "
                             f"tokens), or be 0 for half of that ({max(1, window // 2)}).")
    return stride


def evaluate_split(model_config: TransformerConfig, params: Any, data: Any, split: str,
                   stride: int = 0) -> dict[str, Any]:
    """Return the per-token perplexity and bits per byte of ``split``, every token scored once in context.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Plain :class:`LanguageModel` parameters.
    data : attention_jax.data.lm_data.LanguageModelData
        The run's data.
    split : str
        ``"validation"``, ``"test"`` or ``"train"`` (or the config's name for one).
    stride : int
        ``S``; 0: half the row length.

    Returns
    -------
    dict
        ``tokens``, ``nll_per_token`` (nats), ``perplexity``, ``utf8_bytes``, ``bits_per_byte`` and the method.

    Raises
    ------
    UserInputError
        For a split without text (no tokens, no perplexity).
    """
    window = data.row_length
    stride = resolve_stride(stride, window)
    documents = data.documents(split)
    if not documents or not any(len(document) for document in documents):
        raise UserInputError(f"the {split} split holds no text (is its file empty?): there is no perplexity to "
                             f"measure on it. Give it some documents, or evaluate another split.")
    rows = _pack_windows(documents, window, stride)
    lm = LanguageModel(model_config.replace(decode=False))

    @jax.jit
    def _sums(params: Any, batch: dict) -> dict:  # Parameters an argument, not constants baked into the program.
        logits = cast(jax.Array, lm.apply({"params": params}, batch["inputs"], valid=batch["segmentation"] > 0,
                                          segmentation=batch["segmentation"], positions=batch["positions"],
                                          method=LanguageModel.logits))  # [B,L,N]
        return metrics.token_loss_sums(logits, batch["scored_targets"], 0.0, cpu_kernels=model_config.cpu_kernels)

    nll_sum, tokens = 0.0, 0.0
    for batch in rows.batches(data.rows_per_batch):
        result = jax.device_get(_sums(params, batch))
        nll_sum += float(result["nll_sum"])
        tokens += float(result["tokens"])
    expected_tokens = sum(len(document) for document in documents)
    if int(tokens) != expected_tokens:
        raise ValueError(f"Scored {int(tokens)} tokens of a split holding {expected_tokens}.")
    num_bytes = int(data.split_bytes[data.role_of(split)])
    nll_per_token = nll_sum / max(tokens, 1.0)
    return {"split": split, "tokens": int(tokens), "nll_per_token": nll_per_token,
            "perplexity": float(np.exp(nll_per_token)), "utf8_bytes": num_bytes,
            "bits_per_byte": nll_sum / math.log(2.0) / max(num_bytes, 1),
            "method": METHOD, "window": window, "stride": stride, "min_context": window - stride + 1,
            "documents": len(documents),
            "documents_longer_than_window": sum(len(document) > window for document in documents),
            "windows": len(rows.windows), "rows": rows.num_rows}

"""Strided scoring windows: every token of a document scored once, with its own document before it as context.

A later window's scored tokens see at least ``L - S + 1`` tokens (Hugging Face's; docs/language_models.md).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from attention_jax.models import model

# Shapes: R rows, L window (the model's row length, config.max_len), S stride.
METHOD = "strided_window"  # The evaluation's name in lm_eval_<split>.json.


@dataclasses.dataclass(frozen=True)
class ScoringWindow:
    """One window of one document: the inputs it reads and which predictions count."""

    document: int  # Index in its split.
    start: int  # First input's index in [BOS, t_0, ..]: predicts t_start .. t_{start + length - 1}.
    length: int  # L, or the whole document when shorter.
    first_scored: int  # Offset of the first prediction that counts; those before are context.


def _document_windows(document: int, num_tokens: int, window: int, stride: int) -> list[ScoringWindow]:
    """Return the windows scoring each of a document's ``num_tokens`` tokens once, in document order."""
    if num_tokens <= window:
        return [ScoringWindow(document, 0, num_tokens, 0)]
    windows = [ScoringWindow(document, 0, window, 0)]
    scored_end = window  # t_0 .. t_{scored_end - 1} are scored.
    while scored_end < num_tokens:
        end = min(scored_end + stride, num_tokens)
        start = end - window
        windows.append(ScoringWindow(document, start, window, scored_end - start))
        scored_end = end
    return windows


@dataclasses.dataclass(frozen=True)
class WindowRows:
    """Every window of a split packed into rows of ``L``."""

    inputs: np.ndarray  # int32 [R, L], 0 in padding.
    scored_targets: np.ndarray  # int32 [R, L]: the id predicted where the prediction counts, else 0.
    segmentation: np.ndarray  # int32 [R, L]: a row's windows numbered 1, 2, ..; 0 in padding.
    positions: np.ndarray  # int32 [R, L]: 0 .. length - 1 in each window.
    windows: list[ScoringWindow]  # In packing order.

    @property
    def num_rows(self) -> int:
        """Return ``R``.

        Returns
        -------
        int
            Rows.
        """
        return self.inputs.shape[0]

    def batches(self, rows_per_batch: int) -> list[dict[str, np.ndarray]]:
        """Return the rows in batches, the last padded with empty rows.

        Parameters
        ----------
        rows_per_batch : int
            ``B``.

        Returns
        -------
        list[dict[str, np.ndarray]]
            ``inputs``, ``scored_targets``, ``segmentation``, ``positions``: int32 ``[B, L]`` each.
        """
        names = ("inputs", "scored_targets", "segmentation", "positions")
        num_batches = -(-self.num_rows // rows_per_batch)
        padding_rows = num_batches * rows_per_batch - self.num_rows
        padded = {name: np.pad(getattr(self, name), ((0, padding_rows), (0, 0))) for name in names}
        return [{name: array[index * rows_per_batch:(index + 1) * rows_per_batch] for name, array in padded.items()}
                for index in range(num_batches)]


def pack_windows(documents: Sequence[np.ndarray], window: int, stride: int) -> WindowRows:
    """Cut each document into its scoring windows and pack them, in corpus order, into rows of ``window``.

    Parameters
    ----------
    documents : Sequence[np.ndarray]
        Token ids of each document, EOS included.
    window : int
        ``L``, the row length.
    stride : int
        ``S`` in ``[1, L]``.

    Returns
    -------
    WindowRows
        At least one row.
    """
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
    return WindowRows(inputs, scored_targets, segmentation, positions, windows)

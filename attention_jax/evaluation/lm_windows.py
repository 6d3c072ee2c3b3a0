"""Strided scoring windows: every token of a document scored once, with its own document before it as context.

Shape glossary
--------------
R rows, L window (the model's row length, ``config.max_len``), S stride.

A document of ``n`` tokens ``t_0 .. t_{n-1}`` (EOS last) is read by the model as the inputs
``x = [BOS, t_0, .., t_{n-2}]``: input ``x_i`` predicts ``t_i``. A window is ``L`` consecutive inputs
``x_s .. x_{s+L-1}`` with positions ``0 .. L-1``; it predicts ``t_s .. t_{s+L-1}`` and scores only the last
of them. The windows of one document:

- the first covers ``x_0 .. x_{L-1}`` and scores ``t_0 .. t_{L-1}`` (each with its whole history), so a
  document of at most ``L`` tokens is one window scored whole, exactly as a packed training row scores it;
- each later one moves its end ``S`` tokens on (the last stops at the document's end), starts ``L`` inputs
  before that end, and scores the tokens not yet scored: every one of them sees at least ``L - S + 1``
  tokens of its document before it (no BOS: the window starts inside the document).

So every token is scored exactly once, in the window where it has the most context of those visited
(the Hugging Face "strided perplexity" recipe); ``S = L`` gives non-overlapping windows (least
compute, one token of context at each window's start), ``S = 1`` an ``L``-token history for every token
(about ``L`` times the compute).
A window that does not start at the document's start begins with a real token at position 0, where
training rows always hold BOS (the model reads whatever precedes the window as its first input).

Windows are packed into rows of ``L`` in corpus order (a window that does not fit in the current row
starts the next one), each its own segment, so short documents share rows and attention never crosses
documents (the segment mask).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from attention_jax.models import model

METHOD = "strided_window"
"""The evaluation's name in ``lm_eval_<split>.json``."""


@dataclasses.dataclass(frozen=True)
class ScoringWindow:
    """One window of one document: the inputs it reads and which of its predictions count.

    Attributes
    ----------
    document : int
        Index of the document in its split.
    start : int
        Index of the window's first input in the document's inputs ``[BOS, t_0, .., t_{n-2}]``; the window
        predicts ``t_start .. t_{start + length - 1}``.
    length : int
        Inputs in the window (``L``, or the whole document when it is shorter).
    first_scored : int
        Offset in the window of the first prediction that counts; those before it are context only.
    """

    document: int
    start: int
    length: int
    first_scored: int


def document_windows(document: int, num_tokens: int, window: int, stride: int) -> list[ScoringWindow]:
    """The windows that score each of a document's ``num_tokens`` tokens once (module docstring).

    Parameters
    ----------
    document : int
        The document's index, copied into each window.
    num_tokens : int
        ``n``, tokens of the document (EOS included), at least 1.
    window : int
        ``L``, inputs a window holds.
    stride : int
        ``S`` in ``[1, L]``: how far each later window's end moves on.

    Returns
    -------
    list[ScoringWindow]
        In document order; their scored tokens are ``t_0 .. t_{n-1}``, each once.

    Notes
    -----
    A token ``t_i`` with ``i >= L`` is scored in the window ending at ``min(L + (k + 1) S, n)`` with
    ``k = (i - L) // S`` and starting ``L`` inputs before that end; it sees the ``i - start + 1`` tokens
    ``t_{start-1} .. t_{i-1}`` of its document, at least ``L - S + 1``. A token ``t_i`` with ``i < L`` sees
    BOS and all ``i`` tokens before it.
    """
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
    """Every window of a split packed into rows of ``L``: what the model reads and what is scored.

    Attributes
    ----------
    inputs : np.ndarray
        int32 ``[R, L]``: the ids the model reads (0 in padding).
    scored_targets : np.ndarray
        int32 ``[R, L]``: the id predicted at each slot where the prediction counts, 0 (padding) elsewhere.
    segmentation : np.ndarray
        int32 ``[R, L]``: windows of a row numbered 1, 2, ..., 0 in padding.
    positions : np.ndarray
        int32 ``[R, L]``: ``0 .. length - 1`` in each window.
    windows : list[ScoringWindow]
        The windows, in the order packed.
    """

    inputs: np.ndarray
    scored_targets: np.ndarray
    segmentation: np.ndarray
    positions: np.ndarray
    windows: list[ScoringWindow]

    @property
    def num_rows(self) -> int:
        """``R``, rows holding the windows."""
        return self.inputs.shape[0]

    def batches(self, rows_per_batch: int) -> list[dict[str, np.ndarray]]:
        """The rows in batches of ``rows_per_batch``, the last padded with empty rows (one shape for all).

        Parameters
        ----------
        rows_per_batch : int
            ``B``, rows of each batch.

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
        Token ids of each document, EOS included (at least one token each).
    window : int
        ``L``, the row length and the most inputs a window holds.
    stride : int
        ``S`` in ``[1, L]`` (:func:`document_windows`).

    Returns
    -------
    WindowRows
        At least one row (all padding when there are no documents).
    """
    windows = [piece for index, tokens in enumerate(documents)
               for piece in document_windows(index, len(tokens), window, stride)]
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

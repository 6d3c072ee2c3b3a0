"""Heat maps of attention weights with token labels, like the paper's Figures 3-5 (matplotlib, without pyplot)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

AXIS_LABELS = {  # (rows, columns) token lists and axis titles of each kind.
    "cross": ("target_tokens", "source_tokens", "output", "input"),
    "encoder": ("source_tokens", "source_tokens", "query (input)", "key (input)"),
    "decoder": ("target_tokens", "decoder_input_tokens", "query (predicts)", "key (decoder input)"),
}


def select_heads(num_heads: int, head: str) -> list[int]:
    """Return the head indices ``head`` names: ``"all"`` or one index (negative from the end).

    Parameters
    ----------
    num_heads : int
        Heads in the model.
    head : str
        ``"all"`` or an integer.

    Returns
    -------
    list[int]
        Indices into ``range(num_heads)``.

    Raises
    ------
    ValueError
        For another string or an index out of range.
    """
    if head == "all":
        return list(range(num_heads))
    try:
        index = int(head)
    except ValueError:
        raise ValueError(f"head must be 'all' or an integer; got {head!r}.") from None
    if not -num_heads <= index < num_heads:
        raise ValueError(f"head={index} is out of range for a model with {num_heads} heads.")
    return [index % num_heads]


def _attention_figure(maps: dict[str, Any], kind: str, layer: int, heads: list[int]) -> "Figure":
    """Draw ``maps[kind][layer, head]`` for each head on one color scale, on a Figure not attached to pyplot."""
    from matplotlib.figure import Figure

    weights = maps[kind]  # [N, H, rows, columns]
    num_layers = weights.shape[0]
    if not -num_layers <= layer < num_layers:
        raise ValueError(f"layer={layer} is out of range for a model with {num_layers} layers.")
    layer %= num_layers
    rows_key, columns_key, rows_title, columns_title = AXIS_LABELS[kind]
    row_tokens, column_tokens = maps[rows_key], maps[columns_key]
    grid_columns = math.ceil(math.sqrt(len(heads)))
    grid_rows = math.ceil(len(heads) / grid_columns)
    cell = 0.28  # Inches per token.
    width = max(3.0, cell * len(column_tokens) + 1.5) * grid_columns
    height = max(3.0, cell * len(row_tokens) + 1.5) * grid_rows
    figure = Figure(figsize=(width, height))
    axes = figure.subplots(grid_rows, grid_columns, squeeze=False)
    for axis in axes.flat[len(heads):]:
        axis.axis("off")
    brightest = float(weights[layer, heads].max()) or 1.0  # One color scale for all panels.
    for axis, head in zip(axes.flat, heads):
        axis.imshow(weights[layer, head], cmap="Blues", vmin=0.0, vmax=brightest, aspect="auto")
        axis.set_xticks(range(len(column_tokens)), column_tokens, rotation=90, fontsize=8)
        axis.set_yticks(range(len(row_tokens)), row_tokens, fontsize=8)
        axis.set_xlabel(columns_title)
        axis.set_ylabel(rows_title)
        axis.set_title(f"{kind} attention, layer {layer}, head {head}", fontsize=9)
    figure.suptitle(f"{maps['source']}  \u2192  {maps['target']}", fontsize=10)
    figure.tight_layout()
    return figure


def draw_attention(maps: dict[str, Any], kind: str, layer: int, heads: list[int], out_path: str) -> None:
    """Save each head's ``maps[kind][layer, head]`` (from ``attention_maps``) on one color scale to a PNG.

    Parameters
    ----------
    maps : dict
        From ``attention_maps``.
    kind : str
        ``"cross"``, ``"encoder"`` or ``"decoder"``.
    layer : int
        Layer index (negative from the end).
    heads : list[int]
        Heads to draw.
    out_path : str
        The PNG.

    Raises
    ------
    ValueError
        For a layer out of range.
    """
    _attention_figure(maps, kind, layer, heads).savefig(out_path, dpi=120)

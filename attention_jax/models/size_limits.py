"""Sizes no run can have, refused from a checked config's fields before anything is built or written.

Integer arithmetic on the fields alone (``num_layers = 10**40`` passes every range): integers within int32,
bounded parameters and largest array. Device memory is checked by ``training.setup_checks``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from attention_jax.models import feed_forward_registry
from attention_jax.models.variants import ModelKind

MAX_INT32 = 2**31 - 1
"""The largest integer field: JAX's default integer is int32 (the train state's step is one)."""

MAX_PARAMETERS = 10**11
"""Parameters a config may ask for: 100 billion, 400 GB in float32 before Adam's two moments."""

MAX_ARRAY_ELEMENTS = 2**40
"""Elements of the largest array one step builds (4 TiB in float32), the whole batch across devices."""


def estimated_parameters(fields: Mapping[str, Any]) -> int:
    """Return the parameters a checked config builds, counted from its fields (Python integers: no overflow).

    Layer norms, biases and relative-position tables are left out: a little under the model's count.

    Parameters
    ----------
    fields : Mapping[str, Any]
        A whole flat config whose fields passed the schema.

    Returns
    -------
    int
        Embedding, output, attention, feed-forward and learned-position parameters.
    """
    d_model, num_heads = fields["d_model"], fields["num_heads"]
    key_dim = fields["key_dim"] or d_model // num_heads
    value_dim = fields["value_dim"] or d_model // num_heads
    attention = d_model * num_heads * (2 * key_dim + value_dim) + num_heads * value_dim * d_model  # Q, K, V, O.
    feed_forward = feed_forward_registry._feed_forward_params(
        fields["feed_forward"], d_model=d_model, d_ff=fields["d_ff"], match_params=fields["feed_forward_match_params"],
        bias=False)
    embedding = fields["vocab_size"] * d_model
    positions = (fields["max_len"] + fields["max_decode_extra_len"]) * d_model
    if fields["model_kind"] == ModelKind.DECODER_ONLY:
        layers = fields["num_layers"] * (attention + feed_forward)
        embeddings = embedding if fields["share_embeddings"] else 2 * embedding
    else:
        layers = fields["num_layers"] * ((attention + feed_forward) + (2 * attention + feed_forward))  # Enc + dec.
        embeddings = embedding if fields["share_embeddings"] else 3 * embedding
    learned_positions = positions if fields["positional_encoding"] == "learned" else 0
    return layers + embeddings + learned_positions


def _largest_array_elements(fields: Mapping[str, Any]) -> tuple[int, str]:
    """The elements of the largest array a training or decoding step builds, and what that array is."""
    tokens, max_len = fields["tokens_per_batch"], fields["max_len"]
    hidden = feed_forward_registry._hidden_width(fields["feed_forward"], fields["d_ff"],
                                                match_params=fields["feed_forward_match_params"])
    decode_len = max_len + fields["max_decode_extra_len"]
    candidates = [
        (tokens * fields["vocab_size"], "the output logits, tokens_per_batch x vocab_size"),
        (tokens * hidden, "the feed-forward activations, tokens_per_batch x its hidden width (d_ff; 2/3 gated)"),
        (tokens * fields["num_heads"] * max_len, "the attention weights, tokens_per_batch x num_heads x max_len"),
        (fields["beam_size"] * decode_len * fields["d_model"] * fields["num_layers"] * 2,
         "beam search's key/value cache, beam_size x (max_len + max_decode_extra_len) x d_model x num_layers x 2"),
    ]
    return max(candidates, key=lambda candidate: candidate[0])


def check_sizes(fields: Mapping[str, Any], integer_fields: Iterable[str]) -> None:
    """Refuse a config whose integers, parameters or arrays no run can hold, in one line.

    Parameters
    ----------
    fields : Mapping[str, Any]
        A whole flat config whose fields passed the schema.
    integer_fields : Iterable[str]
        The fields (integers or tuples of them) that must fit int32 (``seed`` has its own range).

    Raises
    ------
    ValueError
        Naming the field, or the estimate, the limit and the fields to lower.
    """
    for name in integer_fields:
        values = tuple(fields[name]) if isinstance(fields[name], (tuple, list)) else (fields[name],)
        if any(abs(value) > MAX_INT32 for value in values):
            shown = values if isinstance(fields[name], (tuple, list)) else values[0]
            raise ValueError(f"{name}={short_number(shown)} is beyond {MAX_INT32:,} (2**31 - 1), JAX's int32: "
                             "lower it.")
    positions = fields["max_len"] + fields["max_decode_extra_len"]
    if positions > MAX_INT32:
        raise ValueError(f"max_len + max_decode_extra_len = {short_number(positions)} positions is "
                                 f"beyond {MAX_INT32:,} (2**31 - 1), JAX's int32, which decoding counts them in: lower "
                                 f"max_decode_extra_len={short_number(fields['max_decode_extra_len'])}.")
    parameters = estimated_parameters(fields)
    if parameters > MAX_PARAMETERS:
        raise ValueError(
            f"this model would have about {short_number(parameters)} parameters, beyond the limit of "
            f"{MAX_PARAMETERS:.0e}: lower num_layers={short_number(fields['num_layers'])}, "
            f"d_model={short_number(fields['d_model'])}, d_ff={short_number(fields['d_ff'])}, "
            f"num_heads={short_number(fields['num_heads'])} or vocab_size={short_number(fields['vocab_size'])}.")
    elements, what = _largest_array_elements(fields)
    if elements > MAX_ARRAY_ELEMENTS:
        raise ValueError(f"a step would build {what}: about {short_number(elements)} elements, "
                                 f"beyond the limit of 2**40 ({MAX_ARRAY_ELEMENTS:.2e}): lower those fields.")


def short_number(value: int | tuple[int, ...]) -> str:
    """Return an integer (or a tuple of them) as typed, in scientific notation past 12 digits.

    Parameters
    ----------
    value : int or tuple of int
        The count, or the field's tuple, to quote in a refusal.

    Returns
    -------
    str
        E.g. ``"1,024"``; ``10**40`` is ``"1e+40"``.
    """
    if isinstance(value, tuple):
        return "(" + ", ".join(short_number(item) for item in value) + ("," if len(value) == 1 else "") + ")"
    return f"{value:,}" if abs(value) < 10**12 else f"{float(value):.3g}"

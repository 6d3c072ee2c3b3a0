"""Every attention weight of the model for one sentence pair, with token strings for the axes (Figures 3-5)."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from attention_jax.decoding import decode
from attention_jax.experiment.sections import DecodeSettings, TransformerConfig
from attention_jax.models import attention_registry
from attention_jax.models.model import BOS_ID, EOS_ID, Transformer

# Shapes: N layers, H heads, S source tokens, T target tokens (both with their EOS).
ATTENTION_KINDS = ("encoder", "decoder", "cross")  # [N, H, S, S], [N, H, T, T] (masked), [N, H, T, S].


def token_strings(tokenizer: decode.TextCodec, ids: list[int]) -> list[str]:
    """Return the subword strings of ``ids`` (``"▁Haus"``; ``"</s>"`` for EOS).

    Parameters
    ----------
    tokenizer : decode.TextCodec
        Its ``id_to_piece`` if any, else decodes each id.
    ids : list[int]
        Token ids.

    Returns
    -------
    list[str]
        One string per id.
    """
    special = {EOS_ID: "</s>", BOS_ID: "<s>"}
    id_to_piece = getattr(tokenizer, "id_to_piece", None)
    if id_to_piece is not None:
        return [str(id_to_piece(int(token))) for token in ids]
    return [special.get(int(token)) or tokenizer.decode([int(token)]) for token in ids]


def attention_maps(model_config: TransformerConfig, params: Any, tokenizer: decode.TextCodec, source: str,
                   target: str | None = None, *, settings: DecodeSettings = DecodeSettings()) -> dict[str, Any]:
    """Return all attention weights for ``source`` and ``target`` (or the model's own translation).

    Row ``t`` of ``cross`` and ``decoder`` reads ``decoder_input_tokens[t]`` and predicts ``target_tokens[t]``.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    params : pytree
        Its parameters.
    tokenizer : decode.TextCodec
        Shared tokenizer.
    source, target : str, str or None
        Source sentence, not empty; the target, ``None`` for beam search's translation (with ``settings``).
    settings : DecodeSettings
        Decoding settings for ``target=None``.

    Returns
    -------
    dict
        float32 ``encoder`` ``[N, H, S, S]``, ``decoder`` ``[N, H, T, T]``, ``cross`` ``[N, H, T, S]``, the
        token lists and the texts.

    Raises
    ------
    ValueError
        For an empty source, a target over ``max_len``, or an attention function without weights.
    """
    attention_registry.require_weights(model_config.attention_function)  # No weights to show: refuse.
    if not source.strip():
        raise ValueError("attention_maps needs a non-empty source sentence.")
    translator = decode.Translator(model_config, params, tokenizer, settings=settings, batch_size=1)
    source_ids = translator.encode_sources([source])[0]
    if target is None:
        target_ids = translator.translate_ids([source_ids])[0]
        target = tokenizer.decode(target_ids)
    else:
        target = decode.replace_invalid_characters(target)
        target_ids = list(tokenizer.encode(target))
        if len(target_ids) > model_config.max_len:
            raise ValueError(f"The target has {len(target_ids)} tokens; the model has only "
                             f"{model_config.max_len} positions. Shorten it.")
    weights = _attention_weights(translator.model_config.replace(attention_implementation="einsum"),
                                 translator.params, jnp.asarray([source_ids]), jnp.asarray([target_ids]))
    target_tokens = token_strings(tokenizer, target_ids)
    return {
        **weights,
        "source_tokens": token_strings(tokenizer, source_ids),
        "target_tokens": target_tokens,
        "decoder_input_tokens": ["<s>"] + target_tokens[:-1],
        "source": source,
        "target": target,
    }


def _attention_weights(model_config: TransformerConfig, params: Any, inputs: jax.Array,
                       targets: jax.Array) -> dict[str, np.ndarray]:
    """Return the weights of a teacher-forced pass, stacked over layers, batch row 0."""
    _, state = Transformer(model_config).apply({"params": params}, inputs, targets, sow_weights=True,
                                               mutable=["intermediates"])
    intermediates = nn.meta.unbox(state["intermediates"])
    stacked = {}
    for kind, (prefix, attention_name) in {"encoder": ("encoder", "self_attention"),
                                           "decoder": ("decoder", "self_attention"),
                                           "cross": ("decoder", "cross_attention")}.items():
        layers = [intermediates[f"{prefix}_{layer}"][attention_name]["attention_weights"][0][0]
                  for layer in range(model_config.num_layers)]  # each [H, T|S, S|T]
        stacked[kind] = np.asarray(jnp.stack(layers), np.float32)
    return stacked

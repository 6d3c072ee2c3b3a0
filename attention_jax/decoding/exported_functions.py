"""A trained model's ``logits`` and ``translate`` functions as ``jax.export`` artifacts, parameters inside.

Built with ``cpu_kernels=False`` so a multi-platform artifact holds no CPU-only code (docs/python_api.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp

from attention_jax.decoding import decode
from attention_jax.experiment.sections import DecodeSettings, TransformerConfig
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import MissingInputError, UserInputError
from attention_jax.models.model import PAD_ID, Transformer

Array = jax.Array
# Shapes: B sentences, S source length, T target length, N vocabulary, K beam size, L output length.
FUNCTIONS = ("logits", "translate")  # What export_function exports, by name.
PLATFORMS = ("cpu", "cuda", "rocm", "tpu")  # What jax.export.export can lower for.


def _export_config(model_config: TransformerConfig) -> TransformerConfig:
    return model_config.replace(decode=False, cpu_kernels=False)


def _logits_function(model_config: TransformerConfig, params: Any) -> Callable[[Array, Array], Array]:
    """Return ``logits(inputs [B, S], targets [B, T]) -> float32 [B, T, N]`` with ``params`` inside."""
    model = Transformer(_export_config(model_config))
    variables = {"params": nn.meta.unbox(params)}

    def _logits(inputs: Array, targets: Array) -> Array:
        return cast(Array, model.apply(variables, inputs, targets))  # [B, T, N]

    return _logits


def _output_length(model_config: TransformerConfig, settings: DecodeSettings, source_len: int) -> int:
    """Return ``L = min(S + max_decode_extra_len, max_len)``, a translate function's output length."""
    return min(source_len + settings.max_decode_extra_len, model_config.max_len)


def _translate_function(model_config: TransformerConfig, params: Any, settings: DecodeSettings,
                       source_len: int) -> Callable[[Array], dict[str, Array]]:
    """Return ``translate(inputs [B, S])``, the search's result as a dict, with ``params`` inside."""
    config = _export_config(model_config)
    plain = nn.meta.unbox(params)
    max_decode_len = _output_length(model_config, settings, source_len)

    def _translate(inputs: Array) -> dict[str, Array]:
        lengths = jnp.sum(inputs != PAD_ID, axis=1, dtype=jnp.int32)
        max_lengths = jnp.where(lengths > 0, jnp.minimum(lengths + settings.max_decode_extra_len, max_decode_len), 0)
        result = decode.decode_batch(
            plain, inputs, max_lengths, model_config=config, method=settings.method, beam_size=settings.beam_size,
            alpha=settings.length_penalty_alpha, max_decode_len=max_decode_len, cache_stages=settings.cache_stages)
        return {"tokens": result.tokens, "lengths": result.lengths, "scores": result.scores,
                "log_probs": result.log_probs}

    return _translate


def _check_shape(model_config: TransformerConfig, settings: DecodeSettings, function: str, *, batch_size: int,
                source_len: int, target_len: int) -> None:
    """Raise ``UserInputError`` for a function name or shape the model cannot take."""
    if function not in FUNCTIONS:
        raise UserInputError(f"--function must be one of {', '.join(FUNCTIONS)}; got {function!r}.")
    longest = model_config.max_len - settings.max_decode_extra_len if function == "translate" else model_config.max_len
    checks = [("batch_size", batch_size, 1 << 20), ("source_len", source_len, longest)]
    if function == "logits":
        checks.append(("target_len", target_len, model_config.max_len))
    for name, value, limit in checks:
        if not 1 <= value <= limit:
            raise UserInputError(f"--{name}={value} must be between 1 and {limit} (the model's max_len is "
                                 f"{model_config.max_len}, its decoding margin {settings.max_decode_extra_len}).")


def export_function(model_config: TransformerConfig, params: Any, function: str, *, batch_size: int,
                    source_len: int, target_len: int = 0, settings: DecodeSettings = DecodeSettings(),
                    platforms: Sequence[str] | None = None) -> jax.export.Exported:
    """Lower ``logits`` or ``translate`` with the parameters inside at a fixed batch shape.

    Parameters
    ----------
    model_config : TransformerConfig
        The run's model.
    params : pytree
        Its parameters.
    function : str
        ``"logits"`` or ``"translate"``.
    batch_size, source_len, target_len : int
        ``B`` and ``S`` of ``inputs``; ``T`` of ``targets`` (``logits`` only).
    settings : DecodeSettings
        The decoding settings (``translate`` only).
    platforms : Sequence[str], optional
        Lower for these; default: JAX's default backend.

    Returns
    -------
    jax.export.Exported
        ``exported.call(inputs[, targets])``; ``serialize()`` gives its bytes.

    Raises
    ------
    UserInputError
        For a function, shape or platform the model cannot take.
    """
    _check_shape(model_config, settings, function, batch_size=batch_size, source_len=source_len,
                target_len=target_len)
    unknown = [platform for platform in platforms or () if platform not in PLATFORMS]
    if unknown:
        raise UserInputError(f"--platforms: {', '.join(unknown)} unknown; choose among {', '.join(PLATFORMS)}.")
    inputs = jax.ShapeDtypeStruct((batch_size, source_len), jnp.int32)
    exporter = jax.export.export
    if function == "logits":
        targets = jax.ShapeDtypeStruct((batch_size, target_len), jnp.int32)
        jitted = jax.jit(_logits_function(model_config, params))
        return exporter(jitted, platforms=platforms)(inputs, targets)
    jitted = jax.jit(_translate_function(model_config, params, settings, source_len))
    return exporter(jitted, platforms=platforms)(inputs)


def save_exported(path: str, exported: jax.export.Exported) -> int:
    """Write ``exported.serialize()`` to ``path`` atomically.

    Parameters
    ----------
    path : str
        The artifact's file.
    exported : jax.export.Exported
        From :func:`export_function`.

    Returns
    -------
    int
        The bytes written.
    """
    payload = bytes(exported.serialize())
    run_files.write_atomically(path, payload)
    return len(payload)


def load_exported(path: str) -> jax.export.Exported:
    """Read an artifact :func:`save_exported` wrote.

    Parameters
    ----------
    path : str
        The artifact's file.

    Returns
    -------
    jax.export.Exported
        Call it with arrays of its ``in_avals`` shapes.

    Raises
    ------
    MissingInputError
        For a missing file.
    """
    try:
        with open(path, "rb") as file:
            payload = file.read()
    except FileNotFoundError:
        raise MissingInputError(f"no exported function {path!r}.") from None
    return jax.export.deserialize(bytearray(payload))

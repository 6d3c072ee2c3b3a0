"""A lower bound on one device's memory for a training step, checked before anything is compiled."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attention_jax.experiment import size_limits
from attention_jax.experiment.schema import ConfigError
from attention_jax.models.variants import ModelKind


def _estimated_step_bytes(fields: Mapping[str, Any], devices: int) -> tuple[int, str]:
    """Return a lower bound on one device's step and decoding-cache memory, and what dominates it.

    Counted: parameters, gradients and Adam's moments (float32, a copy per device); per token of the device's
    share, the logits and their gradient and each layer's saved activations (``d_ff + 4 d_model + heads x
    max_len``); one sentence's beam-search cache. All else comes on top, so a refused config cannot fit.
    """
    width = 2 if fields["dtype"] in ("bfloat16", "float16") else 4
    tokens = -(-fields["tokens_per_batch"] // max(1, devices))
    attention = 4 * fields["d_model"] + fields["num_heads"] * fields["max_len"]
    blocks = (1, 1) if fields["model_kind"] == ModelKind.DECODER_ONLY else (3, 2)  # Attentions, feed-forwards.
    per_token = 2 * fields["vocab_size"] * width + fields["num_layers"] * width * (
        blocks[0] * attention + blocks[1] * fields["d_ff"])
    decode_cache = (fields["beam_size"] * (fields["max_len"] + fields["max_decode_extra_len"]) * fields["d_model"]
                    * fields["num_layers"] * 2 * width)
    parameters = size_limits.estimated_parameters(fields)
    parts = [(16 * parameters, "the parameters, gradients and Adam's moments: lower num_layers, "
                               "d_model, d_ff or vocab_size"),
             (tokens * per_token, f"the activations of {size_limits.short_number(tokens)} tokens "
                                  f"(tokens_per_batch / devices): lower "
                                  f"--config.tokens_per_batch (raise grad_accum_steps to keep the batch)"),
             (decode_cache, "beam search's key/value cache of max_len + max_decode_extra_len positions: lower "
                            "--config.max_decode_extra_len")]
    return sum(part for part, _ in parts), max(parts)[1]


def check_memory(fields: Mapping[str, Any], devices: int, device_bytes: int, device: str) -> None:
    """Refuse a config whose step cannot fit one device's memory, before anything is compiled.

    Parameters
    ----------
    fields : Mapping[str, Any]
        A whole flat config that passed :func:`size_limits.check_sizes`.
    devices : int
        The job's devices.
    device_bytes : int
        One device's memory (a GPU's, or the host's share per CPU device).
    device : str
        The device's kind, named in the error.

    Raises
    ------
    ConfigError
        Naming the estimate, the memory and the fields to lower.
    """
    needed, what = _estimated_step_bytes(fields, devices)
    if needed > device_bytes:
        raise ConfigError(
            f"one step needs at least {_bytes(needed)} per device, more than the {_bytes(device_bytes)} of this "
            f"{device}; most of it is {what}.")


def _bytes(count: int) -> str:
    return f"{count / 2**30:,.1f} GiB" if count < 2**60 else f"{float(count):.3g} bytes"


"""Checks a training run makes before it writes anything (devices, data, a resumed run's files), each one line."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import jax
from absl import logging

from attention_jax.checkpointing import params_checkpoints, resume_checks
from attention_jax.data.tokenizer import Tokenizer
from attention_jax.data.training_data import TrainingData
from attention_jax.experiment.schema import ConfigError
from attention_jax.experiment.sections import Experiment
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import attention_registry, size_limits
from attention_jax.models.variants import ModelKind
from attention_jax.training import early_stopping, sharding


def _check_devices(experiment: Experiment) -> None:
    """Refuse a config that cannot run on this job's devices.

    Raises ``UserInputError``: for a ``mesh_shape`` that does not fit, a step too big for memory, or GPU-only attention
    elsewhere.
    """
    sharding._fit_mesh_shape(experiment.run.mesh_shape, experiment.run.mesh_axes, jax.device_count())
    device_bytes = _device_memory()
    if device_bytes is not None:  # Before compiling: tokens_per_batch=2**31-1 was killed by the kernel after minutes.
        _check_memory(experiment.fields, jax.device_count(), device_bytes, f"{jax.default_backend()} device")
    implementation, backend = experiment.model.attention_implementation, jax.default_backend()
    if implementation in attention_registry.GPU_ONLY_IMPLEMENTATIONS and backend != "gpu":
        raise UserInputError(
            f"attention_implementation={implementation!r} runs only on an NVIDIA GPU (cuDNN's fused attention), but "
            f"this run's devices are {backend}: set --config.attention_implementation=fused (cuDNN on a GPU, XLA "
            f"elsewhere), xla or einsum.")


def _device_memory() -> int | None:
    """Return one local device's memory in bytes (an accelerator's limit, else host RAM), or ``None``."""
    device = jax.local_devices()[0]
    if device.platform != "cpu":
        limit = (device.memory_stats() or {}).get("bytes_limit")
        return int(limit) if limit else None
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // jax.local_device_count()
    except (ValueError, OSError):
        return None


def _warn_unreached_peak(experiment: Experiment) -> None:
    """Warn (a shortened config is common) when ``warmup_steps`` exceeds ``num_train_steps``."""
    warmup, steps = experiment.optimizer.warmup_steps, experiment.run.num_train_steps
    if warmup > steps:
        logging.warning("warmup_steps=%d is beyond num_train_steps=%d: the learning rate rises for the whole run and "
                        "ends at %.2g%% of its peak; lower --config.warmup_steps to reach it.", warmup, steps,
                        100 * steps / warmup)


def _check_data(experiment: Experiment, data: TrainingData) -> None:
    """Refuse data the experiment cannot train on: a vocabulary over ``vocab_size``, too small a dev split.

    Raises ``UserInputError``: before anything is written.
    """
    if data.tokenizer.vocab_size > experiment.model.vocab_size:
        raise UserInputError(f"the tokenizer has {data.tokenizer.vocab_size} tokens but the model's "
                             f"vocab_size is {experiment.model.vocab_size}: raise config.vocab_size.")
    dev_pairs = int(data.stats["examples"]["validation"])
    early_stopping._EarlyStopping.from_config(experiment.run).check_dev_split(dev_pairs)
    _check_dev_pairs_fit(experiment, dev_pairs, data.stats)


def _check_dev_pairs_fit(experiment: Experiment, dev_pairs: int, stats: dict[str, Any]) -> None:
    """Refuse a dev split none of whose pairs fits ``max_len`` (every evaluation would score NaN)."""
    left_out = sum(int(stats.get(reason, {}).get("validation", 0)) for reason in ("dropped_too_long", "dropped_empty"))
    if dev_pairs > 0 and left_out >= dev_pairs:
        raise UserInputError(
            f"none of the {dev_pairs} dev pairs fits config.max_len={experiment.data.max_len} tokens (EOS included; "
            f"{stats.get('dropped_too_long', {}).get('validation', 0)} are longer, "
            f"{stats.get('dropped_empty', {}).get('validation', 0)} have an empty side): every evaluation, the "
            f"final one included, would score no pair. Raise --config.max_len.")


def _check_tokenizer(experiment: Experiment, workdir: str, data: TrainingData, step: int) -> None:
    """Refuse another tokenizer under a run's trained weights (its ids would mean other pieces).

    Raises ``UserInputError``: when the file differs or is missing.
    """
    model_proto = data.tokenizer.model_proto
    path = os.path.join(workdir, run_files.TOKENIZER_FILE)
    if int(step) == 0:
        return
    if not os.path.exists(path):
        raise UserInputError(
            f"{workdir} holds checkpoints up to step {int(step)} but no {run_files.TOKENIZER_FILE}: the weights "
            f"were trained on that tokenizer's ids, and one built from the corpus now may differ. Restore the file "
            f"from a copy of the run, or train in a new --workdir.")
    with open(path, "rb") as file:
        if file.read() == bytes(model_proto):
            return
    Tokenizer.load(path)  # A damaged or truncated file is named as such, not as another corpus's tokenizer.
    raise UserInputError(
        f"{path} differs from the tokenizer of config.dataset={experiment.data.dataset!r}: the run's weights were "
        f"trained on its own token ids. Train on new data in a new --workdir.")


def check_data_splits(workdir: str, data: TrainingData) -> None:
    """Refuse to resume a run on other dev or test splits than ``data_splits.json`` recorded.

    Parameters
    ----------
    workdir : str
        The work directory.
    data : TrainingData
        The loaded data.

    Raises
    ------
    UserInputError
        Through :func:`resume_checks.check_data_splits`.
    """
    if resume_checks.read_data_splits(workdir) is not None:  # A run from before the file existed has none.
        resume_checks.check_data_splits(workdir, data.split_fingerprints())


def _check_checkpoint_parameters(workdir: str, step: int | None, abstract_params: Any) -> None:
    """Refuse to resume from a checkpoint whose parameters are not this version's model's.

    Raises ``UserInputError``: naming the differing leaves.
    """
    if step is None:
        return
    directory = os.path.join(workdir, run_files.CHECKPOINT_DIR)
    try:
        mismatch = params_checkpoints.params_mismatch(directory, step, abstract_params)
    except Exception:  # Damaged: the restore falls back to an older checkpoint.
        return
    if mismatch:
        raise UserInputError(
            f"{directory}/{step} holds other parameters than this version of attention_jax builds for its config "
            f"({'; '.join(mismatch[:2])}{'; ...' if len(mismatch) > 2 else ''}): it was written by another version. "
            f"Resume it with that version, or train again in a new --workdir.")


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


def _check_memory(fields: Mapping[str, Any], devices: int, device_bytes: int, device: str) -> None:
    """Refuse a config whose step cannot fit one device's memory (``device_bytes``), naming the fields to lower."""
    needed, what = _estimated_step_bytes(fields, devices)
    if needed > device_bytes:
        raise ConfigError(
            f"one step needs at least {_bytes(needed)} per device, more than the {_bytes(device_bytes)} of this "
            f"{device}; most of it is {what}.")


def _bytes(count: int) -> str:
    return f"{count / 2**30:,.1f} GiB" if count < 2**60 else f"{float(count):.3g} bytes"

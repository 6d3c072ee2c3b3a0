"""A decoder-only Transformer language model built from the encoder-decoder's own layers.

Each layer is ``model.EncoderLayer`` under a causal mask (the paper's decoder without cross-attention).
Shapes: B batch, L length, D d_model, N vocabulary.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import flax.linen as nn
import jax
import jax.numpy as jnp

from attention_jax.cpu_kernels import dense_dot_general, dropout_class
from attention_jax.models import model, variants
from attention_jax.models.variants import LayerNormPosition, ModelKind

if TYPE_CHECKING:
    from attention_jax.experiment.sections import TransformerConfig

Array = jax.Array

MODEL_KINDS = variants.values(ModelKind)
LM_PACKED_KEYS = ("targets_segmentation", "targets_position")
"""Batch keys of packed language-model rows, keyword arguments of :meth:`LanguageModel.__call__`."""


class LanguageModel(nn.Module):
    """Decoder-only Transformer: shared embedding, ``num_layers`` causal self-attention layers."""

    config: TransformerConfig

    def setup(self) -> None:
        """Build the embedding, the layers and the final norm."""
        cfg = self.config
        embed_init = nn.with_logical_partitioning(
            nn.initializers.normal(stddev=cfg.d_model**-0.5), ("vocab", "embed"))
        self.embedding = nn.Embed(cfg.vocab_size, cfg.d_model, embedding_init=embed_init,
                                  name="shared_embedding" if cfg.share_embeddings else "input_embedding")
        if not cfg.share_embeddings:
            self.output_projection = nn.Dense(
                cfg.vocab_size, use_bias=False, dtype=cfg.compute_dtype,
                dot_general=dense_dot_general(cfg.cpu_kernels),
                kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(),
                                                         ("embed", "vocab")),
                name="output_projection")
        self.position = model.PositionalEncoding(cfg, decode=cfg.decode, name="position")
        self.layers = [model.EncoderLayer(cfg, decode=cfg.decode, name=f"layer_{i}")
                       for i in range(cfg.num_layers)]
        self.embedding_dropout = dropout_class(cfg.cpu_kernels)(cfg.dropout_rate)
        if cfg.layer_norm_position == LayerNormPosition.PRE:
            self.final_norm = model._build_norm(cfg, "final_norm")

    def logits(self, input_ids: Array, *, valid: Array | None = None, segmentation: Array | None = None,
               positions: Array | None = None, deterministic: bool = True,
               sow_weights: bool = False) -> Array:
        """Return float32 next-token logits ``[B, L, N]``; in decode mode ``L`` is 1 and no mask is made.

        Parameters
        ----------
        input_ids : Array
            ``[B, L]`` ids, ``[BOS] + targets[:-1]``.
        valid, segmentation, positions : Array, optional
            Boolean ``[B, L]`` real tokens (default all); ``[B, L]`` document ids and positions of packed rows.
        deterministic, sow_weights : bool
            Disable dropout; record attention weights in ``intermediates``.

        Returns
        -------
        Array
            Position ``t`` predicts the token after input ``t``.
        """
        cfg = self.config
        if valid is None:
            valid = jnp.ones(input_ids.shape, dtype=bool)
        mask = None if cfg.decode else model._self_attention_mask(cfg, valid, causal=True, segmentation=segmentation)
        x = model._embed_tokens(cfg, self.embedding, self.position, self.embedding_dropout, input_ids,
                               deterministic=deterministic, positions=positions)  # [B,L,D]
        for layer in self.layers:
            x = layer(x, mask, deterministic=deterministic, sow_weights=sow_weights, positions=positions,
                      valid=valid)
        if cfg.layer_norm_position == LayerNormPosition.PRE:
            x = model._apply_norm(self.final_norm, x, valid, deterministic=deterministic)
        if cfg.share_embeddings:
            return self.embedding.attend(x).astype(jnp.float32)  # [B,L,N]
        return self.output_projection(x).astype(jnp.float32)

    def __call__(self, targets: Array, *, targets_segmentation: Array | None = None,
                 targets_position: Array | None = None, deterministic: bool = True,
                 sow_weights: bool = False) -> Array:
        """Return teacher-forced float32 logits ``[B, L, N]`` for documents ``targets`` ``[B, L]``."""
        if targets_position is None:
            input_ids = model._shift_right(targets)
        else:
            input_ids = model._shift_right_packed(targets, targets_position)  # BOS at each document start.
        return self.logits(input_ids, valid=targets != model.PAD_ID, segmentation=targets_segmentation,
                           positions=targets_position, deterministic=deterministic, sow_weights=sow_weights)


def _check_model_kind(model_kind: str) -> None:
    if model_kind not in MODEL_KINDS:
        raise ValueError(f"model_kind must be one of {MODEL_KINDS}; got {model_kind!r}.")


def build_model(model_config: TransformerConfig, model_kind: str) -> nn.Module:
    """Return the module of a model kind: the encoder-decoder or the language model.

    Parameters
    ----------
    model_config : TransformerConfig
        The model config.
    model_kind : str
        One of :data:`MODEL_KINDS`.

    Returns
    -------
    nn.Module
        ``Transformer`` or :class:`LanguageModel`.
    """
    _check_model_kind(model_kind)
    if model_kind == ModelKind.DECODER_ONLY:
        return LanguageModel(model_config)
    return model.Transformer(model_config)



def init_arguments(module: nn.Module, length: int = 1) -> tuple[Array, ...]:
    """Return ``module.init``'s positional arguments: ``(ids,)`` or ``(ids, ids)``.

    Parameters
    ----------
    module : nn.Module
        From :func:`build_model`.
    length : int
        Length of the int32 ``[1, length]`` example ids.

    Returns
    -------
    tuple[Array, ...]
        The arguments.
    """
    ids = jnp.ones((1, length), jnp.int32)
    return (ids,) if isinstance(module, LanguageModel) else (ids, ids)


def apply_to_batch(module: nn.Module, params: Any, batch: dict, **kwargs: Any) -> Array:
    """Return either model kind's teacher-forced float32 logits ``[B, T, N]`` on a batch.

    Parameters
    ----------
    module : nn.Module
        From :func:`build_model`.
    params : Any
        Plain parameters.
    batch : dict
        ``targets`` (and ``inputs``) plus packing arrays.
    **kwargs
        Passed to ``module.apply``.

    Returns
    -------
    Array
        The logits.
    """
    if isinstance(module, LanguageModel):
        packed = {key: batch[key] for key in LM_PACKED_KEYS if key in batch}
        return cast(Array, module.apply({"params": params}, batch["targets"], **packed, **kwargs))
    packed = {key: batch[key] for key in model.PACKED_KEYS if key in batch}
    return cast(Array, module.apply({"params": params}, batch["inputs"], batch["targets"], **packed, **kwargs))


def abstract_params(model_config: TransformerConfig, model_kind: str) -> Any:
    """Return either model kind's parameter shapes without allocating them.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.
    model_kind : str
        One of :data:`MODEL_KINDS`.

    Returns
    -------
    Any
        ``jax.ShapeDtypeStruct`` leaves, boxed with logical axis names.
    """
    if model_kind == ModelKind.ENCODER_DECODER:  # The same trace, cached.
        return model.abstract_params(model_config)
    module = build_model(model_config.replace(decode=False), model_kind)
    arguments = init_arguments(module, length=4)
    return jax.eval_shape(lambda: module.init(jax.random.key(0), *arguments))["params"]

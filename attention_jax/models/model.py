"""The Transformer encoder-decoder of Vaswani et al. (2017), Section 3, as Flax linen modules.

Token ids: pad 0, unk 1, bos 2, eos 3; the decoder input is ``[BOS] + targets[:-1]``. Packed rows number
their pairs 1, 2, ... in ``*_segmentation`` (0 = padding) and restart ``*_position`` per pair. Shapes: B
batch, S source, T target, D d_model, H heads, K d_k, V d_v, F d_ff, N vocabulary.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import pickle
from typing import Any

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp

from attention_jax.cpu_kernels import dense_dot_general, dropout_class
from attention_jax.foundation import cache_dirs, run_files
from attention_jax.models import attention, attention_functions, masks, normalization_registry, positional_encodings
from attention_jax.models.embedding_positions import sinusoidal_positional_encoding  # noqa: F401 (re-exported)
from attention_jax.models.feed_forward import FeedForward
from attention_jax.models.masks import make_segment_mask, self_attention_mask  # noqa: F401 (re-exported)
from attention_jax.models.transformer_config import TransformerConfig
from attention_jax.models.variants import LayerNormPosition

Array = jax.Array

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
PACKED_KEYS = ("inputs_segmentation", "inputs_position", "targets_segmentation", "targets_position")
"""Batch keys of packed rows, passed as keyword arguments of :meth:`Transformer.__call__`."""


def shift_right(targets: Array, bos_id: int = BOS_ID) -> Array:
    """Decoder inputs for teacher forcing: ``[BOS] + targets[:-1]`` along the last axis.

    Parameters
    ----------
    targets : Array
        Integer ``[B, T]`` target ids (ending in EOS, padded with 0).
    bos_id : int
        Id of the beginning-of-sentence token.

    Returns
    -------
    Array
        ``[B, T]`` decoder input ids.
    """
    start = jnp.full_like(targets[:, :1], bos_id)
    return jnp.concatenate([start, targets[:, :-1]], axis=1)


def shift_right_packed(targets: Array, targets_position: Array, bos_id: int = BOS_ID) -> Array:
    """Decoder inputs of packed rows: :func:`shift_right` within each pair, BOS at every pair's start.

    Parameters
    ----------
    targets : Array
        Integer ``[B, T]`` packed target ids (each pair ends in EOS; padding 0).
    targets_position : Array
        Integer ``[B, T]`` position of each token within its pair (0 at a pair's first token).
    bos_id : int
        Id of the beginning-of-sentence token.

    Returns
    -------
    Array
        ``[B, T]`` decoder input ids; a pair's inputs equal those of the pair alone in a row.

    Notes
    -----
    Padding positions (position 0) also get BOS; they are masked out of attention and the loss.
    """
    return jnp.where(targets_position == 0, bos_id, shift_right(targets, bos_id))


class PositionalEncoding(nn.Module):
    """Adds the positional encoding ``config.positional_encoding`` names to the embeddings (Section 3.5).

    Attributes
    ----------
    config : TransformerConfig
        ``positional_encoding``, ``d_model`` and ``max_len`` are read.
    decode : bool
        Autoregressive mode (one position per call).

    Notes
    -----
    An encoding that acts in self-attention adds nothing here. In decode mode the position is the count
    of tokens decoded so far, kept in ``cache``.
    """

    config: TransformerConfig
    decode: bool = False

    @nn.compact
    def __call__(self, x: Array, positions: Array | None = None) -> Array:
        """Return ``x + PE`` for ``x`` of shape ``[B, L, D]``.

        Parameters
        ----------
        x : Array
            ``[B, L, D]`` scaled embeddings.
        positions : Array, optional
            Integer ``[B, L]`` positions (packed rows restart them per pair); default ``0 .. L-1``.
            Not used in decode mode.

        Returns
        -------
        Array
            ``[B, L, D]``.
        """
        if not positional_encodings.positional_encoding(self.config.positional_encoding).adds_to_embeddings:
            return x  # Applied in each self-attention instead (attention_positions).
        length = x.shape[1]
        if positions is not None and not self.decode:
            return x + self._encoding(positions).astype(x.dtype)  # [B,L,D]
        positions = jnp.arange(length)
        if self.decode:
            initializing = not self.has_variable("cache", "position")
            position = self.variable("cache", "position", lambda: jnp.array(0, jnp.int32))
            if not initializing:
                positions = position.value + positions
                position.value = position.value + length
        return x + self._encoding(positions)[None].astype(x.dtype)  # [1,L,D]

    def _encoding(self, positions: Array) -> Array:
        """PE ``[..., D]`` of integer ``positions`` ``[...]``, as the registry entry computes it."""
        return positional_encodings.encode_positions(self, positions, self.config)


def embed_tokens(config: TransformerConfig, embedding: nn.Embed, position: PositionalEncoding,
                 dropout: nn.Dropout, ids: Array, *, deterministic: bool,
                 positions: Array | None = None) -> Array:
    """Embedding of ids ``[B, L]`` x sqrt(d_model), plus the positional encoding, with dropout (3.4, 5.4).

    Parameters
    ----------
    config : TransformerConfig
        ``d_model`` and the compute dtype are read.
    embedding, position, dropout : nn.Module
        The (shared) token embedding, the positional encoding and ``P_drop`` applied to their sum.
    ids : Array
        Integer ``[B, L]`` token ids.
    deterministic : bool
        Disable dropout.
    positions : Array, optional
        ``[B, L]`` positions of packed rows.

    Returns
    -------
    Array
        ``[B, L, D]`` in the compute dtype.
    """
    scale = jnp.sqrt(jnp.asarray(config.d_model, config.compute_dtype))
    x = embedding(ids).astype(config.compute_dtype) * scale
    x = position(x, positions)  # embeddings * sqrt(d_model) + PE (3.4, 3.5)
    return dropout(x, deterministic=deterministic)  # P_drop on the sum (5.4)


def build_norm(config: TransformerConfig, name: str) -> nn.Module | None:
    """One norm of ``config.normalization`` named ``name`` (a sublayer's, or a pre-LN stack's final norm).

    Parameters
    ----------
    config : TransformerConfig
        ``normalization`` names the registry entry whose ``build`` makes the module.
    name : str
        The module's name (``layer_norm``, ``encoder_norm``, ``decoder_norm``, ``final_norm``).

    Returns
    -------
    nn.Module or None
        Called as ``norm(x, valid, deterministic=...)`` on ``[B, L, D]`` (float32 out); ``None`` for no norm.
    """
    return normalization_registry.normalization(config.normalization).build(config, name)


def apply_norm(norm: nn.Module | None, x: Array, valid: Array | None, *, deterministic: bool) -> Array:
    """Apply ``norm`` in ``x``'s dtype (``x`` itself when there is no norm).

    Parameters
    ----------
    norm : nn.Module or None
        A norm of ``normalization_registry``.
    x : Array
        ``[B, L, D]``.
    valid : Array or None
        Boolean ``[B, L]``: real tokens.
    deterministic : bool
        Evaluation or decoding.

    Returns
    -------
    Array
        ``[B, L, D]``.
    """
    if norm is None:
        return x
    return norm(x, valid, deterministic=deterministic).astype(x.dtype)


class ResidualSublayer(nn.Module):
    """Wraps a sublayer with dropout, the residual connection and the normalisation (3.1, 5.4).

    Attributes
    ----------
    config : TransformerConfig
        ``layer_norm_position``, ``normalization``, ``residual_connections``, ``dropout_rate`` and
        ``cpu_kernels`` are read.

    Notes
    -----
    post: ``Norm(x + Dropout(Sublayer(x)))`` (the paper); pre: ``x + Dropout(Sublayer(Norm(x)))``; without
    residual connections the ``x +`` goes.
    """

    config: TransformerConfig

    @nn.compact
    def __call__(self, x: Array, sublayer: Any, *, deterministic: bool, valid: Array | None = None) -> Array:
        """Apply ``sublayer`` (a callable of the normalized or raw ``x`` ``[B, L, D]``) with residual and norm.

        ``valid`` (boolean ``[B, L]``, optional) marks the real tokens for a norm that reads it.
        """
        cfg = self.config
        norm = build_norm(cfg, "layer_norm")
        dropout = dropout_class(cfg.cpu_kernels)(cfg.dropout_rate)
        if cfg.layer_norm_position == LayerNormPosition.PRE:
            output = dropout(sublayer(apply_norm(norm, x, valid, deterministic=deterministic)),
                             deterministic=deterministic)
            return x + output if cfg.residual_connections else output
        output = dropout(sublayer(x), deterministic=deterministic)
        summed = x + output if cfg.residual_connections else output  # The residual connection (3.1).
        return apply_norm(norm, summed, valid, deterministic=deterministic)


def _attention(config: TransformerConfig, name: str, decode: bool = False,
               self_attention: bool = False) -> attention.MultiHeadAttention:
    """A multi-head attention of ``config``; self-attention also gets an encoding that acts in attention."""
    return attention.MultiHeadAttention(
        num_heads=config.num_heads,
        key_dim=config.key_dim,
        value_dim=config.value_dim,
        out_dim=config.d_model,
        attention_dropout_rate=config.attention_dropout_rate,
        implementation=config.attention_implementation,
        decode=decode,
        decode_window=config.attention_window,
        attention_function=config.attention_function,
        attention_settings=config.attention_function_settings,
        dtype=config.compute_dtype,
        cpu_kernels=config.cpu_kernels,
        positional_encoding=positional_encodings.self_attention_positions(config) if self_attention else None,
        name=name,
    )


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward, each wrapped by :class:`ResidualSublayer` (Section 3.1).

    With a causal mask, the layer of :mod:`attention_jax.models.language_model` (``decode``: key/value cache).
    """

    config: TransformerConfig
    decode: bool = False

    @nn.compact
    def __call__(self, x: Array,
                 mask: Array | masks.LocalMask | attention_functions.StructuredMask | None, *,
                 deterministic: bool, sow_weights: bool = False, positions: Array | None = None,
                 valid: Array | None = None) -> Array:
        """Map ``[B, S, D]`` to ``[B, S, D]``; ``mask`` is ``[B, 1, S, S]`` or a ``LocalMask``.

        ``positions`` (integer ``[B, S]``, packed rows) reach an encoding that acts in self-attention;
        ``valid`` (boolean ``[B, S]``) marks the real tokens for the norms.
        """
        self_attention = _attention(self.config, "self_attention", decode=self.decode, self_attention=True)
        x = ResidualSublayer(self.config, name="attention_block")(
            x, lambda h: self_attention(h, h, mask, deterministic=deterministic, sow_weights=sow_weights,
                                        positions=positions),
            deterministic=deterministic, valid=valid,
        )
        return ResidualSublayer(self.config, name="ffn_block")(
            x, FeedForward(self.config, name="ffn"), deterministic=deterministic, valid=valid
        )


class DecoderLayer(nn.Module):
    """Masked self-attention, encoder-decoder attention, feed-forward (Section 3.1)."""

    config: TransformerConfig

    @nn.compact
    def __call__(self, y: Array, encoded: Array,
                 self_mask: Array | masks.LocalMask | attention_functions.StructuredMask | None,
                 cross_mask: Array | attention_functions.StructuredMask | None, *, deterministic: bool,
                 sow_weights: bool = False, positions: Array | None = None,
                 valid: Array | None = None) -> Array:
        """Map ``[B, T, D]`` to ``[B, T, D]`` attending to ``encoded`` ``[B, S, D]``.

        ``positions`` (integer ``[B, T]``, packed rows) reach an encoding that acts in self-attention;
        cross-attention sees none (targets and sources share no position frame). ``valid`` (boolean
        ``[B, T]``) marks the real target tokens for the norms.
        """
        cfg = self.config
        self_attention = _attention(cfg, "self_attention", decode=cfg.decode, self_attention=True)
        cross_attention = _attention(cfg, "cross_attention")
        y = ResidualSublayer(cfg, name="self_attention_block")(
            y, lambda h: self_attention(h, h, self_mask, deterministic=deterministic,
                                        sow_weights=sow_weights, positions=positions),
            deterministic=deterministic, valid=valid,
        )
        y = ResidualSublayer(cfg, name="cross_attention_block")(
            y, lambda h: cross_attention(h, encoded, cross_mask, deterministic=deterministic,
                                         sow_weights=sow_weights),
            deterministic=deterministic, valid=valid,
        )
        return ResidualSublayer(cfg, name="ffn_block")(
            y, FeedForward(cfg, name="ffn"), deterministic=deterministic, valid=valid
        )


class Transformer(nn.Module):
    """The encoder-decoder Transformer (Figure 1).

    Attributes
    ----------
    config : TransformerConfig
        All hyperparameters.

    Notes
    -----
    Parameters carry logical axis names (``vocab``, ``embed``, ``heads``, ``kv``, ``mlp``) for sharding.
    """

    config: TransformerConfig

    def setup(self) -> None:
        """Build the shared embedding, the encoder and decoder stacks and their final norms."""
        cfg = self.config
        # Embeddings ~ N(0, d_model^-0.5), so that after the sqrt(d_model) scaling (3.4) they have unit
        # variance, matching the sinusoidal encoding's range.
        embed_init = nn.with_logical_partitioning(nn.initializers.normal(stddev=cfg.d_model**-0.5), ("vocab", "embed"))
        self.source_embedding = nn.Embed(cfg.vocab_size, cfg.d_model, embedding_init=embed_init,
                                         name="shared_embedding" if cfg.share_embeddings else
                                         "source_embedding")
        if cfg.share_embeddings:
            self.target_embedding = self.source_embedding
        else:
            self.target_embedding = nn.Embed(cfg.vocab_size, cfg.d_model, embedding_init=embed_init,
                                             name="target_embedding")
            self.output_projection = nn.Dense(
                cfg.vocab_size, use_bias=False, dtype=cfg.compute_dtype,
                dot_general=dense_dot_general(cfg.cpu_kernels),
                kernel_init=nn.with_logical_partitioning(nn.initializers.xavier_uniform(),
                                                         ("embed", "vocab")),
                name="output_projection",
            )
        self.encoder_position = PositionalEncoding(cfg, name="encoder_position")
        self.decoder_position = PositionalEncoding(cfg, decode=cfg.decode, name="decoder_position")
        self.encoder_layers = [EncoderLayer(cfg, name=f"encoder_{i}") for i in range(cfg.num_layers)]
        self.decoder_layers = [DecoderLayer(cfg, name=f"decoder_{i}") for i in range(cfg.num_layers)]
        self.embedding_dropout = dropout_class(cfg.cpu_kernels)(cfg.dropout_rate)
        if cfg.layer_norm_position == LayerNormPosition.PRE:
            self.encoder_norm = build_norm(cfg, "encoder_norm")
            self.decoder_norm = build_norm(cfg, "decoder_norm")

    def encode(self, inputs: Array, *, inputs_segmentation: Array | None = None,
               inputs_position: Array | None = None, deterministic: bool = True,
               sow_weights: bool = False) -> Array:
        """Encode source ids ``[B, S]`` (0 = pad) into ``[B, S, D]``.

        Parameters
        ----------
        inputs : Array
            Integer source ids.
        inputs_segmentation : Array, optional
            Integer ``[B, S]`` pair ids of a packed row (0 = padding): attention stays within a pair.
        inputs_position : Array, optional
            Integer ``[B, S]`` positions within each pair (for the positional encoding).
        deterministic : bool
            Disable dropout.
        sow_weights : bool
            Record encoder self-attention weights in ``intermediates``.

        Returns
        -------
        Array
            The encoder output ``[B, S, D]``.
        """
        valid = inputs != PAD_ID  # [B,S]
        mask = self_attention_mask(self.config, valid, causal=False,  # [B,1,S,S] or LocalMask
                                   segmentation=inputs_segmentation)
        x = embed_tokens(self.config, self.source_embedding, self.encoder_position, self.embedding_dropout,
                         inputs, deterministic=deterministic, positions=inputs_position)
        for layer in self.encoder_layers:
            x = layer(x, mask, deterministic=deterministic, sow_weights=sow_weights, positions=inputs_position,
                      valid=valid)
        if self.config.layer_norm_position == LayerNormPosition.PRE:
            x = apply_norm(self.encoder_norm, x, valid, deterministic=deterministic)
        return x

    def decode(self, encoded: Array, inputs: Array, decoder_inputs: Array, *,
               targets_valid: Array | None = None, inputs_segmentation: Array | None = None,
               targets_segmentation: Array | None = None, targets_position: Array | None = None,
               deterministic: bool = True, sow_weights: bool = False) -> Array:
        """Return the logits ``[B, T, N]`` for decoder input ids ``[B, T]`` given the encoder output.

        Parameters
        ----------
        encoded : Array
            ``[B, S, D]`` from :meth:`encode`; in decode mode also ``[B', S, D]`` with ``B = B' R``,
            decoder rows ``b R .. b R + R - 1`` sharing row ``b`` (a beam's hypotheses, one sentence).
        inputs : Array
            ``[B, S]`` (or ``[B', S]``) source ids (for the cross-attention padding mask).
        decoder_inputs : Array
            ``[B, T]`` decoder input ids, ``[BOS] + targets[:-1]``; in decode mode ``[B, 1]``.
        targets_valid : Array, optional
            Boolean ``[B, T]``: positions holding real target tokens (masks padded queries and keys).
            Defaults to all positions.
        inputs_segmentation, targets_segmentation : Array, optional
            Integer ``[B, S]`` and ``[B, T]`` pair ids of packed rows (give both or neither): decoder
            self-attention stays within a pair, cross-attention goes to the same pair's source.
        targets_position : Array, optional
            Integer ``[B, T]`` positions within each pair (for the positional encoding).
        deterministic : bool
            Disable dropout.
        sow_weights : bool
            Record decoder self- and cross-attention weights in ``intermediates``.

        Returns
        -------
        Array
            float32 logits ``[B, T, N]`` (pre-softmax projection with the shared embedding).

        Notes
        -----
        In decode mode causality (and the window) come from the key/value cache, so no causal mask is made.
        """
        cfg = self.config
        if targets_valid is None:
            targets_valid = jnp.ones(decoder_inputs.shape, dtype=bool)
        cross_mask = masks.cross_attention_mask(cfg, targets_valid, inputs != PAD_ID,  # [B|B',1,T|1,S]
                                                targets_segmentation=targets_segmentation,
                                                inputs_segmentation=inputs_segmentation)
        if cfg.decode:
            self_mask = None  # Causality and the window come from the key/value cache.
        else:
            self_mask = self_attention_mask(cfg, targets_valid, causal=True,
                                            segmentation=targets_segmentation)
        y = embed_tokens(cfg, self.target_embedding, self.decoder_position, self.embedding_dropout,
                         decoder_inputs, deterministic=deterministic, positions=targets_position)
        for layer in self.decoder_layers:
            y = layer(y, encoded, self_mask, cross_mask, deterministic=deterministic,
                      sow_weights=sow_weights, positions=targets_position, valid=targets_valid)
        if cfg.layer_norm_position == LayerNormPosition.PRE:
            y = apply_norm(self.decoder_norm, y, targets_valid, deterministic=deterministic)
        if not cfg.share_embeddings:
            logits = self.output_projection(y)
        else:
            logits = self.target_embedding.attend(y)  # Pre-softmax projection shares the embedding.
        return logits.astype(jnp.float32)

    def __call__(self, inputs: Array, targets: Array, *, inputs_segmentation: Array | None = None,
                 targets_segmentation: Array | None = None, inputs_position: Array | None = None,
                 targets_position: Array | None = None, deterministic: bool = True,
                 sow_weights: bool = False) -> Array:
        """Teacher-forced logits ``[B, T, N]`` for source ``[B, S]`` and target ``[B, T]`` ids.

        Parameters
        ----------
        inputs : Array
            Source ids, 0-padded.
        targets : Array
            Target ids ending in EOS, 0-padded; the decoder sees ``[BOS] + targets[:-1]``.
        inputs_segmentation, targets_segmentation : Array, optional
            Packed rows: ``[B, S]`` / ``[B, T]`` pair ids (1, 2, ...; 0 = padding), one id per pair
            on both sides. Give all four packing arrays or none.
        inputs_position, targets_position : Array, optional
            Packed rows: ``[B, S]`` / ``[B, T]`` positions restarting at 0 for each pair.
        deterministic : bool
            Disable dropout (evaluation).
        sow_weights : bool
            Record every attention's weights in ``intermediates``.

        Returns
        -------
        Array
            float32 logits; position ``t`` predicts ``targets[:, t]``.
        """
        encoded = self.encode(inputs, inputs_segmentation=inputs_segmentation,
                              inputs_position=inputs_position, deterministic=deterministic,
                              sow_weights=sow_weights)
        if targets_position is None:
            decoder_inputs = shift_right(targets)
        else:
            decoder_inputs = shift_right_packed(targets, targets_position)  # BOS at every pair start.
        return self.decode(encoded, inputs, decoder_inputs, targets_valid=targets != PAD_ID,
                           inputs_segmentation=inputs_segmentation,
                           targets_segmentation=targets_segmentation, targets_position=targets_position,
                           deterministic=deterministic, sow_weights=sow_weights)


def count_params(params: Any) -> int:
    """Total number of scalars in a parameter pytree (boxed or not).

    Parameters
    ----------
    params : pytree
        Parameters, arrays or ``jax.ShapeDtypeStruct``.

    Returns
    -------
    int
        Sum of the sizes of all leaves.
    """
    leaves = jax.tree_util.tree_leaves(nn.meta.unbox(params))
    return int(sum(math.prod(leaf.shape) for leaf in leaves))


def abstract_params(model_config: TransformerConfig) -> Any:
    """Parameter shapes of a model without allocating them (``jax.eval_shape`` of ``init``).

    Parameters
    ----------
    model_config : TransformerConfig
        The model to describe.

    Returns
    -------
    pytree
        ``jax.ShapeDtypeStruct`` leaves, boxed with logical axis names.
    """
    return jax.tree.map(lambda leaf: leaf, _traced_abstract_params(model_config))  # A tree of the caller's own.


@functools.lru_cache(maxsize=8)
def _traced_abstract_params(model_config: TransformerConfig) -> Any:
    """Trace ``init`` once per config: loading a run asks several times (about 0.5 s of tracing each).

    With a compilation cache on, the shapes are kept there (trusted, as the cache is) for later processes.
    """
    path = _saved_shapes_path(model_config)
    if path and os.path.isfile(path):
        with contextlib.suppress(Exception), open(path, "rb") as file:  # Unreadable: traced again.
            return pickle.load(file)
    model = Transformer(model_config.replace(decode=False))
    ids = jnp.ones((1, 4), jnp.int32)
    params = jax.eval_shape(lambda: model.init(jax.random.key(0), ids, ids))["params"]
    with contextlib.suppress(OSError):  # A cache that cannot be written: the next process traces too.
        if path:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            run_files.write_atomically(path, pickle.dumps(params))
    return params


def _saved_shapes_path(model_config: TransformerConfig) -> str | None:
    """Where ``model_config``'s parameter shapes are kept, keyed by the config, JAX, Flax and the package source."""
    directory = getattr(jax.config, "jax_compilation_cache_dir", None)
    if not directory:
        return None
    key = "\n".join([repr(model_config.replace(decode=False)), jax.__version__, flax.__version__,
                     cache_dirs.source_digest()])
    return os.path.join(directory, "param_shapes", hashlib.sha256(key.encode()).hexdigest()[:40] + ".pickle")

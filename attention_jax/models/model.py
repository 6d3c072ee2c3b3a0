"""The Transformer encoder-decoder of Vaswani et al. (2017), Section 3, and its embedding positional encodings.

Ids: pad 0, unk 1, bos 2, eos 3. Shapes: B batch, S source, T target, D d_model, N vocabulary. Packed rows
number their pairs 1, 2, ... in ``*_segmentation`` (0 = pad) and restart ``*_position`` per pair.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import os
import pickle
from typing import TYPE_CHECKING, Any, cast

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
from absl import logging

from attention_jax.cpu_kernels import dense_dot_general, dropout_class
from attention_jax.foundation import cache_dirs, run_files
from attention_jax.models import attention, attention_functions, masks, normalization_registry, positional_encodings
from attention_jax.models.feed_forward import FeedForward
from attention_jax.models.masks import _make_segment_mask, _self_attention_mask  # noqa: F401 (re-exported)
from attention_jax.models.variants import LayerNormPosition

if TYPE_CHECKING:
    from attention_jax.experiment.sections import TransformerConfig

Array = jax.Array

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
PACKED_KEYS = ("inputs_segmentation", "inputs_position", "targets_segmentation", "targets_position")
"""Batch keys of packed rows, passed as keyword arguments of :meth:`Transformer.__call__`."""


def _shift_right(targets: Array, bos_id: int = BOS_ID) -> Array:
    """Return the teacher-forcing decoder inputs ``[BOS] + targets[:-1]``.

    ``targets`` ``[B, T]`` ids to the decoder inputs ``[B, T]``.
    """
    start = jnp.full_like(targets[:, :1], bos_id)
    return jnp.concatenate([start, targets[:, :-1]], axis=1)


def _shift_right_packed(targets: Array, targets_position: Array, bos_id: int = BOS_ID) -> Array:
    """Return :func:`_shift_right` within each packed pair (BOS where the position is 0).

    ``targets``, ``targets_position`` ``[B, T]`` (positions within their pair) to the decoder inputs ``[B, T]``.
    """
    return jnp.where(targets_position == 0, bos_id, _shift_right(targets, bos_id))


# --- The positional encodings added to the embeddings (the registry's EMBEDDINGS entries) ------------

def sinusoidal_positional_encoding(positions: Array, d_model: int) -> Array:
    """Return the paper's fixed encoding (Section 3.5), computed on the fly for any position.

    ``PE(pos, 2i) = sin(pos / 10000^(2i / d))``, ``PE(pos, 2i + 1) = cos(pos / 10000^(2i / d))``.

    Parameters
    ----------
    positions : Array
        Integer ``[...]``.
    d_model : int
        Encoding width (even or odd).

    Returns
    -------
    Array
        float32 ``[..., d_model]``.
    """
    pair_index = jnp.arange(0, d_model, 2, dtype=jnp.float32)  # 2i
    inverse_timescale = jnp.power(10000.0, -pair_index / d_model)  # 10000^(-2i/d_model)
    angles = positions[..., None].astype(jnp.float32) * inverse_timescale  # [..., ceil(D/2)]
    encoding = jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1)  # [..., D/2, 2]
    return encoding.reshape(*positions.shape, -1)[..., :d_model]


def _sinusoidal(module: nn.Module, positions: Array, config: TransformerConfig) -> Array:
    """Return the ``sinusoidal`` entry's encoding."""
    return sinusoidal_positional_encoding(positions, config.d_model)


_TABLES_LOGGED: set[int] = set()
"""Sizes of learned tables whose overrun the log has reported (once per process and size)."""


def _log_beyond_table(last_position: Any, table_rows: int) -> None:
    if table_rows not in _TABLES_LOGGED:
        _TABLES_LOGGED.add(table_rows)
        logging.warning("positional_encoding='learned' was asked for position %d, beyond its table of %d "
                        "positions (max_len + max_decode_extra_len): such positions get a zero position "
                        "vector; raise max_decode_extra_len or decode shorter outputs.", int(last_position),
                        table_rows)


def _learned(module: nn.Module, positions: Array, config: TransformerConfig) -> Array:
    """Return the ``learned`` entry's encoding: row ``p`` of a learned ``[max_len, D]`` table, zeros beyond."""
    table = cast(Array, module.param(  # Table 2 row E: one learned vector per position (param unboxes).
        "position_embedding",
        nn.with_logical_partitioning(nn.initializers.normal(stddev=0.02), (None, "embed")),
        (config.max_len, config.d_model),
    ))
    last = jnp.max(positions)
    log = functools.partial(_log_beyond_table, table_rows=config.max_len)
    jax.lax.cond(last >= config.max_len, lambda: jax.debug.callback(log, last), lambda: None)
    return jnp.take(table, positions, axis=0, mode="fill", fill_value=0.0)  # Beyond the table: zeros.


def _no_positions(module: nn.Module, positions: Array, config: TransformerConfig) -> Array:
    """Return the ``none`` entry's encoding: zeros."""
    return jnp.zeros((*positions.shape, config.d_model), jnp.float32)


class PositionalEncoding(nn.Module):
    """Add ``config.positional_encoding`` to the embeddings (3.5); in decode mode the position is cached."""

    config: TransformerConfig
    decode: bool = False

    @nn.compact
    def __call__(self, x: Array, positions: Array | None = None) -> Array:
        """Return ``x + PE`` for ``x`` ``[B, L, D]`` (``positions`` ``[B, L]`` default to ``0 .. L-1``)."""
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
        """Float32 ``[..., D]`` encoding of integer ``positions`` under ``config.positional_encoding``."""
        encoding = positional_encodings.positional_encoding(self.config.positional_encoding).encoding
        assert encoding is not None  # Called for EMBEDDINGS schemes only, which __post_init__ gives an encoding.
        return encoding(self, positions, self.config)


def _embed_tokens(config: TransformerConfig, embedding: nn.Embed, position: PositionalEncoding,
                 dropout: nn.Dropout, ids: Array, *, deterministic: bool,
                 positions: Array | None = None) -> Array:
    """Return dropout(embedding x sqrt(d_model) + PE) (3.4, 3.5, 5.4).

    ``ids`` ``[B, L]`` to ``[B, L, D]`` in the compute dtype.
    """
    scale = jnp.sqrt(jnp.asarray(config.d_model, config.compute_dtype))
    x = embedding(ids).astype(config.compute_dtype) * scale
    x = position(x, positions)  # embeddings * sqrt(d_model) + PE (3.4, 3.5)
    return dropout(x, deterministic=deterministic)  # P_drop on the sum (5.4)


def _build_norm(config: TransformerConfig, name: str) -> nn.Module | None:
    """Return the ``config.normalization`` module named ``name`` (``None`` for no norm)."""
    return normalization_registry.normalization(config.normalization).build(config, name)


def _apply_norm(norm: nn.Module | None, x: Array, valid: Array | None, *, deterministic: bool) -> Array:
    """Return ``norm(x)`` in ``x``'s dtype, or ``x`` when ``norm`` is ``None``.

    ``x`` ``[B, L, D]``; ``valid`` ``[B, L]`` marks real tokens (for batch statistics).
    """
    if norm is None:
        return x
    return norm(x, valid, deterministic=deterministic).astype(x.dtype)


class ResidualSublayer(nn.Module):
    """Post-LN ``Norm(x + Dropout(f(x)))`` (3.1, 5.4) or pre-LN ``x + Dropout(f(Norm(x)))``."""

    config: TransformerConfig

    @nn.compact
    def __call__(self, x: Array, sublayer: Any, *, deterministic: bool, valid: Array | None = None) -> Array:
        """Apply ``sublayer`` to ``x`` ``[B, L, D]`` with dropout, residual and norm."""
        cfg = self.config
        norm = _build_norm(cfg, "layer_norm")
        dropout = dropout_class(cfg.cpu_kernels)(cfg.dropout_rate)
        if cfg.layer_norm_position == LayerNormPosition.PRE:
            output = dropout(sublayer(_apply_norm(norm, x, valid, deterministic=deterministic)),
                             deterministic=deterministic)
            return x + output if cfg.residual_connections else output
        output = dropout(sublayer(x), deterministic=deterministic)
        summed = x + output if cfg.residual_connections else output  # The residual connection (3.1).
        return _apply_norm(norm, summed, valid, deterministic=deterministic)


def _attention(config: TransformerConfig, name: str, decode: bool = False,
               self_attention: bool = False) -> attention.MultiHeadAttention:
    """Build a multi-head attention of ``config`` (self-attention gets the in-attention encoding)."""
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
        positional_encoding=positional_encodings._self_attention_positions(config) if self_attention else None,
        name=name,
    )


class EncoderLayer(nn.Module):
    """Self-attention then feed-forward (3.1); causal, the language model's layer."""

    config: TransformerConfig
    decode: bool = False

    @nn.compact
    def __call__(self, x: Array,
                 mask: Array | masks.LocalMask | attention_functions.StructuredMask | None, *,
                 deterministic: bool, sow_weights: bool = False, positions: Array | None = None,
                 valid: Array | None = None) -> Array:
        """Map ``[B, S, D]`` to ``[B, S, D]``; ``mask`` is ``[B, 1, S, S]`` or structured."""
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
    """Masked self-attention, encoder-decoder attention, feed-forward (3.1)."""

    config: TransformerConfig

    @nn.compact
    def __call__(self, y: Array, encoded: Array,
                 self_mask: Array | masks.LocalMask | attention_functions.StructuredMask | None,
                 cross_mask: Array | attention_functions.StructuredMask | None, *, deterministic: bool,
                 sow_weights: bool = False, positions: Array | None = None,
                 valid: Array | None = None) -> Array:
        """Map ``[B, T, D]`` to ``[B, T, D]`` attending to ``encoded`` ``[B, S, D]``."""
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
    """The encoder-decoder Transformer (Figure 1); parameters carry logical axis names for sharding."""

    config: TransformerConfig

    def setup(self) -> None:
        """Build the shared embedding, the two stacks and their final norms."""
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
            self.encoder_norm = _build_norm(cfg, "encoder_norm")
            self.decoder_norm = _build_norm(cfg, "decoder_norm")

    def encode(self, inputs: Array, *, inputs_segmentation: Array | None = None,
               inputs_position: Array | None = None, deterministic: bool = True,
               sow_weights: bool = False) -> Array:
        """Encode source ids ``[B, S]`` into ``[B, S, D]``.

        Parameters
        ----------
        inputs : Array
            ``[B, S]`` source ids.
        inputs_segmentation, inputs_position : Array, optional
            ``[B, S]`` pair ids and positions of packed rows.
        deterministic, sow_weights : bool
            Disable dropout; record attention weights in ``intermediates``.

        Returns
        -------
        Array
            ``[B, S, D]``.
        """
        valid = inputs != PAD_ID  # [B,S]
        mask = _self_attention_mask(self.config, valid, causal=False,  # [B,1,S,S] or LocalMask
                                   segmentation=inputs_segmentation)
        x = _embed_tokens(self.config, self.source_embedding, self.encoder_position, self.embedding_dropout,
                         inputs, deterministic=deterministic, positions=inputs_position)
        for layer in self.encoder_layers:
            x = layer(x, mask, deterministic=deterministic, sow_weights=sow_weights, positions=inputs_position,
                      valid=valid)
        if self.config.layer_norm_position == LayerNormPosition.PRE:
            x = _apply_norm(self.encoder_norm, x, valid, deterministic=deterministic)
        return x

    def decode(self, encoded: Array, inputs: Array, decoder_inputs: Array, *,
               targets_valid: Array | None = None, inputs_segmentation: Array | None = None,
               targets_segmentation: Array | None = None, targets_position: Array | None = None,
               deterministic: bool = True, sow_weights: bool = False) -> Array:
        """Return float32 logits ``[B, T, N]`` for decoder inputs given the encoder output.

        In decode mode ``encoded`` may be ``[B', S, D]`` with ``B = B' R`` (R hypotheses per sentence) and
        causality comes from the key/value cache.

        Parameters
        ----------
        encoded, inputs : Array
            ``[B, S, D]`` from :meth:`encode`; ``[B, S]`` source ids (cross-attention padding mask).
        decoder_inputs : Array
            ``[B, T]`` ids, ``[BOS] + targets[:-1]``; ``[B, 1]`` in decode mode.
        targets_valid, inputs_segmentation, targets_segmentation, targets_position : Array, optional
            ``[B, T]`` real target positions (default all); packed rows' pair ids and target positions.
        deterministic, sow_weights : bool
            Disable dropout; record attention weights in ``intermediates``.

        Returns
        -------
        Array
            ``[B, T, N]`` logits.
        """
        cfg = self.config
        if targets_valid is None:
            targets_valid = jnp.ones(decoder_inputs.shape, dtype=bool)
        cross_mask = masks._cross_attention_mask(cfg, targets_valid, inputs != PAD_ID,  # [B|B',1,T|1,S]
                                                targets_segmentation=targets_segmentation,
                                                inputs_segmentation=inputs_segmentation)
        if cfg.decode:
            self_mask = None  # Causality and the window come from the key/value cache.
        else:
            self_mask = _self_attention_mask(cfg, targets_valid, causal=True,
                                            segmentation=targets_segmentation)
        y = _embed_tokens(cfg, self.target_embedding, self.decoder_position, self.embedding_dropout,
                         decoder_inputs, deterministic=deterministic, positions=targets_position)
        for layer in self.decoder_layers:
            y = layer(y, encoded, self_mask, cross_mask, deterministic=deterministic,
                      sow_weights=sow_weights, positions=targets_position, valid=targets_valid)
        if cfg.layer_norm_position == LayerNormPosition.PRE:
            y = _apply_norm(self.decoder_norm, y, targets_valid, deterministic=deterministic)
        if not cfg.share_embeddings:
            logits = self.output_projection(y)
        else:
            logits = self.target_embedding.attend(y)  # Pre-softmax projection shares the embedding.
        return logits.astype(jnp.float32)

    def __call__(self, inputs: Array, targets: Array, *, inputs_segmentation: Array | None = None,
                 targets_segmentation: Array | None = None, inputs_position: Array | None = None,
                 targets_position: Array | None = None, deterministic: bool = True,
                 sow_weights: bool = False) -> Array:
        """Return teacher-forced float32 logits ``[B, T, N]``; position ``t`` predicts ``targets[:, t]``."""
        encoded = self.encode(inputs, inputs_segmentation=inputs_segmentation,
                              inputs_position=inputs_position, deterministic=deterministic,
                              sow_weights=sow_weights)
        if targets_position is None:
            decoder_inputs = _shift_right(targets)
        else:
            decoder_inputs = _shift_right_packed(targets, targets_position)  # BOS at every pair start.
        return self.decode(encoded, inputs, decoder_inputs, targets_valid=targets != PAD_ID,
                           inputs_segmentation=inputs_segmentation,
                           targets_segmentation=targets_segmentation, targets_position=targets_position,
                           deterministic=deterministic, sow_weights=sow_weights)


def count_params(params: Any) -> int:
    """Return the number of scalars in a parameter pytree (boxed or not).

    Parameters
    ----------
    params : Any
        Arrays or ``jax.ShapeDtypeStruct`` leaves.

    Returns
    -------
    int
        Number of scalars.
    """
    leaves = jax.tree_util.tree_leaves(nn.meta.unbox(params))
    return int(sum(math.prod(leaf.shape) for leaf in leaves))


def abstract_params(model_config: TransformerConfig) -> Any:
    """Return the parameter shapes of a model without allocating them.

    Parameters
    ----------
    model_config : TransformerConfig
        The model.

    Returns
    -------
    Any
        ``jax.ShapeDtypeStruct`` leaves, boxed with logical axis names.
    """
    return jax.tree.map(lambda leaf: leaf, _traced_abstract_params(model_config))  # A tree of the caller's own.


@functools.lru_cache(maxsize=8)
def _traced_abstract_params(model_config: TransformerConfig) -> Any:
    """Trace ``init`` once per config (loading a run asks several times); kept under the compilation cache.

    With a cache on, later processes read the shapes there (trusted, as the cache is) instead of tracing.
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

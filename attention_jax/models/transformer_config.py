"""The Transformer's hyperparameters (Table 3): one frozen, validated config built from an experiment config.

:func:`attention_jax.experiment.sections.build_experiment` builds it once from a checked config; eval and decode
variants come from :meth:`TransformerConfig.replace`. The modules in :mod:`attention_jax.models.model` take it.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

from attention_jax.models import attention_registry, normalization_registry, positional_encodings

POSITIONAL_ENCODINGS = positional_encodings.POSITIONAL_ENCODINGS  # The registry: name -> entry (names iterate).
LAYER_NORM_POSITIONS = ("post", "pre")
NORMALIZATIONS = normalization_registry.NORMALIZATIONS  # The registry: name -> entry (names iterate).
DTYPES = ("float32", "bfloat16")  # Names of jnp dtypes; this module imports no framework (configs load it).


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Hyperparameters of the model; frozen, so decode and eval variants come from ``replace``.

    Attributes
    ----------
    vocab_size : int
        Rows of the shared embedding (the tokenizer's vocabulary must not exceed it).
    num_layers : int
        ``N``, layers in the encoder and in the decoder.
    d_model, d_ff, num_heads, key_dim, value_dim : int
        Widths of Section 3 and Table 3; ``key_dim``/``value_dim`` are per head (``d_k``, ``d_v``).
    dropout_rate : float
        ``P_drop`` on every sublayer output and on embeddings + positional encodings (5.4).
    attention_dropout_rate : float
        Dropout on attention weights (not in the paper; 0 reproduces it).
    positional_encoding : str
        ``"sinusoidal"`` (3.5), ``"learned"`` (Table 2 row E), ``"none"`` (no position information:
        the encoder is then permutation-equivariant), or one that acts in self-attention: ``"relative"``
        (Shaw et al., 2018), ``"rotary"`` (Su et al., 2021), ``"alibi"`` (Press et al., 2022); a name in
        :data:`POSITIONAL_ENCODINGS` (:mod:`attention_jax.models.attention_positions`).
    relative_max_distance : int
        ``k`` of ``"relative"``: offsets ``j - i`` are clipped to ``[-k, k]`` (16: Shaw et al.'s MT setting).
    relative_values : bool
        ``"relative"`` also adds its embeddings to the values (Shaw et al., Eq. 3); False: keys only.
    layer_norm_position : str
        ``"post"``: ``LayerNorm(x + Dropout(Sublayer(x)))`` as in the paper; ``"pre"``:
        ``x + Dropout(Sublayer(LayerNorm(x)))`` with a final LayerNorm per stack. The norm is
        ``normalization``'s.
    normalization : str
        The normalisation of every sublayer (and of pre-LN's final norms): ``"layer_norm"`` (the paper's),
        ``"rms_norm"``, ``"batch_norm"`` or ``"none"`` (post-LN only); a name in :data:`NORMALIZATIONS`
        (:mod:`attention_jax.models.normalization_registry`).
    residual_connections : bool
        ``x + Sublayer(x)`` around every sublayer (3.1); False keeps ``Sublayer(x)`` only.
    share_embeddings : bool
        One matrix for encoder input, decoder input and pre-softmax projection (3.4); otherwise three.
    attention_implementation : str
        See :data:`attention_jax.models.attention_registry.ATTENTION_IMPLEMENTATIONS`.
    attention_window : int
        0 for full attention; ``r > 0`` restricts self-attention to ``|i - j| <= r`` (Table 1), computed
        blockwise in O(r n d) by the einsum implementation (other implementations use a dense mask;
        decode mode uses the key/value cache). Cross-attention stays full.
    attention_function : str
        How each head attends (Section 3.2.1): ``"scaled_dot_product"`` (the paper's), ``"dot_product"``,
        ``"additive"`` or ``"linear"``: a name in :data:`attention_jax.models.attention_registry.ATTENTION_FUNCTIONS`.
    max_len : int
        Positions the learned encoding holds (inputs and decoded outputs must fit).
    dtype : str
        Computation dtype name, ``"float32"`` or ``"bfloat16"``; parameters are always float32.
    decode : bool
        Build the autoregressive variant whose decoder keeps a key/value cache.
    cpu_kernels : bool
        Use :mod:`attention_jax.cpu_kernels` (the Dense layers' 2-D backward pass, loop-free dropout
        masks, the blockwise accuracy argmax). Takes effect only when ``jax.default_backend() == "cpu"``;
        False gives the plain Flax/JAX path everywhere. The same numbers either way, to float rounding.
    """

    vocab_size: int = 37000
    num_layers: int = 6
    d_model: int = 512
    d_ff: int = 2048
    num_heads: int = 8
    key_dim: int = 64
    value_dim: int = 64
    dropout_rate: float = 0.1
    attention_dropout_rate: float = 0.0
    positional_encoding: str = "sinusoidal"
    relative_max_distance: int = 16
    relative_values: bool = True
    layer_norm_position: str = "post"
    normalization: str = "layer_norm"
    residual_connections: bool = True
    share_embeddings: bool = True
    attention_implementation: str = "einsum"
    attention_window: int = 0
    attention_function: str = "scaled_dot_product"
    max_len: int = 512
    dtype: str = "float32"
    decode: bool = False
    cpu_kernels: bool = True

    def __post_init__(self) -> None:
        _validate(self)

    def replace(self, **changes: Any) -> "TransformerConfig":
        """Return a copy with ``changes`` applied (validated again)."""
        return dataclasses.replace(self, **changes)

    @property
    def compute_dtype(self) -> Any:
        """The jnp dtype of activations (``jnp.float32`` or ``jnp.bfloat16``)."""
        import jax.numpy as jnp  # Here: configs, sweeps and reports build this class without loading JAX.

        return getattr(jnp, self.dtype)


def _positive_int(name: str, value: Any) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer; got {value!r}.")
    return int(value)


def _one_of(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}; got {value!r}.")


def _validate(config: TransformerConfig) -> None:
    """Raise ``ValueError`` naming the first invalid field and its allowed values."""
    for name in ("vocab_size", "num_layers", "d_model", "d_ff", "num_heads", "key_dim", "value_dim",
                 "max_len", "relative_max_distance"):
        _positive_int(name, getattr(config, name))
    for name in ("dropout_rate", "attention_dropout_rate"):
        rate = getattr(config, name)
        if not isinstance(rate, (int, float)) or not 0.0 <= rate < 1.0:
            raise ValueError(f"{name} must be a probability in [0, 1); got {rate!r}.")
    positional_encodings.check_positional_encoding(config.positional_encoding)
    _one_of("layer_norm_position", config.layer_norm_position, LAYER_NORM_POSITIONS)
    normalization_registry.check_normalization(config.normalization, position=config.layer_norm_position)
    _one_of("attention_implementation", config.attention_implementation,
            attention_registry.ATTENTION_IMPLEMENTATIONS)
    _one_of("dtype", config.dtype, DTYPES)
    for name in ("cpu_kernels", "relative_values", "residual_connections"):
        if not isinstance(getattr(config, name), bool):
            raise ValueError(f"{name} must be True or False; got {getattr(config, name)!r}.")
    if not isinstance(config.attention_window, int) or config.attention_window < 0:
        raise ValueError(
            f"attention_window must be 0 (full attention) or a positive window r; "
            f"got {config.attention_window!r}."
        )
    if config.attention_dropout_rate > 0 and config.attention_implementation != "einsum":
        raise ValueError(
            f"attention_dropout_rate={config.attention_dropout_rate} needs "
            f"attention_implementation='einsum' (the fused kernels have no weight dropout); got "
            f"{config.attention_implementation!r}."
        )
    attention_registry.check_attention_function(
        config.attention_function, implementation=config.attention_implementation,
        window=config.attention_window, attention_dropout_rate=config.attention_dropout_rate)
    positional_encodings.check_with_attention(
        config.positional_encoding, attention_function=config.attention_function,
        implementation=config.attention_implementation, key_dim=config.key_dim)

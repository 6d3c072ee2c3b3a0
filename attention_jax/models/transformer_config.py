"""The Transformer's hyperparameters (Table 3): one frozen, validated config built from an experiment config.

:func:`attention_jax.experiment.sections.build_experiment` builds it once from a checked config; eval and decode
variants come from :meth:`TransformerConfig.replace`. The modules in :mod:`attention_jax.models.model` take it.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any

from attention_jax.foundation import field_declarations
from attention_jax.foundation.field_declarations import (
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    ResumeRule,
    check_declared,
    setting,
)
from attention_jax.models import (
    attention_registry,
    feed_forward_registry,
    normalization_registry,
    positional_encodings,
    variants,
)
from attention_jax.models.attention_registry import AttentionImplementation
from attention_jax.models.variants import LayerNormPosition

POSITIONAL_ENCODINGS = positional_encodings.POSITIONAL_ENCODINGS  # The registry: name -> entry (names iterate).
LAYER_NORM_POSITIONS = variants.values(LayerNormPosition)
NORMALIZATIONS = normalization_registry.NORMALIZATIONS  # The registry: name -> entry (names iterate).
DTYPES = ("float32", "bfloat16")  # Names of jnp dtypes; this module imports no framework (configs load it).


def _attention_function_names() -> tuple[str, ...]:
    return tuple(attention_registry.ATTENTION_FUNCTIONS)


def _positional_encoding_names() -> tuple[str, ...]:
    return tuple(POSITIONAL_ENCODINGS)


def _normalization_names() -> tuple[str, ...]:
    return tuple(NORMALIZATIONS)


def _feed_forward_names() -> tuple[str, ...]:
    return tuple(feed_forward_registry.FEED_FORWARDS)


ENTRY_SETTINGS_FIELDS = {"positional_encoding": "positional_encoding_settings",
                         "normalization": "normalization_settings",
                         "attention_function": "attention_function_settings"}
"""Each field naming a registry entry, and the field of that entry's own settings."""

_MODEL = ResumeRule.MODEL  # A changed value is another model: a run never resumes with it.
_COMPUTE = ResumeRule.COMPUTE  # The same function computed another way: a run may resume with it.


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Hyperparameters of the model; frozen, so decode and eval variants come from ``replace``.

    Attributes
    ----------
    num_layers, d_model, d_ff, num_heads, key_dim, value_dim, dropout_rate, attention_dropout_rate, \
feed_forward, feed_forward_bias, feed_forward_match_params, positional_encoding, layer_norm_position, \
normalization, residual_connections, share_embeddings, attention_implementation, attention_window, \
attention_function, dtype, cpu_kernels, vocab_size
        The model section's config fields, declared below, each with its meaning, allowed values and
        range (``docs/config_fields.md`` lists them). ``key_dim``/``value_dim`` are per head (``d_k``,
        ``d_v``; the config's 0 is resolved to ``d_model / num_heads`` before this is built).
    positional_encoding_settings, normalization_settings, attention_function_settings : Any
        The chosen entry's own settings, as its registry entry's ``settings`` dataclass (e.g.
        ``positional_encodings.RelativeSettings``), or None for an entry without settings. Given as None
        (every setting at its default), that dataclass, or a config's mapping by entry
        (``{"relative": {"max_distance": 8}}``); kept as the dataclass
        (:mod:`attention_jax.foundation.field_declarations`).
    max_len : int
        Positions the learned encoding holds (inputs and decoded outputs must fit): the config's
        ``max_len`` plus ``max_decode_extra_len``.
    decode : bool
        Build the autoregressive variant whose decoder keeps a key/value cache.

    Notes
    -----
    ``attention_window`` r > 0 is computed blockwise in O(r n d) by the einsum implementation (other
    implementations use a dense mask; decode mode uses the key/value cache); cross-attention stays full.
    ``cpu_kernels`` takes effect only when ``jax.default_backend() == "cpu"`` (the Dense layers' 2-D
    backward pass, loop-free dropout masks, the blockwise accuracy argmax); the same numbers either way,
    to float rounding. Positional encodings other than the paper's are described by their registry
    entries (:mod:`attention_jax.models.positional_encodings`), attention functions by theirs
    (:mod:`attention_jax.models.attention_registry`).
    """

    num_layers: int = setting(6, "N: layers of the encoder and of the decoder.", **POSITIVE, resume=_MODEL)
    d_model: int = setting(512, "Width of embeddings and sublayer outputs.", **POSITIVE, resume=_MODEL)
    d_ff: int = setting(2048, "Inner width of the position-wise feed-forward network.", **POSITIVE, resume=_MODEL)
    feed_forward: str = setting("relu", "The feed-forward sublayer (3.3): relu (Eq. 2, the paper's), gelu, swish, or "
                                "gated (Shazeer, 2020) glu, bilinear, reglu, geglu, swiglu.",
                                choices=_feed_forward_names, resume=_MODEL, old_run_value="relu")
    feed_forward_bias: bool = setting(True, "Biases in the feed-forward layers, as Eq. 2 has them (False: none, as "
                                      "T5 and LLaMA).", resume=_MODEL, old_run_value=True)
    feed_forward_match_params: bool = setting(
        True, "A gated feed-forward's hidden width is 2/3 d_ff rounded to a multiple of 8, its parameters within "
        "1% of Eq. 2's (False: d_ff, 3/2 the parameters).", resume=_MODEL, old_run_value=True)
    num_heads: int = setting(8, "h: attention heads.", **POSITIVE, resume=_MODEL)
    key_dim: int = setting(64, "d_k per head (0: d_model / num_heads).", **NON_NEGATIVE, resume=_MODEL)
    value_dim: int = setting(64, "d_v per head (0: d_model / num_heads).", **NON_NEGATIVE, resume=_MODEL)
    dropout_rate: float = setting(0.1, "P_drop on sublayer outputs and embeddings + positions (5.4).",
                                  **PROBABILITY, resume=_MODEL)
    attention_dropout_rate: float = setting(0.0, "Dropout on attention weights (not in the paper).",
                                            **PROBABILITY, resume=_MODEL)
    positional_encoding: str = setting("sinusoidal", "How positions enter the model (3.5; Table 2 row E: "
                                       "learned; relative, rotary and alibi act in self-attention).",
                                       choices=_positional_encoding_names, resume=_MODEL)
    positional_encoding_settings: Any = setting(
        None, "The encodings' own settings, by entry: {entry: {setting: value}} (the entries' settings are listed "
        "below); the chosen entry's are used.", kind="entry_settings", entry_field="positional_encoding",
        settings_of=POSITIONAL_ENCODINGS.settings_classes, resume=_MODEL, old_run_value={})
    layer_norm_position: str = setting("post", "post: LayerNorm(x + Dropout(Sublayer(x))) as in the paper; pre: "
                                       "before the sublayer.", choices=LAYER_NORM_POSITIONS, resume=_MODEL)
    normalization: str = setting("layer_norm", "The sublayers' normalisation: layer_norm (the paper's), rms_norm, "
                                 "batch_norm or none (docs/normalization.md).", choices=_normalization_names,
                                 resume=_MODEL, old_run_value="layer_norm")
    normalization_settings: Any = setting(
        None, "The normalisations' own settings, by entry (none of the built-in ones has any).",
        kind="entry_settings", entry_field="normalization", settings_of=NORMALIZATIONS.settings_classes,
        resume=_MODEL, old_run_value={})
    residual_connections: bool = setting(True, "x + Sublayer(x) around every sublayer (3.1); False drops the x "
                                         "(docs/normalization.md).", resume=_MODEL, old_run_value=True)
    share_embeddings: bool = setting(True, "One matrix for encoder input, decoder input and pre-softmax "
                                     "projection (3.4).", resume=_MODEL)
    attention_implementation: str = setting("einsum", "How dot-product attention is computed.",
                                            choices=attention_registry.ATTENTION_IMPLEMENTATIONS,
                                            resume=_COMPUTE)
    attention_window: int = setting(0, "0: full attention; r > 0: self-attention within |i - j| <= r "
                                    "(Table 1).", **NON_NEGATIVE, resume=_MODEL)
    attention_function: str = setting("scaled_dot_product", "How each head scores keys (3.2.1).",
                                      choices=_attention_function_names, resume=_MODEL,
                                      old_run_value="scaled_dot_product")
    attention_function_settings: Any = setting(
        None, "The attention functions' own settings, by entry (none of the built-in ones has any).",
        kind="entry_settings", entry_field="attention_function",
        settings_of=attention_registry.ATTENTION_FUNCTIONS.settings_classes, resume=_MODEL, old_run_value={})
    dtype: str = setting("float32", "Compute dtype (parameters stay float32).", choices=DTYPES, resume=_COMPUTE)
    cpu_kernels: bool = setting(True, "CPU-only speed-ups of the hot paths (attention_jax/cpu_kernels).",
                                resume=_COMPUTE, old_run_value=True)
    vocab_size: int = setting(37000, "Rows of the shared embedding; the BPE vocabulary trained.", **POSITIVE,
                              resume=_MODEL)
    max_len: int = 512
    decode: bool = False

    def __post_init__(self) -> None:
        _validate(self)

    def replace(self, **changes: Any) -> "TransformerConfig":
        """Return a copy with ``changes`` applied (validated again).

        Parameters
        ----------
        **changes
            Fields and their new values. A change of entry (``positional_encoding="rotary"``) without its
            settings field takes the new entry's default settings; the old entry's do not carry over.

        Returns
        -------
        TransformerConfig
            The copy.
        """
        for entry_field, settings_field in ENTRY_SETTINGS_FIELDS.items():
            if changes.get(entry_field, getattr(self, entry_field)) != getattr(self, entry_field):
                changes.setdefault(settings_field, None)
        return dataclasses.replace(self, **changes)

    @property
    def compute_dtype(self) -> Any:
        """Look up the dtype of activations.

        Returns
        -------
        Any
            ``jnp.float32`` or ``jnp.bfloat16``.
        """
        import jax.numpy as jnp  # Here: configs, sweeps and reports build this class without loading JAX.

        return getattr(jnp, self.dtype)


def _validate(config: TransformerConfig) -> None:
    """Raise ``ValueError`` naming the first invalid field: its declaration's check, then the combinations."""
    positional_encodings.check_positional_encoding(config.positional_encoding)  # The registries name their own
    attention_registry.attention_function(config.attention_function)  # entries (with a did-you-mean).
    normalization_registry.check_normalization(config.normalization, position=config.layer_norm_position)
    feed_forward_registry.feed_forward(config.feed_forward)
    registries: dict[str, Any] = {"positional_encoding": POSITIONAL_ENCODINGS, "normalization": NORMALIZATIONS,
                                  "attention_function": attention_registry.ATTENTION_FUNCTIONS}
    for entry_field, settings_field in ENTRY_SETTINGS_FIELDS.items():
        name = getattr(config, entry_field)
        resolved = field_declarations.resolve(settings_field, name, registries[entry_field][name].settings,
                                          getattr(config, settings_field))
        object.__setattr__(config, settings_field, resolved)  # Frozen: set once, while it is built.
    check_declared(config, "model")
    if isinstance(config.max_len, bool) or not isinstance(config.max_len, numbers.Integral) or config.max_len <= 0:
        raise ValueError(f"max_len must be a positive integer; got {config.max_len!r}.")
    if not isinstance(config.decode, bool):
        raise ValueError(f"decode must be True or False; got {config.decode!r}.")
    for name in ("key_dim", "value_dim"):
        if getattr(config, name) == 0:  # The config's 0 (d_model / num_heads), resolved by build_experiment.
            raise ValueError(f"{name}=0 means d_model / num_heads in a config; a TransformerConfig needs the "
                             f"width itself: set {name}={config.d_model // max(config.num_heads, 1)}.")
    if config.attention_dropout_rate > 0 and config.attention_implementation != AttentionImplementation.EINSUM:
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

"""The config's sections, one frozen pydantic dataclass each: every config field (one with a description) once."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any

from annotated_types import Ge, Gt
from pydantic import Field

from attention_jax.experiment import fields
from attention_jax.experiment.fields import AS_TUPLE, BySettings, OneOf, Paper, ResumeRule, rule
from attention_jax.models import attention_registry, feed_forward_registry, normalization_registry, variants
from attention_jax.models.attention_registry import ATTENTION_FUNCTIONS, AttentionImplementation
from attention_jax.models.normalization_registry import NORMALIZATIONS
from attention_jax.models.positional_encodings import POSITIONAL_ENCODINGS, check_with_attention
from attention_jax.models.variants import LayerNormPosition, ModelKind

MODEL, COMPUTE, DATA = rule(ResumeRule.MODEL), rule(ResumeRule.COMPUTE), rule(ResumeRule.DATA)
ENTRY_SETTINGS_FIELDS = {registry.field: f"{registry.field}_settings"
                         for registry in (POSITIONAL_ENCODINGS, NORMALIZATIONS, ATTENTION_FUNCTIONS)}
"""Each field naming a registry entry, and the field of that entry's own settings."""


@fields.section
class ExperimentSettings:
    """The run's name, seed and kind of model, and the paper's figures."""

    name: str = Field(default="base", description="The run's name in reports and TensorBoard (a sweep sets the row's).")
    paper: Paper = Field(default=None, description="The paper's figures for this row (keys PAPER_FIGURES; None: none).")
    seed: int = Field(default=0, description="Parameter initialisation, dropout keys and batch order (32 bits: JAX "
                      "keys drop the higher ones).", ge=0, le=2**32 - 1, json_schema_extra=rule(ResumeRule.SEED))
    user_modules: Annotated[tuple[str, ...], AS_TUPLE] = Field(
        default=(), description="Python modules imported before the config is checked, where your own registry entries "
        "live (docs/extending.md).", json_schema_extra=rule(old_run_value=()))
    model_kind: Annotated[str, OneOf(variants.values(ModelKind))] = Field(
        default="encoder_decoder", description="The Transformer of the paper, or a decoder-only language model.",
        json_schema_extra=MODEL)


@fields.section
class TransformerConfig:
    """The Transformer's hyperparameters (Table 3); frozen, so decode and eval variants come from ``replace``.

    A ``*_settings`` field is given as None (the entry's defaults), its dataclass or ``{entry: {setting: value}}``.
    """

    num_layers: int = Field(
        default=6, description="N: layers of the encoder and of the decoder.", gt=0, json_schema_extra=MODEL)
    d_model: int = Field(
        default=512, description="Width of embeddings and sublayer outputs.", gt=0, json_schema_extra=MODEL)
    d_ff: int = Field(default=2048, description="Inner width of the position-wise feed-forward network.", gt=0,
                      json_schema_extra=MODEL)
    feed_forward: Annotated[str, OneOf(feed_forward_registry.FEED_FORWARDS)] = Field(
        default="relu", description="The feed-forward sublayer (3.3): relu (Eq. 2, the paper's), gelu, swish, or gated "
        "(Shazeer, 2020) glu, bilinear, reglu, geglu, swiglu.",
        json_schema_extra=rule(ResumeRule.MODEL, old_run_value="relu"))
    feed_forward_bias: bool = Field(
        default=True, description="Biases in the feed-forward layers, as Eq. 2 has them (False: none, as T5 and "
        "LLaMA).", json_schema_extra=rule(ResumeRule.MODEL, old_run_value=True))
    feed_forward_match_params: bool = Field(
        default=True, description="A gated feed-forward's hidden width is 2/3 d_ff rounded to a multiple of 8, its "
        "parameters within 1% of Eq. 2's (False: d_ff, 3/2 the parameters).",
        json_schema_extra=rule(ResumeRule.MODEL, old_run_value=True))
    num_heads: int = Field(default=8, description="h: attention heads.", gt=0, json_schema_extra=MODEL)
    key_dim: int = Field(
        default=64, description="d_k per head (0: d_model / num_heads).", ge=0, json_schema_extra=MODEL)
    value_dim: int = Field(
        default=64, description="d_v per head (0: d_model / num_heads).", ge=0, json_schema_extra=MODEL)
    dropout_rate: float = Field(default=0.1, description="P_drop on sublayer outputs and embeddings + positions (5.4).",
                                ge=0, lt=1, json_schema_extra=MODEL)
    attention_dropout_rate: float = Field(default=0.0, description="Dropout on attention weights (not in the paper).",
                                          ge=0, lt=1, json_schema_extra=MODEL)
    positional_encoding: Annotated[str, OneOf(POSITIONAL_ENCODINGS)] = Field(
        default="sinusoidal", description="How positions enter the model (3.5; Table 2 row E: learned; relative, "
        "rotary and alibi act in self-attention).", json_schema_extra=MODEL)
    positional_encoding_settings: Annotated[Any, BySettings(POSITIONAL_ENCODINGS)] = Field(
        default=None, description="The encodings' own settings, by entry: {entry: {setting: value}} (the entries' "
        "settings are listed below); the chosen entry's are used.",
        json_schema_extra=rule(ResumeRule.MODEL, old_run_value={}))
    layer_norm_position: Annotated[str, OneOf(variants.values(LayerNormPosition))] = Field(
        default="post", description="post: LayerNorm(x + Dropout(Sublayer(x))) as in the paper; pre: before the "
        "sublayer.", json_schema_extra=MODEL)
    normalization: Annotated[str, OneOf(NORMALIZATIONS)] = Field(
        default="layer_norm", description="The sublayers' normalisation: layer_norm (the paper's), rms_norm, "
        "batch_norm or none (docs/normalization.md).",
        json_schema_extra=rule(ResumeRule.MODEL, old_run_value="layer_norm"))
    normalization_settings: Annotated[Any, BySettings(NORMALIZATIONS)] = Field(
        default=None, description="The normalisations' own settings, by entry (none of the built-in ones has any).",
        json_schema_extra=rule(ResumeRule.MODEL, old_run_value={}))
    residual_connections: bool = Field(
        default=True, description="x + Sublayer(x) around every sublayer (3.1); False drops the x "
        "(docs/normalization.md).", json_schema_extra=rule(ResumeRule.MODEL, old_run_value=True))
    share_embeddings: bool = Field(default=True, description="One matrix for encoder input, decoder input and "
                                   "pre-softmax projection (3.4).", json_schema_extra=MODEL)
    attention_implementation: Annotated[str, OneOf(attention_registry.ATTENTION_IMPLEMENTATIONS)] = Field(
        default="einsum", description="How dot-product attention is computed.", json_schema_extra=COMPUTE)
    attention_window: int = Field(default=0, description="0: full attention; r > 0: self-attention within |i - j| <= r "
                                  "(Table 1).", ge=0, json_schema_extra=MODEL)
    attention_function: Annotated[str, OneOf(ATTENTION_FUNCTIONS)] = Field(
        default="scaled_dot_product", description="How each head scores keys (3.2.1).",
        json_schema_extra=rule(ResumeRule.MODEL, old_run_value="scaled_dot_product"))
    attention_function_settings: Annotated[Any, BySettings(ATTENTION_FUNCTIONS)] = Field(
        default=None, description="The attention functions' own settings, by entry (none of the built-in ones has "
        "any).", json_schema_extra=rule(ResumeRule.MODEL, old_run_value={}))
    dtype: Annotated[str, OneOf(("float32", "bfloat16"))] = Field(
        default="float32", description="Compute dtype (parameters stay float32).", json_schema_extra=COMPUTE)
    cpu_kernels: bool = Field(
        default=True, description="CPU-only speed-ups of the hot paths (attention_jax/cpu_kernels).",
        json_schema_extra=rule(ResumeRule.COMPUTE, old_run_value=True))
    vocab_size: int = Field(default=37000, description="Rows of the shared embedding; the BPE vocabulary trained.",
                            gt=0, json_schema_extra=MODEL)
    max_len: int = Field(default=512, gt=0)  # Positions held: the config's max_len plus max_decode_extra_len.
    decode: bool = False  # The autoregressive variant, whose decoder keeps a key/value cache.

    def __post_init__(self) -> None:
        """Check the fields that must go together."""
        normalization_registry.check_normalization(self.normalization, position=self.layer_norm_position)
        for name in ("key_dim", "value_dim"):
            if getattr(self, name) == 0:  # The config's 0 (d_model / num_heads), resolved by build_experiment.
                raise ValueError(f"{name}=0 means d_model / num_heads in a config; a TransformerConfig needs the "
                                 f"width itself: set {name}={self.d_model // max(self.num_heads, 1)}.")
        if self.attention_dropout_rate > 0 and self.attention_implementation != AttentionImplementation.EINSUM:
            raise ValueError(f"attention_dropout_rate={self.attention_dropout_rate} needs attention_implementation="
                             f"'einsum' (the fused kernels have no weight dropout); got "
                             f"{self.attention_implementation!r}.")
        attention_registry.check_attention_function(
            self.attention_function, implementation=self.attention_implementation, window=self.attention_window,
            attention_dropout_rate=self.attention_dropout_rate)
        check_with_attention(
            self.positional_encoding, attention_function=self.attention_function,
            implementation=self.attention_implementation, key_dim=self.key_dim)

    def replace(self, **changes: Any) -> TransformerConfig:
        """Return a checked copy with ``changes``; a new entry without its settings takes its defaults.

        Parameters
        ----------
        **changes
            Fields and their new values.

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
        """Return the dtype of activations, ``jnp.float32`` or ``jnp.bfloat16``.

        Returns
        -------
        Any
            The jnp dtype.
        """
        import jax.numpy as jnp  # Here: configs, sweeps and reports build this class without loading JAX.

        return getattr(jnp, self.dtype)


@fields.section
class DataConfig:
    """Corpus, splits, tokenizer and batches (Section 5.1)."""

    vocab_size: int  # The model section's.
    fine_tune_from: str  # A run whose tokenizer.model tokenizes this data ("": train one).
    corpus: str = Field(default="", description="The corpus recipe this run follows ('' for none; "
                        "attention_jax.data.corpora).", json_schema_extra=rule(old_run_value=""))
    dataset: str = Field(default="wmt14_translate/de-en", description="TFDS name, 'synthetic_en_de', 'tsv:DIR' or "
                         "'txt:DIR' (a language model's corpus).", json_schema_extra=DATA)
    source_lang: str = Field(default="en", description="Source language code.", json_schema_extra=DATA)
    target_lang: str = Field(default="de", description="Target language code.", json_schema_extra=DATA)
    train_split: str = Field(default="train", description="Training split (TFDS slicing such as 'train[:4000]' works).",
                             json_schema_extra=DATA)
    eval_split: str = Field(default="validation", description="Dev split (newstest2013 in TFDS wmt14_translate).")
    test_split: str = Field(default="test", description="Test split (newstest2014).")
    data_dir: str = Field(default="", description="TFDS data directory ('': "
                          "$ATTENTION_JAX_CACHE_DIR/tensorflow_datasets, else TFDS's default).")
    text_feature: str = Field(default="text", description="A language model's TFDS text feature.",
                              json_schema_extra=rule(old_run_value="text"))
    max_len: int = Field(default=256, description="Longest example kept for training, in tokens with EOS.", gt=0,
                         json_schema_extra=rule(ResumeRule.POSITIONS))
    tokens_per_batch: int = Field(default=25000, description="Tokens per side of a batch (5.1).", gt=0)
    tokens_per_batch_unit: Annotated[str, OneOf(("slots", "real"))] = Field(
        default="real", description="real: the pairs' own tokens (the paper); slots: rows x padded length.",
        json_schema_extra=rule(old_run_value="slots"))
    packing: bool = Field(default=False, description="Several pairs per training row, attending within their own pair.")
    packing_row_lengths: Annotated[tuple[Annotated[int, Gt(0)], ...], AS_TUPLE] = Field(
        default=(), description="Packed row lengths ending in max_len (): 3/8, 3/4 and all of max_len).")
    tokenizer_max_sentences: int = Field(
        default=2_000_000, description="Sentences (both sides) that train the BPE model.", gt=0, json_schema_extra=DATA)
    data_threads: int = Field(default=2, description="Grain reader threads.", gt=0)


class LearningRateSchedule(enum.StrEnum):
    """``lr_schedule``: both peak at ``scale (d_model warmup)^-0.5`` and decay as ``step^-0.5`` after."""

    PAPER = "paper"  # Equation 3: a linear ramp to the peak at warmup_steps.
    CONSTANT_THEN_INVERSE_SQRT = "constant_then_inverse_sqrt"  # The peak from step 1 (Xiong et al., 2020).


@fields.section
class OptimizerConfig:
    """Adam, the learning-rate schedule and the loss (Sections 5.3-5.4)."""

    d_model: int  # The model section's: the schedule scales by it.
    warmup_steps: int = Field(default=4000, description="Warm-up of the learning-rate schedule (5.3).", gt=0)
    lr_schedule: Annotated[str, OneOf(variants.values(LearningRateSchedule))] = Field(
        default="paper", description="paper: Equation 3, a linear ramp to the peak at warmup_steps; "
        "constant_then_inverse_sqrt: that peak from step 1, the same decay after warmup_steps.",
        json_schema_extra=rule(ResumeRule.SCHEDULE, old_run_value="paper"))
    learning_rate_scale: float = Field(default=1.0, description="Multiplies d_model^-0.5 * min(step^-0.5, step * "
                                       "warmup^-1.5) (0: parameters never move).", ge=0)
    adam_b1: float = Field(default=0.9, description="Adam beta_1.", ge=0, lt=1)
    adam_b2: float = Field(default=0.98, description="Adam beta_2.", ge=0, lt=1)
    adam_eps: float = Field(default=1e-9, description="Adam epsilon.", gt=0)
    grad_accum_steps: int = Field(default=1, description="Micro-batches per optimizer step.", gt=0)
    label_smoothing: float = Field(default=0.1, description="eps_ls (5.4).", ge=0, lt=1)
    grad_clip_norm: float = Field(
        default=0.0, description="Clips the gradient to this global L2 norm before Adam (0: off, as in the paper).",
        ge=0, json_schema_extra=rule(ResumeRule.OPTIMIZER_STATE, old_run_value=0.0))
    weight_decay: float = Field(default=0.0, description="Decoupled weight decay (AdamW) on the matrices, not on "
                                "biases or layer-norm parameters (0: off, as in the paper).", ge=0,
                                json_schema_extra=rule(ResumeRule.OPTIMIZER_STATE, old_run_value=0.0))
    dropout_rng: Annotated[str, OneOf(("threefry", "rbg"))] = Field(
        default="threefry", description="Dropout masks' generator (rbg: XLA's, depends on the mesh).")


@fields.section
class DecodeSettings:
    """Decoding of Section 6.1 (``cache_stages``: ``docs/benchmarks.md``, "History: growing the cache in stages")."""

    beam_size: int = Field(default=4, description="Beams kept per sentence (1: greedy).", gt=0)
    length_penalty_alpha: float = Field(default=0.6, description="GNMT length penalty ((5 + |Y|) / 6) ** alpha.", ge=0)
    max_decode_extra_len: int = Field(default=50, description="Outputs hold at most input length + this.", gt=0,
                                      json_schema_extra=rule(ResumeRule.POSITIONS))
    cache_stages: int = Field(default=2, description="Stages in which the key/value cache grows.", gt=0,
                              json_schema_extra=rule(old_run_value=2))

    @property
    def method(self) -> str:
        """The search's name.

        Returns
        -------
        str
            ``"greedy"`` for a beam of one, else ``"beam"``.
        """
        return "greedy" if self.beam_size == 1 else "beam"


@fields.section
class RunConfig:
    """Steps, parallelism, checkpoints, evaluation and logging of one training run."""

    num_train_steps: int = Field(default=100_000, description="Optimizer steps.", gt=0)
    compilation_cache_dir: str = Field(
        default="default", description="XLA compilation cache: 'default', '' (off) or a directory.")
    mesh_shape: Annotated[tuple[Annotated[int, Ge(-1)], ...], AS_TUPLE] = Field(
        default=(-1,), description="Sizes of the device mesh's axes (-1: the remaining devices).")
    mesh_axes: Annotated[tuple[str, ...], AS_TUPLE] = Field(default=("data",), description="Names of the mesh axes.")
    param_sharding: Annotated[str, OneOf(("replicated", "fsdp"))] = Field(
        default="replicated", description="replicated, or fsdp: parameters and optimizer state sharded on 'data'.")
    fine_tune_from: str = Field(
        default="", description="A run directory whose parameters and tokenizer a new run starts from ('' : from "
        "scratch).", json_schema_extra=rule(ResumeRule.DATA, old_run_value=""))
    fine_tune_checkpoint: str = Field(default="latest", description="Its parameters: latest, best, averaged or a step.",
                                      json_schema_extra=rule(old_run_value="latest"))
    checkpoint_every_steps: int = Field(default=0, description="Checkpoint interval in steps (0: by time only).", ge=0)
    checkpoint_every_minutes: float = Field(
        default=10.0, description="Checkpoint interval in minutes (0: by steps only).", ge=0)
    keep_checkpoints: int = Field(
        default=5, description="Checkpoints kept (the paper averages the last 5 or 20).", gt=0)
    average_last_checkpoints: int = Field(default=5, description="Checkpoints averaged for the final BLEU (6.1).", gt=0)
    log_every_steps: int = Field(default=100, description="Progress line interval.", gt=0)
    peak_tflops_per_device: float = Field(default=0.0, description="MFU's peak (0: a datasheet's, or measured on a "
                                          "CPU).", ge=0, json_schema_extra=rule(old_run_value=0.0))
    profile_steps: int = Field(default=0, description="Train steps traced for TensorBoard's profiler (0: none).", ge=0)
    profile_start_step: int = Field(default=10, description="Steps before the trace starts.", ge=0)
    eval_every_steps: int = Field(default=1000, description="Dev evaluation interval (0: none during training).", ge=0)
    num_eval_batches: int = Field(default=0, description="Dev batches per evaluation (0: the whole split).", ge=0)
    num_bleu_examples: int = Field(
        default=500, description="Dev sentences decoded for the sampled BLEU (0: none).", ge=0)
    num_sample_translations: int = Field(default=3, description="Dev translations shown in TensorBoard (0: none).",
                                         ge=0, json_schema_extra=rule(old_run_value=3))
    final_bleu: bool = Field(default=True, description="Beam-search BLEU of whole splits when training ends.")
    final_bleu_splits: Annotated[tuple[Annotated[str, OneOf(("dev", "validation", "test"))], ...], AS_TUPLE] = Field(
        default=("dev", "test"), description="Which splits the final BLEU decodes.")
    early_stopping_patience: int = Field(
        default=0, description="Evaluations without a better dev perplexity before stopping (0: never).", ge=0)
    early_stopping_min_improvement: float = Field(
        default=0.0, description="Smallest relative improvement that resets the patience.", ge=0, lt=1)
    early_stopping_min_steps: int = Field(default=0, description="Evaluations before this step never count toward "
                                          "patience.", ge=0, json_schema_extra=rule(old_run_value=0))

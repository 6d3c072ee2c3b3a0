"""The config's sections, one frozen pydantic dataclass each: every config field (one with a description) once."""

from __future__ import annotations

import dataclasses
import enum
from typing import Annotated, Any

from annotated_types import Ge, Gt
from pydantic import Field

from attention_jax.experiment import fields
from attention_jax.experiment.fields import AS_TUPLE, BySettings, OldRuns, OneOf, Paper, ResumeRule
from attention_jax.models import attention_registry, feed_forward_registry, normalization_registry, variants
from attention_jax.models.attention_registry import ATTENTION_FUNCTIONS, AttentionImplementation
from attention_jax.models.normalization_registry import NORMALIZATIONS
from attention_jax.models.positional_encodings import POSITIONAL_ENCODINGS, check_with_attention
from attention_jax.models.variants import LayerNormPosition, ModelKind

MODEL, COMPUTE, DATA = ResumeRule.MODEL, ResumeRule.COMPUTE, ResumeRule.DATA
ENTRY_SETTINGS_FIELDS = {registry.field: f"{registry.field}_settings"
                         for registry in (POSITIONAL_ENCODINGS, NORMALIZATIONS, ATTENTION_FUNCTIONS)}
"""Each field naming a registry entry, and the field of that entry's own settings."""


@fields.section
class ExperimentSettings:
    """The run's name, seed and kind of model, and the paper's figures."""

    name: str = Field(default="base", description="The run's name in reports and TensorBoard (a sweep sets the row's).")
    paper: Paper = Field(default=None, description="The paper's figures for this row (keys PAPER_FIGURES; None: none).")
    seed: Annotated[int, ResumeRule.SEED] = Field(
        default=0, description="Parameter initialisation, dropout keys and batch order (32 bits: JAX keys drop the "
        "higher ones).", ge=0, le=2**32 - 1)
    user_modules: Annotated[tuple[str, ...], AS_TUPLE, OldRuns(())] = Field(
        default=(), description="Python modules imported before the config is checked, where your own registry entries "
        "live (docs/extending.md).")
    model_kind: Annotated[str, OneOf(variants.values(ModelKind)), MODEL] = Field(
        default="encoder_decoder", description="The Transformer of the paper, or a decoder-only language model.")


@fields.section
class TransformerConfig:
    """The Transformer's hyperparameters (Table 3); frozen, so decode and eval variants come from ``replace``.

    A ``*_settings`` field is given as None (the entry's defaults), its dataclass or ``{entry: {setting: value}}``.
    """

    num_layers: Annotated[int, MODEL] = Field(
        default=6, description="N: layers of the encoder and of the decoder.", gt=0)
    d_model: Annotated[int, MODEL] = Field(default=512, description="Width of embeddings and sublayer outputs.", gt=0)
    d_ff: Annotated[int, MODEL] = Field(
        default=2048, description="Inner width of the position-wise feed-forward network.", gt=0)
    feed_forward: Annotated[str, OneOf(feed_forward_registry.FEED_FORWARDS), MODEL, OldRuns("relu")] = Field(
        default="relu", description="The feed-forward sublayer (3.3): relu (Eq. 2, the paper's), gelu, swish, or gated "
        "(Shazeer, 2020) glu, bilinear, reglu, geglu, swiglu.")
    feed_forward_bias: Annotated[bool, MODEL, OldRuns(True)] = Field(
        default=True, description="Biases in the feed-forward layers, as Eq. 2 has them (False: none, as T5 and "
        "LLaMA).")
    feed_forward_match_params: Annotated[bool, MODEL, OldRuns(True)] = Field(
        default=True, description="A gated feed-forward's hidden width is 2/3 d_ff rounded to a multiple of 8, its "
        "parameters within 1% of Eq. 2's (False: d_ff, 3/2 the parameters).")
    num_heads: Annotated[int, MODEL] = Field(default=8, description="h: attention heads.", gt=0)
    key_dim: Annotated[int, MODEL] = Field(default=64, description="d_k per head (0: d_model / num_heads).", ge=0)
    value_dim: Annotated[int, MODEL] = Field(default=64, description="d_v per head (0: d_model / num_heads).", ge=0)
    dropout_rate: Annotated[float, MODEL] = Field(
        default=0.1, description="P_drop on sublayer outputs and embeddings + positions (5.4).", ge=0, lt=1)
    attention_dropout_rate: Annotated[float, MODEL] = Field(
        default=0.0, description="Dropout on attention weights (not in the paper).", ge=0, lt=1)
    positional_encoding: Annotated[str, OneOf(POSITIONAL_ENCODINGS), MODEL] = Field(
        default="sinusoidal", description="How positions enter the model (3.5; Table 2 row E: learned; relative, "
        "rotary and alibi act in self-attention).")
    positional_encoding_settings: Annotated[Any, BySettings(POSITIONAL_ENCODINGS), MODEL, OldRuns({})] = Field(
        default=None, description="The encodings' own settings, by entry: {entry: {setting: value}} (the entries' "
        "settings are listed below); the chosen entry's are used.")
    layer_norm_position: Annotated[str, OneOf(variants.values(LayerNormPosition)), MODEL] = Field(
        default="post", description="post: LayerNorm(x + Dropout(Sublayer(x))) as in the paper; pre: before the "
        "sublayer.")
    normalization: Annotated[str, OneOf(NORMALIZATIONS), MODEL, OldRuns("layer_norm")] = Field(
        default="layer_norm", description="The sublayers' normalisation: layer_norm (the paper's), rms_norm, "
        "batch_norm or none (docs/normalization.md).")
    normalization_settings: Annotated[Any, BySettings(NORMALIZATIONS), MODEL, OldRuns({})] = Field(
        default=None, description="The normalisations' own settings, by entry (none of the built-in ones has any).")
    residual_connections: Annotated[bool, MODEL, OldRuns(True)] = Field(
        default=True, description="x + Sublayer(x) around every sublayer (3.1); False drops the x "
        "(docs/normalization.md).")
    share_embeddings: Annotated[bool, MODEL] = Field(
        default=True, description="One matrix for encoder input, decoder input and pre-softmax projection (3.4).")
    attention_implementation: Annotated[str, OneOf(attention_registry.ATTENTION_IMPLEMENTATIONS), COMPUTE] = Field(
        default="einsum", description="How dot-product attention is computed.")
    attention_window: Annotated[int, MODEL] = Field(
        default=0, description="0: full attention; r > 0: self-attention within |i - j| <= r (Table 1).", ge=0)
    attention_function: Annotated[str, OneOf(ATTENTION_FUNCTIONS), MODEL, OldRuns("scaled_dot_product")] = Field(
        default="scaled_dot_product", description="How each head scores keys (3.2.1).")
    attention_function_settings: Annotated[Any, BySettings(ATTENTION_FUNCTIONS), MODEL, OldRuns({})] = Field(
        default=None, description="The attention functions' own settings, by entry (none of the built-in ones has "
        "any).")
    dtype: Annotated[str, OneOf(("float32", "bfloat16")), COMPUTE] = Field(
        default="float32", description="Compute dtype (parameters stay float32).")
    cpu_kernels: Annotated[bool, COMPUTE, OldRuns(True)] = Field(
        default=True, description="CPU-only speed-ups of the hot paths (attention_jax/cpu_kernels).")
    vocab_size: Annotated[int, MODEL] = Field(
        default=37000, description="Rows of the shared embedding; the BPE vocabulary trained.", gt=0)
    max_len: int = Field(default=512, gt=0)  # Positions held: the config's max_len plus max_decode_extra_len.
    decode: bool = False  # The autoregressive variant, whose decoder keeps a key/value cache.

    def __post_init__(self) -> None:
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
    corpus: Annotated[str, OldRuns("")] = Field(
        default="", description="The corpus recipe this run follows ('' for none; attention_jax.data.corpora).")
    dataset: Annotated[str, DATA] = Field(default="wmt14_translate/de-en", description="TFDS name, 'synthetic_en_de', "
                                          "'tsv:DIR' or 'txt:DIR' (a language model's corpus).")
    source_lang: Annotated[str, DATA] = Field(default="en", description="Source language code.")
    target_lang: Annotated[str, DATA] = Field(default="de", description="Target language code.")
    train_split: Annotated[str, DATA] = Field(
        default="train", description="Training split (TFDS slicing such as 'train[:4000]' works).")
    eval_split: str = Field(default="validation", description="Dev split (newstest2013 in TFDS wmt14_translate).")
    test_split: str = Field(default="test", description="Test split (newstest2014).")
    data_dir: str = Field(default="", description="TFDS data directory ('': "
                          "$ATTENTION_JAX_CACHE_DIR/tensorflow_datasets, else TFDS's default).")
    text_feature: Annotated[str, OldRuns("text")] = Field(
        default="text", description="A language model's TFDS text feature.")
    max_len: Annotated[int, ResumeRule.POSITIONS] = Field(
        default=256, description="Longest example kept for training, in tokens with EOS.", gt=0)
    tokens_per_batch: int = Field(default=25000, description="Tokens per side of a batch (5.1).", gt=0)
    tokens_per_batch_unit: Annotated[str, OneOf(("slots", "real")), OldRuns("slots")] = Field(
        default="real", description="real: the pairs' own tokens (the paper); slots: rows x padded length.")
    packing: bool = Field(default=False, description="Several pairs per training row, attending within their own pair.")
    packing_row_lengths: Annotated[tuple[Annotated[int, Gt(0)], ...], AS_TUPLE] = Field(
        default=(), description="Packed row lengths ending in max_len (): 3/8, 3/4 and all of max_len).")
    tokenizer_max_sentences: Annotated[int, DATA] = Field(
        default=2_000_000, description="Sentences (both sides) that train the BPE model.", gt=0)
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
    lr_schedule: Annotated[
        str, OneOf(variants.values(LearningRateSchedule)), ResumeRule.SCHEDULE, OldRuns("paper")] = Field(
        default="paper", description="paper: Equation 3, a linear ramp to the peak at warmup_steps; "
        "constant_then_inverse_sqrt: that peak from step 1, the same decay after warmup_steps.")
    learning_rate_scale: float = Field(default=1.0, description="Multiplies d_model^-0.5 * min(step^-0.5, step * "
                                       "warmup^-1.5) (0: parameters never move).", ge=0)
    adam_b1: float = Field(default=0.9, description="Adam beta_1.", ge=0, lt=1)
    adam_b2: float = Field(default=0.98, description="Adam beta_2.", ge=0, lt=1)
    adam_eps: float = Field(default=1e-9, description="Adam epsilon.", gt=0)
    grad_accum_steps: int = Field(default=1, description="Micro-batches per optimizer step.", gt=0)
    label_smoothing: float = Field(default=0.1, description="eps_ls (5.4).", ge=0, lt=1)
    grad_clip_norm: Annotated[float, ResumeRule.OPTIMIZER_STATE, OldRuns(0.0)] = Field(
        default=0.0, description="Clips the gradient to this global L2 norm before Adam (0: off, as in the paper).",
        ge=0)
    weight_decay: Annotated[float, ResumeRule.OPTIMIZER_STATE, OldRuns(0.0)] = Field(
        default=0.0, description="Decoupled weight decay (AdamW) on the matrices, not on biases or layer-norm "
        "parameters (0: off, as in the paper).", ge=0)
    dropout_rng: Annotated[str, OneOf(("threefry", "rbg"))] = Field(
        default="threefry", description="Dropout masks' generator (rbg: XLA's, depends on the mesh).")


@fields.section
class DecodeSettings:
    """Decoding of Section 6.1 (``cache_stages``: ``docs/benchmarks.md``, "History: growing the cache in stages")."""

    beam_size: int = Field(default=4, description="Beams kept per sentence (1: greedy).", gt=0)
    length_penalty_alpha: float = Field(default=0.6, description="GNMT length penalty ((5 + |Y|) / 6) ** alpha.", ge=0)
    max_decode_extra_len: Annotated[int, ResumeRule.POSITIONS] = Field(
        default=50, description="Outputs hold at most input length + this.", gt=0)
    cache_stages: Annotated[int, OldRuns(2)] = Field(
        default=2, description="Stages in which the key/value cache grows.", gt=0)

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
    fine_tune_from: Annotated[str, DATA, OldRuns("")] = Field(
        default="", description="A run directory whose parameters and tokenizer a new run starts from ('' : from "
        "scratch).")
    fine_tune_checkpoint: Annotated[str, OldRuns("latest")] = Field(
        default="latest", description="Its parameters: latest, best, averaged or a step.")
    checkpoint_every_steps: int = Field(default=0, description="Checkpoint interval in steps (0: by time only).", ge=0)
    checkpoint_every_minutes: float = Field(
        default=10.0, description="Checkpoint interval in minutes (0: by steps only).", ge=0)
    keep_checkpoints: int = Field(
        default=5, description="Checkpoints kept (the paper averages the last 5 or 20).", gt=0)
    average_last_checkpoints: int = Field(default=5, description="Checkpoints averaged for the final BLEU (6.1).", gt=0)
    log_every_steps: int = Field(default=100, description="Progress line interval.", gt=0)
    peak_tflops_per_device: Annotated[float, OldRuns(0.0)] = Field(
        default=0.0, description="MFU's peak (0: a datasheet's, or measured on a CPU).", ge=0)
    profile_steps: int = Field(default=0, description="Train steps traced for TensorBoard's profiler (0: none).", ge=0)
    profile_start_step: int = Field(default=10, description="Steps before the trace starts.", ge=0)
    eval_every_steps: int = Field(default=1000, description="Dev evaluation interval (0: none during training).", ge=0)
    num_eval_batches: int = Field(default=0, description="Dev batches per evaluation (0: the whole split).", ge=0)
    num_bleu_examples: int = Field(
        default=500, description="Dev sentences decoded for the sampled BLEU (0: none).", ge=0)
    num_sample_translations: Annotated[int, OldRuns(3)] = Field(
        default=3, description="Dev translations shown in TensorBoard (0: none).", ge=0)
    final_bleu: bool = Field(default=True, description="Beam-search BLEU of whole splits when training ends.")
    final_bleu_splits: Annotated[tuple[Annotated[str, OneOf(("dev", "validation", "test"))], ...], AS_TUPLE] = Field(
        default=("dev", "test"), description="Which splits the final BLEU decodes.")
    early_stopping_patience: int = Field(
        default=0, description="Evaluations without a better dev perplexity before stopping (0: never).", ge=0)
    early_stopping_min_improvement: float = Field(
        default=0.0, description="Smallest relative improvement that resets the patience.", ge=0, lt=1)
    early_stopping_min_steps: Annotated[int, OldRuns(0)] = Field(
        default=0, description="Evaluations before this step never count toward patience.", ge=0)

"""The experiment, optimizer and run sections: each config field declared once, with its meaning and range.

The model (:mod:`attention_jax.models.transformer_config`), data (:mod:`attention_jax.data.data_config`) and
decoding (:mod:`attention_jax.models.decode_settings`) sections are declared beside the code that uses them;
these three have no other home. :mod:`attention_jax.experiment.schema` collects every section's
declarations into the schema (:func:`attention_jax.foundation.field_declarations.setting`).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any

from attention_jax.foundation.field_declarations import (
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    ResumeRule,
    check_declared,
    setting,
)
from attention_jax.models import variants
from attention_jax.models.variants import ModelKind


@dataclasses.dataclass(frozen=True, kw_only=True)
class ExperimentSettings:
    """The experiment section: the run's name, seed and kind of model, and the paper's figures.

    Attributes
    ----------
    name, paper, seed, user_modules, model_kind
        Declared below, each with its meaning (``docs/config_fields.md`` lists them).
        :class:`attention_jax.experiment.sections.Experiment` holds them, ``paper`` as
        :class:`attention_jax.experiment.sections.PaperFigures`.
    """

    name: str = setting("base", "The run's name in reports and TensorBoard (a sweep sets the row's).")
    paper: Any = setting(None, "The paper's figures for this row (keys PAPER_FIGURES; None: none).", kind="paper")
    seed: int = setting(0, "Parameter initialisation, dropout keys and batch order (32 bits: JAX keys drop the "
                        "higher ones).", minimum=0, maximum=2**32 - 1, resume=ResumeRule.SEED)
    user_modules: tuple[str, ...] = setting((), "Python modules imported before the config is checked, where "
                                            "your own registry entries live (docs/extending.md).", old_run_value=())
    model_kind: str = setting("encoder_decoder", "The Transformer of the paper, or a decoder-only language model.",
                              choices=variants.values(ModelKind), resume=ResumeRule.MODEL)

    def __post_init__(self) -> None:
        """Check every declared field (:func:`attention_jax.foundation.field_declarations.check_declared`)."""
        check_declared(self, "experiment")


class LearningRateSchedule(enum.StrEnum):
    """``config.lr_schedule``: both peak at ``scale (d_model warmup)^-0.5`` and decay as ``step^-0.5`` after.

    Attributes
    ----------
    PAPER
        Equation 3: a linear ramp to the peak at ``warmup_steps``.
    CONSTANT_THEN_INVERSE_SQRT
        The peak from step 1: no warm-up at the same peak (Xiong et al., 2020).
    """

    PAPER = "paper"
    CONSTANT_THEN_INVERSE_SQRT = "constant_then_inverse_sqrt"


@dataclasses.dataclass(frozen=True, kw_only=True)
class OptimizerConfig:
    """Adam, the learning-rate schedule and the loss (Sections 5.3-5.4).

    Attributes
    ----------
    d_model : int
        The model width the schedule scales by (``d_model ** -0.5``): the model section's, copied.
    warmup_steps, lr_schedule, learning_rate_scale, adam_b1, adam_b2, adam_eps, grad_accum_steps, label_smoothing, \
grad_clip_norm, weight_decay, dropout_rng
        Declared below, each with its meaning and range (``docs/config_fields.md`` lists them).
    """

    d_model: int
    warmup_steps: int = setting(4000, "Warm-up of the learning-rate schedule (5.3).", **POSITIVE)
    lr_schedule: str = setting("paper", "paper: Equation 3, a linear ramp to the peak at warmup_steps; "
                               "constant_then_inverse_sqrt: that peak from step 1, the same decay after warmup_steps.",
                               choices=variants.values(LearningRateSchedule), resume=ResumeRule.SCHEDULE,
                               old_run_value="paper")
    learning_rate_scale: float = setting(1.0, "Multiplies d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) "
                                         "(0: parameters never move).", **NON_NEGATIVE)
    adam_b1: float = setting(0.9, "Adam beta_1.", **PROBABILITY)
    adam_b2: float = setting(0.98, "Adam beta_2.", **PROBABILITY)
    adam_eps: float = setting(1e-9, "Adam epsilon.", **POSITIVE)
    grad_accum_steps: int = setting(1, "Micro-batches per optimizer step.", **POSITIVE)
    label_smoothing: float = setting(0.1, "eps_ls (5.4).", **PROBABILITY)
    grad_clip_norm: float = setting(0.0, "Clips the gradient to this global L2 norm before Adam (0: off, as in "
                                    "the paper).", **NON_NEGATIVE, resume=ResumeRule.OPTIMIZER_STATE,
                                    old_run_value=0.0)
    weight_decay: float = setting(0.0, "Decoupled weight decay (AdamW) on the matrices, not on biases or "
                                  "layer-norm parameters (0: off, as in the paper).", **NON_NEGATIVE,
                                  resume=ResumeRule.OPTIMIZER_STATE, old_run_value=0.0)
    dropout_rng: str = setting("threefry", "Dropout masks' generator (rbg: XLA's, depends on the mesh).",
                               choices=("threefry", "rbg"))

    def __post_init__(self) -> None:
        """Check every declared field (:func:`attention_jax.foundation.field_declarations.check_declared`)."""
        check_declared(self, "optimizer")


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig:
    """Steps, parallelism, checkpoints, evaluation and logging of one training run.

    Attributes
    ----------
    num_train_steps, compilation_cache_dir, mesh_shape, mesh_axes, param_sharding, fine_tune_from, \
fine_tune_checkpoint, checkpoint_every_steps, checkpoint_every_minutes, keep_checkpoints, \
average_last_checkpoints, log_every_steps, peak_tflops_per_device, profile_steps, profile_start_step, \
eval_every_steps, num_eval_batches, num_bleu_examples, num_sample_translations, final_bleu, \
final_bleu_splits, early_stopping_patience, early_stopping_min_improvement, early_stopping_min_steps
        Declared below, each with its meaning and range (``docs/config_fields.md`` lists them).
    """

    num_train_steps: int = setting(100_000, "Optimizer steps.", **POSITIVE)
    compilation_cache_dir: str = setting("default", "XLA compilation cache: 'default', '' (off) or a directory.")
    mesh_shape: tuple[int, ...] = setting((-1,), "Sizes of the device mesh's axes (-1: the remaining devices).",
                                          minimum=-1)
    mesh_axes: tuple[str, ...] = setting(("data",), "Names of the mesh axes.")
    param_sharding: str = setting("replicated", "replicated, or fsdp: parameters and optimizer state sharded "
                                  "on 'data'.", choices=("replicated", "fsdp"))
    fine_tune_from: str = setting("", "A run directory whose parameters and tokenizer a new run starts from "
                                  "('' : from scratch).", resume=ResumeRule.DATA, old_run_value="")
    fine_tune_checkpoint: str = setting("latest", "Its parameters: latest, best, averaged or a step.",
                                        old_run_value="latest")
    checkpoint_every_steps: int = setting(0, "Checkpoint interval in steps (0: by time only).", **NON_NEGATIVE)
    checkpoint_every_minutes: float = setting(10.0, "Checkpoint interval in minutes (0: by steps only).",
                                              **NON_NEGATIVE)
    keep_checkpoints: int = setting(5, "Checkpoints kept (the paper averages the last 5 or 20).", **POSITIVE)
    average_last_checkpoints: int = setting(5, "Checkpoints averaged for the final BLEU (6.1).", **POSITIVE)
    log_every_steps: int = setting(100, "Progress line interval.", **POSITIVE)
    peak_tflops_per_device: float = setting(0.0, "MFU's peak (0: a datasheet's, or measured on a CPU).",
                                            **NON_NEGATIVE, old_run_value=0.0)
    profile_steps: int = setting(0, "Train steps traced for TensorBoard's profiler (0: none).", **NON_NEGATIVE)
    profile_start_step: int = setting(10, "Steps before the trace starts.", **NON_NEGATIVE)
    eval_every_steps: int = setting(1000, "Dev evaluation interval (0: none during training).", **NON_NEGATIVE)
    num_eval_batches: int = setting(0, "Dev batches per evaluation (0: the whole split).", **NON_NEGATIVE)
    num_bleu_examples: int = setting(500, "Dev sentences decoded for the sampled BLEU (0: none).", **NON_NEGATIVE)
    num_sample_translations: int = setting(3, "Dev translations shown in TensorBoard (0: none).", **NON_NEGATIVE,
                                           old_run_value=3)
    final_bleu: bool = setting(True, "Beam-search BLEU of whole splits when training ends.")
    final_bleu_splits: tuple[str, ...] = setting(("dev", "test"), "Which splits the final BLEU decodes.",
                                                 choices=("dev", "validation", "test"))
    early_stopping_patience: int = setting(0, "Evaluations without a better dev perplexity before stopping "
                                           "(0: never).", **NON_NEGATIVE)
    early_stopping_min_improvement: float = setting(0.0, "Smallest relative improvement that resets the "
                                                    "patience.", **PROBABILITY)
    early_stopping_min_steps: int = setting(0, "Evaluations before this step never count toward patience.",
                                            **NON_NEGATIVE, old_run_value=0)

    def __post_init__(self) -> None:
        """Check every declared field (:func:`attention_jax.foundation.field_declarations.check_declared`)."""
        check_declared(self, "run")

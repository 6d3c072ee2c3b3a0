"""Every field of an experiment config, in one table: its type, default, allowed values, meaning and section.

A config file's ``get_config()``, each row of a sweep and each ``--config.FIELD=VALUE`` flag set fields of
one flat config (``configs/base.py`` is :func:`default_config`, the paper's base model). Before anything
runs, :func:`check_config` compares all of it with :data:`FIELDS`: a key the table does not hold (with the
closest field's name), a value of the wrong type or one outside its range is one
:class:`ConfigError` line naming where it was set. A run's ``config.json`` keeps the same flat form;
:func:`with_old_run_defaults` is the one place that says what the fields added since an old run was
written meant for it.

Sections group the fields by what consumes them (:data:`SECTIONS`);
:func:`attention_jax.experiment.sections.build_experiment` turns a checked config into one frozen object
per section.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib
import math
import numbers
from typing import Any, Callable, Iterable, Mapping, TypedDict

from attention_jax.models import attention_registry, transformer_config
from attention_jax.user_errors import UserInputError

SECTIONS = ("experiment", "model", "data", "optimizer", "decoding", "run")
"""``experiment``: name, seed, model kind, the paper's figures; ``model``: the Transformer (Table 3);
``data``: corpus, tokenizer and batches (5.1); ``optimizer``: Adam, schedule and loss (5.3-5.4);
``decoding``: beam search (6.1); ``run``: steps, parallelism, checkpoints, evaluation and logging."""

PAPER_FIGURES = ("dev_ppl", "dev_bleu", "params_millions", "test_bleu", "train_flops", "train_hours",
                 "num_gpus", "gpu_tflops")
"""Keys of ``config.paper``: the paper's figures for the config's row (``None`` where it has none)."""


class ConfigError(UserInputError):
    """A config key or value that the schema refuses; the message is one line naming where and the fix."""


@dataclasses.dataclass(frozen=True)
class Field:
    """One config field.

    Attributes
    ----------
    name : str
        The key, as in ``--config.<name>`` and ``config.json``.
    section : str
        One of :data:`SECTIONS`.
    kind : str
        ``"int"``, ``"float"`` (an int is taken too), ``"bool"``, ``"str"``, ``"int_tuple"``,
        ``"str_tuple"`` (a list is taken for a tuple: ``config.json`` stores lists) or ``"paper"``.
    default : Any
        The paper's base-model value (``configs/base.py`` is the table's defaults).
    doc : str
        One line: what the field means.
    choices : tuple[str, ...] or callable, optional
        The allowed values of a ``"str"`` field, or of each item of a ``"str_tuple"``; a callable
        returns them (a registry's names, read when checked).
    minimum, maximum : float, optional
        The allowed range of a number (each item of an ``int_tuple``).
    exclusive_minimum, exclusive_maximum : bool
        Whether the bound itself is refused.
    """

    name: str
    section: str
    kind: str
    default: Any
    doc: str
    choices: tuple[str, ...] | Callable[[], Iterable[str]] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False

    def allowed(self) -> tuple[str, ...] | None:
        """The allowed string values, or None when any string is allowed."""
        if self.choices is None:
            return None
        return tuple(self.choices() if callable(self.choices) else self.choices)

    def range_text(self) -> str:
        """The range in words, e.g. ``"positive"``, ``">= 0"`` or ``"in [0, 100]"``; ``""`` when unbounded."""
        low, high = self.minimum, self.maximum
        if (low, high, self.exclusive_minimum, self.exclusive_maximum) == (0, 1, False, True):
            return "a probability in [0, 1)"
        if (low, high, self.exclusive_minimum) == (0, None, True):
            return "positive"
        if low is not None and high is not None:
            return (f"in {'(' if self.exclusive_minimum else '['}{_number(low)}, "
                    f"{_number(high)}{')' if self.exclusive_maximum else ']'}")
        if low is not None:
            return f"{'>' if self.exclusive_minimum else '>='} {_number(low)}"
        if high is not None:
            return f"{'<' if self.exclusive_maximum else '<='} {_number(high)}"
        return ""


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _attention_function_names() -> tuple[str, ...]:
    return tuple(attention_registry.ATTENTION_FUNCTIONS)


def _positional_encoding_names() -> tuple[str, ...]:
    return tuple(transformer_config.POSITIONAL_ENCODINGS)


def _normalization_names() -> tuple[str, ...]:
    return tuple(transformer_config.NORMALIZATIONS)


class _Range(TypedDict, total=False):
    """The range keywords of :class:`Field`, shared by many fields."""

    minimum: float
    maximum: float
    exclusive_minimum: bool
    exclusive_maximum: bool


_POSITIVE = _Range(minimum=0, exclusive_minimum=True)
_NON_NEGATIVE = _Range(minimum=0)
_PROBABILITY = _Range(minimum=0, maximum=1, exclusive_maximum=True)

FIELDS: tuple[Field, ...] = (
    # --- experiment ---------------------------------------------------------------------------------
    Field("name", "experiment", "str", "base", "The run's name in reports and TensorBoard (a sweep sets the row's)."),
    Field("paper", "experiment", "paper", None, "The paper's figures for this row (keys PAPER_FIGURES; None: none)."),
    Field("seed", "experiment", "int", 0, "Parameter initialisation, dropout keys and batch order (32 bits: JAX keys "
          "drop the higher ones).", minimum=0, maximum=2**32 - 1),
    Field("user_modules", "experiment", "str_tuple", (), "Python modules imported before the config is checked, "
          "where your own registry entries live (docs/extending.md)."),
    Field("model_kind", "experiment", "str", "encoder_decoder", "The Transformer of the paper, or a decoder-only "
          "language model.", choices=("encoder_decoder", "decoder_only")),
    # --- model (Section 3, Table 3) ------------------------------------------------------------------
    Field("num_layers", "model", "int", 6, "N: layers of the encoder and of the decoder.", **_POSITIVE),
    Field("d_model", "model", "int", 512, "Width of embeddings and sublayer outputs.", **_POSITIVE),
    Field("d_ff", "model", "int", 2048, "Inner width of the position-wise feed-forward network.", **_POSITIVE),
    Field("num_heads", "model", "int", 8, "h: attention heads.", **_POSITIVE),
    Field("key_dim", "model", "int", 64, "d_k per head (0: d_model / num_heads).", **_NON_NEGATIVE),
    Field("value_dim", "model", "int", 64, "d_v per head (0: d_model / num_heads).", **_NON_NEGATIVE),
    Field("dropout_rate", "model", "float", 0.1, "P_drop on sublayer outputs and embeddings + positions (5.4).",
          **_PROBABILITY),
    Field("attention_dropout_rate", "model", "float", 0.0, "Dropout on attention weights (not in the paper).",
          **_PROBABILITY),
    Field("positional_encoding", "model", "str", "sinusoidal", "How positions enter the model (3.5; Table 2 "
          "row E: learned; relative, rotary and alibi act in self-attention).", choices=_positional_encoding_names),
    Field("relative_max_distance", "model", "int", 16, "positional_encoding=relative: offsets clipped to [-k, k] "
          "(Shaw et al., 2018: k = 16).", minimum=1),
    Field("relative_values", "model", "bool", True, "positional_encoding=relative: also add the relative "
          "embeddings to the values (Shaw et al., Eq. 3)."),
    Field("layer_norm_position", "model", "str", "post", "post: LayerNorm(x + Dropout(Sublayer(x))) as in the "
          "paper; pre: before the sublayer.", choices=transformer_config.LAYER_NORM_POSITIONS),
    Field("normalization", "model", "str", "layer_norm", "The sublayers' normalisation: layer_norm (the paper's), "
          "rms_norm, batch_norm or none (docs/normalization.md).", choices=_normalization_names),
    Field("residual_connections", "model", "bool", True, "x + Sublayer(x) around every sublayer (3.1); False "
          "drops the x (docs/normalization.md)."),
    Field("share_embeddings", "model", "bool", True, "One matrix for encoder input, decoder input and "
          "pre-softmax projection (3.4)."),
    Field("attention_implementation", "model", "str", "einsum", "How dot-product attention is computed.",
          choices=attention_registry.ATTENTION_IMPLEMENTATIONS),
    Field("attention_window", "model", "int", 0, "0: full attention; r > 0: self-attention within |i - j| <= r "
          "(Table 1).", **_NON_NEGATIVE),
    Field("attention_function", "model", "str", "scaled_dot_product", "How each head scores keys (3.2.1).",
          choices=_attention_function_names),
    Field("dtype", "model", "str", "float32", "Compute dtype (parameters stay float32).",
          choices=transformer_config.DTYPES),
    Field("cpu_kernels", "model", "bool", True, "CPU-only speed-ups of the hot paths (attention_jax/cpu_kernels)."),
    Field("vocab_size", "model", "int", 37000, "Rows of the shared embedding; the BPE vocabulary trained.",
          **_POSITIVE),
    # --- data (Section 5.1) -------------------------------------------------------------------------
    Field("dataset", "data", "str", "wmt14_translate/de-en", "TFDS name, 'synthetic_en_de', 'tsv:DIR' or "
          "'txt:DIR' (a language model's corpus)."),
    Field("source_lang", "data", "str", "en", "Source language code."),
    Field("target_lang", "data", "str", "de", "Target language code."),
    Field("train_split", "data", "str", "train", "Training split (TFDS slicing such as 'train[:4000]' works)."),
    Field("eval_split", "data", "str", "validation", "Dev split (newstest2013 in TFDS wmt14_translate)."),
    Field("test_split", "data", "str", "test", "Test split (newstest2014)."),
    Field("data_dir", "data", "str", "", "TFDS data directory ('' : TFDS's default)."),
    Field("text_feature", "data", "str", "text", "A language model's TFDS text feature."),
    Field("max_len", "data", "int", 256, "Longest example kept for training, in tokens with EOS.", **_POSITIVE),
    Field("tokens_per_batch", "data", "int", 25000, "Tokens per side of a batch (5.1).", **_POSITIVE),
    Field("tokens_per_batch_unit", "data", "str", "real", "real: the pairs' own tokens (the paper); slots: rows "
          "x padded length.", choices=("slots", "real")),
    Field("packing", "data", "bool", False, "Several pairs per training row, attending within their own pair."),
    Field("packing_row_lengths", "data", "int_tuple", (), "Packed row lengths ending in max_len (): 3/8, 3/4 "
          "and all of max_len).", **_POSITIVE),
    Field("tokenizer_max_sentences", "data", "int", 2_000_000, "Sentences (both sides) that train the BPE "
          "model.", **_POSITIVE),
    Field("data_threads", "data", "int", 2, "Grain reader threads.", **_POSITIVE),
    # --- optimizer and loss (Sections 5.3-5.4) --------------------------------------------------------
    Field("warmup_steps", "optimizer", "int", 4000, "Warm-up of the learning-rate schedule (5.3).", **_POSITIVE),
    Field("learning_rate_scale", "optimizer", "float", 1.0, "Multiplies d_model^-0.5 * min(step^-0.5, "
          "step * warmup^-1.5) (0: parameters never move).", **_NON_NEGATIVE),
    Field("adam_b1", "optimizer", "float", 0.9, "Adam beta_1.", **_PROBABILITY),
    Field("adam_b2", "optimizer", "float", 0.98, "Adam beta_2.", **_PROBABILITY),
    Field("adam_eps", "optimizer", "float", 1e-9, "Adam epsilon.", **_POSITIVE),
    Field("grad_accum_steps", "optimizer", "int", 1, "Micro-batches per optimizer step.", **_POSITIVE),
    Field("label_smoothing", "optimizer", "float", 0.1, "eps_ls (5.4).", **_PROBABILITY),
    Field("grad_clip_norm", "optimizer", "float", 0.0, "Clips the gradient to this global L2 norm before Adam "
          "(0: off, as in the paper).", **_NON_NEGATIVE),
    Field("weight_decay", "optimizer", "float", 0.0, "Decoupled weight decay (AdamW) on the matrices, not on biases "
          "or layer-norm parameters (0: off, as in the paper).", **_NON_NEGATIVE),
    Field("dropout_rng", "optimizer", "str", "threefry", "Dropout masks' generator (rbg: XLA's, depends on "
          "the mesh).", choices=("threefry", "rbg")),
    # --- decoding (Section 6.1) -----------------------------------------------------------------------
    Field("beam_size", "decoding", "int", 4, "Beams kept per sentence (1: greedy).", **_POSITIVE),
    Field("length_penalty_alpha", "decoding", "float", 0.6, "GNMT length penalty ((5 + |Y|) / 6) ** alpha.",
          **_NON_NEGATIVE),
    Field("max_decode_extra_len", "decoding", "int", 50, "Outputs hold at most input length + this.", **_POSITIVE),
    Field("cache_stages", "decoding", "int", 2, "Stages in which the key/value cache grows.", **_POSITIVE),
    # --- run: steps, parallelism, checkpoints, evaluation, logging ------------------------------------
    Field("num_train_steps", "run", "int", 100_000, "Optimizer steps.", **_POSITIVE),
    Field("compilation_cache_dir", "run", "str", "default", "XLA compilation cache: 'default', '' (off) or a "
          "directory."),
    Field("mesh_shape", "run", "int_tuple", (-1,), "Sizes of the device mesh's axes (-1: the remaining "
          "devices).", minimum=-1),
    Field("mesh_axes", "run", "str_tuple", ("data",), "Names of the mesh axes."),
    Field("param_sharding", "run", "str", "replicated", "replicated, or fsdp: parameters and optimizer state "
          "sharded on 'data'.", choices=("replicated", "fsdp")),
    Field("fine_tune_from", "run", "str", "", "A run directory whose parameters and tokenizer a new run "
          "starts from ('' : from scratch)."),
    Field("fine_tune_checkpoint", "run", "str", "latest", "Its parameters: latest, best, averaged or a step."),
    Field("checkpoint_every_steps", "run", "int", 0, "Checkpoint interval in steps (0: by time only).",
          **_NON_NEGATIVE),
    Field("checkpoint_every_minutes", "run", "float", 10.0, "Checkpoint interval in minutes (0: by steps only).",
          **_NON_NEGATIVE),
    Field("keep_checkpoints", "run", "int", 5, "Checkpoints kept (the paper averages the last 5 or 20).",
          **_POSITIVE),
    Field("average_last_checkpoints", "run", "int", 5, "Checkpoints averaged for the final BLEU (6.1).",
          **_POSITIVE),
    Field("log_every_steps", "run", "int", 100, "Progress line interval.", **_POSITIVE),
    Field("peak_tflops_per_device", "run", "float", 0.0, "MFU's peak (0: a datasheet's, or measured on a "
          "CPU).", **_NON_NEGATIVE),
    Field("profile_steps", "run", "int", 0, "Train steps traced for TensorBoard's profiler (0: none).",
          **_NON_NEGATIVE),
    Field("profile_start_step", "run", "int", 10, "Steps before the trace starts.", **_NON_NEGATIVE),
    Field("eval_every_steps", "run", "int", 1000, "Dev evaluation interval (0: none during training).",
          **_NON_NEGATIVE),
    Field("num_eval_batches", "run", "int", 0, "Dev batches per evaluation (0: the whole split).",
          **_NON_NEGATIVE),
    Field("num_bleu_examples", "run", "int", 500, "Dev sentences decoded for the sampled BLEU (0: none).",
          **_NON_NEGATIVE),
    Field("num_sample_translations", "run", "int", 3, "Dev translations shown in TensorBoard (0: none).",
          **_NON_NEGATIVE),
    Field("final_bleu", "run", "bool", True, "Beam-search BLEU of whole splits when training ends."),
    Field("final_bleu_splits", "run", "str_tuple", ("dev", "test"), "Which splits the final BLEU decodes.",
          choices=("dev", "validation", "test")),
    Field("early_stopping_patience", "run", "int", 0, "Evaluations without a better dev perplexity before "
          "stopping (0: never).", **_NON_NEGATIVE),
    Field("early_stopping_min_improvement", "run", "float", 0.0, "Smallest relative improvement that resets "
          "the patience.", **_PROBABILITY),
    Field("early_stopping_min_steps", "run", "int", 0, "Evaluations before this step never count toward "
          "patience.", **_NON_NEGATIVE),
)
"""The schema: every field a config may set, in the order ``configs/base.py`` documents them."""

FIELDS_BY_NAME: Mapping[str, Field] = {field.name: field for field in FIELDS}


def default_config() -> dict[str, Any]:
    """The paper's base model as a flat dict: every field at its default.

    Returns
    -------
    dict[str, Any]
        ``{name: default}`` for every field of :data:`FIELDS` (``paper`` with every figure ``None``).
    """
    config = {field.name: field.default for field in FIELDS}
    config["paper"] = dict.fromkeys(PAPER_FIGURES)
    return config


def section_fields(section: str) -> tuple[str, ...]:
    """The names of the fields of one section, in the table's order.

    Parameters
    ----------
    section : str
        One of :data:`SECTIONS`.

    Returns
    -------
    tuple[str, ...]
        Field names.
    """
    if section not in SECTIONS:
        raise ValueError(f"unknown section {section!r}; the sections are {', '.join(SECTIONS)}.")
    return tuple(field.name for field in FIELDS if field.section == section)


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """A hint naming the closest candidate, e.g. ``" (did you mean num_heads?)"``; ``""`` when none is close.

    Parameters
    ----------
    name : str
        The unknown name.
    candidates : Iterable[str]
        The known names.

    Returns
    -------
    str
        The hint, with a leading space, or an empty string.
    """
    closest = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {closest[0]}?)" if closest else ""


def _items(config: Any) -> list[tuple[str, Any]]:
    """The top-level ``(key, value)`` pairs of a ConfigDict, a FieldReference-free dict or a Mapping."""
    if hasattr(config, "items"):
        return list(config.items())
    raise ConfigError(f"a config must be a ConfigDict or a dict of fields; got {type(config).__name__}.")


def check_value(field: Field, value: Any) -> str | None:
    """Why ``value`` does not fit ``field``, or None when it does.

    Parameters
    ----------
    field : Field
        The schema's field.
    value : Any
        The value a config gives it.

    Returns
    -------
    str or None
        E.g. ``"num_heads must be an integer; got '8' (str)"``.
    """
    if field.kind == "paper":
        return _check_paper(value)
    if field.kind in ("int_tuple", "str_tuple"):
        if not isinstance(value, (tuple, list)):
            return f"{field.name} must be a tuple; got {value!r} ({type(value).__name__})"
        item_field = dataclasses.replace(field, kind=field.kind.split("_")[0])
        for item in value:
            problem = check_value(item_field, item)
            if problem:
                return f"{problem} (an item of {field.name}={tuple(value)!r})"
        return None
    problem = _check_type(field, value)
    if problem:
        return problem
    allowed = field.allowed()
    if allowed is not None and value not in allowed:
        return f"{field.name} must be one of {', '.join(allowed)}; got {value!r}{did_you_mean(str(value), allowed)}"
    if field.kind in ("int", "float") and not _in_range(field, value):
        return f"{field.name} must be {field.range_text()}; got {value!r}"
    return None


def _check_type(field: Field, value: Any) -> str | None:
    expected = {"int": "an integer", "float": "a number", "bool": "True or False", "str": "a string"}[field.kind]
    if field.kind == "bool":
        ok = isinstance(value, bool)
    elif field.kind == "int":
        ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    elif field.kind == "float":
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    else:
        ok = isinstance(value, str)
    return None if ok else f"{field.name} must be {expected}; got {value!r} ({type(value).__name__})"


def _in_range(field: Field, value: float) -> bool:
    if field.minimum is not None and (value < field.minimum or (field.exclusive_minimum and value == field.minimum)):
        return False
    if field.maximum is not None and (value > field.maximum or (field.exclusive_maximum and value == field.maximum)):
        return False
    return True


def _check_paper(value: Any) -> str | None:
    if value is None:
        return None
    if not hasattr(value, "items"):
        return f"paper must be a dict of the paper's figures; got {value!r}"
    for key, figure in value.items():
        if key not in PAPER_FIGURES:
            return (f"paper has no figure {key!r}{did_you_mean(key, PAPER_FIGURES)}; "
                    f"its keys: {', '.join(PAPER_FIGURES)}")
        if figure is not None and (isinstance(figure, bool) or not isinstance(figure, numbers.Real)):
            return f"paper.{key} must be a number or None; got {figure!r}"
    return None


def check_config(config: Any, where: str, *, complete: bool = True) -> None:
    """Check every key and value of a config against :data:`FIELDS`; raise one :class:`ConfigError` line.

    Parameters
    ----------
    config : ml_collections.ConfigDict or Mapping
        A whole config (a config file's ``get_config()`` with a row's overrides and the command-line
        flags applied), or a run's ``config.json`` after :func:`with_old_run_defaults`.
    where : str
        Where the config came from, named first in the message: e.g. ``"configs/my_sweep.py row
        heads2"`` or ``"--config=configs/tiny.py"``.
    complete : bool
        Whether every field must be there (False for a reader that needs only some of a run's fields,
        such as a report).

    Notes
    -----
    Raises :class:`ConfigError` for the first of: a key the schema does not know (with the closest
    field's name), a field the config lacks, a value of the wrong type, or a value outside its choices or
    range. Relations between fields (``packing`` needs full attention, say) are checked where the
    sections are built (:func:`attention_jax.experiment.sections.build_experiment`).
    """
    items = _items(config)
    import_user_modules(dict(items), where)
    for key, value in items:
        field = FIELDS_BY_NAME.get(key)
        if field is None:
            raise ConfigError(f"{where}: unknown config field {key!r}{did_you_mean(key, FIELDS_BY_NAME)}; "
                              f"the fields are listed in attention_jax/experiment/schema.py.")
        problem = check_value(field, value.to_dict() if hasattr(value, "to_dict") else value)
        if problem:
            raise ConfigError(f"{where}: {problem}.")
    missing = [field.name for field in FIELDS if field.name not in dict(items)]
    if complete and missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ConfigError(f"{where}: the config has no field {missing[0]}{more}; "
                          f"start a config file from configs/base.py's get_config().")


def check_keys(keys: Iterable[str], where: str) -> None:
    """Raise :class:`ConfigError` for the first key that is not a field (a row's or a flag's overrides).

    Parameters
    ----------
    keys : Iterable[str]
        Field names, possibly dotted (``paper.dev_ppl``).
    where : str
        Named first in the message.
    """
    for key in keys:
        top, _, rest = str(key).partition(".")
        field = FIELDS_BY_NAME.get(top)
        if field is None or (rest and field.kind != "paper") or (rest and rest not in PAPER_FIGURES):
            known = list(FIELDS_BY_NAME) + [f"paper.{figure}" for figure in PAPER_FIGURES]
            raise ConfigError(f"{where}: unknown config field {key!r}{did_you_mean(str(key), known)}; "
                              f"the fields are listed in attention_jax/experiment/schema.py.")


def parse_flag_value(key: str, text: str, where: str) -> Any:
    """A ``--config.<key>=<text>`` value as the field's type, the way the entry point's flags parse it.

    Parameters
    ----------
    key : str
        A field (``paper.<figure>`` for one of the paper's figures).
    text : str
        The value as written on the command line.
    where : str
        Named first in an error.

    Returns
    -------
    Any
        The value: the text itself for a string field, ``True``/``False`` for a boolean, else the Python
        literal it spells (a number, a tuple, ``None``).

    Notes
    -----
    Raises :class:`ConfigError` for text that is no literal of the field's kind; the value's range is
    checked with the rest of the config.
    """
    kind = "paper" if key.startswith("paper.") else FIELDS_BY_NAME[key].kind
    if kind == "str":
        return text
    if kind == "bool":
        words = {"true": True, "1": True, "false": False, "0": False}
        if text.strip().lower() not in words:
            raise ConfigError(f"{where}: {key} must be True or False; got {text!r}.")
        return words[text.strip().lower()]
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ConfigError(f"{where}: {key}={text!r} is not a {kind.replace('_', ' of ')} value.") from None
    return tuple(value) if isinstance(value, list) else value


def import_user_modules(config: Any, where: str) -> None:
    """Import the modules a config's ``user_modules`` names, so that their registry entries exist.

    Parameters
    ----------
    config : Mapping
        A config (its ``user_modules``, if any, is read).
    where : str
        Named first in an error.

    Notes
    -----
    A module registers its attention functions or positional encodings when imported
    (``docs/extending.md``); naming it in the config makes every command that reads the config (training,
    a sweep's launcher, ``evaluate`` and ``translate`` on the run) import it before the config's choices
    are checked, as fairseq's ``--user-dir`` does. Raises :class:`ConfigError` for a module that cannot be
    imported.
    """
    modules = config.get("user_modules") if hasattr(config, "get") else None
    if not isinstance(modules, (tuple, list)):
        return
    for name in modules:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}: user_modules must name Python modules; got {name!r}.")
        try:
            importlib.import_module(name)
        except ImportError as error:
            raise ConfigError(f"{where}: user_modules: cannot import {name!r} ({error}); put it on PYTHONPATH "
                              "or in the directory you run from.") from None


OLD_RUN_DEFAULTS: Mapping[str, Any] = {
    "attention_function": "scaled_dot_product",
    "cpu_kernels": True,
    "cache_stages": 2,
    "fine_tune_from": "",
    "fine_tune_checkpoint": "latest",
    "num_sample_translations": 3,
    "peak_tflops_per_device": 0.0,
    "early_stopping_min_steps": 0,
    "text_feature": "text",
    "tokens_per_batch_unit": "slots",
    "user_modules": (),
    "relative_max_distance": 16,
    "relative_values": True,
    "grad_clip_norm": 0.0,
    "weight_decay": 0.0,
    "normalization": "layer_norm",
    "residual_connections": True,
}
"""What each field added since the first runs were written means for a run whose ``config.json`` lacks it:
the behaviour that run had. ``tokens_per_batch_unit`` differs from today's default (``real``): runs from
before the field counted padded slots."""


def with_old_run_defaults(saved: Mapping[str, Any]) -> dict[str, Any]:
    """A run's saved config with the fields added since it was written, as that run behaved.

    Parameters
    ----------
    saved : Mapping[str, Any]
        A ``config.json`` as read (lists for tuples).

    Returns
    -------
    dict[str, Any]
        The same fields, plus :data:`OLD_RUN_DEFAULTS` for those it lacks, lists turned into tuples and
        ``paper`` completed with ``None`` for the figures it lacks.

    Notes
    -----
    The one place that knows the history of the schema: every reader of a run directory
    (``evaluate``, ``translate``, ``report``, resuming) goes through it. A field it does not know is
    left in place, for :func:`check_config` to name.
    """
    config: dict[str, Any] = {key: (tuple(value) if isinstance(value, list) else value) for key, value in saved.items()}
    for name, value in OLD_RUN_DEFAULTS.items():
        config.setdefault(name, value)
    paper = config.get("paper")
    given = dict(paper) if paper is not None and hasattr(paper, "items") else {}
    config["paper"] = {**dict.fromkeys(PAPER_FIGURES), **given}
    return config

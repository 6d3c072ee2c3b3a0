"""A checked config as typed, frozen sections, built once at a command's entry point (:func:`build_experiment`)."""

from __future__ import annotations

import dataclasses
import types
from typing import Any, Mapping

from attention_jax.data import batching, packing
from attention_jax.experiment import schema
from attention_jax.experiment.declarations import (
    ENTRY_SETTINGS_FIELDS,
    DataConfig,
    DecodeSettings,
    ExperimentSettings,
    LearningRateSchedule,
    OptimizerConfig,
    RunConfig,
    TransformerConfig,
)
from attention_jax.experiment.fields import PAPER_FIGURES
from attention_jax.experiment.schema import ConfigError, plain_fields
from attention_jax.foundation import run_files
from attention_jax.models import flops, size_limits
from attention_jax.models.variants import ModelKind

__all__ = ["PaperFigures", "Experiment", "ExperimentSettings", "TransformerConfig", "DataConfig", "OptimizerConfig",
           "LearningRateSchedule", "DecodeSettings", "RunConfig", "plain_fields", "build_experiment"]


PaperFigures = dataclasses.make_dataclass("PaperFigures", [(key, float | None, None) for key in PAPER_FIGURES],
                                          frozen=True)
"""The paper's figures for a config's row, one attribute per key of ``PAPER_FIGURES`` (None: the paper has none)."""


@dataclasses.dataclass(frozen=True)
class Experiment:
    """One checked experiment: the experiment section's fields, the other sections, and the flat config."""

    name: str
    seed: int
    model_kind: str
    paper: Any  # PaperFigures
    model: TransformerConfig
    data: DataConfig
    optimizer: OptimizerConfig
    decoding: DecodeSettings
    run: RunConfig
    fields: Mapping[str, Any] = dataclasses.field(repr=False, compare=False)

    def to_json_dict(self) -> dict[str, Any]:
        """Return :attr:`fields` as ``config.json`` stores them (tuples as lists).

        Returns
        -------
        dict[str, Any]
            A JSON-serialisable copy.
        """
        return {key: (list(value) if isinstance(value, tuple) else dict(value) if isinstance(value, Mapping) else
                      value) for key, value in self.fields.items()}

    def training_flops(self, target_tokens: float) -> float:
        """Return the model FLOPs of training on ``target_tokens`` target tokens (:func:`flops.training_flops`).

        Parameters
        ----------
        target_tokens : float
            Target-side tokens trained on.

        Returns
        -------
        float
            Forward and backward FLOPs, attention counted at the training ``max_len`` (no decoding margin).
        """
        return flops.training_flops(self.model, self.model_kind, target_tokens, self.data.max_len)


def build_experiment(config: Any, where: str) -> Experiment:
    """Check ``config`` against the schema and the relations between fields; build its sections.

    Parameters
    ----------
    config : Mapping
        A whole config, or a run's ``config.json`` after :func:`schema.with_old_run_defaults`.
    where : str
        Named first in an error, e.g. ``"--config=configs/tiny.py"``.

    Returns
    -------
    Experiment
        The checked, typed experiment.

    Raises
    ------
    ConfigError
        One line beginning with ``where``: an unknown key, a refused value, fields that do not go together.
    """
    fields = plain_fields(config)
    schema.check_config(fields, where)
    try:
        size_limits.check_sizes(fields, [field.name for field in schema.FIELDS  # 10**40 layers, refused at once;
                                         if field.kind in ("int", "int_tuple") and field.name != "seed"])  # 32 bits.
        _check_relations(fields)
        model = _section("model", fields, **_head_widths(fields),
                         max_len=fields["max_len"] + fields["max_decode_extra_len"])
        for entry_field, settings_field in ENTRY_SETTINGS_FIELDS.items():  # config.json: the chosen entry's.
            chosen = getattr(model, settings_field)
            fields[settings_field] = {getattr(model, entry_field): dataclasses.asdict(chosen)} if chosen else {}
        data = _section("data", fields, vocab_size=fields["vocab_size"], fine_tune_from=fields["fine_tune_from"])
        optimizer = _section("optimizer", fields, d_model=fields["d_model"])
        decoding, run, identity = (_section(section, fields) for section in ("decoding", "run", "experiment"))
    except ValueError as error:
        raise ConfigError(f"{where}: {error}") from None
    return Experiment(name=identity.name, seed=identity.seed, model_kind=identity.model_kind,
                      paper=PaperFigures(**(identity.paper or {})), model=model, data=data,
                      optimizer=optimizer, decoding=decoding, run=run, fields=types.MappingProxyType(fields))


def _section(section: str, fields: Mapping[str, Any], **derived: Any) -> Any:
    return schema.SECTION_CLASSES[section](**{**{name: fields[name] for name in schema.SECTION_FIELDS[section]},
                                              **derived})


def _head_widths(fields: Mapping[str, Any]) -> dict[str, int]:
    zero = [name for name in ("key_dim", "value_dim") if fields[name] == 0]  # The paper's d_k = d_v = d_model / h.
    if zero and fields["d_model"] % fields["num_heads"]:
        raise ValueError(f"{zero[0]}=0 means d_model / num_heads, but d_model={fields['d_model']} is not divisible "
                         f"by num_heads={fields['num_heads']}: set {zero[0]} explicitly or change num_heads.")
    return dict.fromkeys(zero, fields["d_model"] // fields["num_heads"])


def _check_relations(fields: Mapping[str, Any]) -> None:
    if fields["early_stopping_patience"] > 0 and fields["eval_every_steps"] <= 0:
        raise ValueError(f"early_stopping_patience={fields['early_stopping_patience']} needs dev evaluations "
                         "to count: set eval_every_steps > 0 (e.g. --config.eval_every_steps=500), or "
                         "early_stopping_patience=0.")
    if fields["packing"] and fields["attention_window"] > 0:
        raise ValueError(f"packing=True needs full attention, but attention_window={fields['attention_window']} "
                         "restricts self-attention with a blockwise mask that cannot take segment ids: set "
                         "--config.attention_window=0 or --config.packing=False.")
    if fields["packing"]:
        packing.check_row_lengths(fields["packing_row_lengths"], fields["max_len"])
    if fields["model_kind"] != ModelKind.DECODER_ONLY:  # A language model's batch holds a row whatever the budget.
        batching.make_bucket_shapes(fields["max_len"], fields["tokens_per_batch"], 1)  # One row of max_len fits.
    run_files.final_bleu_splits(fields["final_bleu_splits"])
    if len(fields["mesh_shape"]) != len(fields["mesh_axes"]):
        raise ValueError(f"mesh_shape={tuple(fields['mesh_shape'])} and mesh_axes={tuple(fields['mesh_axes'])} "
                         "must have one entry per mesh axis.")
    if "data" not in fields["mesh_axes"] or list(fields["mesh_shape"]).count(-1) > 1:
        raise ValueError(f"mesh_axes={tuple(fields['mesh_axes'])} must contain 'data' (batches are split over it), "
                         f"and at most one mesh_shape entry may be -1; got {tuple(fields['mesh_shape'])}.")
    if fields["model_kind"] == ModelKind.DECODER_ONLY:
        if fields["attention_window"] > 0:
            raise ValueError(f"model_kind='decoder_only' packs documents into rows with segment ids, which "
                             f"restricted attention (attention_window={fields['attention_window']}) cannot "
                             "take: set --config.attention_window=0.")
        if fields["num_bleu_examples"] > 0 or fields["final_bleu"]:
            raise ValueError(
                f"model_kind='decoder_only' has no source sentences to translate, but num_bleu_examples="
                f"{fields['num_bleu_examples']} and final_bleu={fields['final_bleu']} ask for BLEU: set "
                "--config.num_bleu_examples=0 --config.final_bleu=False (configs/lm_*.py do).")

"""The paper's configs: Table 2 rows build and run, parameter counts, CLI, and config errors."""

from __future__ import annotations

import json
import subprocess
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.commands import count_params
from attention_jax.experiment import sections
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.models import model
from configs import base, big, table2, tiny
from tests.support import reference

PAPER_ROW_ORDER = ["base", "A1", "A2", "A3", "A4", "B1", "B2", "C1", "C2", "C3", "C4", "C5", "C6", "C7",
                   "D1", "D2", "D3", "D4", "E", "big"]


def test_rows_are_the_papers_twenty_in_order() -> None:
    assert list(table2.ROW_NAMES) == PAPER_ROW_ORDER
    assert list(table2.get_sweep()) == PAPER_ROW_ORDER


def test_base_config_is_the_paper_base_model() -> None:
    config = base.get_config()
    assert (config.num_layers, config.d_model, config.d_ff, config.num_heads) == (6, 512, 2048, 8)
    assert (config.key_dim, config.value_dim, config.dropout_rate, config.label_smoothing) == (64, 64, 0.1, 0.1)
    assert (config.adam_b1, config.adam_b2, config.adam_eps, config.warmup_steps) == (0.9, 0.98, 1e-9, 4000)
    assert (config.beam_size, config.length_penalty_alpha, config.max_decode_extra_len) == (4, 0.6, 50)
    assert config.layer_norm_position == "post" and config.share_embeddings
    assert config.positional_encoding == "sinusoidal" and config.tokens_per_batch == 25000


def test_rows_change_only_their_fields() -> None:
    base_config = base.get_config().to_dict()
    expectations = {
        "A1": dict(num_heads=1, key_dim=512, value_dim=512), "B1": dict(key_dim=16),
        "C4": dict(d_model=256, key_dim=32, value_dim=32), "D3": dict(label_smoothing=0.0),
        "E": dict(positional_encoding="learned"),
        "big": dict(d_model=1024, d_ff=4096, num_heads=16, dropout_rate=0.3, num_train_steps=300_000,
                    keep_checkpoints=20, average_last_checkpoints=20),
    }
    for row, changes in expectations.items():
        config = table2.get_config(row).to_dict()
        differing = {key for key in base_config if key not in ("name", "paper")
                     and config[key] != base_config[key]}
        assert differing == set(changes), row
        assert all(config[key] == value for key, value in changes.items()), row
    assert table2.get_config("big").to_dict() == big.get_config().to_dict()


def _model(config) -> TransformerConfig:
    """The model section of ``config``, built as the entry point builds it."""
    return sections.build_experiment(config, "test").model


def _closed_form(config) -> int:
    cfg = _model(config)
    return reference.transformer_param_count(
        cfg.vocab_size, cfg.num_layers, cfg.d_model, cfg.d_ff, cfg.num_heads, cfg.key_dim, cfg.value_dim,
        share_embeddings=cfg.share_embeddings,
        learned_positions=cfg.max_len if cfg.positional_encoding == "learned" else 0,
        pre_norm=cfg.layer_norm_position == "pre")


@pytest.mark.reference
@pytest.mark.parametrize("row", PAPER_ROW_ORDER)
def test_parameter_count_matches_closed_form(row: str) -> None:
    config = table2.get_config(row)
    counted = model.count_params(model.abstract_params(_model(config)))
    assert counted == _closed_form(config)


@pytest.mark.integration
def test_parameter_counts_within_seven_percent_of_the_paper() -> None:
    for row in PAPER_ROW_ORDER:
        summary = count_params._param_summary(table2.get_config(row))
        if summary["paper_params"] is None:
            continue
        relative = abs(summary["params"] - summary["paper_params"]) / summary["paper_params"]
        assert relative < 0.07, (row, summary)


@pytest.mark.reference
def test_variants_change_the_closed_form_count() -> None:
    config = tiny.get_config()
    for overrides in (dict(share_embeddings=False), dict(layer_norm_position="pre"),
                      dict(positional_encoding="learned")):
        variant = tiny.get_config()
        variant.update(overrides)
        counted = model.count_params(model.abstract_params(_model(variant)))
        assert counted == _closed_form(variant) != _closed_form(config)


@pytest.mark.slow
@pytest.mark.parametrize("row", PAPER_ROW_ORDER)
def test_every_row_runs_a_forward_pass(row: str) -> None:
    config = table2.get_config(row)
    config.vocab_size = 64
    cfg = _model(config)
    # Parameters tiled from one random pool: Flax's own initializers take ~15 s per row on 2 CPU cores,
    # and this test is about the rows' graphs running, not about initialization.
    pool = np.random.default_rng(0).normal(scale=0.05, size=1 << 20).astype(np.float32)
    params = jax.tree_util.tree_map(lambda leaf: np.resize(pool, leaf.shape),
                                    nn.meta.unbox(model.abstract_params(cfg)))
    inputs = jnp.asarray(np.random.default_rng(0).integers(4, 64, size=(2, 6)), jnp.int32)
    targets = jnp.asarray(np.random.default_rng(1).integers(4, 64, size=(2, 5)), jnp.int32)
    logits = model.Transformer(cfg).apply({"params": params}, inputs, targets)
    assert logits.shape == (2, 5, 64)
    assert bool(jnp.isfinite(logits).all())
    assert float(jnp.std(logits)) > 0


@pytest.mark.slow
def test_count_params_cli_prints_one_json_line(repo_root) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "attention_jax.count_params", "--config=configs/table2.py:B1",
         "--config.vocab_size=1000"],
        cwd=repo_root, capture_output=True, text=True, check=True, timeout=120)
    line = json.loads(result.stdout.strip().splitlines()[-1])
    expected_config = table2.get_config("B1")
    expected_config.vocab_size = 1000
    assert line == {"row": "B1", "params": _closed_form(expected_config), "paper_params": 58_000_000}


def test_unknown_row_lists_the_rows() -> None:
    with pytest.raises(ValueError, match="unknown Table 2 row 'Z9'.*base, A1"):
        table2.get_config("Z9")


def test_derived_head_size_needs_divisible_d_model() -> None:
    config = base.get_config()
    config.key_dim = 0
    config.num_heads = 7
    with pytest.raises(ValueError, match="key_dim=0.*d_model=512.*num_heads=7"):
        _model(config)
    config.num_heads = 8
    assert _model(config).key_dim == 64


@pytest.mark.parametrize("module_name", ["table2_small", "table2_pilot", "table2_small_quarter", "table2_small_subset"])
def test_table2_small_scales_every_row_the_same_way(module_name: str) -> None:
    import importlib

    from configs import table2

    table2_small = importlib.import_module(f"configs.{module_name}")
    assert list(table2_small.get_sweep()) == list(table2.ROW_NAMES)
    small_base = table2_small.get_config("base")
    for row in table2.ROW_NAMES:
        paper_row, small_row = table2.get_config(row), table2_small.get_config(row)
        for field in ("d_model", "d_ff", "key_dim", "value_dim"):
            assert small_row[field] * table2_small.WIDTH_DIVISOR == paper_row[field], (row, field)
        for field in ("num_heads", "num_layers", "dropout_rate", "label_smoothing", "positional_encoding"):
            assert small_row[field] == paper_row[field], (row, field)
        # One budget and one data set for every row, the big one included.
        for field in ("num_train_steps", "warmup_steps", "learning_rate_scale", "tokens_per_batch", "dataset",
                      "train_split", "max_len", "vocab_size", "seed", "packing", "eval_every_steps",
                      "early_stopping_patience", "early_stopping_min_improvement", "average_last_checkpoints",
                      "final_bleu_splits"):
            assert small_row[field] == small_base[field], (row, field)
        assert small_row.paper.to_dict() == paper_row.paper.to_dict()
    if module_name in ("table2_small", "table2_pilot", "table2_small_quarter"):  # The paper's protocol: the whole split, a fixed budget, the last step.
        assert small_base.train_split == "train" and small_base.early_stopping_patience == 0
        assert small_base.num_train_steps == table2_small.NUM_TRAIN_STEPS
    else:  # The subset: every row trains until dev stops improving (the step count is only a cap).
        assert small_base.early_stopping_patience > 0 and small_base.train_split == "train[:4000]"
    assert small_base.eval_every_steps > 0
    assert small_base.average_last_checkpoints == 1 and tuple(small_base.final_bleu_splits) == ("dev",)

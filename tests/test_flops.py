"""Training FLOPs (attention_jax.models.flops) against counts read off the models' own parameters; Table 3 report."""

from __future__ import annotations

import csv
import json
import math
import pathlib

import flax.linen as nn
import jax
import pytest

from attention_jax.models import flops, language_model
from attention_jax.reports import table3_report
from attention_jax.models.transformer_config import TransformerConfig
from tests.support.fake_data import tiny_config


def _kernel_scalars(params: dict, prefix: str) -> int:
    """Scalars of the matmul kernels (attention projections and FFN) of the layers named ``prefix*``."""
    total = 0
    for path, leaf in jax.tree_util.tree_flatten_with_path(nn.meta.unbox(params))[0]:
        keys = jax.tree_util.keystr(path)
        if keys.startswith(f"['{prefix}") and "kernel" in keys:
            total += math.prod(leaf.shape)
    return total


@pytest.mark.parametrize("model_kind", ["decoder_only", "encoder_decoder"])
def test_training_flops_equal_three_forward_passes_counted_from_the_parameters(model_kind: str) -> None:
    config = tiny_config(model_kind=model_kind, max_len=16, d_ff=48, vocab_size=50)
    model_config = TransformerConfig.from_config(config)
    params = language_model.abstract_params(model_config, model_kind)
    length, heads_kv = config.max_len, config.num_heads * (config.key_dim + config.value_dim)
    scores = 2 * length * heads_kv  # Per query token: q.k over L keys and the weighted sum of L values.
    logits = 2 * config.d_model * config.vocab_size
    if model_kind == "decoder_only":
        per_token = 2 * _kernel_scalars(params, "layer_") + scores + logits
    else:  # One source token per target token: both stacks' kernels, three attentions' scores.
        per_token = (2 * (_kernel_scalars(params, "encoder_") + _kernel_scalars(params, "decoder_"))
                     + 3 * scores + logits)
    assert flops.training_flops(config, 1000) == pytest.approx(3 * per_token * 1000, rel=1e-9)


def test_paper_estimate_reproduces_table_3_costs() -> None:
    assert flops.paper_training_flops(12, 8, 9.5) == pytest.approx(3.3e18, rel=0.01)  # base: 12 h, 8 P100.
    assert flops.paper_training_flops(84, 8, 9.5) == pytest.approx(2.3e19, rel=0.01)  # big: 3.5 days.


def test_table3_report_puts_our_bleu_and_flops_beside_the_papers(tmp_path: pathlib.Path) -> None:
    from configs import table3

    for row, bleu in (("base_en_fr", 12.5), ("big_en_fr", None)):
        (tmp_path / row).mkdir()
        (tmp_path / row / "config.json").write_text(json.dumps(table3.get_config(row).to_dict()))
    tokens = 4.0e6
    results = dict(finished=True, step=160, test_bleu=12.5, dev_bleu=11.0, train_target_tokens=tokens,
                   train_flops=flops.training_flops(table3.get_config("base_en_fr"), tokens), wall_s=7200.0,
                   devices=2)
    (tmp_path / "base_en_fr" / "results.json").write_text(json.dumps(results))
    md_path, csv_path = table3_report.write_table3_report(str(tmp_path), sustained_tflops=100.0)
    records = {record["row"]: record for record in csv.DictReader(open(csv_path, encoding="utf-8"))}
    done, pending = records["base_en_fr"], records["big_en_fr"]
    assert float(done["test_bleu"]) == 12.5 and float(done["paper_test_bleu"]) == 38.1
    assert float(done["train_flops"]) == pytest.approx(results["train_flops"])
    assert float(done["our_estimate_flops"]) == pytest.approx(2 * 2 * 3600 * 100e12)  # 2 h x 2 devices.
    base_schedule = flops.training_flops(table3.get_config("base_en_fr"), 100_000 * 25_000)
    assert float(done["schedule_flops"]) == pytest.approx(base_schedule)
    assert float(pending["paper_train_flops"]) == 2.3e19 and pending["test_bleu"] == ""
    text = pathlib.Path(md_path).read_text()
    assert "| base_en_fr | done |" in text and "38.1" in text and "41.8" in text

"""End to end through the command line: the real input pipeline on a small TSV corpus."""

from __future__ import annotations

import json
import pathlib

import pytest

from tests.support import train_support
from tests.support.tsv_corpus import write_word_corpus

pytestmark = pytest.mark.end_to_end

@pytest.mark.slow
def test_main_trains_tiny_config_on_a_tsv_corpus(tmp_path: pathlib.Path) -> None:
    write_word_corpus(tmp_path / "corpus")
    workdir = tmp_path / "run"
    overrides = dict(
        dataset=f"tsv:{tmp_path / 'corpus'}", data_dir=str(tmp_path / "tfds"), vocab_size=96,
        num_layers=1, d_model=32, d_ff=64, num_heads=2, key_dim=16, value_dim=16, max_len=12,
        tokens_per_batch=192, num_train_steps=6, warmup_steps=4, log_every_steps=3, eval_every_steps=0,
        checkpoint_every_steps=3, num_bleu_examples=4, max_decode_extra_len=4, beam_size=2,
    )
    command = ["-m", "attention_jax.main", "--config=configs/tiny.py", f"--workdir={workdir}"]
    command += [f"--config.{key}={value}" for key, value in overrides.items()]
    completed = train_support.run_python(command, train_support.subprocess_env(str(tmp_path / "cache")))
    assert completed.returncode == 0, completed.stderr[-5000:]

    results = json.loads((workdir / "results.json").read_text())
    assert results["name"] == "tiny" and results["step"] == 6 and results["finished"]
    assert results["eval_ppl"] > 1.0 and results["train_tokens_per_s"] > 0
    # BLEU sampled at the last evaluation (4 dev sentences), then of the whole dev and test splits
    # (config.final_bleu) from the last parameters: 2 checkpoints kept, too few to average 5.
    assert results["bleu_num_examples"] == 4 and 0.0 <= results["bleu"] <= 100.0
    assert results["final_checkpoint"] == "step 6" and results["stop_reason"] == "num_train_steps"
    for split, name in (("validation", "dev"), ("test", "test")):
        assert results[f"{name}_sentences"] == 24 and 0.0 <= results[f"{name}_bleu"] <= 100.0
        assert "tok:13a" in results[f"{name}_bleu_signature"] and results[f"{name}_ppl"] > 1.0
        report = json.loads((workdir / f"eval_{split}.json").read_text())
        assert report["bleu"] == results[f"{name}_bleu"] and report["checkpoint"] == "step 6"
        assert 0.0 <= report["chrf"] <= 100.0 and "tok:tercom" in report["ter_signature"]  # Beside BLEU.
        rows = (workdir / f"eval_{split}.translations.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(rows) == 24 and set(json.loads(rows[0])) == {"source", "reference", "hypothesis"}
    assert not {"dev_chrf", "dev_ter", "test_chrf", "test_ter"} & set(results)  # results.json: BLEU, as it was.
    assert json.loads((workdir / "config.json").read_text())["d_model"] == 32
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "train/loss" in r] == [3, 6]
    assert sorted(p.name for p in (workdir / "checkpoints").iterdir()) == ["3", "6"]
    data_state = (workdir / "checkpoints" / "6" / "data" / "process_0-of-1.json").read_text()
    assert json.loads(data_state)["json"]  # The Grain iterator's position.
    assert "step 6/6" in completed.stderr and "tok/s" in completed.stderr

"""A tiny language model end to end: train on a txt: corpus, results.json, generate, the wrong-run errors."""

from __future__ import annotations

import json
import math
import pathlib
import subprocess
import sys

import pytest

from attention_jax.checkpointing import checkpoints, resume_checks
from attention_jax.experiment import sections
from attention_jax.foundation import quiet_libraries
from attention_jax.models import flops
from attention_jax.training import train
from tests.support.lm_corpus import lm_experiment, write_txt_corpus

pytestmark = [pytest.mark.end_to_end]


@pytest.fixture(scope="module")
def lm_workdir(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    corpus = tmp_path_factory.mktemp("corpus")
    write_txt_corpus(corpus, train_docs=600)
    workdir = tmp_path_factory.mktemp("lm_run")
    train.train_and_evaluate(lm_experiment(corpus, tmp_path_factory.mktemp("data")), str(workdir))
    return workdir


def _generate(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_jax.generate", *args], input=stdin,
                          capture_output=True, text=True, timeout=300, cwd=pathlib.Path(__file__).parents[2])


def test_training_writes_dev_perplexity_and_training_flops(lm_workdir: pathlib.Path) -> None:
    results = json.loads((lm_workdir / "results.json").read_text())
    config = checkpoints.read_config(str(lm_workdir))
    assert results["finished"] and results["step"] == 30
    assert math.isfinite(results["eval_ppl"]) and 1.0 < results["eval_ppl"] < config.model.vocab_size
    evaluations = [json.loads(line) for line in (lm_workdir / "metrics.jsonl").read_text().splitlines()]
    dev_ppl = [row["eval/perplexity"] for row in evaluations if "eval/perplexity" in row]
    assert len(dev_ppl) == 3 and dev_ppl[-1] < dev_ppl[0]  # Falls from step 10 to step 30.
    assert results["train_target_tokens"] > 0
    splits = json.loads((lm_workdir / "data_splits.json").read_text())  # Checked when the run resumes.
    assert {role: (split["split"], split["documents"]) for role, split in splits.items()} == {
        "validation": ("validation", 40), "test": ("test", 40)}
    assert all(len(split["sha256"]) == 64 for split in splits.values())
    assert results["train_flops"] == pytest.approx(flops.training_flops(
        config.model, "decoder_only", results["train_target_tokens"], config.data.max_len))


def test_generate_continues_prompts_and_reports_perplexity(lm_workdir: pathlib.Path) -> None:
    one = _generate(f"--workdir={lm_workdir}", "--prompt=Der Hund", "--seed=1", "--max_new_tokens=8")
    assert one.returncode == 0, one.stderr[-2000:]
    assert len(one.stdout.splitlines()) == 1 and one.stdout.strip()
    again = _generate(f"--workdir={lm_workdir}", "--prompt=Der Hund", "--seed=1", "--max_new_tokens=8")
    assert again.stdout == one.stdout
    three = _generate(f"--workdir={lm_workdir}", "--prompt=Der Hund", "--seed=1", "--max_new_tokens=8",
                      "--num_samples=3", "--echo_prompt")
    assert three.returncode == 0, three.stderr[-2000:]
    lines = three.stdout.splitlines()  # Sample 0 is --seed=1's continuation, after the prompt.
    assert len(lines) == 3 and all(line.startswith("Der Hund") for line in lines)
    assert lines[0].replace(" ", "") == ("Der Hund" + one.stdout).replace(" ", "").strip()
    greedy = _generate(f"--workdir={lm_workdir}", "--temperature=0", "--top_k=5", stdin="Heute\nDie Katze\n")
    assert greedy.returncode == 0 and len(greedy.stdout.splitlines()) == 2
    evaluated = _generate(f"--workdir={lm_workdir}", "--eval_split=validation")
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    report = json.loads((lm_workdir / "lm_eval_validation.json").read_text())
    assert report["bits_per_byte"] > 0 and report["perplexity"] > 1
    assert report["bits_per_byte"] == pytest.approx(
        report["nll_per_token"] * report["tokens"] / math.log(2) / report["utf8_bytes"])
    assert report["method"] == "strided_window" and report["window"] == 32 and report["stride"] == 16
    assert "windows of 32 tokens, stride 16" in evaluated.stdout
    bad_stride = _generate(f"--workdir={lm_workdir}", "--eval_split=validation", "--eval_stride=33")
    assert bad_stride.returncode != 0 and "Traceback" not in bad_stride.stderr
    assert bad_stride.returncode == 2 and "generate: error: --eval_stride=33 must lie in [1, 32]" in bad_stride.stderr


def test_bad_prompts_and_wrong_runs_are_clear_errors(lm_workdir: pathlib.Path, tmp_path: pathlib.Path) -> None:
    empty = _generate(f"--workdir={lm_workdir}", "--prompt=  ")
    assert empty.returncode == 2 and "generate: error: The prompt is empty" in empty.stderr
    too_long = _generate(f"--workdir={lm_workdir}", "--prompt=" + " ".join(["Hund"] * 40))
    assert too_long.returncode == 2 and "shorten it to at most 30 tokens" in too_long.stderr
    assert "Traceback" not in empty.stderr + too_long.stderr
    translate = subprocess.run([sys.executable, "-m", "attention_jax.translate", f"--workdir={lm_workdir}"],
                               input="Hallo\n", capture_output=True, text=True, timeout=300)
    assert translate.returncode == 2 and "decoder-only language model" in translate.stderr
    assert "attention_jax.generate" in translate.stderr and "Traceback" not in translate.stderr
    from tests.support.fake_data import tiny_experiment

    checkpoints.write_config(str(tmp_path), tiny_experiment())  # A translation run's config.json.
    wrong = _generate(f"--workdir={tmp_path}", "--prompt=Hallo")
    assert wrong.returncode == 2 and "encoder-decoder translation model" in wrong.stderr
    assert "attention_jax.translate" in wrong.stderr and "Traceback" not in wrong.stderr


def test_a_language_model_workdir_refuses_a_translation_config(lm_workdir: pathlib.Path) -> None:
    from tests.support.fake_data import tiny_config

    with pytest.raises(ValueError, match="model_kind"):
        resume_checks.check_resume_compatible(str(lm_workdir), sections.build_experiment(tiny_config(), "test"))
    with pytest.raises(ValueError, match="num_bleu_examples=0 --config.final_bleu=False"):
        sections.build_experiment(tiny_config(model_kind="decoder_only", num_bleu_examples=10), "config")
    with pytest.raises(ValueError, match="set --config.attention_window=0"):
        sections.build_experiment(tiny_config(model_kind="decoder_only", attention_window=4), "config")
    with pytest.raises(ValueError, match="model_kind must be one of"):
        sections.build_experiment(tiny_config(model_kind="encoder_only"), "config")


def test_more_new_tokens_than_fit_is_said(lm_workdir: pathlib.Path) -> None:
    completed = _generate(f"--workdir={lm_workdir}", "--prompt=Der Hund", "--max_new_tokens=100000", "--seed=1")
    assert completed.returncode == 0, completed.stderr[-2000:]
    warnings = [line for line in completed.stderr.splitlines() if "--max_new_tokens=100000 is more than fits" in line]
    assert len(warnings) == 1 and "rows hold 32 positions" in warnings[0]
    assert not [line for line in completed.stderr.splitlines()  # No INFO line.
                if (match := quiet_libraries.SHORT_PREFIX.match(line)) and match.group(1) == "I"]

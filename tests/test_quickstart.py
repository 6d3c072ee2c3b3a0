"""The README's quickstart end to end: train configs/tiny.py, then translate and evaluate the run."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import sacrebleu

from attention_jax.data import synthetic_en_de

pytestmark = pytest.mark.slow

# The README promises at least this test BLEU for the quickstart's tiny model (it states the measured one).
QUICKSTART_MIN_BLEU = 90.0
TRANSLATED_TEST_SENTENCES = 400


def _run(args: list[str], repo_root: pathlib.Path, stdin: str | None = None) -> str:
    completed = subprocess.run([sys.executable, "-m", *args], cwd=repo_root, input=stdin,
                               capture_output=True, text=True, timeout=900)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout


def test_quickstart_writes_results(tiny_workdir: pathlib.Path) -> None:
    results = json.loads((tiny_workdir / "results.json").read_text())
    assert results["finished"] and results["step"] == 1200 and results["name"] == "tiny"
    for field in ("train_loss", "eval_loss", "eval_ppl", "params", "wall_s", "train_tokens_per_s", "bleu"):
        assert results[field] is not None and results[field] >= 0, field
    assert results["bleu"] >= QUICKSTART_MIN_BLEU
    assert (tiny_workdir / "metrics.jsonl").is_file() and (tiny_workdir / "config.json").is_file()
    assert (tiny_workdir / "tokenizer.model").stat().st_size > 0  # The workdir carries its vocabulary.


def test_translate_reaches_the_readme_bleu_on_test_sentences(tiny_workdir: pathlib.Path,
                                                             repo_root: pathlib.Path) -> None:
    pairs = synthetic_en_de.generate_split("test")[:TRANSLATED_TEST_SENTENCES]
    sources = [source for source, _ in pairs]
    stdin = "\n".join(sources[:200] + [""] + sources[200:]) + "\n"  # An empty line mid-stream.
    output_lines = _run(["attention_jax.translate", f"--workdir={tiny_workdir}"], repo_root, stdin).split("\n")
    assert output_lines[-1] == ""
    translations = output_lines[:-1]
    assert len(translations) == len(sources) + 1 and translations[200] == ""
    hypotheses = translations[:200] + translations[201:]
    bleu = sacrebleu.corpus_bleu(hypotheses, [[target for _, target in pairs]]).score
    assert bleu >= QUICKSTART_MIN_BLEU


def test_evaluate_reproduces_the_bleu_in_results(tiny_workdir: pathlib.Path, repo_root: pathlib.Path,
                                                 tmp_path: pathlib.Path) -> None:
    results = json.loads((tiny_workdir / "results.json").read_text())
    config = json.loads((tiny_workdir / "config.json").read_text())
    output = tmp_path / "eval_validation.json"
    _run(["attention_jax.evaluate", f"--workdir={tiny_workdir}", "--split=validation",
          f"--num_examples={config['num_bleu_examples']}", f"--output={output}"], repo_root)
    evaluated = json.loads(output.read_text())
    assert evaluated["bleu"] == pytest.approx(results["bleu"], abs=1e-6)

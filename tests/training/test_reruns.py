"""Reruns that must not silently change a run (issue 36): a rerun trains on and says so, finishes a final
evaluation only, or changes no file and says why. Also: a changed corpus is refused, SIGTERM during the
final BLEU stops like training does, ``best/`` keeps the k best evaluations, and ``evaluate --reaverage``
records the steps it averaged.

Runs train a one-layer model on :class:`tests.support.fake_data.FakeData` in this process, sharing one
compilation cache.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys
import types

import flax.linen as nn
import jax
import numpy as np
import pytest

from attention_jax.checkpointing import checkpoints, params_checkpoints, resume_checks
from attention_jax.data import tokenizer as tokenizer_module
from attention_jax.foundation import quiet_libraries, run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.training import early_stopping, run_evaluation, setup_checks
from tests.support import REPO_ROOT, fake_data, train_support
from tests.support.fake_data import SigtermDuringFinalBleu, train_tiny
from tests.support.train_support import save_checkpoint, snapshot

pytestmark = [pytest.mark.end_to_end, pytest.mark.usefixtures("cache_dir")]  # tests/conftest.py

# Every evaluation after the first improves by less than 99%, so patience 1 stops at the second one.
EARLY_STOPPED = dict(num_train_steps=40, eval_every_steps=2, checkpoint_every_steps=2, early_stopping_patience=1,
                     early_stopping_min_improvement=0.99, average_last_checkpoints=1)
FINISHED = dict(num_train_steps=4, eval_every_steps=2, checkpoint_every_steps=2)


def _eval_steps(workdir: pathlib.Path) -> list[int]:
    records = [json.loads(line) for line in (workdir / run_files.METRICS_FILE).read_text().splitlines()]
    return [record["step"] for record in records if "eval/loss" in record]


def _results(workdir: pathlib.Path) -> dict:
    return json.loads((workdir / run_files.RESULTS_FILE).read_text())


# --- Rule 1: a rerun at or below the last step ---------------------------------------------------------

@pytest.mark.slow
def test_early_stopped_rerun_changes_nothing_until_patience_is_raised(tmp_path: pathlib.Path) -> None:
    first = train_tiny(tmp_path, **EARLY_STOPPED)
    assert first["stop_reason"] == early_stopping.STOPPED_EARLY and first["step"] == 4
    before = snapshot(tmp_path)
    longer = train_tiny(tmp_path, **dict(EARLY_STOPPED, num_train_steps=200))
    assert longer["already_finished"] and "early stopping ended it at step 4" in longer["reason"]
    assert "raise --config.early_stopping_patience above 1" in longer["reason"]
    assert snapshot(tmp_path) == before  # No eval record, no null train figures, config.json still 40 steps.
    patient = train_tiny(tmp_path, **dict(EARLY_STOPPED, early_stopping_patience=3))
    assert patient["step"] == 8 and patient["stop_reason"] == early_stopping.STOPPED_EARLY  # Trained on.
    assert _eval_steps(tmp_path) == [2, 4, 6, 8]
    assert checkpoints.read_config(str(tmp_path)).run.early_stopping_patience == 3


@pytest.mark.slow
def test_finished_rerun_with_fewer_steps_changes_nothing(tmp_path: pathlib.Path) -> None:
    train_tiny(tmp_path, **FINISHED)
    before = snapshot(tmp_path)
    shorter = train_tiny(tmp_path, **dict(FINISHED, num_train_steps=2))
    assert shorter["already_finished"] and "beyond num_train_steps=2" in shorter["reason"]
    assert snapshot(tmp_path) == before
    other_logging = train_tiny(tmp_path, **dict(FINISHED, log_every_steps=1))
    assert other_logging["already_finished"] and "reached num_train_steps=4" in other_logging["reason"]
    assert snapshot(tmp_path) == before


@pytest.mark.slow
def test_final_bleu_added_to_a_finished_run_keeps_its_training_figures(tmp_path: pathlib.Path) -> None:
    train_tiny(tmp_path, **FINISHED)
    trained = _results(tmp_path)
    config_before = (tmp_path / run_files.CONFIG_FILE).read_bytes()
    evaluated = train_tiny(tmp_path, **dict(FINISHED, final_bleu=True, final_bleu_splits=("dev",), beam_size=1))
    assert evaluated["finished"] and not evaluated.get("already_finished")
    results = _results(tmp_path)
    for key in ("train_loss", "train_nll_loss", "train_tokens_per_s", "wall_s", "evaluations_since_best",
                "eval_ppl", "step"):
        assert results[key] == trained[key], key
    assert results["dev_bleu"] is not None and results["final_bleu_splits"] == ["dev"]
    assert (tmp_path / "eval_validation.json").exists()
    assert _eval_steps(tmp_path) == [2, 4]  # No second evaluation of step 4.
    assert (tmp_path / run_files.CONFIG_FILE).read_bytes() == config_before
    before = snapshot(tmp_path)
    again = train_tiny(tmp_path, **dict(FINISHED, final_bleu=True, final_bleu_splits=("dev",), beam_size=1))
    assert again["already_finished"]  # The evaluation it asks for is there.
    assert snapshot(tmp_path) == before


# --- Rule 3: SIGTERM during the final BLEU -----------------------------------------------------------

@pytest.mark.slow
def test_sigterm_during_final_bleu_stops_and_the_rerun_only_evaluates(tmp_path: pathlib.Path) -> None:
    settings = dict(FINISHED, final_bleu=True, final_bleu_splits=("dev",), beam_size=1)
    stopped = train_tiny(tmp_path, data=SigtermDuringFinalBleu(), **settings)
    assert stopped["finished"] is False  # The command exits 75 (run_files.STOPPED_EXIT_STATUS).
    assert not (tmp_path / run_files.RESULTS_FILE).exists()  # A sweep does not count the row as done.
    config_before = (tmp_path / run_files.CONFIG_FILE).read_bytes()
    finished = train_tiny(tmp_path, **settings)
    assert finished["finished"] and finished["dev_bleu"] is not None
    results = _results(tmp_path)
    assert results["train_loss"] is not None and results["train_tokens_per_s"] is not None
    assert results["eval_ppl"] is not None and results["step"] == 4
    assert _eval_steps(tmp_path) == [2, 4]
    assert (tmp_path / run_files.CONFIG_FILE).read_bytes() == config_before


# --- Rule 2: other data under trained weights -----------------------------------------------------------

def test_resuming_on_another_corpus_is_refused_naming_the_field(tmp_path: pathlib.Path) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment(dataset="tsv:/data/a"))
    save_checkpoint(tmp_path)
    with pytest.raises(UserInputError, match=r"trained on other data \(dataset: 'tsv:/data/a' in the workdir, "
                                             r"'tsv:/data/b' now\)"):
        resume_checks.check_resume_compatible(str(tmp_path), fake_data.tiny_experiment(dataset="tsv:/data/b"))
    with pytest.raises(UserInputError, match="tokenizer_max_sentences"):
        resume_checks.check_resume_compatible(str(tmp_path), fake_data.tiny_experiment(
            dataset="tsv:/data/a", tokenizer_max_sentences=10))
    resume_checks.check_resume_compatible(str(tmp_path), fake_data.tiny_experiment(dataset="tsv:/data/a",
                                                                                 num_train_steps=99))


def test_a_different_tokenizer_never_replaces_the_runs_own(tmp_path: pathlib.Path) -> None:
    # Two real SentencePiece models: the check reads a differing file as a model first, so that a damaged
    # one is named as damaged (test_faults_round_four), and only a readable other model as another corpus's.
    runs_own = tokenizer_module.train_tokenizer(["the cat sat on the mat", "a dog ran"] * 20, vocab_size=40)
    another = tokenizer_module.train_tokenizer(["der Hund lief schnell", "eine Katze"] * 20, vocab_size=40)
    assert runs_own.model_proto != another.model_proto
    (tmp_path / run_files.TOKENIZER_FILE).write_bytes(runs_own.model_proto)
    tokenizer = types.SimpleNamespace(model_proto=another.model_proto)
    data, experiment = types.SimpleNamespace(tokenizer=tokenizer), fake_data.tiny_experiment(dataset="tsv:/data/b")
    with pytest.raises(UserInputError, match="tokenizer.model differs from the tokenizer of"):
        setup_checks._check_tokenizer(experiment, str(tmp_path), data, step=40)
    tokenizer.model_proto = runs_own.model_proto
    setup_checks._check_tokenizer(experiment, str(tmp_path), data, step=40)
    # A trained run whose tokenizer.model was deleted is refused, not retokenized by a new one.
    (tmp_path / run_files.TOKENIZER_FILE).unlink()
    with pytest.raises(UserInputError, match=r"holds checkpoints up to step 40 but no tokenizer.model"):
        setup_checks._check_tokenizer(experiment, str(tmp_path), data, step=40)
    setup_checks._check_tokenizer(experiment, str(tmp_path), data, step=0)  # A new run writes its own.


# --- Rule 6: the k best evaluations, not the newest improvements ------------------------------------------

def test_best_directory_keeps_the_k_lowest_perplexities(tmp_path: pathlib.Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    run = types.SimpleNamespace(workdir=str(tmp_path),
                                loop=types.SimpleNamespace(early_stopping=early_stopping._EarlyStopping(patience=5)),
                                experiment=fake_data.tiny_experiment(average_last_checkpoints=3))
    saved_params: dict[int, float] = {}
    for step, perplexity in ((100, 10.0), (200, 8.0), (300, 8.5), (400, 7.0)):
        saved_params[step] = perplexity
        monkeypatch.setattr(run_evaluation, "_replicated_params", lambda _, value=perplexity: {"w": np.full(2, value, np.float32)})
        run_evaluation._track_best(run, step, perplexity)
    best_dir = str(tmp_path / run_files.BEST_DIR)
    assert checkpoints.finished_steps(best_dir) == [200, 300, 400]
    assert params_checkpoints._ranked_by_perplexity(best_dir) == [400, 200, 300]
    run_evaluation._track_best(run, 500, 9.0)  # Worse than the three kept: not saved.
    assert checkpoints.finished_steps(best_dir) == [200, 300, 400]


# --- Rule 5: evaluate --reaverage records the averaged steps ----------------------------------------------

@pytest.mark.slow
def test_evaluate_records_the_steps_it_averaged_and_translate_is_quiet(tmp_path: pathlib.Path) -> None:
    from attention_jax.data import input_pipeline
    from attention_jax.experiment import sections
    from attention_jax.models.model import Transformer
    from configs import tiny

    (tmp_path / "corpus").mkdir()
    words = ["the", "house", "is", "small", "a", "dog", "runs", "big", "green", "my", "cat", "sleeps"]
    for name, count in (("train", 60), ("dev", 6), ("test", 6)):
        lines = [f"{words[i % 12]} {words[(3 * i) % 12]}\t{words[(5 * i) % 12]} {words[(i + 1) % 12]}"
                 for i in range(count)]
        (tmp_path / "corpus" / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = tiny.get_config()
    config.update(dict(dataset=f"tsv:{tmp_path / 'corpus'}", data_dir=str(tmp_path / "tfds"), vocab_size=64,
                       num_layers=1, d_model=32, d_ff=64, num_heads=2, key_dim=16, value_dim=16, max_len=16,
                       max_decode_extra_len=8))
    experiment = sections.build_experiment(config, "test")
    data = input_pipeline.get_datasets(experiment.data)
    run_dir = tmp_path / "run"
    checkpoints.write_config(str(run_dir), experiment)
    checkpoints.write_tokenizer(str(run_dir), data.tokenizer.model_proto)  # As training keeps it.
    model_config = experiment.model
    ids = np.ones((1, 4), np.int32)
    for seed, step in enumerate((10, 20, 30)):
        params = nn.meta.unbox(Transformer(model_config).init(jax.random.key(seed), ids, ids)["params"])
        single = tmp_path / f"single_{step}"
        params_checkpoints._save_params(str(single), step, params, {"seed": seed})
        (run_dir / run_files.CHECKPOINT_DIR).mkdir(exist_ok=True)
        shutil.move(single / str(step), run_dir / run_files.CHECKPOINT_DIR / str(step))
        if step == 20:
            params_checkpoints.write_average(str(run_dir), 2)  # Steps 10 and 20; step 30 makes it stale.
    environment = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
                       XLA_FLAGS=train_support.child_xla_flags())
    completed = subprocess.run([sys.executable, "-m", "attention_jax.evaluate", f"--workdir={run_dir}", "--split=dev",
                                "--checkpoint=averaged", "--reaverage", "--num_examples=2", "--beam_size=1"],
                               cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    report = json.loads((run_dir / "eval_validation_first2.averaged.json").read_text())  # 2 of the 6 dev pairs.
    assert report["averaged_steps"] == [20, 30] and report["split"] == "validation"
    translated = subprocess.run([sys.executable, "-m", "attention_jax.translate", f"--workdir={run_dir}"],
                                input="the house is small\n", cwd=REPO_ROOT, env=environment, capture_output=True,
                                text=True, timeout=600)
    assert translated.returncode == 0 and len(translated.stdout.splitlines()) == 1, translated.stderr[-3000:]
    info_lines = [line for line in translated.stderr.splitlines()
                  if (match := quiet_libraries.SHORT_PREFIX.match(line)) and match.group(1) == "I"]
    assert info_lines == []  # Orbax's and JAX's INFO lines only with --verbosity=0.

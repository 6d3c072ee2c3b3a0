"""First use of a corpus by several processes at once (issue 39): one prepares, the others wait and reuse
it; a preparation killed halfway is redone; two trainers and a ``--parallel=2`` sweep on a data
directory never prepared before both train to the end."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest

from attention_jax.data import first_use, tokenizer as tokenizer_lib
from tests.support import train_support
from tests.support.sweep_cli import REPO_ROOT, TINY_TRAINING, run_sweep, tiny_flags
from tests.support.waiting import wait_until
from tests.support.tsv_corpus import write_word_corpus

# Prepares a TSV corpus, each generated example slowed by DELAY seconds after touching MARKER (so the
# test knows the child is inside the preparation, holding the lock), then prints the split sizes.
_PREPARE_SCRIPT = """
import json, sys, time
from absl import logging
from attention_jax.data import tsv_dataset
tsv_dir, data_dir, marker, delay = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
logging.set_verbosity(logging.INFO)
generate = tsv_dataset.TsvTranslation._generate_examples
def slow_generate(self, path):
    for example in generate(self, path):
        open(marker, "a").close()
        time.sleep(delay)
        yield example
tsv_dataset.TsvTranslation._generate_examples = slow_generate
builder = tsv_dataset._prepare_tsv_dataset(tsv_dir, data_dir)
sizes = {split: builder.info.splits[split].num_examples for split in ("train", "validation", "test")}
print("RESULT " + json.dumps(sizes))
"""
_CORPUS_SIZES = {"train": 240, "validation": 24, "test": 24}  # tests.support.tsv_corpus.write_word_corpus


def _start_preparation(corpus: pathlib.Path, data_dir: pathlib.Path, marker: pathlib.Path,
                       delay_s: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", _PREPARE_SCRIPT, str(corpus), str(data_dir), str(marker),
                             str(delay_s)], cwd=REPO_ROOT, env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(process: subprocess.Popen) -> tuple[dict, str]:
    stdout, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr[-5000:]
    line = next(line for line in stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[len("RESULT "):]), stderr


def _incomplete_dirs(data_dir: pathlib.Path) -> list[pathlib.Path]:
    return sorted(data_dir.glob("tsv_translation/*/incomplete.*"))


def test_prepare_once_runs_the_preparation_in_one_of_two_threads(tmp_path: pathlib.Path) -> None:
    # flock locks belong to open file descriptions, so two threads that each open the lock file exclude
    # each other as two processes do.
    done, calls, returned = tmp_path / "done", [], []

    def prepare() -> None:
        calls.append(threading.get_ident())
        time.sleep(0.5)
        done.write_text("ready")

    def worker() -> None:
        returned.append(first_use._prepare_once(str(tmp_path / "cache.lock"), "a test cache", done.exists, prepare))

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(calls) == 1 and sorted(returned) == [False, True] and done.read_text() == "ready"


def test_tokenizer_trained_once_by_two_threads(tmp_path: pathlib.Path) -> None:
    model_path = str(tmp_path / "spm.model")
    sentences_asked, tokenizers = [], []
    sentences = [f"the cat number {index} sees a house" for index in range(200)]

    def training_sentences() -> list[str]:
        sentences_asked.append(1)
        time.sleep(0.3)  # Both threads are past the first look before the first one writes the model.
        return sentences

    threads = [threading.Thread(target=lambda: tokenizers.append(
        tokenizer_lib.load_or_train_tokenizer(model_path, training_sentences, 60))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(sentences_asked) == 1 and len(tokenizers) == 2
    assert tokenizers[0].model_proto == tokenizers[1].model_proto == pathlib.Path(model_path).read_bytes()


@pytest.mark.slow
def test_second_process_waits_for_the_first_to_prepare_the_corpus_then_reuses_it(tmp_path: pathlib.Path) -> None:
    write_word_corpus(tmp_path / "corpus")
    data_dir, marker = tmp_path / "tfds", tmp_path / "first_is_preparing"
    first = _start_preparation(tmp_path / "corpus", data_dir, marker, delay_s=0.01)
    # The first holds the lock and is writing the dataset.
    wait_until(marker.exists, 120, f"{marker}", process=first, poll_s=0.05)
    second = _start_preparation(tmp_path / "corpus", data_dir, tmp_path / "unused", delay_s=0.0)
    (first_sizes, first_log), (second_sizes, second_log) = _result(first), _result(second)
    assert first_sizes == second_sizes == _CORPUS_SIZES
    assert "Preparing" in first_log and "Preparing" not in second_log
    assert f"Waiting for pid {first.pid} on host" in second_log and "Reusing the corpus" in second_log
    assert not (tmp_path / "unused").exists()  # The second generated nothing.
    assert not _incomplete_dirs(data_dir)


@pytest.mark.slow
def test_preparation_killed_halfway_is_redone_by_the_next_run(tmp_path: pathlib.Path) -> None:
    write_word_corpus(tmp_path / "corpus")
    data_dir, marker = tmp_path / "tfds", tmp_path / "preparing"
    killed = _start_preparation(tmp_path / "corpus", data_dir, marker, delay_s=0.2)
    wait_until(marker.exists, 120, f"{marker}", process=killed, poll_s=0.05)
    time.sleep(0.5)
    killed.send_signal(signal.SIGKILL)
    killed.communicate(timeout=60)
    assert killed.returncode == -signal.SIGKILL
    assert _incomplete_dirs(data_dir), "the killed preparation left no incomplete directory to clean up"
    sizes, log = _result(_start_preparation(tmp_path / "corpus", data_dir, tmp_path / "rerun", delay_s=0.0))
    assert sizes == _CORPUS_SIZES
    assert "left by an interrupted preparation" in log and not _incomplete_dirs(data_dir)


def _tiny_main(workdir: pathlib.Path, data_dir: pathlib.Path, cache_dir: str, **extra: object) -> subprocess.Popen:
    command = [sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py", f"--workdir={workdir}",
               *tiny_flags(data_dir, 4, **extra)]
    return subprocess.Popen(command, cwd=REPO_ROOT, env=train_support.subprocess_env(cache_dir),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_two_trainers_started_together_on_a_fresh_synthetic_corpus_both_train(tmp_path: pathlib.Path) -> None:
    data_dir, cache_dir = tmp_path / "tfds", str(tmp_path / "jax_cache")
    trainers = [_tiny_main(tmp_path / name, data_dir, cache_dir) for name in ("a", "b")]
    for trainer in trainers:
        _, stderr = trainer.communicate(timeout=600)
        assert trainer.returncode == 0, stderr[-5000:]
    for name in ("a", "b"):
        results = json.loads((tmp_path / name / "results.json").read_text())
        assert results["finished"] and results["step"] == 4
    assert not list(data_dir.glob("synthetic_en_de/*/incomplete.*"))


@pytest.mark.slow
def test_parallel_sweep_on_a_fresh_tsv_corpus_trains_both_rows(tmp_path: pathlib.Path) -> None:
    write_word_corpus(tmp_path / "corpus")
    root, data_dir = tmp_path / "sweep", tmp_path / "tfds"
    corpus = dict(dataset=f"tsv:{tmp_path / 'corpus'}", vocab_size=96, max_len=12, tokens_per_batch=192)
    assert set(corpus) <= set(TINY_TRAINING)
    completed = run_sweep("--config=configs/table2.py", "--rows=base,C1", "--parallel=2", "--report=false",
                          f"--root={root}", *tiny_flags(data_dir, 4, **corpus), timeout=600)
    logs = "".join((root / row / "log.txt").read_text()[-3000:] for row in ("base", "C1")
                   if (root / row / "log.txt").exists())
    assert completed.returncode == 0, completed.stdout + completed.stderr + logs
    for row in ("base", "C1"):
        results = json.loads((root / row / "results.json").read_text())
        assert results["finished"] and results["step"] == 4, row
    assert not _incomplete_dirs(data_dir)

"""Run setup and resume faults (issue 64): a resumed run keeps its dev and test splits and its seed; a dev
split that overlaps the training data is named; a config that cannot run here (a mesh over the devices, cuDNN
on a CPU, a batch budget under one row, early stopping on a tiny dev split, an unwritable data directory) is
one line and exit status 2 with nothing written; a changed ``max_len`` names the field as the user wrote it.

The resumed runs train a one-layer model on :class:`tests.support.fake_data.FakeData` in this process, sharing
one compilation cache; the data tests prepare a tiny TSV corpus.
"""

from __future__ import annotations

import errno
import hashlib
import json
import pathlib
import subprocess
import sys

import jax
import pytest

from attention_jax.checkpointing import checkpoints, resume_checks
from attention_jax.data import first_use, input_pipeline
from attention_jax.experiment import schema, sections
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.training import setup_checks, sharding, train
from tests.support import REPO_ROOT, fake_data, train_support
from tests.support.train_support import save_checkpoint

pytestmark = pytest.mark.usefixtures("cache_dir")  # A compilation cache (tests/conftest.py).


PAIRS = [f"the cat {i} sat on mat {i % 7}\tdie katze {i} sass auf matte {i % 7}" for i in range(200)]


def _write_corpus(directory: pathlib.Path, dev: list[str], test: list[str] | None = None) -> pathlib.Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, lines in (("train", PAIRS[:150]), ("dev", dev), ("test", PAIRS[170:] if test is None else test)):
        (directory / f"{name}.tsv").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return directory


def _data(corpus: pathlib.Path, data_dir: pathlib.Path) -> input_pipeline.TranslationData:
    return input_pipeline.get_datasets(fake_data.data_config(
        dataset=f"tsv:{corpus}", data_dir=str(data_dir), vocab_size=60, max_len=32, tokens_per_batch=256,
        tokens_per_batch_unit="slots"))


def _snapshot_but_the_lock_time(directory: pathlib.Path) -> dict[str, tuple[int, str]]:
    """Every file's modification time and hash; the lock's emptied file only by its contents."""
    return {str(path.relative_to(directory)): (0 if path.name == run_files.LOCK_FILE else path.stat().st_mtime_ns,
                                               hashlib.sha256(path.read_bytes()).hexdigest())
            for path in sorted(directory.rglob("*")) if path.is_file()}


# --- Item 4: the dev and test splits a run evaluates on --------------------------------------------------

class _EvaluatedOn(fake_data.FakeData):
    """Fake data whose dev split is ``dev_text`` (its fingerprint), as a corpus's dev.tsv would be."""

    def __init__(self, dev_text: str) -> None:
        super().__init__(shapes=fake_data.DEFAULT_SHAPES[:1], num_eval_batches=1)  # One shape: one compilation.
        self.dev_text = dev_text

    def split_fingerprints(self) -> dict[str, dict]:
        dev_sha256 = hashlib.sha256(self.dev_text.encode()).hexdigest()
        return {"validation": {"split": "validation", "pairs": 3, "sha256": dev_sha256},
                "test": {"split": "test", "pairs": 3, "sha256": "0" * 64}}


@pytest.mark.slow
@pytest.mark.end_to_end
def test_a_run_resumed_on_a_replaced_dev_split_is_refused_and_nothing_is_written(tmp_path: pathlib.Path) -> None:
    settings = dict(num_train_steps=2, eval_every_steps=0, checkpoint_every_steps=2)
    train.train_and_evaluate(fake_data.tiny_experiment(**settings), str(tmp_path), data=_EvaluatedOn("dev one"))
    recorded = json.loads((tmp_path / run_files.DATA_SPLITS_FILE).read_text())
    assert recorded == _EvaluatedOn("dev one").split_fingerprints()
    before = _snapshot_but_the_lock_time(tmp_path)
    longer = fake_data.tiny_experiment(**dict(settings, num_train_steps=4))
    with pytest.raises(UserInputError, match=r"was evaluated on another dev split: config\.eval_split='validation' "
                                             r"now holds 3 pairs .* Put back the dev split"):
        train.train_and_evaluate(longer, str(tmp_path), data=_EvaluatedOn("dev two"))
    assert _snapshot_but_the_lock_time(tmp_path) == before  # No metrics, no TensorBoard events, no config.json.
    resumed = train.train_and_evaluate(longer, str(tmp_path), data=_EvaluatedOn("dev one"))
    assert resumed["finished"] and resumed["step"] == 4  # The original dev split resumes.


def test_replacing_dev_tsv_in_place_changes_its_fingerprint_only(tmp_path: pathlib.Path) -> None:
    corpus = _write_corpus(tmp_path / "corpus", dev=PAIRS[150:170])
    before = _data(corpus, tmp_path / "tfds").split_fingerprints()
    assert before["validation"]["pairs"] == 20 and before["test"]["pairs"] == 30
    _write_corpus(corpus, dev=["a new sentence\teine neue zeile"] + PAIRS[151:170])  # Same size, one pair changed.
    after = _data(corpus, tmp_path / "tfds").split_fingerprints()
    assert after["validation"]["sha256"] != before["validation"]["sha256"] and after["test"] == before["test"]
    resume_checks.write_data_splits(str(tmp_path / "run"), before)
    with pytest.raises(UserInputError, match=r"another dev split: .* Put back the dev split .* dev\.tsv"):
        resume_checks.check_data_splits(str(tmp_path / "run"), after)


# --- Item 6: the seed is part of the run -------------------------------------------------------------------

def test_resuming_with_another_seed_is_refused(tmp_path: pathlib.Path) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment(seed=0))
    save_checkpoint(tmp_path)
    with pytest.raises(UserInputError, match=r"started with another seed \(seed: 0 in the workdir, 1 now\).* "
                                             r"Resume it with --config\.seed=0"):
        resume_checks.check_resume_compatible(str(tmp_path), fake_data.tiny_experiment(seed=1))
    resume_checks.check_resume_compatible(str(tmp_path), fake_data.tiny_experiment(seed=0, num_train_steps=99))


# --- Item 7: dev and test pairs that also occur in training ------------------------------------------------

def test_dev_pairs_that_occur_in_training_are_counted_in_one_warning(tmp_path: pathlib.Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    warnings: list[str] = []
    monkeypatch.setattr(input_pipeline.logging, "warning", lambda message, *args: warnings.append(message % args))
    _data(_write_corpus(tmp_path / "overlapping", dev=PAIRS[:60], test=PAIRS[140:160]), tmp_path / "tfds")
    overlap = [warning for warning in warnings if "also occur in the training split" in warning]
    assert len(overlap) == 1, warnings
    assert overlap[0].startswith("60 of 60 dev pairs (split 'validation') and 10 of 20 test pairs (split 'test')")
    warnings.clear()
    _data(_write_corpus(tmp_path / "held_out", dev=PAIRS[150:170]), tmp_path / "tfds")
    assert not [warning for warning in warnings if "also occur" in warning]


# --- Messages: one line, naming the field and the fix ------------------------------------------------------

def test_a_mesh_that_does_not_fit_the_devices_is_refused_in_one_line() -> None:
    with pytest.raises(UserInputError, match=r"config\.mesh_shape=\(4,\) needs 4 devices, but this run sees 1: set "):
        sharding._fit_mesh_shape((4,), ("data",), 1)
    with pytest.raises(UserInputError, match=r"mesh_shape=\(2, -1\): its other axes hold 2 devices, which does not "
                                             r"divide the 1 device"):
        sharding._fit_mesh_shape((2, -1), ("data", "model"), 1)
    assert sharding._fit_mesh_shape((2, -1), ("data", "model"), 8) == (2, 4)
    with pytest.raises(UserInputError, match="needs"):  # Checked before the trainer takes the work directory.
        setup_checks._check_devices(fake_data.tiny_experiment(mesh_shape=(jax.device_count() + 1,)))
    setup_checks._check_devices(fake_data.tiny_experiment())


@pytest.mark.skipif(jax.default_backend() == "gpu", reason="cuDNN runs on a GPU")
def test_cudnn_attention_off_a_gpu_is_refused_in_one_line() -> None:
    with pytest.raises(UserInputError, match=r"attention_implementation='cudnn' runs only on an NVIDIA GPU .* "
                                             r"--config\.attention_implementation=fused"):
        setup_checks._check_devices(fake_data.tiny_experiment(attention_implementation="cudnn"))


def test_a_batch_budget_under_one_row_is_a_config_error() -> None:
    with pytest.raises(schema.ConfigError, match=r"^test: config\.tokens_per_batch=4 cannot hold 1 rows of "
                                                 r"config\.max_len=32 tokens"):
        sections.build_experiment(fake_data.tiny_config(tokens_per_batch=4), "test")


def test_early_stopping_on_a_tiny_dev_split_is_a_user_error() -> None:
    data = fake_data.FakeData()
    data.stats = {"examples": {"validation": 60}}
    with pytest.raises(UserInputError, match="needs a dev split of at least 100 pairs .* this one has 60"):
        setup_checks._check_data(fake_data.tiny_experiment(early_stopping_patience=2), data)


def test_max_len_changed_on_resume_names_the_field_as_written(tmp_path: pathlib.Path) -> None:
    checkpoints.write_config(str(tmp_path), fake_data.tiny_experiment(max_len=32))
    save_checkpoint(tmp_path)
    with pytest.raises(UserInputError, match=r"a different model \(max_len: 32 in the workdir, 64 now\)\."):
        resume_checks.check_resume_compatible(str(tmp_path), fake_data.tiny_experiment(max_len=64))


def test_an_unwritable_data_directory_is_named_with_its_fix(tmp_path: pathlib.Path) -> None:
    def prepare() -> None:
        raise OSError(errno.EROFS, "Read-only file system", "/home/me/tensorflow_datasets")

    with pytest.raises(UserInputError) as raised:
        first_use._prepare_once(str(tmp_path / "corpus.lock"), "the corpus /data/en_de", lambda: False, prepare)
    message = str(raised.value)
    assert message.startswith("cannot write the corpus /data/en_de to /home/me/tensorflow_datasets (Read-only file "
                              "system)")
    assert "--config.data_dir=DIR, TFDS_DATA_DIR=DIR or ATTENTION_JAX_CACHE_DIR=DIR" in message and "--workdir" not in message


SMALL_MODEL = ["--config.num_layers=1", "--config.d_model=32", "--config.d_ff=64", "--config.num_heads=2",
               "--config.key_dim=16", "--config.value_dim=16", "--config.num_train_steps=2",
               "--config.final_bleu=False", "--config.vocab_size=60"]
COMMAND_LINE_MISTAKES = {  # Flags after SMALL_MODEL and a tiny corpus of 20 dev pairs; the text the line holds.
    "mesh_over_the_devices": (["--config.mesh_shape=(4,)"], "needs 4 devices, but this run sees 1"),
    "cudnn_on_a_cpu": (["--config.attention_implementation=cudnn"], "runs only on an NVIDIA GPU"),
    "budget_under_one_row": (["--config.tokens_per_batch=4"], "tokens_per_batch=4 cannot hold 1 rows"),
    "early_stopping_on_20_dev_pairs": (["--config.early_stopping_patience=2", "--config.eval_every_steps=1"],
                                       "needs a dev split of at least 100 pairs"),
}


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("name", sorted(COMMAND_LINE_MISTAKES))
def test_a_setup_mistake_is_one_line_exit_2_and_leaves_no_workdir(name: str, tmp_path: pathlib.Path) -> None:
    if name == "cudnn_on_a_cpu" and jax.default_backend() == "gpu":
        pytest.skip("cuDNN runs on a GPU")
    flags, expected = COMMAND_LINE_MISTAKES[name]
    corpus = _write_corpus(tmp_path / "corpus", dev=PAIRS[150:170])
    workdir = tmp_path / "run"
    completed = subprocess.run(
        [sys.executable, "-m", "attention_jax.main", "--config=configs/tiny.py", f"--workdir={workdir}",
         *SMALL_MODEL, f"--config.dataset=tsv:{corpus}", f"--config.data_dir={tmp_path / 'tfds'}", *flags],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
        env=train_support.subprocess_env(str(tmp_path / "cache")))
    assert completed.returncode == 2, completed.stderr[-3000:]
    assert "Traceback" not in completed.stderr, completed.stderr[-3000:]
    errors = [line for line in completed.stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1 and expected in errors[0], completed.stderr[-3000:]
    assert not workdir.exists()

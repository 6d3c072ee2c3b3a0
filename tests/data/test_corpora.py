"""Corpus recipes (attention_jax/data/corpora.py) and sweeps over corpora (launch.sweep --corpora).

Dry runs, refusals and the job list run in this process (fast); the local runs use
``tests/support/fake_main.py`` and, once, the real entry point on two tiny corpora (slow).
"""

from __future__ import annotations

import json
import pathlib
import re

import numpy as np
import pytest

from attention_jax.data import corpora
from attention_jax.foundation.registry import Registration
from configs import small_corpus
from configs.sweeps import attention_function, normalization, positions
from launch import export_results, local_executor, sweep_spec
from tests.support.sweep_cli import (REPO_ROOT, dry_run_commands, fake_main_env, needs_entry_point, sweep_in_process,  # noqa: F401
                                     tiny_data_dir, tiny_overrides)

BOTH = ("messages_en_de", "gnome_help_en_de")


def test_messages_recipe_is_what_the_shipped_sweeps_use() -> None:
    recipe, config = corpora.CORPORA.lookup("messages_en_de"), small_corpus.get_config()
    assert tuple(corpora.CORPORA) == BOTH
    assert recipe.dataset == attention_function.DATASET == normalization.DATASET
    assert (recipe.vocab_size, recipe.num_train_steps, recipe.warmup_steps) == (
        config.vocab_size, config.num_train_steps, config.warmup_steps)
    assert (recipe.max_len, recipe.eval_every_steps) == (config.max_len, normalization.EVAL_EVERY_STEPS)
    assert (recipe.positions_cap, positions.CAP, positions.MAX_LEN) == (12, 12, 256)
    gnome = corpora.CORPORA["gnome_help_en_de"]
    assert gnome.overrides() == dict(corpus="gnome_help_en_de", dataset="tsv:../shared/data/gnome_help_en_de",
                                     vocab_size=4000, num_train_steps=corpora.GNOME_HELP_TRAIN_STEPS,
                                     warmup_steps=300, eval_every_steps=100, max_len=128)


def test_a_corpus_registers_once_and_unknown_names_say_how() -> None:
    mine = corpora.Corpus(name="mine", dataset="tsv:x", vocab_size=8, num_train_steps=2, warmup_steps=1,
                          eval_every_steps=1, max_len=8, positions_cap=4)
    registration = corpora.register_corpus(mine)
    assert registration is not None
    try:
        assert corpora.register_corpus(mine) is None  # A sweep file imported twice.
        with pytest.raises(ValueError, match="registered already"):
            corpora.register_corpus(corpora.Corpus(**dict(mine.__dict__, max_len=16)))
        assert corpora.lookup_corpora(["mine", "messages_en_de"], "--corpora")[0] is mine
    finally:
        registration.undo()
    with pytest.raises(ValueError) as error:
        corpora.lookup_corpora(["mine"], "--corpora=mine")
    assert "unknown corpus 'mine'; known: messages_en_de, gnome_help_en_de" in str(error.value)
    assert "register_corpus" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ValueError, match="repeated"):
        corpora.lookup_corpora(list(BOTH) * 2, "--corpora")


def _bucket_sizes(corpus_dir: pathlib.Path, cap: int) -> list[int]:
    """Independent count of length_buckets' buckets: unique usable pairs by target words."""
    splits = {split: [tuple(line.rstrip("\n").split("\t", 1)) for line in
                      (corpus_dir / f"{split}.tsv").read_text(encoding="utf-8").splitlines()]
              for split in ("train", "dev", "test")}

    def usable(pair: tuple) -> bool:
        return len(pair) == 2 and bool(pair[0].strip()) and bool(pair[1].strip())

    test = np.array([len(pair[1].split()) for pair in set(filter(usable, splits["test"]))])
    pool = np.array([len(pair[1].split()) for pair in {pair for pairs in splits.values() for pair in pairs
                                                       if usable(pair) and len(pair[1].split()) > cap}])
    half = 3 * cap // 2
    return [int((test <= cap).sum()), int((pool <= half).sum()), int(((pool > half) & (pool <= 2 * cap)).sum()),
            int((pool > 2 * cap).sum())]


def test_gnome_cap_is_the_largest_that_leaves_500_pairs_in_every_bucket(gnome_help_en_de: pathlib.Path) -> None:
    cap = corpora.CORPORA["gnome_help_en_de"].positions_cap
    assert min(_bucket_sizes(gnome_help_en_de, cap)) >= 500
    assert min(_bucket_sizes(gnome_help_en_de, cap + 1)) < 500
    targets = [len(line.split("\t", 1)[1].split()) for line in
               (gnome_help_en_de / "train.tsv").read_text(encoding="utf-8").splitlines()]
    assert 0.8 < np.mean(np.array(targets) <= cap) < 0.85


def test_jobs_go_seed_corpus_row_with_the_recipe_between_row_and_common_overrides() -> None:
    sweep = sweep_spec.load_sweep("configs/sweeps/normalization.py")
    recipes = corpora.lookup_corpora(BOTH, "--corpora")
    jobs = sweep_spec.row_jobs(sweep, ["base", "post_warmup_1_17x_peak"], ["num_train_steps=7"], root="/r", run_root="/r",
                               python="py", main_module="attention_jax.main", seeds=(0, 1), corpora_to_run=recipes)
    assert [job.name for job in jobs] == [f"{corpus}/{row}/seed_{seed}" for seed in (0, 1) for corpus in BOTH
                                          for row in ("base", "post_warmup_1_17x_peak")]
    assert [job.index for job in jobs] == list(range(1, 9)) and {job.total for job in jobs} == {8}
    gnome_base = jobs[2]
    assert (gnome_base.workdir, gnome_base.record_dir) == ("/r/gnome_help_en_de/base/seed_0",) * 2
    assert list(gnome_base.argv) == [
        "py", "-m", "attention_jax.main", "--config=configs/sweeps/normalization.py:base",
        "--workdir=/r/gnome_help_en_de/base/seed_0", "--config.corpus=gnome_help_en_de",
        "--config.dataset=tsv:../shared/data/gnome_help_en_de", "--config.vocab_size=4000",
        f"--config.num_train_steps={corpora.GNOME_HELP_TRAIN_STEPS}", "--config.warmup_steps=300",
        "--config.eval_every_steps=100", "--config.max_len=128", "--config.num_train_steps=7", "--config.seed=0"]
    assert not any(flag.startswith("--config.warmup_steps") for flag in jobs[3].argv)  # The row's own warm-up.
    positions_sweep = sweep_spec.load_sweep("configs/sweeps/positions.py")
    argv = sweep_spec.row_argv(positions_sweep, "learned", "/w", [], python="py", main_module="m", corpus=recipes[1])
    assert "--config.dataset=tsv:runs/positions_corpora/gnome_help_en_de" in argv and "--config.max_len=512" in argv


def test_dry_run_over_corpora_on_every_executor(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "norm"
    common = ("--config=configs/sweeps/normalization.py", "--rows=base,no_residual", f"--root={root}",
              "--corpora=messages_en_de,gnome_help_en_de", "--seeds=1", "--dry_run")
    local = sweep_in_process(*common)
    assert local.returncode == 0, local.stderr
    assert "x seeds 0 x corpora messages_en_de, gnome_help_en_de" in local.stdout.splitlines()[0]
    workdirs = [next(arg for arg in command if arg.startswith("--workdir="))
                for command in dry_run_commands(local.stdout)]
    assert workdirs == [f"--workdir={root}/{corpus}/{row}/seed_0" for corpus in BOTH for row in ("base", "no_residual")]
    slurm = sweep_in_process(*common, "--executor=slurm")
    assert slurm.returncode == 0, slurm.stderr
    scripts = re.findall(r"^# ---- (.*)$", slurm.stdout, flags=re.M)
    assert scripts[1] == f"{root}/messages_en_de/no_residual/seed_0/job.sbatch"
    assert "#SBATCH --job-name=normalization-gnome_help_en_de-base-seed_0" in slurm.stdout
    tpu = sweep_in_process(*common, "--executor=tpu", "--tpu_name=v4", "--zone=z", "--remote_root=gs://b/n")
    assert tpu.returncode == 0, tpu.stderr
    assert "--workdir=gs://b/n/gnome_help_en_de/no_residual/seed_0" in tpu.stdout
    assert not root.exists(), "a dry run must write nothing"


def test_unknown_corpus_and_mixed_layouts_are_refused_before_anything_is_written(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "norm"
    result = sweep_in_process("--config=configs/sweeps/normalization.py", f"--root={root}", "--corpora=messages,x")
    assert result.returncode == 2 and not root.exists()
    assert result.stderr.count("\n") == 1 and "unknown corpus 'messages'; known: messages_en_de" in result.stderr
    assert "register_corpus" in result.stderr
    (root / "gnome_help_en_de").mkdir(parents=True)
    (root / "gnome_help_en_de" / "sweep.json").write_text("{}")
    flat = sweep_in_process("--config=configs/sweeps/normalization.py", f"--root={root}", "--dry_run")
    assert flat.returncode == 2 and "holds a sweep over corpora (gnome_help_en_de)" in flat.stderr
    (root / "sweep.json").write_text("{}")
    over = sweep_in_process("--config=configs/sweeps/normalization.py", f"--root={root}", "--corpora=gnome_help_en_de")
    assert over.returncode == 2 and "holds a sweep without corpora" in over.stderr


def test_a_common_dataset_or_corpus_override_is_refused_with_corpora(tmp_path: pathlib.Path,
                                                                     user_sweep: pathlib.Path) -> None:
    root = tmp_path / "norm"
    for flags in (("--corpora=messages_en_de,gnome_help_en_de", "--config.dataset=tsv:../shared/data/x"),
                  ("--corpora=gnome_help_en_de", "--config.corpus=messages_en_de")):
        result = sweep_in_process("--config=configs/sweeps/normalization.py", f"--root={root}", *flags, "--dry_run")
        key = flags[1].split("=")[0]
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert f"{key} cannot be combined with corpora" in result.stderr and "same data" in result.stderr
    own = sweep_in_process(f"--config={user_sweep}", f"--root={root}", "--config.dataset=synthetic_en_de", "--dry_run")
    assert own.returncode == 2 and "get_corpora()" in own.stderr  # The file's own corpora count too.
    alone = sweep_in_process("--config=configs/sweeps/normalization.py", f"--root={root}", "--rows=base",
                             "--config.dataset=tsv:../shared/data/gnome_help_en_de", "--dry_run")
    assert alone.returncode == 0, alone.stderr  # Without corpora the override is the user's corpus.
    assert "--config.dataset=tsv:../shared/data/gnome_help_en_de" in alone.stdout
    assert not root.exists()


USER_SWEEP = '''
from attention_jax.data import corpora
from configs import tiny

corpora.register_corpus(corpora.Corpus(name="user_corpus", dataset="synthetic_en_de/small", vocab_size=1000,
                                       num_train_steps=3, warmup_steps=2, eval_every_steps=3, max_len=8,
                                       positions_cap=4))


def get_sweep():
    return {"one_layer": {"num_layers": 1}, "two_layers": {"num_layers": 2}}


def get_corpora():
    return ("user_corpus", "messages_en_de")


def get_corpus_overrides(corpus):
    return {"max_len": 16} if corpus == "messages_en_de" else {}


def get_config():
    return tiny.get_config()
'''


@pytest.fixture
def user_sweep(tmp_path: pathlib.Path) -> pathlib.Path:
    """A sweep file outside the repository that registers a corpus and runs on it by default."""
    path = tmp_path / "elsewhere" / "my_sweep.py"
    path.parent.mkdir()
    path.write_text(USER_SWEEP)
    yield path
    if "user_corpus" in corpora.CORPORA:
        Registration(corpora.CORPORA, corpora.CORPORA["user_corpus"]).undo()


def test_a_users_sweep_file_elsewhere_gets_its_corpora(tmp_path: pathlib.Path, user_sweep: pathlib.Path) -> None:
    root = tmp_path / "mine"
    result = sweep_in_process(f"--config={user_sweep}", f"--root={root}", "--dry_run", "--config.d_model=32")
    assert result.returncode == 0, result.stderr
    commands = dry_run_commands(result.stdout)
    corpus_flags = [next(index for index, arg in enumerate(c) if arg.startswith("--config.corpus=")) for c in commands]
    assert [c[index - 1:index + 1] for c, index in zip(commands, corpus_flags)] == [
        [f"--config.name={row}", f"--config.corpus={corpus}"] for corpus in ("user_corpus", "messages_en_de")
        for row in ("one_layer", "two_layers")]
    assert f"--workdir={root}/user_corpus/two_layers" in commands[1]
    messages = commands[2]
    assert messages.index("--config.max_len=16") < messages.index("--config.d_model=32")
    assert "--config.max_len=64" not in messages
    only = sweep_in_process(f"--config={user_sweep}", f"--root={root}", "--dry_run", "--corpora=messages_en_de")
    assert len(dry_run_commands(only.stdout)) == 2 and "user_corpus" not in only.stdout


def _job(corpus: str, row: str, seed: int, root: pathlib.Path) -> sweep_spec.RowJob:
    record_dir = root / corpus / row / f"seed_{seed}"
    return sweep_spec.RowJob(row=row, index=1, total=1, workdir=str(record_dir), record_dir=str(record_dir), argv=(),
                             seed=seed, corpus=corpus)


def test_eta_costs_a_row_on_each_corpus_by_its_own_finished_runs(tmp_path: pathlib.Path) -> None:
    jobs = [_job(corpus, "base", seed, tmp_path) for seed in (0, 1) for corpus in BOTH]
    for job, wall_s in ((jobs[0], 100.0), (jobs[1], 400.0)):  # Seed 0 finished on both corpora.
        pathlib.Path(job.record_dir).mkdir(parents=True)
        (pathlib.Path(job.record_dir) / "results.json").write_text(json.dumps({"wall_s": wall_s}))
    clock = local_executor.SweepClock(jobs, parallel=2)
    assert clock.eta(now=0.0) == pytest.approx(400.0)  # The gnome run's own 400 s, not a mean over corpora.
    clock.started(jobs[2], 0.0)
    assert clock.finished(jobs[2], 90.0, 90.0).startswith("1 of 2 runs ended, 1 to go: ETA 6m40s")


def _fake_run(run_dir: pathlib.Path, corpus: str) -> None:
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps({"corpus": corpus, "name": "base"}))
    (run_dir / "results.json").write_text(json.dumps({"eval_ppl": 5.0}))
    (run_dir / "checkpoint_1").mkdir()


def test_export_keeps_the_corpus_level(tmp_path: pathlib.Path) -> None:
    root, to = tmp_path / "root", tmp_path / "docs"
    record = {"config_file": "c.py", "rows": ["base"], "all_rows": ["base"], "seeds": [0]}
    for corpus in BOTH:
        (root / corpus).mkdir(parents=True)
        (root / corpus / "sweep.json").write_text(json.dumps(dict(record, corpus=corpus)))
        _fake_run(root / corpus / "base" / "seed_0", corpus)
    _fake_run(to / "base" / "seed_0", "messages_en_de")  # The flat messages export already there stays.
    (to / "sweep.json").write_text(json.dumps(record))
    written = export_results.export_results(str(root), str(to))
    assert sorted(written) == sorted(f"{corpus}/{name}" for corpus in BOTH for name in
                                     ("sweep.json", "base/seed_0/config.json", "base/seed_0/results.json"))
    assert json.loads((to / "gnome_help_en_de" / "base" / "seed_0" / "config.json").read_text())["corpus"] == BOTH[1]
    assert json.loads((to / "sweep.json").read_text()) == record
    copied = export_results.export_results(str(to), str(tmp_path / "copy"))  # Both layouts in one root: both.
    assert {"base/seed_0/results.json", "gnome_help_en_de/base/seed_0/results.json", "sweep.json"} <= set(copied)


@pytest.mark.slow
def test_local_sweep_over_corpora_runs_records_and_resumes(tmp_path: pathlib.Path) -> None:
    root = tmp_path / "norm"
    args = ("--config=configs/sweeps/normalization.py", "--rows=base,no_residual", f"--root={root}",
            "--corpora=messages_en_de,gnome_help_en_de", "--seeds=1", "--main=fake_main", "--parallel=2",
            "--report=false", "--config.num_train_steps=7")
    first = sweep_in_process(*args, env=fake_main_env())
    assert first.returncode == 0, first.stdout + first.stderr
    assert "Summary: 4 done" in first.stdout and "4 of 4 runs ended, 0 to go: ETA 0m00s" in first.stdout
    for corpus in BOTH:
        config = json.loads((root / corpus / "no_residual" / "seed_0" / "config.json").read_text())
        assert (config["corpus"], config["dataset"]) == (corpus, corpora.CORPORA[corpus].dataset)
        assert (config["num_train_steps"], config["max_len"]) == (7, corpora.CORPORA[corpus].max_len)
        record = json.loads((root / corpus / "sweep.json").read_text())
        assert (record["corpus"], record["rows"], record["seeds"]) == (corpus, ["base", "no_residual"], [0])
        assert record["row_configs"]["base"]["dataset"] == corpora.CORPORA[corpus].dataset
    assert not (root / "sweep.json").exists()
    second = sweep_in_process(*args, env=fake_main_env())
    assert second.returncode == 0 and "Summary: 4 skipped" in second.stdout
    assert re.search(r"\[3/4\] gnome_help_en_de/base/seed_0 +skipped", second.stdout)


REAL_SWEEP = '''
from attention_jax.data import corpora
from configs import tiny

for name in ("tiny_a", "tiny_b"):
    corpora.register_corpus(corpora.Corpus(name=name, dataset="synthetic_en_de/small", vocab_size=1000,
                                           num_train_steps=2, warmup_steps=1, eval_every_steps=2, max_len=8,
                                           positions_cap=4))


def get_sweep():
    return {"drop0": {"dropout_rate": 0.0}, "drop1": {"dropout_rate": 0.1}}


def get_corpora():
    return ("tiny_a", "tiny_b")


def get_config():
    return tiny.get_config()
'''


@pytest.mark.slow
def test_two_rows_on_two_corpora_train_for_real(tmp_path: pathlib.Path, tiny_data_dir: pathlib.Path) -> None:
    needs_entry_point()
    sweep_file = tmp_path / "two_corpora.py"
    sweep_file.write_text(REAL_SWEEP)
    fields = tiny_overrides(tiny_data_dir, 2)
    for key in ("dataset", "vocab_size", "max_len", "num_train_steps", "warmup_steps", "eval_every_steps"):
        del fields[key]  # The recipes set these.
    root = tmp_path / "root"
    try:
        result = sweep_in_process(f"--config={sweep_file}", f"--root={root}", "--seeds=1", "--report=false",
                                  *(f"--config.{key}={value}" for key, value in fields.items()))
    finally:
        for name in ("tiny_a", "tiny_b"):
            if name in corpora.CORPORA:
                Registration(corpora.CORPORA, corpora.CORPORA[name]).undo()
    assert result.returncode == 0, result.stdout + result.stderr
    for corpus in ("tiny_a", "tiny_b"):
        for row in ("drop0", "drop1"):
            run = root / corpus / row / "seed_0"
            assert json.loads((run / "config.json").read_text())["corpus"] == corpus
            assert json.loads((run / "results.json").read_text())["step"] == 2

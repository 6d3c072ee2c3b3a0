"""The extrapolation experiment's machinery (docs/positions.md): the length split, the bucket evaluation, the report.

- the split on a small synthetic TSV corpus: bucket membership by target words, the capped corpus, the
  sampling, the same bytes on every run, and one-line refusals;
- the report on hand-made ``length_buckets.json`` files: paired changes, standard errors and readings
  checked against numbers worked out by hand below;
- the bucket evaluation end to end on a tiny run trained for a few steps (slow).
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

from attention_jax.data import length_buckets
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import MissingInputError, UserInputError
from attention_jax.reports import sweep_rows, within_groups
from configs.sweeps import positions

from tests.support import REPO_ROOT

WORDS_EN = ["the", "house", "is", "small", "a", "dog", "runs", "big", "green", "my", "cat", "sleeps"]
WORDS_DE = ["das", "Haus", "ist", "klein", "ein", "Hund", "läuft", "groß", "grün", "mein", "Katze", "schläft"]
OUR_MODULE_FILES = {path.name for folder in ("attention_jax", "launch", "configs")
                    for path in (REPO_ROOT / folder).rglob("*.py")}
CAP = 4  # Buckets: 1-4, 5-6, 7-8 and 9 or more target words.


def _pairs(rng: np.random.Generator, count: int, lengths: tuple[int, int]) -> list[str]:
    lines = []
    for _ in range(count):
        picks = rng.integers(0, len(WORDS_EN), rng.integers(*lengths))
        lines.append(" ".join(WORDS_EN[i] for i in picks) + "\t" + " ".join(WORDS_DE[i] for i in picks))
    return lines


def _write_corpus(directory: pathlib.Path, *, train: int = 80, long_train: int = 30, seed: int = 0) -> pathlib.Path:
    """Targets of 1-4 words mostly, some of 5-12 in every split; one pair with an empty target."""
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True)
    splits = {"train": _pairs(rng, train, (1, 5)) + _pairs(rng, long_train, (5, 13)) + ["the cat\t"],
              "dev": _pairs(rng, 12, (1, 5)) + _pairs(rng, 6, (5, 13)),
              "test": _pairs(rng, 12, (1, 5)) + _pairs(rng, 6, (5, 13))}
    for name, lines in splits.items():
        (directory / f"{name}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def _words(line: str) -> int:
    return len(line.split("\t")[1].split())


def test_split_puts_each_pair_in_its_bucket_and_caps_the_corpus(tmp_path: pathlib.Path) -> None:
    corpus = _write_corpus(tmp_path / "corpus")
    record = length_buckets.write_length_split(str(corpus), CAP, str(tmp_path / "split"), min_pairs=1, max_pairs=0)
    assert record["cap"] == CAP
    ranges = {name: (bucket["min_words"], bucket["max_words"]) for name, bucket in record["buckets"].items()}
    assert ranges == {"within_cap": (1, 4), "up_to_1.5x": (5, 6), "up_to_2x": (7, 8), "beyond_2x": (9, 12)}
    source_lines = {name: (corpus / f"{name}.tsv").read_text(encoding="utf-8").splitlines()
                    for name in length_buckets.SPLITS}
    for name in length_buckets.SPLITS:  # The capped corpus: every usable pair within the cap, in file order.
        kept = (tmp_path / "split" / f"{name}.tsv").read_text(encoding="utf-8").splitlines()
        assert kept == [line for line in source_lines[name] if 1 <= _words(line) <= CAP]
        assert record["corpus_pairs"][name] == len(kept)
    pool = {line for name in length_buckets.SPLITS for line in source_lines[name] if _words(line) > CAP}
    for name, (low, high) in ranges.items():
        lines = (tmp_path / "split" / record["buckets"][name]["file"]).read_text(encoding="utf-8").splitlines()
        assert len(lines) == record["buckets"][name]["num_pairs"] > 0
        assert all(low <= _words(line) <= high for line in lines)
        expected = ({line for line in source_lines["test"] if 1 <= _words(line) <= CAP} if name == "within_cap"
                    else {line for line in pool if low <= _words(line) <= high})
        assert set(lines) == expected  # Every held-apart pair of the range, each once.
        assert lines == sorted(lines, key=lambda line: (_words(line), *line.split("\t")))


def test_split_is_deterministic_and_samples_with_a_fixed_seed(tmp_path: pathlib.Path) -> None:
    corpus = _write_corpus(tmp_path / "corpus", long_train=60)
    first = length_buckets.write_length_split(str(corpus), CAP, str(tmp_path / "a"), min_pairs=1, max_pairs=5)
    second = length_buckets.write_length_split(str(corpus), CAP, str(tmp_path / "b"), min_pairs=1, max_pairs=5)
    assert {name: bucket["sha256"] for name, bucket in first["buckets"].items()} == \
           {name: bucket["sha256"] for name, bucket in second["buckets"].items()}
    for name in ("train.tsv", "buckets/beyond_2x.tsv", "buckets/within_cap.tsv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert all(bucket["num_pairs"] == min(5, bucket["num_available"]) for bucket in first["buckets"].values())
    other_seed = length_buckets.write_length_split(str(corpus), CAP, str(tmp_path / "c"), min_pairs=1, max_pairs=5,
                                                   seed=1)
    assert other_seed["buckets"]["within_cap"]["sha256"] != first["buckets"]["within_cap"]["sha256"]
    assert length_buckets.read_split(str(tmp_path / "a"))["cap"] == CAP  # Fingerprints match the files.
    with open(tmp_path / "a" / "buckets" / "up_to_2x.tsv", "a", encoding="utf-8") as bucket_file:
        bucket_file.write("extra\tpair\n")
    with pytest.raises(UserInputError, match="changed since"):
        length_buckets.read_split(str(tmp_path / "a"))


@pytest.mark.slow
def test_split_refuses_bad_input_in_one_line(tmp_path: pathlib.Path) -> None:
    corpus = _write_corpus(tmp_path / "corpus")
    with pytest.raises(MissingInputError, match="does not exist"):
        length_buckets.write_length_split(str(tmp_path / "none"), CAP, str(tmp_path / "out"))
    with pytest.raises(UserInputError, match=r"--cap=12 leaves fewer than 1 pairs in up_to_1.5x 0"):
        length_buckets.write_length_split(str(corpus), 12, str(tmp_path / "out"), min_pairs=1)
    with pytest.raises(UserInputError, match="choose a larger cap"):  # Nothing within a cap of 2 in 200 test pairs.
        length_buckets.write_length_split(str(corpus), 2, str(tmp_path / "out"), min_pairs=200)
    with pytest.raises(UserInputError, match="at least 2 words"):
        length_buckets.write_length_split(str(corpus), 1, str(tmp_path / "out"), min_pairs=0)
    with pytest.raises(UserInputError, match="the corpus itself"):
        length_buckets.write_length_split(str(corpus), CAP, str(corpus))
    assert not (tmp_path / "out").exists()  # Checked before anything is written.
    completed = subprocess.run([sys.executable, "-m", "attention_jax.data.length_buckets", f"--corpus={corpus}",
                                "--cap=30", f"--out={tmp_path / 'out'}"], cwd=REPO_ROOT, capture_output=True,
                               text=True, timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines()[-1].startswith("attention_jax.data.length_buckets: error: --cap=30 leaves fewer than 200")


# The report on hand-made files. Perplexities per seed (0, 1, 2) and bucket:
PPL = {"sinusoidal": {"within_cap": [5.0, 5.0, 5.0], "beyond_2x": [10.0, 12.0, 11.0]},
       "learned": {"within_cap": [5.05, 4.9, 5.1], "beyond_2x": [12.0, 15.0, 12.1]}}
BLEU = {"sinusoidal": {"within_cap": [30.0, 31.0, 32.0], "beyond_2x": [10.0, 12.0, 11.0]},
        "learned": {"within_cap": [30.5, 30.0, 32.5], "beyond_2x": [6.0, 9.0, 7.0]}}
# By hand. Beyond 2x, learned against sinusoidal: changes 12/10 - 1 = 0.2, 15/12 - 1 = 0.25, 12.1/11 - 1 = 0.1;
# mean 0.55 / 3 = 0.183333; deviations 0.016667, 0.066667, -0.083333, squares summing to 0.0116667, over n - 1 = 2:
# variance 0.00583333, sd 0.0763763, SE = sd / sqrt(3) = 0.0440959; 0.1833 > 2 x 0.0441: "higher".
# BLEU differences -4, -3, -4: mean -11/3 = -3.666667, sd 0.577350, SE 0.333333: "lower".
# Within the cap: changes 0.01, -0.02, 0.02, mean 0.0033333, sd 0.0208167, SE 0.0120185: "within noise".
# Trend (beyond minus within): 0.19, 0.27, 0.08; mean 0.18, sd 0.0953939, SE 0.0550757: "worse with length".
# Learned perplexity beyond 2x: 12, 15, 12.1, mean 13.033333, sd 1.703917, SE 0.983757.


def _write_scored_run(root: pathlib.Path, row: str, seed: int, ppl: dict, bleu: dict) -> None:
    run_dir = root / row / f"seed_{seed}"
    run_dir.mkdir(parents=True)
    config = positions.get_config(row)  # The sweep's own row, as config.json holds it.
    config.seed = seed
    (run_dir / run_files.CONFIG_FILE).write_text(json.dumps(config.to_dict(), default=list))
    ranges = {"within_cap": (1, 4, 50), "beyond_2x": (9, 30, 40)}
    buckets = {name: dict(min_words=low, max_words=high, num_pairs=count, sha256="x", perplexity=ppl[name][seed],
                          bleu=bleu[name][seed]) for name, (low, high, count) in ranges.items()}
    (run_dir / run_files.LENGTH_BUCKETS_FILE).write_text(json.dumps(dict(cap=4, buckets=buckets)))


@pytest.fixture()
def scored_root(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "positions"
    for row in ("sinusoidal", "learned"):
        for seed in range(3):
            _write_scored_run(root, row, seed, PPL[row], BLEU[row])
    _write_scored_run(root, "none", 0, {"within_cap": [6.0], "beyond_2x": [30.0]},
                      {"within_cap": [20.0], "beyond_2x": [2.0]})
    return root


POSITIONS = positions.bucket_comparison()  # What the sweep file's get_report() declares.


def test_report_pairs_by_seed_with_hand_computed_changes(scored_root: pathlib.Path) -> None:
    _, rows = sweep_rows.read_sweep_rows(str(scored_root))
    assert within_groups._read_bucket_results(str(scored_root), rows)
    compared = {(row.row, row.group): row for row in within_groups._compare_encodings(str(scored_root), rows, POSITIONS)}
    records = {(record["row"], record["bucket"]): record for record in within_groups._bucket_records(compared.values(), POSITIONS)}
    beyond = records[("learned", "beyond_2x")]
    assert beyond["paired_seeds"] == 3
    assert beyond["ppl_change_mean"] == pytest.approx(0.183333, abs=1e-6)
    assert beyond["ppl_change_se"] == pytest.approx(0.0440959, abs=1e-6)
    assert beyond["ppl_reading"] == "higher" and beyond["reading_basis"] == "|mean| > 2 x SE, 3 paired seeds"
    assert beyond["bleu_difference_mean"] == pytest.approx(-3.666667, abs=1e-6)
    assert beyond["bleu_difference_se"] == pytest.approx(0.333333, abs=1e-6)
    assert beyond["bleu_reading"] == "lower"
    assert beyond["ppl_mean"] == pytest.approx(13.033333, abs=1e-6)
    within = records[("learned", "within_cap")]
    assert within["ppl_change_mean"] == pytest.approx(0.0033333, abs=1e-6)
    assert within["ppl_change_se"] == pytest.approx(0.0120185, abs=1e-6)
    assert within["ppl_reading"] == "within noise"
    assert records[("sinusoidal", "beyond_2x")]["ppl_reading"] == "reference"
    assert records[("none", "beyond_2x")]["ppl_reading"] == "1 seed"
    assert records[("none", "beyond_2x")]["ppl_change_mean"] == pytest.approx(2.0)  # 30 / 10 - 1, seed 0 only.
    trends = {trend.name: trend for trend in within_groups._length_trends(list(compared.values()))}
    assert sorted(trends["learned"].differences.values()) == pytest.approx([0.08, 0.19, 0.27])
    # The plot's third panel: the same paired changes, in percent, bucket by bucket; no line for the reference.
    series = within_groups._change_series(within_groups._compare_encodings(str(scored_root), rows, POSITIONS))
    assert set(series) == {"learned", "none"}
    (within_mean, within_se), (beyond_mean, beyond_se) = series["learned"]
    assert (within_mean, within_se, beyond_mean, beyond_se) == pytest.approx((0.33333, 1.20185, 18.3333, 4.40959),
                                                                            abs=1e-4)
    assert series["none"] == [(pytest.approx(20.0), None), (pytest.approx(200.0), None)]  # One seed: no SE.
    assert trends["learned"].reading == "worse with length"
    assert trends["none"].reading == "1 seed"


@pytest.mark.slow
def test_report_command_writes_table_csv_and_plot(scored_root: pathlib.Path) -> None:
    rows = ["sinusoidal", "learned", "none"]  # The sweep file's get_report() declares the bucket report.
    (scored_root / run_files.SWEEP_FILE).write_text(json.dumps(dict(config_file="configs/sweeps/positions.py",
                                                                    rows=rows, all_rows=rows)))
    completed = subprocess.run([sys.executable, "-m", "attention_jax.report", str(scored_root)], cwd=REPO_ROOT,
                               capture_output=True, text=True, timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert [os.path.basename(path) for path in completed.stdout.split()][-3:] == \
        ["positions_by_length.md", "positions_by_length.csv", "positions_by_length.png"]
    markdown = (scored_root / "positions_by_length.md").read_text(encoding="utf-8")
    assert ("| beyond_2x (9-30, 40) | learned | 3 | 13.03 ± 0.98 | +18.3 ± 4.4% | higher | 7.3 ± 0.9 | -3.7 ± 0.3 "
            "| lower |") in markdown
    assert "| learned | within_cap → beyond_2x | +18.0 ± 5.5% | worse with length |" in markdown
    assert (scored_root / "positions_by_length.png").stat().st_size > 10_000
    assert len((scored_root / "positions_by_length.csv").read_text().splitlines()) == 1 + 2 * 3


@pytest.mark.slow
@pytest.mark.end_to_end
def test_bucket_evaluation_of_a_tiny_trained_run(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from attention_jax.evaluation import length_bucket_evaluation
    from attention_jax.experiment import sections
    from attention_jax.training import train
    from tests.support import fake_data

    corpus = _write_corpus(tmp_path / "corpus", train=160, long_train=40)
    split_dir = tmp_path / "split"
    split = length_buckets.write_length_split(str(corpus), CAP, str(split_dir), min_pairs=1, max_pairs=6)
    config = fake_data.tiny_config(dataset=f"tsv:{split_dir}", data_dir=str(tmp_path / "tfds"), vocab_size=48,
                                   max_len=48, tokens_per_batch=192, num_train_steps=4, eval_every_steps=0,
                                   checkpoint_every_steps=4)
    workdir = tmp_path / "root" / "sinusoidal" / "seed_0"
    experiment = sections.build_experiment(config, "test_length_buckets")
    assert train.train_and_evaluate(experiment, str(workdir))["finished"]
    record = length_bucket_evaluation.evaluate_run(str(workdir), str(split_dir), batch_size=8)
    assert list(record["buckets"]) == list(length_buckets.BUCKET_NAMES)
    assert record["beam_size"] == 4 and record["alpha"] == 0.6 and record["max_source_len"] == 48
    assert record["checkpoint"] == "latest" and record["trained_steps"] == 4
    assert record["positional_encoding"] == "sinusoidal" and record["seed"] == config.seed and record["cap"] == CAP
    for name, figures in record["buckets"].items():
        assert figures["num_pairs"] == split["buckets"][name]["num_pairs"]
        assert figures["num_over_max_len"] == 0 and figures["num_skipped_for_perplexity"] == 0
        assert figures["perplexity"] > 1.0 and 0.0 <= figures["bleu"] <= 100.0
        hypotheses = workdir / f"length_buckets.{name}.hypotheses.txt"
        assert len(hypotheses.read_text(encoding="utf-8").splitlines()) == figures["num_pairs"]
    assert json.loads((workdir / run_files.LENGTH_BUCKETS_FILE).read_text()) == record
    # The loss by target position pools the same tokens: its mean is the buckets' pooled perplexity's log.
    plot = tmp_path / "position_losses.png"
    completed = subprocess.run([sys.executable, "-m", "attention_jax.evaluation.position_losses",
                                f"--buckets={split_dir}", f"--workdir={workdir}", f"--out={plot}", "--bin=4"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                               env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert completed.returncode == 0, completed.stderr[-2000:]
    # Only our INFO lines (absl's "I<date> <time> <thread> <file>:<line>] ..."): no orbax "Closing ..." chatter.
    info_files = {line.split("]")[0].split()[-1].split(":")[0] for line in completed.stderr.splitlines()
                  if re.match(r"I\d{4} ", line)}
    assert info_files <= OUR_MODULE_FILES, info_files - OUR_MODULE_FILES
    assert "Closing" not in completed.stderr
    assert plot.stat().st_size > 10_000
    losses = json.loads((workdir / run_files.POSITION_LOSSES_FILE).read_text())
    tokens = sum(figures["num_target_tokens"] for figures in record["buckets"].values())
    pooled_nats = sum(math.log(figures["perplexity"]) * figures["num_target_tokens"]
                      for figures in record["buckets"].values()) / tokens
    assert sum(losses["counts"]) == tokens and losses["num_pairs"] == sum(
        figures["num_pairs"] for figures in record["buckets"].values())
    assert sum(losses["sums"]) / sum(losses["counts"]) == pytest.approx(pooled_nats, rel=1e-4)
    assert losses["counts"] == sorted(losses["counts"], reverse=True)  # Every target reaches position 0.
    assert losses["trained_steps"] == 4 and losses["positional_encoding"] == "sinusoidal"
    assert 1 <= losses["training_target_pieces"]["p50"] <= losses["training_target_pieces"]["max"]
    # Scored already: the second call reuses every bucket (scoring one would fail here).
    def refuse(*args: object) -> None:
        raise AssertionError("a bucket was scored again")

    monkeypatch.setattr(length_bucket_evaluation, "_score_bucket", refuse)
    assert length_bucket_evaluation.evaluate_run(str(workdir), str(split_dir), batch_size=8) == record
    (tmp_path / "root" / run_files.SWEEP_FILE).write_text(json.dumps(dict(rows=["sinusoidal"], seeds=[0])))
    assert length_bucket_evaluation.evaluate_root(str(tmp_path / "root"), str(split_dir)) == []
    assert length_bucket_evaluation._expected_runs(str(tmp_path / "root")) == [str(workdir)]


def test_the_committed_positions_sweep_reports_without_one_report_overwriting_another(tmp_path: pathlib.Path) -> None:
    from attention_jax.reports import all_reports

    committed = pathlib.Path(__file__).resolve().parents[2] / "docs" / "positions"
    paths = all_reports.write_reports(str(committed), str(tmp_path))
    assert len(paths) == len(set(paths)), paths  # The sweep's report is also named "positions".
    names = {os.path.basename(path) for path in paths}
    assert {"positions.md", "positions_by_length.md", "positions_by_length.png"} <= names, names
    # Any number of seeds: the committed sweep grows as its runs finish.
    assert re.search(r"\| learned \| [1-3] \|", (tmp_path / "positions_by_length.md").read_text(encoding="utf-8"))
    assert "| learned |" in (tmp_path / "positions.md").read_text(encoding="utf-8")  # The Table-2-style one.


def test_position_losses_bin_exactly_and_draw_the_difference_to_sinusoidal(tmp_path: pathlib.Path) -> None:
    from attention_jax.evaluation import position_losses

    pieces = {"p50": 5, "p90": 9, "p99": 12, "max": 20}
    sinusoidal = dict(positional_encoding="sinusoidal", seed=0, num_pairs=60, training_target_pieces=pieces,
                      sums=[60.0, 120.0, 30.0, 40.0, 5.0], counts=[60, 60, 30, 20, 10])
    learned = dict(sinusoidal, positional_encoding="learned", sums=[30.0, 60.0, 30.0, 20.0, 1.0])
    starts, means = position_losses._binned_means(sinusoidal, 2)
    assert starts.tolist() == [0, 2, 4]
    # Bins pool sums and counts: (60 + 120) / 120 = 1.5, (30 + 40) / 50 = 1.4; 10 tokens are too few to draw.
    assert means[:2].tolist() == pytest.approx([1.5, 1.4]) and np.isnan(means[2])
    plot = tmp_path / "losses.png"
    position_losses.plot_runs([sinusoidal, learned], str(plot), bin_size=2)
    assert plot.stat().st_size > 10_000

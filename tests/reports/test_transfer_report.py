"""The transfer report (issue 85): a sweep over corpora, each row's paired change on every corpus and a verdict.

A root ``runs/<corpus>/<row>/seed_<k>/`` of two corpora is written by hand as ``launch.sweep`` and training
leave it (as tests/reports/test_comparison_report.py does for one corpus); the changes are checked against NumPy.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import pathlib
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

from attention_jax.data import corpora
from attention_jax.experiment import schema
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.reports import all_reports, comparison, sweep_rows, transfer_report, within_groups
from configs.sweeps import positions
from launch import sweep_record, sweep_spec
from tests.support.sweep_cli import REPO_ROOT

SWEEP_FILE = '''
from configs import tiny


def get_config():
    return tiny.get_config()


def get_sweep():
    return {"base": {}, "alpha": dict(dropout_rate=0.0), "beta": dict(dropout_rate=0.2),
            "gamma": dict(dropout_rate=0.3), "delta": dict(dropout_rate=0.05)}


def get_report():
    from attention_jax.reports import within_groups

    return dict(headline_measures=[within_groups.LENGTH_TREND])
'''
# Directory -> row -> per seed (dev PPL, dev BLEU); None: the seed has not finished. "gamma" seed 1 diverges on
# gnome. The first directory's runs name their corpus in config.json; the second's do not (older runs).
CORPORA = {"messages": "messages_en_de", "gnome_help_en_de": None}
RUNS: dict[str, dict[str, list]] = {
    "messages": {
        "base": [(10.0, 20.0), (11.0, 21.0), (12.0, 22.0)],
        "alpha": [(9.0, 22.0), (10.0, 23.2), (10.7, 23.9)],    # PPL -10%, BLEU +2: both beyond 2 SE.
        "beta": [(10.5, 20.5), (11.6, 20.6), (12.5, 22.3)],    # PPL +5% beyond; BLEU within noise.
        "gamma": [(10.2, 20.1), (11.1, 21.2), (12.3, 22.1)],
        "delta": [(9.5, 21.0), (10.4, 22.0), (11.5, 23.0)],
    },
    "gnome_help_en_de": {
        "base": [(20.0, 30.0), (22.0, 31.0), (24.0, 32.0)],
        "alpha": [(18.4, 28.1), (20.0, 29.0), (22.2, 29.8)],   # PPL -8% (holds), BLEU -2 (reverses).
        "beta": [(20.5, 30.4), (21.5, 30.7), (24.3, 32.2)],    # PPL within noise (one corpus), BLEU too (noise).
        "gamma": [(20.5, 30.2), (22.4, 31.1), (24.6, 32.3)],   # Seed 1 diverged: unstable.
        "delta": [(19.0, 31.0), None, None],                   # One paired seed: pending, n=1.
    },
}
EXPECTED = {("alpha", "dev_ppl"): "holds", ("alpha", "dev_bleu"): "reverses", ("beta", "dev_ppl"): "one corpus",
            ("beta", "dev_bleu"): "noise", ("gamma", "dev_ppl"): "unstable", ("gamma", "dev_bleu"): "unstable",
            ("delta", "dev_ppl"): "pending", ("delta", "dev_bleu"): "pending"}


@pytest.fixture(autouse=True)
def corpus_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``corpus`` field, declared here until the data section declares it (a run's config.json holds it)."""
    if "corpus" not in {field.name for field in schema.FIELDS}:
        monkeypatch.setitem(schema.FIELDS_BY_NAME, "corpus",
                            dataclasses.replace(schema.FIELDS_BY_NAME["dataset"], name="corpus"))


def _write_corpus(tmp_path: pathlib.Path, directory: pathlib.Path, runs: dict, corpus: str | None) -> None:
    sweep_path = tmp_path / "my_sweep.py"
    sweep_path.write_text(SWEEP_FILE)
    sweep = sweep_spec.load_sweep(str(sweep_path))
    description = sweep_record.sweep_description(sweep, [], seeds=[0, 1, 2])
    sweep_record.record_launch(str(directory), description, list(runs), "local", force=False)
    for row, seeds in runs.items():
        for seed, figures in enumerate(seeds):
            run_dir = directory / row / f"seed_{seed}"
            run_dir.mkdir(parents=True)
            config = json.loads(sweep.row_config(row).to_json_best_effort())
            config.update(seed=seed, **({"corpus": corpus} if corpus else {}))
            (run_dir / "config.json").write_text(json.dumps(config))
            if figures is None:
                continue
            results = dict(step=1600, params=1000, dev_ppl=figures[0], dev_bleu=figures[1], wall_s=60.0)
            if (directory.name, row, seed) == ("gnome_help_en_de", "gamma", 1):  # Blew up after its best step.
                results.update(best_eval_ppl=figures[0], best_step=1100, eval_ppl=8 * figures[0], eval_accuracy=0.02)
                (run_dir / "metrics.jsonl").write_text("".join(
                    json.dumps({"step": step, "eval/accuracy": accuracy}) + "\n"
                    for step, accuracy in ((1100, 0.3), (1600, 0.02))))
            (run_dir / "results.json").write_text(json.dumps(results))


@pytest.fixture()
def corpora_root(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "runs"
    for directory, corpus in CORPORA.items():
        _write_corpus(tmp_path, root / directory, RUNS[directory], corpus)
    return root


def _expected(directory: str, row: str, index: int, relative: bool) -> np.ndarray:
    """The paired changes of ``row`` on one corpus, from the table above (NumPy); a diverged seed left out."""
    pairs = [(ours[index], base[index]) for seed, (ours, base) in enumerate(zip(RUNS[directory][row],
                                                                               RUNS[directory]["base"]))
             if ours and (directory, row, seed) != ("gnome_help_en_de", "gamma", 1)]
    values, reference = np.array(pairs).T
    return values / reference - 1 if relative else values - reference


def test_verdicts_and_changes_match_numpy(corpora_root: pathlib.Path) -> None:
    corpora = transfer_report.read_corpora(str(corpora_root))
    assert [corpus.name for corpus in corpora] == ["gnome_help_en_de", "messages_en_de"]  # Directory, field.
    assert all(corpus.reference == "base" for corpus in corpora)
    transfers = {(item.row, item.metric.name): item for item in transfer_report._compare_corpora(corpora)}
    assert {key: transfer.verdict for key, transfer in transfers.items()} == EXPECTED
    for (row, metric), transfer in transfers.items():
        beyond = []  # (beyond 2 SE, sign) per corpus, from NumPy.
        for corpus, stats in zip(corpora, transfer.stats):
            changes = _expected(os.path.basename(corpus.directory), row, 0 if metric == "dev_ppl" else 1,
                                metric == "dev_ppl")
            assert stats is not None and stats.paired_seeds == len(changes)
            assert stats.change_mean == pytest.approx(changes.mean())
            se = np.std(changes, ddof=1) / np.sqrt(len(changes)) if len(changes) > 1 else None
            assert stats.change_se == (None if se is None else pytest.approx(se))
            if se is not None and abs(changes.mean()) > 2 * se:
                beyond.append(changes.mean() > 0)
        if row in ("alpha", "beta"):  # Neither diverged nor short of seeds: the rule on NumPy's figures.
            oracle = {0: "noise", 1: "one corpus"}.get(len(beyond), "holds" if len(set(beyond)) == 1 else "reverses")
            assert oracle == EXPECTED[(row, metric)], (row, metric)


def test_verdict_rule_for_three_corpora() -> None:
    def stats(*changes: float) -> comparison.MetricStats:
        mean, se = comparison._mean_and_se(list(changes))
        return comparison.MetricStats(comparison.METRICS[0], {}, None, None, dict(enumerate(changes)), mean, se,
                                      comparison.verdict(list(changes)))

    up, down, flat = stats(1.0, 1.1, 0.9), stats(-1.0, -1.1, -0.9), stats(1.0, -1.0, 0.1)
    assert transfer_report._transfer_verdict([up, up, up]) == "holds"
    assert transfer_report._transfer_verdict([up, flat, down]) == "reverses"
    assert transfer_report._transfer_verdict([up, up, flat]) == "some corpora"
    assert transfer_report._transfer_verdict([flat, up, flat]) == "one corpus"
    assert transfer_report._transfer_verdict([flat, flat, flat]) == "noise"
    assert transfer_report._transfer_verdict([up, None, up]) == "pending"
    assert transfer_report._transfer_verdict([up, stats(0.5), up]) == "pending"


def test_files_written_and_markdown_labels_every_spread(corpora_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    out = tmp_path / "out"
    paths = all_reports.write_reports(str(corpora_root), str(out))
    names = {str(pathlib.Path(path).relative_to(out)) for path in paths}
    assert {"transfer.md", "transfer.csv", "transfer.png", "messages/my_sweep.md",
            "gnome_help_en_de/my_sweep.md", "gnome_help_en_de/my_sweep.csv"} <= names, names
    markdown = (out / "transfer.md").read_text(encoding="utf-8")
    assert "## Transfer" in markdown and transfer_report.RULE in markdown
    assert "gnome_help_en_de: change ± SE (n) | messages_en_de: change ± SE (n)" in markdown
    ppl_gnome, ppl_messages = (_expected(directory, "alpha", 0, True) * 100 for directory in ("gnome_help_en_de",
                                                                                              "messages"))
    se = [np.std(changes, ddof=1) / np.sqrt(3) for changes in (ppl_gnome, ppl_messages)]
    assert (f"| alpha | dev PPL | {ppl_gnome.mean():+.1f}% ± {se[0]:.1f}% (n=3) | "
            f"{ppl_messages.mean():+.1f}% ± {se[1]:.1f}% (n=3) | holds |") in markdown
    delta = _expected("gnome_help_en_de", "delta", 1, False)[0]
    assert f"| delta | dev BLEU | {delta:+.1f} (n=1, no SE) |" in markdown
    gamma = _expected("gnome_help_en_de", "gamma", 0, True) * 100  # Seed 1 diverged: left out, and said.
    assert f"| gamma | dev PPL | {gamma.mean():+.1f}% ± {np.std(gamma, ddof=1) / np.sqrt(2):.1f}% (n=2; 1 diverged) |" \
        in markdown
    assert "[gnome_help_en_de/my_sweep.md](gnome_help_en_de/my_sweep.md)" in markdown
    with open(out / "transfer.csv", encoding="utf-8") as file:
        records = {(record["row"], record["metric"], record["corpus"]): record for record in csv.DictReader(file)}
    assert len(records) == len(EXPECTED) * 2
    alpha = records[("alpha", "dev_ppl", "messages_en_de")]
    assert float(alpha["change_mean"]) == pytest.approx(ppl_messages.mean())
    assert float(alpha["change_se"]) == pytest.approx(se[1])
    assert (alpha["change_unit"], alpha["paired_seeds"], alpha["verdict"]) == ("%", "3", "holds")
    assert records[("delta", "dev_bleu", "gnome_help_en_de")]["paired_seeds"] == "1"
    assert records[("gamma", "dev_bleu", "gnome_help_en_de")]["corpus_verdict"] == comparison.UNSTABLE_VERDICT
    assert matplotlib.image.imread(out / "transfer.png").std() > 0.01  # Not a blank figure.


def test_a_single_corpus_root_is_reported_as_before(corpora_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    flat = tmp_path / "flat"
    _write_corpus(tmp_path, flat, RUNS["messages"], "messages_en_de")
    assert transfer_report.read_corpora(str(flat)) == []
    paths = all_reports.write_reports(str(flat), str(flat))
    assert not any("transfer" in path for path in paths) and not (flat / "transfer.md").exists()
    all_reports.write_reports(str(corpora_root), str(corpora_root))
    for suffix in (".md", ".csv"):  # The corpus's tables are those of the same runs reported alone.
        assert (corpora_root / "messages" / f"my_sweep{suffix}").read_text() == (flat / f"my_sweep{suffix}").read_text()
    (tmp_path / "one").mkdir()
    os.rename(corpora_root / "messages", tmp_path / "one" / "messages")
    paths = all_reports.write_reports(str(tmp_path / "one"), str(tmp_path / "one"))  # One corpus: no transfer.
    assert paths and not any("transfer" in path for path in paths)


def test_extra_metrics_take_part(corpora_root: pathlib.Path) -> None:
    for directory in RUNS:  # Per-run evaluations (comparison_report._evaluation_metrics) join the headline metrics.
        for row in ("base", "alpha"):
            for seed in range(3):
                buckets = {"beyond_2x": {"bleu": RUNS[directory][row][seed][1] / 2, "perplexity": 9.0}}
                (corpora_root / directory / row / f"seed_{seed}" / "length_buckets.json").write_text(
                    json.dumps({"buckets": buckets}))
    corpora = transfer_report.read_corpora(str(corpora_root))
    transfers = {(transfer.row, transfer.metric.name): transfer.verdict
                 for transfer in transfer_report._compare_corpora(corpora)}
    assert transfers[("alpha", "length_buckets/beyond_2x/bleu")] == "reverses"  # Half of dev BLEU's changes.
    assert transfers[("beta", "length_buckets/beyond_2x/bleu")] == "pending"  # Not scored: n=0.
    own = comparison.Metric("wall_s", "wall s", 0, True, lambda run_dir, run: run.results.get("wall_s"))
    verdicts = {transfer.verdict for transfer in transfer_report._compare_corpora(corpora, [own])
                if transfer.row in ("alpha", "beta")}
    assert verdicts == {"noise"}  # Every run took 60 s.


BUCKETS = ("within_cap", "up_to_2x", "beyond_2x")
# Directory -> row -> per seed, perplexity per bucket. The trend (last minus first bucket's change against base)
# is about -10 pp on messages and +10 pp on gnome for alpha: it reverses; beta's is about 0 on both.
BUCKET_PPL = {
    "messages": {"base": [(5.0, 8.0, 12.0), (5.2, 8.1, 12.5), (4.9, 7.8, 11.6)],
                 "alpha": [(5.0, 7.5, 10.8), (5.3, 7.8, 11.1), (4.8, 7.2, 10.4)],
                 "beta": [(5.1, 8.3, 12.2), (5.1, 8.0, 12.3), (5.0, 7.9, 11.9)]},
    "gnome_help_en_de": {"base": [(9.0, 14.0, 20.0), (9.4, 14.2, 21.0), (8.8, 13.5, 19.5)],
                         "alpha": [(9.1, 15.5, 22.3), (9.2, 15.4, 22.6), (8.9, 14.9, 21.7)],
                         "beta": [(9.2, 14.1, 20.5), (9.3, 14.3, 20.6), (8.9, 13.4, 19.8)]},
}


def _write_buckets(root: pathlib.Path) -> None:
    for directory, rows in BUCKET_PPL.items():
        for row, seeds in rows.items():
            for seed, perplexities in enumerate(seeds):
                buckets = {bucket: {"perplexity": ppl, "bleu": 10.0, "min_words": 1, "max_words": 2, "num_pairs": 3}
                           for bucket, ppl in zip(BUCKETS, perplexities)}
                (root / directory / row / f"seed_{seed}" / "length_buckets.json").write_text(
                    json.dumps({"buckets": buckets}))


def _expected_trend(directory: str, row: str) -> np.ndarray:
    """Per seed, in pp: (ppl / ppl_base - 1) in the last bucket minus the same in the first (NumPy)."""
    ppl, base = np.array(BUCKET_PPL[directory][row]), np.array(BUCKET_PPL[directory]["base"])
    change = ppl / base - 1
    return 100 * (change[:, -1] - change[:, 0])


def test_a_derived_measure_takes_part_as_the_change_itself(corpora_root: pathlib.Path) -> None:
    _write_buckets(corpora_root)
    corpora_read = transfer_report.read_corpora(str(corpora_root))
    trends = {transfer.row: transfer for transfer in transfer_report._compare_corpora(corpora_read)
              if transfer.metric.name == within_groups.LENGTH_TREND.name}
    assert set(trends) == set(RUNS["messages"]) - {"base"}
    verdicts = {}
    for row in ("alpha", "beta"):
        beyond = []
        for corpus, stats in zip(corpora_read, trends[row].stats):
            expected = _expected_trend(os.path.basename(corpus.directory), row)
            assert stats is not None and stats.paired_seeds == 3
            assert stats.change_mean == pytest.approx(expected.mean())
            assert stats.change_se == pytest.approx(np.std(expected, ddof=1) / np.sqrt(3))
            if abs(expected.mean()) > 2 * np.std(expected, ddof=1) / np.sqrt(3):
                beyond.append(expected.mean() > 0)
        verdicts[row] = trends[row].verdict
        assert trends[row].verdict == {0: "noise", 1: "one corpus"}.get(
            len(beyond), "holds" if len(set(beyond)) == 1 else "reverses")
    assert verdicts == {"alpha": "reverses", "beta": "noise"}
    assert trends["gamma"].verdict == "pending" and trends["gamma"].stats[0].paired_seeds == 0  # Not scored.
    _, rows = sweep_rows.read_sweep_rows(str(corpora_root / "messages"))  # The positions report's own trend.
    own = {trend.name: trend for trend in within_groups._length_trends(
        within_groups._compare_encodings(str(corpora_root / "messages"), rows, positions.bucket_comparison()))}
    messages = trends["alpha"].stats[[corpus.name for corpus in corpora_read].index("messages_en_de")]
    assert {seed: 100 * value for seed, value in own["alpha"].differences.items()} == pytest.approx(messages.changes)


def test_a_registered_per_run_measure_takes_part(corpora_root: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measure = comparison.Metric("half_bleu", "half dev BLEU", 1, False,
                                lambda run_dir, run: run.results["dev_bleu"] / 2 if run.results else None)
    monkeypatch.setitem(transfer_report.comparison_report.HEADLINE_MEASURES, measure.name, measure)
    transfers = {(transfer.row, transfer.metric.name): transfer
                 for transfer in transfer_report._compare_corpora(transfer_report.read_corpora(str(corpora_root)))}
    for row in ("alpha", "beta"):
        half, full = transfers[(row, "half_bleu")], transfers[(row, "dev_bleu")]
        assert [stats.change_mean for stats in half.stats] == pytest.approx(
            [stats.change_mean / 2 for stats in full.stats])
        assert half.verdict == full.verdict == EXPECTED[(row, "dev_bleu")]


@pytest.mark.parametrize("flat_config, name", [
    ({"corpus": "", "dataset": corpora.MESSAGES_EN_DE.dataset}, "messages_en_de"),  # The recipe's dataset.
    ({"dataset": "tsv:runs/positions_corpus"}, "messages_en_de"),  # Recorded before the corpus field.
    ({"corpus": "", "dataset": "tsv:runs/mine"}, "tsv:runs/mine"),  # Neither: named by its data.
])
def test_a_root_of_flat_runs_beside_a_corpus_directory(tmp_path: pathlib.Path, flat_config: dict,
                                                       name: str) -> None:
    """``docs/<experiment>/<row>/seed_<k>`` exported before corpora, ``docs/<experiment>/gnome_help_en_de/`` since."""
    launched = tmp_path / "launched"  # launch.sweep --corpora's layout: ROOT/<corpus>/sweep.json, no ROOT/sweep.json.
    for directory in ("messages_en_de", "gnome_help_en_de"):
        _write_corpus(tmp_path, launched / directory, RUNS["messages" if directory == "messages_en_de" else directory],
                      directory)
    assert not (launched / "sweep.json").exists()
    mixed = tmp_path / "mixed"
    _write_corpus(tmp_path, mixed, RUNS["messages"], None)
    _write_corpus(tmp_path, mixed / "gnome_help_en_de", RUNS["gnome_help_en_de"], "gnome_help_en_de")
    for path in mixed.glob("*/seed_*/config.json"):
        config = {key: value for key, value in json.loads(path.read_text()).items() if key != "corpus"}
        path.write_text(json.dumps({**config, **flat_config}))
    corpora_read = transfer_report.read_corpora(str(mixed))
    assert [(corpus.name, corpus.flat) for corpus in corpora_read] == [(name, True), ("gnome_help_en_de", False)]
    assert corpora_read[0].directory == str(mixed) and len(corpora_read[0].rows) == len(RUNS["messages"])
    out = {root.name: tmp_path / f"out_{root.name}" for root in (launched, mixed)}
    paths = {root: all_reports.write_reports(str(tmp_path / root), str(out[root])) for root in out}
    assert {"my_sweep.md", "gnome_help_en_de/my_sweep.md", "transfer.md"} <= {
        str(pathlib.Path(path).relative_to(out["mixed"])) for path in paths["mixed"]}
    flat_csv = (out["mixed"] / "my_sweep.csv").read_text()
    assert flat_csv == (out["launched"] / "messages_en_de" / "my_sweep.csv").read_text()
    tables = {}
    for root in out:
        with open(out[root] / "transfer.csv", encoding="utf-8") as file:
            tables[root] = {(record["row"], record["metric"], record["corpus"].replace(name, "messages_en_de")):
                            (record["change_mean"], record["change_se"], record["verdict"])
                            for record in csv.DictReader(file)}
    assert tables["mixed"] == tables["launched"] and len(tables["mixed"]) == len(EXPECTED) * 2
    markdown = (out["mixed"] / "transfer.md").read_text(encoding="utf-8")
    assert f"| row | metric | {name}: change ± SE (n) | gnome_help_en_de: change ± SE (n) | verdict |" in markdown
    assert "[gnome_help_en_de/my_sweep.md](gnome_help_en_de/my_sweep.md)" in markdown
    assert "[my_sweep.md](my_sweep.md)" in markdown
    os.rename(mixed / "gnome_help_en_de", tmp_path / "gnome_help_en_de")  # Flat runs alone: reported as before.
    assert transfer_report.read_corpora(str(mixed)) == []


def test_mistakes_are_one_line(corpora_root: pathlib.Path) -> None:
    with pytest.raises(UserInputError, match=r"--reference: row 'zeta' is not among the rows reported"):
        transfer_report.read_corpora(str(corpora_root), reference="zeta")
    config_path = corpora_root / "messages" / "beta" / "seed_0" / "config.json"
    config_path.write_text(json.dumps(dict(json.loads(config_path.read_text()), corpus="other_en_de")))
    with pytest.raises(UserInputError, match=r"messages holds runs of corpora messages_en_de, other_en_de"):
        transfer_report.read_corpora(str(corpora_root))


def test_report_from_another_directory(corpora_root: pathlib.Path, tmp_path: pathlib.Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    paths = all_reports.write_reports(os.path.relpath(corpora_root), os.path.relpath(corpora_root))
    assert os.path.relpath(corpora_root / "transfer.md") in paths
    assert "| alpha | dev BLEU |" in (corpora_root / "transfer.md").read_text()


@pytest.mark.slow
def test_report_command_prints_the_transfer_table(corpora_root: pathlib.Path, tmp_path: pathlib.Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    if "corpus" not in {field.name for field in schema.FIELDS}:  # The command's process declares no such field.
        for path in corpora_root.glob("*/*/seed_*/config.json"):
            path.write_text(json.dumps({key: value for key, value in json.loads(path.read_text()).items()
                                        if key != "corpus"}))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run([sys.executable, "-m", "attention_jax.report", str(corpora_root)], cwd=tmp_path / "elsewhere",
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert str(corpora_root / "transfer.md") in done.stdout.splitlines()
    assert "## Transfer" in done.stdout and "| alpha | dev PPL |" in done.stdout

"""The attention-function report (attention_jax/reports/within_groups.py) on a sweep written by hand."""

from __future__ import annotations

import csv
import json
import pathlib

import matplotlib.image
import numpy as np
import pytest

from attention_jax.reports import comparison, sweep_rows, within_groups
from configs.sweeps import attention_function
from launch import sweep_record, sweep_spec
from tests.support.sweep_cli import REPO_ROOT, run_module

# Dev perplexity and BLEU per seed (None: the seed has not finished), rows of configs/sweeps/attention_function.py.
SEED_PPL = {
    "base": [10.0, 11.0, 12.0],                        # scaled dot product, d_k = 32
    "scaled_dot_product_dk8": [12.0, 12.5, 13.0],
    "scaled_dot_product_dk128": [9.0, 10.0, 11.5],
    "dot_product_dk8": [12.1, 12.4, 13.2],            # +0.8%, -0.8%, +1.5%: within noise
    "dot_product_dk32": [10.5, 11.66, 12.36],         # +5%, +6%, +3%
    "dot_product_dk128": [10.8, 12.5, 14.26],         # +20%, +25%, +24%: higher, and the gap grows with d_k
    "additive_dk8": [11.4, 11.5, 12.22],              # -5%, -8%, -6%: lower perplexity
    "additive_dk32": [10.2, None, None],               # one seed: no spread
    "linear": [None, None, None],                      # nothing finished: pending
}
SEED_BLEU = {"base": [20.0, 21.0, 22.0], "dot_product_dk32": [19.0, 20.5, 20.0]}
DECLARED = attention_function.get_report()["extras"][0].__self__
ROWS = list(SEED_PPL)  # additive_dk128 never launched (not in the record's rows).


def _write_seed(root: pathlib.Path, row: str, seed: int, ppl: float | None) -> None:
    run_dir = root / row / f"seed_{seed}"
    run_dir.mkdir(parents=True)
    config = attention_function.get_config(row)
    config.seed = seed
    (run_dir / "config.json").write_text(config.to_json_best_effort())
    if ppl is not None:
        bleu = SEED_BLEU.get(row, [15.0, 15.0, 15.0])[seed]
        (run_dir / "results.json").write_text(json.dumps(dict(step=1700, dev_ppl=ppl, eval_ppl=ppl + 1,
                                                                dev_bleu=bleu, params=1000, wall_s=60.0)))


@pytest.fixture()
def sweep_root(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "af"
    sweep = sweep_spec.load_sweep(str(REPO_ROOT / "configs" / "sweeps" / "attention_function.py"))
    description = sweep_record.sweep_description(sweep, [], seeds=[0, 1, 2])
    sweep_record.record_launch(str(root), description, ROWS, "local", force=False)
    for row, values in SEED_PPL.items():
        for seed, ppl in enumerate(values):
            _write_seed(root, row, seed, ppl)
    return root


def _compared(root: pathlib.Path) -> dict[str, within_groups.PairedRow]:
    rows = sweep_rows.read_sweep_rows(str(root))[1]
    return {row.row: row for row in within_groups._compare_within_groups(rows, DECLARED)}


def _paired_changes(row: str, reference: str) -> np.ndarray:
    ours, theirs = np.array(SEED_PPL[row], dtype=float), np.array(SEED_PPL[reference], dtype=float)
    return (ours / theirs - 1)[~np.isnan(ours)]


def test_each_row_is_compared_with_scaled_dot_product_at_its_own_key_dim(sweep_root: pathlib.Path) -> None:
    compared = _compared(sweep_root)
    assert [row.reference_row for row in compared.values()] == [
        None, None, None, "scaled_dot_product_dk8", "base", "scaled_dot_product_dk128", "scaled_dot_product_dk8",
        "base", "base"]
    assert [(row.value, row.group) for row in compared.values()][:3] == [
        ("scaled_dot_product", 8), ("scaled_dot_product", 32), ("scaled_dot_product", 128)]
    for name, reference in [("dot_product_dk128", "scaled_dot_product_dk128"), ("dot_product_dk32", "base"),
                            ("additive_dk8", "scaled_dot_product_dk8")]:
        expected = _paired_changes(name, reference)
        np.testing.assert_allclose(list(compared[name].ppl_changes.values()), expected, rtol=1e-12)
    assert compared["dot_product_dk32"].bleu_differences == pytest.approx({0: -1.0, 1: -0.5, 2: -2.0})


def test_readings_follow_the_spread_rule(sweep_root: pathlib.Path) -> None:
    compared = _compared(sweep_root)
    readings = {name: row.reading for name, row in compared.items()}
    assert readings == {
        "scaled_dot_product_dk8": "reference", "base": "reference", "scaled_dot_product_dk128": "reference",
        "dot_product_dk8": "within noise", "dot_product_dk32": "higher perplexity",
        "dot_product_dk128": "higher perplexity", "additive_dk8": "lower perplexity", "additive_dk32": "1 seed",
        "linear": "pending"}
    # The rule, computed independently: |mean| > 2 x (sample std / sqrt(n)).
    for name in ("dot_product_dk8", "dot_product_dk32", "additive_dk8"):
        changes = _paired_changes(name, "scaled_dot_product_dk8" if name.endswith("dk8") else "base")
        beyond = abs(changes.mean()) > 2 * changes.std(ddof=1) / np.sqrt(len(changes))
        assert (compared[name].reading != "within noise") == beyond


def test_the_trend_with_key_dim_pairs_seeds_across_rows(sweep_root: pathlib.Path) -> None:
    trends = {trend.value: trend for trend in
              within_groups._group_trends(list(_compared(sweep_root).values()), DECLARED)}
    assert set(trends) == {"dot_product", "additive"}
    expected = (_paired_changes("dot_product_dk128", "scaled_dot_product_dk128")
                - _paired_changes("dot_product_dk8", "scaled_dot_product_dk8"))
    dot = trends["dot_product"]
    assert (dot.first, dot.last) == (8, 128)
    np.testing.assert_allclose(list(dot.differences.values()), expected, rtol=1e-12)
    assert dot.reading == "grows with d_k"
    additive = trends["additive"]  # d_k 8 (3 seeds) against 32 (1 seed): one paired seed.
    assert (additive.first, additive.last, additive.reading) == (8, 32, "1 seed")


@pytest.mark.slow
def test_report_files_from_the_report_command(sweep_root: pathlib.Path) -> None:
    result = run_module("attention_jax.report", str(sweep_root))
    assert result.returncode == 0, result.stderr
    written = result.stdout.split()
    assert written[-3:] == [str(sweep_root / f"attention_functions.{ext}") for ext in ("md", "csv", "png")]
    markdown = (sweep_root / "attention_functions.md").read_text()
    line = next(text for text in markdown.splitlines() if text.startswith("| dot_product_dk128 |"))
    changes = _paired_changes("dot_product_dk128", "scaled_dot_product_dk128")
    mean, se = 100 * changes.mean(), 100 * changes.std(ddof=1) / np.sqrt(3)
    assert f"+{mean:.1f} ± {se:.1f}%" in line and line.endswith("| higher perplexity |")
    assert "| dot_product | 8 → 128 |" in markdown and "grows with d_k" in markdown
    with open(sweep_root / "attention_functions.csv", encoding="utf-8") as file:
        records = {record["row"]: record for record in csv.DictReader(file)}
    assert records["additive_dk8"]["reference_row"] == "scaled_dot_product_dk8"
    assert float(records["additive_dk8"]["ppl_change_mean"]) == pytest.approx(
        _paired_changes("additive_dk8", "scaled_dot_product_dk8").mean())
    assert records["linear"]["reading"] == "pending" and records["linear"]["seeds"] == "0"
    image = matplotlib.image.imread(sweep_root / "attention_functions.png")
    assert image.shape[1] > image.shape[0] > 100  # Two panels side by side.


def test_a_table2_sweep_gets_no_attention_function_report() -> None:
    rows = [sweep_rows.RowReport(row="base", group="base", status="done", config={"d_model": 8, "num_heads": 2},
                                 results={}),
            sweep_rows.RowReport(row="A1", group="A", status="done",
                                 config={"d_model": 8, "num_heads": 1, "attention_function": "scaled_dot_product"},
                                 results={})]
    assert not within_groups._applies(rows, DECLARED)


def test_beyond_spread_needs_two_changes() -> None:
    assert comparison._beyond_spread([0.1, 0.1]) == (True, "|mean| > 2 x SE, 2 paired seeds")
    with pytest.raises(ValueError, match="two or more"):
        comparison._beyond_spread([0.1])

"""The sweep-file hook ``get_paper_figures()`` (issue 72): only a sweep that gives the paper's figures gets them.

Two sweeps of the same Table 2 rows (``base``, ``A1``; two seeds) are written by hand: one whose file defines
``get_paper_figures()`` and one whose file does not, though its rows' configs still carry ``config.paper``
(built on ``configs/table2.py``). Only the first gets the paper's columns and the paper-direction verdict;
``--reference`` moves the paired change to another row in either layout.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from attention_jax.reports import all_reports, paper_figures, sweep_rows
from launch import sweep_record, sweep_spec

WITHOUT_HOOK = '''
from configs import table2


def get_config(row="base"):
    return table2.get_config(row)


def get_sweep():
    return {"base": {}, "A1": dict(num_heads=1, key_dim=512, value_dim=512)}
'''
WITH_HOOK = WITHOUT_HOOK + '''

def get_paper_figures():
    return {row: figures for row, figures in table2.get_paper_figures().items() if row in get_sweep()}
'''
DEV_PPL = {"base": [10.0, 11.0], "A1": [11.0, 12.1]}  # A1 +10% on both seeds, the paper's direction.


def _write_sweep(tmp_path: pathlib.Path, sweep_text: str) -> pathlib.Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    sweep_path = tmp_path / "ablation.py"
    sweep_path.write_text(sweep_text)
    sweep = sweep_spec.load_sweep(str(sweep_path))
    root = tmp_path / "runs"
    sweep_record.record_launch(str(root), sweep_record.sweep_description(sweep, [], seeds=[0, 1]),
                               list(sweep.row_names), "local", force=False)
    for row, perplexities in DEV_PPL.items():
        for seed, ppl in enumerate(perplexities):
            run_dir = root / row / f"seed_{seed}"
            run_dir.mkdir(parents=True)
            config = sweep.row_config(row)
            config.seed = seed
            (run_dir / "config.json").write_text(config.to_json_best_effort())
            (run_dir / "results.json").write_text(json.dumps(dict(step=10, dev_ppl=ppl, dev_bleu=20.0, params=1000)))
    return root


def test_only_a_sweep_file_with_the_hook_gets_the_paper_columns(tmp_path: pathlib.Path) -> None:
    with_hook = _write_sweep(tmp_path / "with", WITH_HOOK)
    record, rows = sweep_rows.read_sweep_rows(str(with_hook))
    assert record["paper_figures"]["A1"] == {"dev_ppl": 5.29, "dev_bleu": 24.9, "params_millions": None}
    assert paper_figures.has_paper_figures(rows) and rows[1].paper["dev_ppl"] == 5.29
    all_reports.write_reports(str(with_hook), str(tmp_path / "with_out"))
    table = (tmp_path / "with_out" / "ablation.md").read_text(encoding="utf-8")
    assert "| paper | paper change vs base | paper verdict |" in table and "| +7.5% | reproduced |" in table

    without_hook = _write_sweep(tmp_path / "without", WITHOUT_HOOK)
    record, rows = sweep_rows.read_sweep_rows(str(without_hook))
    assert record["paper_figures"] is None and rows[1].config["paper"]["dev_ppl"] == 5.29
    assert not paper_figures.has_paper_figures(rows) and rows[1].paper == {}
    all_reports.write_reports(str(without_hook), str(tmp_path / "without_out"))
    comparison = (tmp_path / "without_out" / "ablation.md").read_text(encoding="utf-8")
    for table2_text in ("paper", "newstest2013", "reproduced"):
        assert table2_text not in comparison
    assert "| A1 | 2 | 11.55 ± 0.55 | +10.0% ± 0.0% | 2 | beyond 2 SE |" in comparison


def test_a_root_recorded_before_the_hook_reads_the_rows_config_paper(tmp_path: pathlib.Path) -> None:
    root = _write_sweep(tmp_path, WITHOUT_HOOK)
    record_path = root / "sweep.json"
    record = json.loads(record_path.read_text())
    del record["paper_figures"]  # As launch.sweep wrote it before get_paper_figures() (docs/table2_small/).
    record_path.write_text(json.dumps(record))
    _, rows = sweep_rows.read_sweep_rows(str(root))
    assert paper_figures.has_paper_figures(rows) and rows[1].paper["dev_ppl"] == 5.29


def test_reference_flag_moves_the_table2_comparison(tmp_path: pathlib.Path) -> None:
    root = _write_sweep(tmp_path, WITH_HOOK)
    all_reports.write_reports(str(root), str(tmp_path / "out"), reference="A1")
    table = (tmp_path / "out" / "ablation.md").read_text(encoding="utf-8")
    assert "paper change vs A1" in table and "vs base" not in table
    dev_ppl_table = table.split("## dev PPL")[1].split("##")[0]
    base_line = next(line for line in dev_ppl_table.splitlines() if line.startswith("| base |"))
    assert "-9.1% ± 0.0%" in base_line  # 10 / 11 - 1 and 11 / 12.1 - 1, paired by seed.
    assert "-7.0%" in base_line  # The paper's change from A1 to base: 4.92 / 5.29 - 1.


@pytest.mark.parametrize("figures, message", [
    ("{'C9': {'dev_ppl': 1.0}}", "C9 not a row of get_sweep()"),
    ("{'A1': {'ppl': 1.0}}", "row A1 must map some of dev_ppl, dev_bleu, params_millions"),
    ("{'A1': {'dev_ppl': 'high'}}", "row A1 dev_ppl='high' is not a number or None"),
    ("[1.0]", "returned a list"),
])
def test_malformed_paper_figures_are_refused_when_the_sweep_loads(tmp_path: pathlib.Path, figures: str,
                                                                 message: str) -> None:
    sweep_path = tmp_path / "bad_sweep.py"
    sweep_path.write_text(WITHOUT_HOOK + f"\n\ndef get_paper_figures():\n    return {figures}\n")
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sweep_spec.load_sweep(str(sweep_path))

"""Scoring translations that already exist: ``evaluate --hypotheses --reference --tokenize``, no model.

The oracle is sacrebleu's own corpus functions called directly with the same tokenizer, as
``sacrebleu REF -i HYP -m bleu chrf ter --tokenize T`` computes them.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
import sacrebleu

from attention_jax.commands import hypothesis_scoring
from attention_jax.evaluation import sacrebleu_scores, translation_quality
from attention_jax.foundation.user_errors import UserInputError

from tests.support import REPO_ROOT


# Chinese without spaces: 13a leaves each sentence nearly one token, intl and zh split it.
CJK_HYPOTHESES = ["我喜欢猫，也喜欢狗。", "今天天气很好！", "他在读一本书。"]
CJK_REFERENCES = ["我喜欢猫，也喜欢狗。", "今天的天气很好。", "他正在读一本书。"]


def _write(path: pathlib.Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


@pytest.mark.reference
@pytest.mark.parametrize("tokenizer", ["13a", "intl", "zh", "char", "none"])
def test_corpus_scores_equal_sacrebleus_with_each_bleu_tokenizer(tokenizer):
    scores = sacrebleu_scores.corpus_scores(CJK_HYPOTHESES, CJK_REFERENCES, bleu_tokenizer=tokenizer)
    expected = sacrebleu.corpus_bleu(CJK_HYPOTHESES, [CJK_REFERENCES], tokenize=tokenizer)
    assert scores.bleu == pytest.approx(expected.score, abs=1e-9)
    assert f"tok:{tokenizer}|" in scores.bleu_signature
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(CJK_HYPOTHESES, [CJK_REFERENCES]).score, abs=1e-9)
    assert scores.ter == pytest.approx(sacrebleu.corpus_ter(CJK_HYPOTHESES, [CJK_REFERENCES]).score, abs=1e-9)


def test_the_bleu_tokenizer_changes_bleu_on_unspaced_chinese_but_not_chrf_or_ter():
    by_tokenizer = {name: sacrebleu_scores.corpus_scores(CJK_HYPOTHESES, CJK_REFERENCES, bleu_tokenizer=name)
                    for name in ("13a", "zh")}
    assert by_tokenizer["zh"].bleu > by_tokenizer["13a"].bleu  # Characters match where whole sentences do not.
    assert by_tokenizer["zh"].chrf == by_tokenizer["13a"].chrf and by_tokenizer["zh"].ter == by_tokenizer["13a"].ter


def test_translation_quality_keeps_its_corpus_scores_and_13a_default():
    scores = translation_quality.corpus_scores(CJK_HYPOTHESES, CJK_REFERENCES)
    assert isinstance(scores, translation_quality.CorpusScores)
    assert "tok:13a|" in scores.bleu_signature


def test_unknown_or_uninstalled_tokenizers_are_refused_in_one_line():
    with pytest.raises(UserInputError, match=r"--tokenize=13b is not a BLEU tokenizer: use one of 13a, intl"):
        sacrebleu_scores.check_bleu_tokenizer("13b")
    assert sacrebleu_scores.check_bleu_tokenizer("intl") == "intl"
    try:
        import MeCab  # noqa: F401
    except ImportError:
        with pytest.raises(UserInputError, match=r"pip install 'sacrebleu\[ja\]'"):
            sacrebleu_scores.check_bleu_tokenizer("ja-mecab")


def test_score_file_reads_both_files_and_reports_the_figures(tmp_path):
    hypotheses = _write(tmp_path / "hyp.zh", CJK_HYPOTHESES)
    references = _write(tmp_path / "ref.zh", CJK_REFERENCES)
    report = hypothesis_scoring._score_file(hypotheses, references, "intl")
    expected = sacrebleu.corpus_bleu(CJK_HYPOTHESES, [CJK_REFERENCES], tokenize="intl")
    assert report["bleu"] == pytest.approx(expected.score, abs=1e-9)
    assert report["num_sentences"] == 3 and report["bleu_tokenizer"] == "intl"
    assert report["hypotheses_file"] == os.path.abspath(hypotheses)
    json.dumps(report)  # The report is what --output writes.


def test_score_file_refuses_files_of_different_lengths_naming_the_hypotheses_flag(tmp_path):
    hypotheses = _write(tmp_path / "hyp.txt", CJK_HYPOTHESES[:2])
    references = _write(tmp_path / "ref.txt", CJK_REFERENCES)
    with pytest.raises(UserInputError, match=r"--hypotheses=.*hyp.txt has 2 lines but --reference=.*has 3"):
        hypothesis_scoring._score_file(hypotheses, references, "13a")


def test_model_flags_with_hypotheses_are_refused():
    with pytest.raises(UserInputError, match="leave out --workdir, --beam_size"):
        hypothesis_scoring._check_no_model_flags(["workdir", "beam_size"])
    hypothesis_scoring._check_no_model_flags([])  # None given: no error.


def test_run_prints_three_metrics_and_writes_the_json(tmp_path, capsys):
    hypotheses = _write(tmp_path / "hyp.zh", CJK_HYPOTHESES)
    references = _write(tmp_path / "ref.zh", CJK_REFERENCES)
    output = tmp_path / "scores.json"
    hypothesis_scoring.run("evaluate", hypotheses, references, "intl", str(output), [])
    printed = capsys.readouterr().out
    expected = sacrebleu.corpus_bleu(CJK_HYPOTHESES, [CJK_REFERENCES], tokenize="intl").score
    assert f"BLEU = {expected:.2f}  (nrefs:1|case:mixed|eff:no|tok:intl|" in printed
    assert "chrF2 = " in printed and "TER = " in printed
    assert json.loads(output.read_text())["bleu"] == pytest.approx(expected, abs=1e-9)


def test_run_exits_2_on_a_missing_reference_flag(tmp_path, capsys):
    hypotheses = _write(tmp_path / "hyp.zh", CJK_HYPOTHESES)
    with pytest.raises(SystemExit) as leaving:
        hypothesis_scoring.run("evaluate", hypotheses, "", "13a", None, [])
    assert leaving.value.code == 2
    assert capsys.readouterr().err.strip() == ("evaluate: error: --hypotheses needs --reference: the reference "
                                               "translations, one per line.")


@pytest.mark.slow
@pytest.mark.end_to_end
def test_evaluate_command_scores_a_file_with_no_workdir(tmp_path):
    hypotheses = _write(tmp_path / "hyp.zh", CJK_HYPOTHESES)
    references = _write(tmp_path / "ref.zh", CJK_REFERENCES)
    environment = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    command = [sys.executable, "-m", "attention_jax.evaluate", f"--hypotheses={hypotheses}",
               f"--reference={references}", "--tokenize=intl"]
    completed = subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, timeout=300)
    assert completed.returncode == 0, completed.stderr.decode()[-2000:]
    lines = completed.stdout.decode().splitlines()
    assert [line.split(" = ")[0] for line in lines[1:4]] == ["BLEU", "chrF2", "TER"]
    assert "tok:intl|" in lines[1]
    refused = subprocess.run(command + ["--workdir=runs/base"], cwd=tmp_path, env=environment,
                             capture_output=True, timeout=300)
    assert refused.returncode == 2
    assert refused.stderr.decode().strip().startswith("attention_jax.evaluate: error: --hypotheses scores translations")


@pytest.mark.slow
@pytest.mark.end_to_end
def test_evaluate_a_run_with_another_bleu_tokenizer_records_it_and_the_step(tmp_path):
    from tests.support import decoding_runs, train_support

    workdir = decoding_runs.make_random_run(tmp_path)
    output = tmp_path / "report.json"
    environment = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT),
                       XLA_FLAGS=train_support.child_xla_flags())
    completed = subprocess.run([sys.executable, "-m", "attention_jax.evaluate", f"--workdir={workdir}",
                                "--split=test", "--num_examples=2", "--tokenize=intl", f"--output={output}"],
                               cwd=REPO_ROOT, env=environment, capture_output=True, timeout=600)
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    report = json.loads(output.read_text())
    assert "tok:intl|" in report["bleu_signature"] and report["checkpoint"] == "latest"
    assert report["checkpoint_step"] == decoding_runs.STEPS[-1]
    hypotheses = (tmp_path / "report.hypotheses.txt").read_text(encoding="utf-8").splitlines()
    references = [json.loads(line)["reference"] for line in
                  (tmp_path / "report.translations.jsonl").read_text(encoding="utf-8").splitlines()]
    expected = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="intl").score
    assert report["bleu"] == pytest.approx(expected, abs=1e-9)

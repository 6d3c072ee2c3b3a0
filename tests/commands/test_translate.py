"""translate as fairseq users expect it (issue 63, item 1): line-by-line output, n-best lists, alignments, JSON.

The library part decodes the tiny random Transformer of ``tests/support/decoding_helpers.py`` with its
word tokenizer: the n-best list against the 1-best and against scores recomputed by a teacher-forced
pass, the alignments against the attention maps of ``evaluation/attention_maps.py``. The command part
runs ``python -m attention_jax.translate`` on a run directory of random parameters
(``tests/support/decoding_runs.py``, made once for the module) as a user would, with a pipe for stdin.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import queue
import subprocess
import sys
import threading
import time

import flax.linen as nn
import jax
import numpy as np
import pytest

from attention_jax.commands import translation_output
from attention_jax.decoding import alignment, beam_search, decode, inference, text_batches
from attention_jax.evaluation import attention_maps
from attention_jax.models.model import Transformer
from tests.support import REPO_ROOT, train_support
from tests.support.decoding_helpers import SHORT, TINY, WordTokenizer, init_params

SOURCES = ["w5 w6 w7", "", "w9 w10 w11 w12 w13", "w20 w21"]
SETTINGS = dataclasses.replace(SHORT, beam_size=3)
LINES = ["the house is small", "", "a big dog runs"]


@pytest.fixture(scope="module")
def tiny_translator() -> decode.Translator:
    return decode.Translator(TINY, nn.meta.unbox(init_params(TINY, seed=1)), WordTokenizer(), settings=SETTINGS,
                             batch_size=4)


@pytest.fixture(scope="module")
def tiny_nbest(tiny_translator: decode.Translator) -> list[list[decode.Hypothesis]]:
    return tiny_translator.translate_nbest(SOURCES, nbest=3)


def _teacher_forced_log_probs(translator: decode.Translator, sources: list[str],
                              targets: list[tuple[int, ...]]) -> np.ndarray:
    """``log P(target | source)`` of each pair from one teacher-forced pass of the model (no search, no cache)."""
    inputs = text_batches._pad_ids(translator.encode_sources(sources))
    padded_targets = text_batches._pad_ids(targets)
    logits = jax.jit(Transformer(translator.model_config).apply)({"params": translator.params}, inputs, padded_targets)
    log_probs = np.take_along_axis(np.asarray(jax.nn.log_softmax(logits), np.float64), padded_targets[..., None],
                                   axis=-1)[..., 0]  # [B, T]
    return np.sum(np.where(padded_targets != 0, log_probs, 0.0), axis=-1)


@pytest.mark.integration
def test_nbest_lists_start_with_the_1best_sorted_by_normalized_score(tiny_translator, tiny_nbest):
    assert [found[0].text if found else "" for found in tiny_nbest] == tiny_translator.translate(SOURCES)
    assert tiny_nbest[1] == []  # An empty line has no hypothesis.
    pairs = [(source, hypothesis) for source, found in zip(SOURCES, tiny_nbest) for hypothesis in found]
    recomputed = _teacher_forced_log_probs(tiny_translator, [source for source, _ in pairs],
                                           [hypothesis.ids for _, hypothesis in pairs])
    np.testing.assert_allclose([hypothesis.score for _, hypothesis in pairs], recomputed, rtol=1e-4, atol=1e-4)
    for source, found in zip(SOURCES, tiny_nbest):
        if not source:
            continue
        assert len(found) == 3 and len({hypothesis.ids for hypothesis in found}) == 3
        normalized = [hypothesis.normalized_score for hypothesis in found]
        assert normalized == sorted(normalized, reverse=True)
        for hypothesis in found:
            assert hypothesis.ids[-1] == beam_search.EOS_ID
            assert hypothesis.text == WordTokenizer().decode(hypothesis.ids)
            penalty = float(beam_search._length_penalty(len(hypothesis.ids), SETTINGS.length_penalty_alpha))
            assert hypothesis.normalized_score == pytest.approx(hypothesis.score / penalty, rel=1e-6)
    with pytest.raises(ValueError, match="beam size 3"):
        tiny_translator.translate_nbest(SOURCES, nbest=4)


@pytest.mark.integration
def test_alignments_are_the_argmax_of_the_attention_maps_head_average(tiny_translator, tiny_nbest):
    tokenizer = WordTokenizer()
    pairs = [(SOURCES[0], tiny_nbest[0][0]), (SOURCES[0], tiny_nbest[0][1]), (SOURCES[2], tiny_nbest[2][0])]
    source_ids = [tiny_translator.encode_sources([source])[0] for source, _ in pairs]
    maps = [attention_maps.attention_maps(TINY, tiny_translator.params, tokenizer, source, hypothesis.text,
                                          settings=SETTINGS) for source, hypothesis in pairs]  # Each pair alone.
    for layer in (-1, 0):  # The last layer (the default) and the first of TINY's two.
        found = alignment.hard_alignments(TINY, tiny_translator.params, source_ids,
                                          [list(hypothesis.ids) for _, hypothesis in pairs], layer=layer)
        compared = 0
        for (_, hypothesis), ids, pair_maps, pairs_found in zip(pairs, source_ids, maps, found):
            assert pair_maps["target_tokens"] == attention_maps.token_strings(tokenizer, list(hypothesis.ids))
            heads_average = pair_maps["cross"][layer].mean(axis=0)[:-1, :-1]  # [T-1, S-1]: no EOS row or column.
            assert [target for _, target in pairs_found] == list(range(len(hypothesis.ids) - 1))
            top_two = np.sort(heads_average, axis=-1)[:, -2:]
            for source_index, target_index in pairs_found:
                assert 0 <= source_index < len(ids) - 1
                if top_two[target_index, 1] - top_two[target_index, 0] > 1e-5:  # No near-tie to flip.
                    assert source_index == int(np.argmax(heads_average[target_index]))
                    compared += 1
        assert compared >= 10
    assert alignment.format_pairs([(0, 0), (2, 1)]) == "0-0 2-1"


def test_an_alignment_needs_a_layer_the_model_has():
    assert alignment.check_layer(TINY, -1) == TINY.num_layers - 1
    with pytest.raises(ValueError, match="not a decoder layer"):
        alignment.check_layer(TINY, TINY.num_layers)


def test_text_and_jsonl_layouts_of_one_line():
    hypotheses = [decode.Hypothesis((7, 8, 3), "das\tHaus", -1.5, -1.25),
                  decode.Hypothesis((9, 3), "Haus", -2.0, -1.75)]
    result = translation_output._LineResult(4, "the house", hypotheses, [[(0, 0), (1, 1)], [(1, 0)]],
                                           ["▁the", "▁house"], [["▁das", "▁Haus"], ["▁Haus"]])
    assert translation_output._plain_line(result) == "das\tHaus"
    assert translation_output._tagged_lines(result) == ["H-4\t-1.2500\t-1.5000\tdas Haus", "A-4\t0-0 1-1",
                                                       "H-4\t-1.7500\t-2.0000\tHaus", "A-4\t1-0"]
    record = json.loads(translation_output._json_line(result, nbest=True))
    assert record["source"] == "the house" and record["translation"] == "das\tHaus"
    assert record["alignment"] == [[0, 0], [1, 1]] and record["source_pieces"] == ["▁the", "▁house"]
    assert [entry["normalized_score"] for entry in record["nbest"]] == [-1.25, -1.75]
    assert record["nbest"][1] == {"translation": "Haus", "score": -2.0, "normalized_score": -1.75,
                                  "alignment": [[1, 0]], "translation_pieces": ["▁Haus"]}
    empty = json.loads(translation_output._json_line(translation_output._LineResult(5, "", []), nbest=False))
    assert empty == {"source": "", "translation": "", "score": None, "normalized_score": None}


def test_a_terminal_is_translated_line_by_line_and_a_pipe_in_blocks_unless_buffer_size_says():
    from attention_jax.commands import text_io  # Not commands.translate: its absl flags would clash with others'.

    assert text_io.buffer_size(None, batch_size=64, interactive=True) == 1
    assert text_io.buffer_size(None, batch_size=64, interactive=False) == 64 * text_io.LINES_PER_BLOCK_PER_BATCH
    assert text_io.buffer_size(3, batch_size=64, interactive=True) == 3
    assert [len(block) for block in text_io.blocks(map(str, range(7)), 3)] == [3, 3, 1]


# The command, as a user runs it.


@pytest.fixture(scope="module")
def run_translator(workdir) -> decode.Translator:
    return inference.make_translator(inference.load_run(str(workdir)), batch_size=4)


def _environment() -> dict[str, str]:
    return dict(os.environ, JAX_PLATFORMS="cpu", PYTHONPATH=str(REPO_ROOT), XLA_FLAGS=train_support.child_xla_flags())


def _translate(workdir: pathlib.Path, *flags: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "attention_jax.translate", f"--workdir={workdir}", "--batch_size=4",
                           *flags], cwd=REPO_ROOT, env=_environment(), input=stdin.encode(), capture_output=True,
                          timeout=600)


def _next_line(lines_out: queue.Queue[bytes], reader: threading.Thread, line: str, stderr_path: pathlib.Path,
               timeout_s: float = 300.0) -> str:
    """The next stdout line of the command, failing at once if its stdout ends (it exited) or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return lines_out.get(timeout=0.2).decode("utf-8").rstrip("\n")
        except queue.Empty:
            if not reader.is_alive() and lines_out.empty():
                pytest.fail(f"translate's stdout ended before the translation of {line!r}; stderr:\n"
                            f"{stderr_path.read_text()[-3000:]}")
    pytest.fail(f"no translation of {line!r} within {timeout_s} s; stderr:\n{stderr_path.read_text()[-3000:]}")


@pytest.mark.slow
@pytest.mark.end_to_end
def test_an_interactive_translate_prints_a_lines_translation_before_the_next_line_is_typed(
        workdir, run_translator, tmp_path):
    stderr_path = tmp_path / "stderr.txt"
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "attention_jax.translate", f"--workdir={workdir}",
                                    "--buffer_size=1"], cwd=REPO_ROOT, env=_environment(), stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=stderr)
    assert process.stdin is not None and process.stdout is not None
    lines_out: queue.Queue[bytes] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines_out.put(line) for line in process.stdout], daemon=True)
    reader.start()
    try:
        for line in LINES:
            process.stdin.write(line.encode("utf-8") + b"\n")
            process.stdin.flush()
            # The next line is written only once this one's translation has come back.
            translation = _next_line(lines_out, reader, line, stderr_path)
            assert translation == (run_translator.translate([line])[0] if line else "")
        process.stdin.close()
        assert process.wait(timeout=120) == 0, stderr_path.read_text()[-3000:]
        reader.join(timeout=10)
        assert lines_out.empty()  # One output line per input line, nothing more.
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _expected_alignments(translator: decode.Translator, hypotheses: list[list[decode.Hypothesis]]) -> list:
    source_ids = translator.encode_sources(LINES)
    pairs = [(source_ids[index], list(hypothesis.ids)) for index, found in enumerate(hypotheses)
             for hypothesis in found]
    return alignment.hard_alignments(translator.model_config, translator.params, [pair[0] for pair in pairs],
                                     [pair[1] for pair in pairs])


@pytest.mark.slow
@pytest.mark.end_to_end
def test_nbest_with_alignment_prints_fairseq_like_h_and_a_lines(workdir, run_translator):
    completed = _translate(workdir, "--nbest=2", "--alignment", stdin="\n".join(LINES) + "\n")
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    expected = run_translator.translate_nbest(LINES, nbest=2)
    alignments = iter(_expected_alignments(run_translator, expected))
    lines = completed.stdout.decode("utf-8").split("\n")
    assert lines[-1] == ""
    wanted = []
    for index, found in enumerate(expected):  # The empty line 1 has no hypothesis: no H line.
        assert len(found) == (2 if LINES[index] else 0)
        for hypothesis in found:
            wanted.append(f"H-{index}\t{hypothesis.normalized_score:.4f}\t{hypothesis.score:.4f}\t{hypothesis.text}")
            wanted.append(f"A-{index}\t{alignment.format_pairs(next(alignments))}")
    assert lines[:-1] == wanted


@pytest.mark.slow
@pytest.mark.end_to_end
def test_jsonl_prints_one_object_per_line_with_nbest_and_alignment(workdir, run_translator):
    completed = _translate(workdir, "--format=jsonl", "--nbest=2", "--alignment", stdin="\n".join(LINES))
    assert completed.returncode == 0, completed.stderr.decode()[-3000:]
    records = [json.loads(line) for line in completed.stdout.decode("utf-8").splitlines()]
    assert [record["source"] for record in records] == LINES
    expected = run_translator.translate_nbest(LINES, nbest=2)
    alignments = iter(_expected_alignments(run_translator, expected))
    for record, found in zip(records, expected):
        assert record["translation"] == (found[0].text if found else "")
        assert [entry["translation"] for entry in record["nbest"]] == [hypothesis.text for hypothesis in found]
        for entry, hypothesis in zip(record["nbest"], found):
            assert entry["score"] == pytest.approx(hypothesis.score, abs=1e-5)
            assert entry["normalized_score"] == pytest.approx(hypothesis.normalized_score, abs=1e-5)
            assert entry["alignment"] == [list(pair) for pair in next(alignments)]
            assert len(entry["translation_pieces"]) == len(hypothesis.ids) - 1
            assert all(0 <= source < len(record["source_pieces"]) for source, _ in entry["alignment"])
        assert record["alignment"] == (record["nbest"][0]["alignment"] if found else [])
    assert records[1]["nbest"] == [] and records[1]["score"] is None


@pytest.mark.slow
@pytest.mark.end_to_end
@pytest.mark.parametrize("flags,message", [
    (["--nbest=5"], "--nbest=5 is more than the beam size 4"),
    (["--nbest=3", "--beam_size=2"], "--nbest=3 is more than the beam size 2"),
    (["--buffer_size=0"], "--buffer_size must be at least 1"),
    (["--alignment", "--alignment_layer=-2"], "not a decoder layer of this model, which has 1"),
    (["--format=xml"], "--format must be one of text, jsonl"),
])
def test_options_the_run_cannot_serve_are_refused_in_one_line(workdir, flags, message):
    completed = _translate(workdir, *flags, stdin="the house is small\n")
    assert completed.returncode == 2 and completed.stdout == b"", completed.stderr.decode()[-3000:]
    errors = [line for line in completed.stderr.decode().splitlines()
              if line.strip() and not (line[:1] in "IWE" and line[1:5].isdigit())]
    assert len(errors) == 1 and errors[0].startswith("attention_jax.translate: error: ") and message in errors[0], errors

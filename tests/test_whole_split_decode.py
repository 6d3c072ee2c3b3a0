"""benchmarks/whole_split_decode.py and ``translate_stoppably(sort_by_length=False)`` (issue 38): the unsorted
baseline translates as the default does, the padded shapes are the programs compiled, a smoke run's JSON,
and one-line usage errors. No timing is asserted here."""

from __future__ import annotations

import json
import pathlib

import pytest

from attention_jax.decoding import decode
from attention_jax.evaluation import translation_quality
from attention_jax.models.decode_settings import DecodeSettings
from benchmarks import whole_split_decode
from tests.support import train_support
from tests.support.decoding_helpers import SHORT, TINY, WordTokenizer, init_params

# Lengths 1..14 words in no order, and an empty line: sorted and input-order batches differ.
SOURCES = ["w5 w6 w7", "w9", "w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20", "", "w21 w22",
           "w23 w24 w25 w26 w27 w28", "w8", "w30 w31 w32 w33 w34 w35 w36 w37 w38 w39 w4 w5 w6 w7",
           "w11 w12 w13 w14", "w15 w16 w17 w18 w19 w20 w21 w22 w23", "w25 w26 w27 w28 w29"]
MODE_FIELDS = {"sentences", "seconds", "sentences_per_s", "target_tokens", "target_tokens_per_s", "batches",
               "padded_batch_shapes", "shapes", "source_padding_fraction", "compile_s", "seconds_with_compile"}
SPLIT_FIELDS = {"split", "sentences", "source_tokens", "truncated_sources", "warmup", "modes",
                "identical_translations", "differing_translations", "sorted_speedup"}
REPORT_FIELDS = {"what", "note", "smoke", "workdir", "checkpoint", "config_name", "dataset", "model", "decoding",
                 "machine", "splits", "identical_translations", "total_s", "smoke_training_s"}


@pytest.fixture(scope="module")
def translator() -> decode.Translator:
    """A random one-layer tiny model (fast to compile) with batches of 3: the 10 non-empty sources make 4."""
    model_config = TINY.replace(num_layers=1)
    return decode.Translator(model_config, init_params(model_config), WordTokenizer(), settings=SHORT, batch_size=3)


def test_decoding_batches_sort_longest_first_or_keep_the_input_order() -> None:
    encoded = [[5, 2], [], [5, 6, 7, 2], [5, 2], [5, 6, 2], [2]]
    assert translation_quality.decoding_batches(encoded, 2) == [[2, 4], [0, 3], [5]]  # Ties keep input order.
    assert translation_quality.decoding_batches(encoded, 2, sort_by_length=False) == [[0, 2], [3, 4], [5]]
    assert translation_quality.decoding_batches([[], []], 2) == []


@pytest.mark.integration
def test_unsorted_batches_translate_as_the_default_in_input_order(translator: decode.Translator) -> None:
    encoded = translator.encode_sources(SOURCES)
    assert (translation_quality.decoding_batches(encoded, 3)
            != translation_quality.decoding_batches(encoded, 3, sort_by_length=False))  # A real comparison.
    progress: list[int] = []
    default = translation_quality.translate_stoppably(translator, SOURCES)
    unsorted = translation_quality.translate_stoppably(translator, SOURCES, sort_by_length=False,
                                                       report_progress=progress.append)
    assert unsorted == default == translator.translate(SOURCES)
    assert len(unsorted) == len(SOURCES) and unsorted[3] == ""
    assert progress == [4, 7, 10, 11]  # The empty source counts as done from the start.
    for source, output in zip(SOURCES, unsorted):  # Each output within its own source's length limit.
        assert len(output.split()) <= len(source.split()) + translator.max_extra_len


def test_unsorted_translation_stops_between_batches(translator: decode.Translator) -> None:
    asked: list[int] = []

    def stop_on_second_batch() -> bool:
        asked.append(1)
        return len(asked) == 2

    with pytest.raises(translation_quality.EvaluationStopped, match="4 of 11 sentences translated"):
        translation_quality.translate_stoppably(translator, SOURCES, should_stop=stop_on_second_batch,
                                                sort_by_length=False)


@pytest.mark.integration
def test_padded_shapes_are_the_programs_compiled() -> None:
    # One layer and alpha 0.55: static arguments no other test compiles with, so the jit cache grows by
    # exactly this split's shapes (and one layer compiles faster).
    model_config = TINY.replace(num_layers=1)
    settings = DecodeSettings(max_decode_extra_len=6, length_penalty_alpha=0.55)
    translator = decode.Translator(model_config, init_params(model_config, seed=1), WordTokenizer(),
                                   settings=settings, batch_size=3)
    estimates: dict[whole_split_decode.Shape, float] = {}
    record = whole_split_decode.measure_split(translator, "dev", SOURCES, estimates)
    assert set(record) == SPLIT_FIELDS
    warmup, modes = record["warmup"], record["modes"]
    shapes = {tuple(shape) for mode in modes.values() for shape in mode["shapes"]}
    assert warmup["new_shapes"] == len(shapes) == len(estimates) >= 3
    if warmup["compiled_programs"] is not None:
        assert warmup["compiled_programs"] == warmup["new_shapes"]
    assert set(estimates) == shapes and all(seconds >= 0.0 for seconds in estimates.values())
    for figures in modes.values():
        assert set(figures) == MODE_FIELDS
        assert figures["sentences"] == len(SOURCES) and figures["batches"] == 4
        assert figures["padded_batch_shapes"] == len(figures["shapes"])
        assert all(rows in (1, 3) and source_length in (8, 16) and 0 < decode_length <= TINY.max_len
                   for rows, source_length, decode_length in figures["shapes"])
        assert figures["compile_s"] == pytest.approx(
            sum(estimates[tuple(shape)] for shape in figures["shapes"]), abs=0.01)
    # The same rows per batch, and each sorted batch's longest source is at most its unsorted counterpart's.
    assert modes["sorted"]["source_padding_fraction"] <= modes["unsorted"]["source_padding_fraction"]
    assert record["identical_translations"] and record["differing_translations"] == 0
    assert record["sentences"] == len(SOURCES) and record["truncated_sources"] == 0
    assert record["source_tokens"] == sum(len(source.split()) + 1 for source in SOURCES if source)
    again = whole_split_decode.measure_split(translator, "test", SOURCES, estimates)
    assert again["warmup"]["new_shapes"] == 0 and again["warmup"]["compiled_programs"] in (0, None)


@pytest.mark.slow
@pytest.mark.end_to_end
def test_smoke_run_reports_both_modes_of_both_splits(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "results" / "whole_split_decode.json"
    env = train_support.subprocess_env(str(tmp_path / "compilation_cache"))
    completed = train_support.run_python(["benchmarks/whole_split_decode.py", "--smoke", "--note=test",
                                          f"--out={out}"], env, timeout=600)
    assert completed.returncode == 0, completed.stderr[-5000:]
    report = json.loads(out.read_text())
    assert json.loads(completed.stdout) == report
    assert set(report) == REPORT_FIELDS and report["smoke"] and report["note"] == "test"
    assert report["decoding"] == dict(report["decoding"], beam_size=4, alpha=0.6, batch_size=64, num_sentences=0)
    assert report["machine"]["cpu_count"] > 0 and report["machine"]["backend"] == "cpu"
    assert report["machine"]["jax_compilation_cache_dir"] == str(tmp_path / "compilation_cache")
    assert list(report["splits"]) == ["dev", "test"]
    for record in report["splits"].values():
        assert set(record) == SPLIT_FIELDS and record["sentences"] == 100  # synthetic_en_de/small's splits.
        assert set(record["modes"]) == {"sorted", "unsorted"}
        for figures in record["modes"].values():
            assert set(figures) == MODE_FIELDS and figures["sentences"] == 100 and figures["batches"] == 2
            assert figures["seconds"] > 0 and figures["target_tokens"] >= 100  # At least each output's EOS.
            assert figures["padded_batch_shapes"] >= 1
        assert record["identical_translations"] and record["differing_translations"] == 0
    assert report["identical_translations"]
    assert report["splits"]["dev"]["warmup"]["new_shapes"] >= 1
    assert "length-sorted batches" in completed.stderr and "translations identical" in completed.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("arguments", "message"), [
    ([], "--workdir is required"),
    (["--workdir=/no/such/run"], "--workdir=/no/such/run is not a directory"),
    (["--workdir={empty}"], "holds no config.json: it is not a training run"),
    (["--workdir={empty}", "--smoke"], "--smoke trains its own tiny run"),
    (["--smoke", "--splits=train"], "--splits: unknown ['train']"),
    (["--smoke", "--splits=dev,validation"], "names a split twice"),
    (["--smoke", "--batch_size=0"], "--batch_size must be positive"),
])
def test_a_usage_mistake_is_one_line_and_exit_2(tmp_path: pathlib.Path, arguments: list[str], message: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    given = [argument.format(empty=empty) for argument in arguments]
    env = train_support.subprocess_env(str(tmp_path / "compilation_cache"))
    completed = train_support.run_python(["benchmarks/whole_split_decode.py", *given], env, timeout=300)
    assert completed.returncode == 2 and completed.stdout == ""
    [line] = completed.stderr.strip().splitlines()
    assert line.startswith("whole_split_decode.py: error: ") and message in line

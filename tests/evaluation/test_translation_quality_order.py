"""``translation_quality``'s decoding batches: longest first by default, or in input order
(``translate_stoppably(sort_by_length=False)``, the baseline of docs/benchmarks.md's whole-split timing)."""

from __future__ import annotations

import pytest

from attention_jax.decoding import decode
from attention_jax.evaluation import translation_quality
from tests.support.decoding_helpers import SHORT, TINY, WordTokenizer, init_params

# Lengths 1..14 words in no order, and an empty line: sorted and input-order batches differ.
SOURCES = ["w5 w6 w7", "w9", "w10 w11 w12 w13 w14 w15 w16 w17 w18 w19 w20", "", "w21 w22",
           "w23 w24 w25 w26 w27 w28", "w8", "w30 w31 w32 w33 w34 w35 w36 w37 w38 w39 w4 w5 w6 w7",
           "w11 w12 w13 w14", "w15 w16 w17 w18 w19 w20 w21 w22 w23", "w25 w26 w27 w28 w29"]


@pytest.fixture(scope="module")
def translator() -> decode.Translator:
    """A random one-layer tiny model (fast to compile) with batches of 3: the 10 non-empty sources make 4."""
    model_config = TINY.replace(num_layers=1)
    return decode.Translator(model_config, init_params(model_config), WordTokenizer(), settings=SHORT, batch_size=3)


def test_decoding_batches_sort_longest_first_or_keep_the_input_order() -> None:
    encoded = [[5, 2], [], [5, 6, 7, 2], [5, 2], [5, 6, 2], [2]]
    assert translation_quality._decoding_batches(encoded, 2) == [[2, 4], [0, 3], [5]]  # Ties keep input order.
    assert translation_quality._decoding_batches(encoded, 2, sort_by_length=False) == [[0, 2], [3, 4], [5]]
    assert translation_quality._decoding_batches([[], []], 2) == []


@pytest.mark.integration
def test_unsorted_batches_translate_as_the_default_in_input_order(translator: decode.Translator) -> None:
    encoded = translator.encode_sources(SOURCES)
    assert (translation_quality._decoding_batches(encoded, 3)
            != translation_quality._decoding_batches(encoded, 3, sort_by_length=False))  # A real comparison.
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

"""Fixed decoding shapes: once a source bucket is warm, a sentence of a new length compiles nothing.

``Translator.warm_up`` turns on one decode length per source bucket; the outputs must be those of the
default, tighter lengths (the decode length only bounds them), and the jitted search's cache of compiled
programs must not grow for sentences whose buckets were warmed.
"""

from __future__ import annotations

import dataclasses
import threading
import time

import flax.linen as nn
import numpy as np
import pytest

from attention_jax.checkpointing import compilation_cache
from attention_jax.decoding import background_warm_up, decode
from tests.support.decoding_helpers import SHORT, TINY, WordTokenizer, init_params

# Source lengths from 1 to 15 words (2 to 16 tokens with EOS): buckets 8 and 16, several decode lengths each.
SOURCES = [" ".join(f"w{5 + (word * 7 + length) % 30}" for word in range(length)) for length in (1, 3, 6, 7, 9, 12, 15)]
# An alpha no other test uses: the search's compiled programs (alpha is a static argument) are this file's own.
OWN_SETTINGS = dataclasses.replace(SHORT, length_penalty_alpha=0.6125)


def _translator(settings=SHORT, exported_searches=None) -> decode.Translator:
    return decode.Translator(TINY, nn.meta.unbox(init_params(TINY)), WordTokenizer(), settings=settings, batch_size=2,
                             exported_searches=exported_searches)


@pytest.mark.integration
def test_warm_up_names_the_buckets_up_to_the_longest_source_the_model_takes():
    translator = _translator()
    assert translator.max_source_len == TINY.max_len - SHORT.max_decode_extra_len == 18
    assert translator.warm_up(3) == [8] and translator.fixed_shapes
    assert translator.warm_up(12) == [8, 16]
    assert translator.warm_up(100) == [8, 16, 18]  # The last bucket is cut to the model's longest source.


@pytest.mark.integration
def test_fixed_shapes_give_the_same_hypotheses_one_sentence_at_a_time():
    default, fixed = _translator(), _translator()
    fixed.warm_up(16, num_best=2)
    for source in SOURCES:
        expected, found = default.translate_nbest([source], 2)[0], fixed.translate_nbest([source], 2)[0]
        assert [hypothesis.ids for hypothesis in found] == [hypothesis.ids for hypothesis in expected], source
        np.testing.assert_allclose([h.score for h in found], [h.score for h in expected], rtol=1e-5, atol=1e-5)


@pytest.mark.integration
def test_after_warm_up_new_lengths_compile_nothing_and_without_it_they_do():
    translator = _translator(OWN_SETTINGS)
    translator.warm_up(16)
    programs = decode.decode_batch._cache_size()
    for source in SOURCES:
        translator.translate([source])
    assert decode.decode_batch._cache_size() == programs
    default = _translator(OWN_SETTINGS)
    before = decode.decode_batch._cache_size()
    for source in SOURCES:
        default.translate([source])
    assert decode.decode_batch._cache_size() > before  # The default sizes each batch's decode length to it.


# Another alpha of this file's own: the background warm-up's programs are compiled by the test below only.
BACKGROUND_SETTINGS = dataclasses.replace(SHORT, length_penalty_alpha=0.6375)


@pytest.mark.integration
def test_background_warm_up_answers_the_first_line_first_then_warms_the_rest_with_the_same_hypotheses():
    default, translator = _translator(BACKGROUND_SETTINGS), _translator(BACKGROUND_SETTINGS)
    assert translator.source_buckets(3) == [8] and translator.source_buckets(100) == [8, 16, 18]
    warm_up = background_warm_up.BackgroundWarmUp(translator, translator.source_buckets(16), num_best=2)
    assert translator.fixed_shapes  # The first line already decodes to its bucket's length.
    before = decode.decode_batch._cache_size()
    with warm_up.holding() as held:
        first = held.translate_nbest([SOURCES[-1]], 2)[0]  # 16 tokens: bucket 16 compiled for it alone.
    assert decode.decode_batch._cache_size() == before + 1 and warm_up.warmed == []
    warm_up.start()
    warm_up.wait()  # Bucket 8, then 16 (a call of the compiled program); stop() would race the thread.
    warm_up.stop()
    assert warm_up.warmed == [8, 16] and decode.decode_batch._cache_size() == before + 2
    found = [first] + [translator.translate_nbest([source], 2)[0] for source in SOURCES[:-1]]
    assert decode.decode_batch._cache_size() == before + 2  # Every later length: no compilation.
    for source, hypotheses in zip(SOURCES[-1:] + SOURCES[:-1], found):
        expected = default.translate_nbest([source], 2)[0]
        assert [hypothesis.ids for hypothesis in hypotheses] == [hypothesis.ids for hypothesis in expected], source
        np.testing.assert_allclose([h.score for h in hypotheses], [h.score for h in expected], rtol=1e-5, atol=1e-5)


@pytest.mark.fast
def test_stop_after_a_ctrl_c_inside_start_ends_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    class UnusedTranslator:
        fixed_shapes = False

        def warm_bucket(self, length: int, num_best: int = 1) -> None:
            raise AssertionError("no bucket is warmed after stop")

    warm_up = background_warm_up.BackgroundWarmUp(UnusedTranslator(), [8, 16])

    def interrupted_start(thread: threading.Thread) -> None:
        raise KeyboardInterrupt  # SIGINT while Thread.start waits for the thread to run.

    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    with pytest.raises(KeyboardInterrupt):
        warm_up.start()
    monkeypatch.undo()
    warm_up.stop()  # translate's `finally`: no "cannot join thread before it is started".
    assert warm_up.warmed == []


@pytest.mark.integration
def test_a_line_waits_for_the_bucket_being_warmed_and_never_runs_beside_it():
    translator = _translator(BACKGROUND_SETTINGS)
    warm_up = background_warm_up.BackgroundWarmUp(translator, [8, 16])
    running, overlaps = threading.Lock(), []
    original = translator.warm_bucket

    def warm_bucket(length: int, num_best: int = 1) -> None:
        overlaps.append(not running.acquire(blocking=False))
        time.sleep(0.2)  # Long enough for the line below to come while the bucket is warming.
        original(length, num_best)
        running.release()

    translator.warm_bucket = warm_bucket
    warm_up.start()
    while not overlaps:
        time.sleep(0.01)
    with warm_up.holding():
        overlaps.append(not running.acquire(blocking=False))
        running.release()
    warm_up.wait()  # Both buckets: stop() would cancel bucket 16 if the line came before it started.
    warm_up.stop()
    assert overlaps == [False, False, False]  # Bucket 8, the line, bucket 16 (the last two in either order).
    assert warm_up.warmed == [8, 16]


CACHE_SETTINGS = ("jax_compilation_cache_dir", "jax_persistent_cache_min_compile_time_secs",
                  "jax_persistent_cache_min_entry_size_bytes")


@pytest.fixture
def jax_cache_settings():
    """JAX's cache settings as they were, restored after the test (``enable`` changes them)."""
    import jax

    previous = {name: getattr(jax.config, name) for name in CACHE_SETTINGS}
    yield jax.config
    for name, value in previous.items():
        jax.config.update(name, value)


def test_enable_unless_set_keeps_a_cache_directory_already_chosen(tmp_path, monkeypatch, jax_cache_settings):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    jax_cache_settings.update("jax_compilation_cache_dir", str(tmp_path / "chosen"))
    assert compilation_cache.enable_unless_set(str(tmp_path / "configured")) == str(tmp_path / "chosen")
    assert not (tmp_path / "configured").exists()
    jax_cache_settings.update("jax_compilation_cache_dir", None)
    assert compilation_cache.enable_unless_set(str(tmp_path / "configured")) == str(tmp_path / "configured")
    assert (tmp_path / "configured").is_dir()
    assert compilation_cache.enable_unless_set("") == str(tmp_path / "configured")  # Now set: kept.


@pytest.mark.parametrize("configured", ["", None])
def test_enable_unless_set_follows_the_environment_first(configured, tmp_path, monkeypatch, jax_cache_settings):
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "from_environment"))
    jax_cache_settings.update("jax_compilation_cache_dir", None)
    assert compilation_cache.enable_unless_set(configured) == str(tmp_path / "from_environment")


def test_enable_unless_set_with_the_cache_off_enables_nothing(monkeypatch, jax_cache_settings):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    jax_cache_settings.update("jax_compilation_cache_dir", None)
    assert compilation_cache.enable_unless_set("") is None
    assert jax_cache_settings.jax_compilation_cache_dir is None


# An alpha of its own again: the exported searches' programs are this test's.
EXPORTED_SETTINGS = dataclasses.replace(SHORT, length_penalty_alpha=0.6625)


@pytest.mark.integration
def test_exported_searches_give_the_same_hypotheses_and_a_second_translator_reads_them(tmp_path):
    default = _translator(EXPORTED_SETTINGS)
    for number in range(2):  # The first exports bucket 16's search, the second reads it.
        translator = _translator(EXPORTED_SETTINGS, background_warm_up.ExportedSearches(str(tmp_path)))
        translator.fixed_shapes = True
        found = translator.translate_nbest([SOURCES[-1]], 2)[0]
        expected = default.translate_nbest([SOURCES[-1]], 2)[0]
        assert [hypothesis.ids for hypothesis in found] == [hypothesis.ids for hypothesis in expected], number
        np.testing.assert_allclose([h.score for h in found], [h.score for h in expected], rtol=1e-5, atol=1e-5)
        assert len(list((tmp_path / background_warm_up.SEARCHES_SUBDIR).iterdir())) == 1

"""Progress for the phases that were silent (issue 74): the sampled BLEU inside training and the
perplexity pass after a final decode log a start line, with how much they have to do, and an end line
with their elapsed time."""

from __future__ import annotations

import logging
import re
import types
from typing import Any

import pytest

from attention_jax.evaluation import progress, translation_quality


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


def test_a_timed_phase_logs_its_start_with_the_count_and_its_end_with_the_time(
        caplog: pytest.LogCaptureFixture) -> None:
    # On absl's logger itself: a test that parsed absl flags in this worker may have left it at WARNING.
    with caplog.at_level(logging.INFO, logger="absl"):
        with progress.timed_phase("sampled dev BLEU at step 400", 200):
            pass
        with progress.timed_phase("warming up"):
            pass
    start, end, other_start, other_end = _messages(caplog)
    assert start == "sampled dev BLEU at step 400: 200 sentences ..."
    assert re.fullmatch(r"sampled dev BLEU at step 400: done in \d+\.\d s( \([\d.]+ sentences/s\))?", end), end
    assert other_start == "warming up: started ..."
    assert re.fullmatch(r"warming up: done in \d+\.\d s", other_end), other_end


def test_a_phase_that_raises_logs_no_end_line(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="absl"), pytest.raises(KeyboardInterrupt):
        with progress.timed_phase("final test perplexity", 3, unit="reference pairs"):
            raise KeyboardInterrupt
    assert _messages(caplog) == ["final test perplexity: 3 reference pairs ..."]


def test_the_perplexity_pass_after_a_decode_is_announced_and_timed(monkeypatch: pytest.MonkeyPatch,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    """translation_quality.evaluate around fakes: the lines come between the decode and the result."""
    order: list[str] = []

    def fake_translate(translator: Any, sources: list[str], **_: Any) -> list[str]:
        order.append("translated")
        return list(sources)

    def fake_cross_entropy(*_: Any, **__: Any) -> translation_quality._CrossEntropy:
        order.append("perplexity computed")
        return translation_quality._CrossEntropy(mean=1.0, num_tokens=6, num_pairs=3, num_skipped=0)

    monkeypatch.setattr(translation_quality, "translate_stoppably", fake_translate)
    monkeypatch.setattr(translation_quality, "_cross_entropy", fake_cross_entropy)
    translator = types.SimpleNamespace(model_config=None, params=None, tokenizer=None, max_source_len=8,
                                       batch_size=2)
    pairs = [("a b", "a b"), ("c d", "c d"), ("e f", "e f")]

    class _Order(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            order.append(record.getMessage())

    handler = _Order(level=logging.INFO)
    logging.getLogger("absl").addHandler(handler)
    try:
        with caplog.at_level(logging.INFO, logger="absl"):
            result = translation_quality.evaluate(translator, pairs,  # type: ignore[arg-type]
                                                  progress_name="final test")
    finally:
        logging.getLogger("absl").removeHandler(handler)
    assert result.perplexity == pytest.approx(2.718281828) and result.num_examples == 3
    assert order[:3] == ["translated", "final test perplexity: 3 reference pairs ...", "perplexity computed"]
    assert re.fullmatch(r"final test perplexity: done in \d+\.\d s( \([\d.]+ reference pairs/s\))?", order[3]), order

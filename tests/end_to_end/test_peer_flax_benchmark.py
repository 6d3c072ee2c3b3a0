"""benchmarks/peer_flax.py: medians and ratios of alternating runs; a clean skip without the peer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT / "benchmarks"))

import peer_flax  # noqa: E402


def test_summary_takes_medians_and_our_throughput_over_the_peers():
    ours = [{"sentences_per_s": rate, "best_sentences_per_s": rate + 1} for rate in (3.0, 1.0, 2.0)]
    peer = [{"sentences_per_s": rate} for rate in (4.0, 8.0, 5.0)]
    summary = peer_flax.summarize_task(ours, peer)
    assert summary["ours"]["median_sentences_per_s"] == 2.0
    assert summary["ours"]["median_best_sentences_per_s"] == 3.0
    assert summary["peer"]["median_sentences_per_s"] == 5.0
    assert summary["ratio"] == pytest.approx(0.4)
    assert summary["ours"]["runs"] == ours


def test_train_summary_compares_target_tokens_per_second():
    ours = [{"target_tokens_per_s": 300.0, "mfu": 0.5}]
    peer = [{"target_tokens_per_s": 200.0}]
    assert peer_flax.summarize_task(ours, peer)["ratio"] == pytest.approx(1.5)


def test_missing_peer_is_skipped_with_a_message(tmp_path):
    completed = subprocess.run([sys.executable, "benchmarks/peer_flax.py", f"--peer_dir={tmp_path}"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode == 0
    assert "Skipped: no Flax WMT peer" in completed.stderr
    assert completed.stdout == ""


def test_unknown_task_is_rejected():
    completed = subprocess.run([sys.executable, "benchmarks/peer_flax.py", "--tasks=beam_big"],
                               cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert completed.returncode != 0
    assert "unknown tasks ['beam_big']" in completed.stderr

"""``benchmarks/interactive_latency.py``'s summary over rounds: each scenario's median, min and max first
answer and its slowest new length, read from every round (the figures docs/benchmarks.md quotes)."""

from __future__ import annotations

from benchmarks import interactive_latency


def _round(before: float, cold: float, warm: float, slowest_new: float) -> dict:
    """One round as ``run_scenarios`` returns it, with made-up times."""
    return {name: {"flags": [], "first_answer_s": first, "new_length_s": [0.01, slowest_new, 0.0],
                   "answers": ["a", "b", "c", "d"]}
            for name, first in (("before", before), ("cold", cold), ("warm", warm))}


def test_summary_gives_each_scenarios_median_range_and_slowest_new_length():
    rounds = [_round(5.0, 10.0, 4.0, 3.0), _round(7.0, 12.0, 6.0, 0.02), _round(6.0, 11.0, 9.0, 0.5)]
    summary = interactive_latency.summarize(rounds)
    assert summary["warm"] == {"first_answer_s": [4.0, 6.0, 9.0], "first_answer_median_s": 6.0,
                               "first_answer_min_s": 4.0, "first_answer_max_s": 9.0, "new_length_max_s": 3.0}
    assert summary["cold"]["first_answer_median_s"] == 11.0
    assert summary["before"]["first_answer_s"] == [5.0, 7.0, 6.0]


def test_summary_of_one_round_is_that_round():
    summary = interactive_latency.summarize([_round(5.0, 10.0, 4.0, 0.25)])
    assert summary["cold"]["first_answer_median_s"] == summary["cold"]["first_answer_max_s"] == 10.0
    assert summary["before"]["new_length_max_s"] == 0.25

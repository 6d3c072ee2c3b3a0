r"""How long ``translate`` takes to answer line by line: the first answer cold and warm, then new lengths; JSON.

Run from the repository root on any translation run::

    python benchmarks/interactive_latency.py --workdir=runs/tiny --out=benchmarks/results/interactive_latency.json
    python benchmarks/interactive_latency.py --quick      # trains a one-layer run first; one round of all three

Each scenario starts ``python -m attention_jax.translate --workdir=RUN --buffer_size=1`` as a user would
through a pipe, writes one sentence, waits for its line, then one sentence of each further length
(``--lengths`` words, each a length the process has not seen), timing each answer from the moment its
line was written. Scenarios, in order (``--scenarios``; by default ``cold`` and ``warm``, five rounds, which
take about 3 minutes on 2 loaded cores):

- ``before`` (only when named): ``--warm_up_tokens=0`` (each batch's decode length fitted to it, as
  before fixed shapes) and an empty compilation cache directory, so every shape it meets compiles;
- ``cold``: the defaults (fixed shapes; the first line's source bucket compiled when it arrives, the
  other buckets up to 32 tokens in the background after its answer) with another empty cache directory;
- ``warm``: the defaults again, in a second process sharing ``cold``'s cache directory, which loads the
  searches ``cold`` exported and compiled instead of tracing and compiling them.

``first_answer_s`` counts from the process's start (imports, loading the run, the first line's search
with its compilation or cache load); ``new_length_s`` lists the answers after it, each written as soon as
the previous answer came, so one may wait for the background warm-up's bucket in progress. The host's load
average before and after is recorded: on a shared machine the figures scale with it, each process's CPU
seconds (``cpu_s``) less so. ``--repeats=N`` runs N rounds, each with fresh cache directories, and
``summary`` gives each scenario's first answers (median, min, max) and its slowest new length over the
rounds. No test depends on these times.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

from absl import flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from benchmarks import harness  # noqa: E402

SCENARIOS = ("before", "cold", "warm")

WORDS = ("the small child sleeps because the woman reads a book and the old man walks to the green house "
         "near the river while a dog runs after the red ball in the garden of my friend today").split()


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.harness`)."""
    flags.DEFINE_string("workdir", None, "Training work directory or export directory to translate with "
                        "(with --quick and none given: a one-layer run trained first).")
    flags.DEFINE_list("lengths", ["4", "9", "13", "18", "24"], "Words of the first sentence, then of each "
                      "new-length sentence, in order.")
    flags.DEFINE_list("scenarios", ["cold", "warm"], "Scenarios of each round, among before, cold and warm.")
    flags.DEFINE_integer("repeats", 5, "Rounds of the scenarios, each with fresh caches; the summary gives "
                         "each scenario's median, min and max first answer.")
    flags.DEFINE_integer("timeout_s", 600, "Give up on a scenario after this many seconds.")


def sentence(num_words: int) -> str:
    """Return a sentence of ``num_words`` words from :data:`WORDS`, ending in a full stop.

    Parameters
    ----------
    num_words : int
        Its length in words.

    Returns
    -------
    str
        The sentence.
    """
    return " ".join(WORDS[index % len(WORDS)] for index in range(num_words)) + "."


def time_process(workdir: str, cache_dir: str, lengths: list[int], extra_flags: list[str],
                 timeout_s: float) -> dict[str, Any]:
    """Start ``translate`` line by line, send one sentence of each length, time each answer.

    Parameters
    ----------
    workdir : str
        The run.
    cache_dir : str
        ``JAX_COMPILATION_CACHE_DIR`` of the process.
    lengths : list[int]
        Words per sentence, first sentence first.
    extra_flags : list[str]
        More ``translate`` flags.
    timeout_s : float
        A deadline for the whole process.

    Returns
    -------
    dict
        ``first_answer_s`` (from the start), ``new_length_s`` (one per further sentence), ``cpu_s`` (the
        whole process's CPU seconds, background warm-up included) and the answers.
    """
    environment = dict(os.environ, JAX_COMPILATION_CACHE_DIR=cache_dir, PYTHONPATH=REPO_ROOT)
    command = [sys.executable, "-m", "attention_jax.translate", f"--workdir={workdir}", "--buffer_size=1",
               *extra_flags]
    started, children_before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    process = subprocess.Popen(command, cwd=REPO_ROOT, env=environment, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert process.stdin is not None and process.stdout is not None
    times, answers = [], []
    try:
        for number, num_words in enumerate(lengths):
            sent = time.perf_counter()
            process.stdin.write(sentence(num_words).encode() + b"\n")
            process.stdin.flush()
            answer = process.stdout.readline()
            if not answer:
                raise RuntimeError(f"translate ended early: {process.stderr.read().decode()[-2000:]}")
            times.append(time.perf_counter() - (started if number == 0 else sent))
            answers.append(answer.decode().rstrip("\n"))
            if time.perf_counter() - started > timeout_s:
                raise RuntimeError(f"the scenario ran past --timeout_s={timeout_s}")
        process.stdin.close()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = sum(getattr(children, name) - getattr(children_before, name) for name in ("ru_utime", "ru_stime"))
    return {"flags": extra_flags, "first_answer_s": round(times[0], 2),
            "new_length_s": [round(value, 2) for value in times[1:]], "cpu_s": round(cpu_s, 2), "answers": answers}


def run_scenarios(workdir: str, lengths: list[int], timeout_s: float,
                  scenarios: tuple[str, ...] = SCENARIOS) -> dict[str, dict[str, Any]]:
    """One round of the scenarios, each with its own fresh cache directory (``warm`` shares ``cold``'s).

    Parameters
    ----------
    workdir : str
        The run.
    lengths : list[int]
        Words per sentence, first sentence first.
    timeout_s : float
        A deadline for each process.
    scenarios : tuple[str, ...]
        Which of :data:`SCENARIOS` to run, in that order.

    Returns
    -------
    dict
        Each scenario as :func:`time_process` returns it.

    Notes
    -----
    The scenarios run one after another, never side by side, so that they do not share the cores; the
    cache directories are removed when the round ends, so each round starts cold.
    """
    with tempfile.TemporaryDirectory() as before_cache, tempfile.TemporaryDirectory() as shared_cache:
        runs = {"before": (before_cache, ["--warm_up_tokens=0"]), "cold": (shared_cache, []),
                "warm": (shared_cache, [])}
        return {name: time_process(workdir, runs[name][0], lengths, runs[name][1], timeout_s)
                for name in SCENARIOS if name in scenarios}


def summarize(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Each scenario's first answers over the rounds (median, min, max) and its slowest new length.

    Parameters
    ----------
    rounds : list[dict]
        :func:`run_scenarios`' results, one per round.

    Returns
    -------
    dict
        Per scenario: ``first_answer_s`` (every round's), ``first_answer_median_s``, ``_min_s``, ``_max_s``
        and ``new_length_max_s`` (the slowest new-length answer of any round).

    Notes
    -----
    The median is :func:`statistics.median` (the mean of the middle two for an even number of rounds);
    no spread beyond min and max is given, since a handful of rounds is what the benchmark runs.
    """
    summary = {}
    for name in rounds[0]:
        firsts = sorted(one_round[name]["first_answer_s"] for one_round in rounds)
        summary[name] = {"first_answer_s": [one_round[name]["first_answer_s"] for one_round in rounds],
                         "first_answer_median_s": round(statistics.median(firsts), 2),
                         "first_answer_min_s": firsts[0], "first_answer_max_s": firsts[-1],
                         "new_length_max_s": max(max(one_round[name]["new_length_s"], default=0.0)
                                                 for one_round in rounds)}
    return summary


def train_quick_run(workdir: str) -> None:
    """Train :data:`harness.QUICK_TRAINING`'s one-layer run into ``workdir`` (seconds).

    Parameters
    ----------
    workdir : str
        The new run's directory.
    """
    command = [sys.executable, "-m", "attention_jax.main", f"--config={harness.QUICK_CONFIG}", f"--workdir={workdir}",
               *[f"--config.{key}={value}" for key, value in harness.QUICK_TRAINING.items()]]
    completed = harness.run_captured(command)
    if completed.returncode != 0:
        raise RuntimeError(f"training the --quick run failed:\n{completed.stderr[-3000:]}")


def main(argv: list[str]) -> None:
    """Run ``--repeats`` rounds of the scenarios and print (and with ``--out`` write) the JSON report.

    Parameters
    ----------
    argv : list[str]
        What absl leaves of the command line (nothing).
    """
    del argv
    options = flags.FLAGS
    if not options.workdir and not options.quick:
        harness.fail("--workdir is required: a run to translate with (or --quick, which trains one).")
    unknown = sorted(set(options.scenarios) - set(SCENARIOS))
    if unknown:
        harness.fail(f"--scenarios: {', '.join(unknown)} unknown; choose among {', '.join(SCENARIOS)}.")
    if options.repeats < 1:
        harness.fail(f"--repeats={options.repeats}: give at least 1 round.")
    lengths = [int(value) for value in options.lengths]
    if options.quick and not options["lengths"].present:
        lengths = [2, 4]  # Within the --quick run's max_len of 8 tokens.
    scenarios = tuple(options.scenarios)
    repeats = options.repeats
    if options.quick:  # One round of all three: the test of the script, not a measurement.
        scenarios = scenarios if options["scenarios"].present else SCENARIOS
        repeats = repeats if options["repeats"].present else 1
    with tempfile.TemporaryDirectory() as scratch:
        workdir = options.workdir or os.path.join(scratch, "run")
        if not options.workdir:
            train_quick_run(workdir)
        rounds = []
        for number in range(repeats):
            rounds.append(run_scenarios(workdir, lengths, options.timeout_s, scenarios))
            print(f"round {number + 1}/{repeats}: first answers "
                  + ", ".join(f"{name} {scenario['first_answer_s']} s" for name, scenario in rounds[-1].items()),
                  file=sys.stderr, flush=True)
    if len({tuple(scenario["answers"]) for one_round in rounds for scenario in one_round.values()}) != 1:
        raise RuntimeError("the scenarios translated differently: fixed shapes must not change a translation.")
    harness.emit({"quick": options.quick, "workdir": options.workdir, "lengths_words": lengths,
                  "identical_translations": True, "repeats": repeats,
                  "scenarios": list(rounds[0]), "summary": summarize(rounds),
                  "rounds": rounds}, options.out)


if __name__ == "__main__":
    harness.run(main, define_flags)

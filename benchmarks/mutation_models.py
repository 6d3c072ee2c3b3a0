"""Mutation-test the fast tier over the paper's maths in attention_jax/models/ (issue 87; docs/testing.md).

A measurement, not a CI step: needs mutmut 3 (``pip install mutmut==3.8.1``). The sources and tests are copied
to a scratch folder, whose copied pyproject.toml gets a ``[tool.mutmut]`` table; mutmut writes its ``mutants/``
there. ``--sample N`` runs a uniformly random sample of the mutants (fixed ``--seed``).
"""

import ast
import importlib.metadata
import json
import math
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from absl import flags

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import harness  # noqa: E402

FILES = [f"attention_jax/models/{name}.py" for name in (
    "attention", "attention_functions", "attention_positions", "masks", "model", "normalization")]
TESTS = ["tests/models/"]
PYTEST_ARGS = ["-m", "fast", "-n", "0", "-p", "no:cacheprovider"]
COPIED = ("tests", "launch", "configs", "docs", "benchmarks")
"""What the tests read besides the package."""

_GENERATE = """
import os
import mutmut.__main__ as m
from mutmut.mutation.trampoline import set_mutant_under_test
set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
m.copy_src_dir(); m.copy_also_copy_files(); m.setup_source_paths(); m.store_lines_covered_by_tests()
m.create_mutants(1)
"""

_RUN = """
import sys
from mutmut.workers import isolation
isolation.ForkServerRunner.run_clean_tests = lambda self, tests: 0  # The stats pass ran every test unmutated.
from mutmut.__main__ import cli
sys.argv[0] = "mutmut"
cli()
"""

_DIFFS = """
import json, sys
import mutmut.__main__ as m
names = json.load(open(sys.argv[1]))
print(json.dumps({n: m.get_diff_for_mutant(n, path=m.find_mutant(n).path) for n in names}))
"""


def _prepare(work: Path) -> None:
    """Copy the package, the tests and pyproject.toml to ``work`` with mutmut's settings."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in ("attention_jax", *COPIED):
        shutil.copytree(ROOT / folder, work / folder, ignore=ignore)
    shutil.copy(ROOT / "README.md", work)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    (work / "commit.txt").write_text(head)
    settings = {"source_paths": ["attention_jax"], "only_mutate": FILES, "pytest_add_cli_args": PYTEST_ARGS,
                "pytest_add_cli_args_test_selection": TESTS, "process_isolation": "forkserver",
                "forkserver_warmup": "none",  # A server that imported JAX has threads: its forks deadlock.
                "use_git_change_detection": False, "also_copy": [*COPIED, "README.md"]}
    table = "\n[tool.mutmut]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in settings.items())
    for file in FILES:
        _undecorate_compact(work / file)
    (work / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text() + table)


def _undecorate_compact(path: Path) -> None:
    """Write ``f = nn.compact(f)`` after each ``@nn.compact`` method: mutmut skips decorated functions."""
    lines = path.read_text().splitlines(keepends=True)
    for node in sorted(ast.walk(ast.parse("".join(lines))), key=lambda n: -getattr(n, "lineno", 0)):
        if isinstance(node, ast.FunctionDef) and [ast.unparse(d) for d in node.decorator_list] == ["nn.compact"]:
            indent = lines[node.lineno - 1][: node.col_offset]
            lines.insert(node.end_lineno, f"{indent}{node.name} = nn.compact({node.name})\n")
            del lines[node.decorator_list[0].lineno - 1]
    path.write_text("".join(lines))


def _exit_codes(work: Path) -> dict[str, int | None]:
    """Return every mutant of FILES and its exit code (None: not run) from mutmut's .meta files."""
    codes: dict[str, int | None] = {}
    for file in FILES:
        codes.update(json.loads((work / "mutants" / (file + ".meta")).read_text())["exit_code_by_key"])
    return codes


def _record(work: Path, every: list[str], chosen: list[str], start: float) -> dict:
    """Write the outcome of the mutants run so far to ``--output`` (and ``--out``) and return it."""
    options = flags.FLAGS
    wall = time.time() - start
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    from mutmut.stats import status_by_exit_code

    codes = _exit_codes(work)
    (work / "chosen.json").write_text(json.dumps(chosen))
    diffs = json.loads(subprocess.run([sys.executable, "-c", _DIFFS, "chosen.json"], cwd=work, check=True,
                                      capture_output=True, text=True).stdout)
    status = {name: status_by_exit_code[codes[name]] for name in chosen}
    sampled = len(chosen) < len(every)
    counts = {s: list(status.values()).count(s) for s in sorted(set(status.values()))}
    # A timeout or a crash counts as killed; a mutant no fast test of tests/models/ reaches ("no tests") survives.
    killed = counts.get("killed", 0) + counts.get("timeout", 0) + counts.get("segfault", 0)
    judged = killed + counts.get("survived", 0) + counts.get("no tests", 0)
    score = killed / judged
    commit = (work / "commit.txt").read_text().strip()  # What was copied.
    record = {
        "tool": f"mutmut {importlib.metadata.version('mutmut')}", "commit": commit, "files": FILES, "tests": TESTS,
        "pytest_args": PYTEST_ARGS,
        "command": " ".join(["python", "benchmarks/mutation_models.py", *sys.argv[1:]]),
        "mutants_in_files": len(every), "sample": len(chosen) if sampled else None,
        "seed": options.seed, "wall_s": round(wall),
        "cpu_s": round(cpu.ru_utime + cpu.ru_stime),
        "outcomes": counts, "killed": killed, "judged": judged, "score": round(score, 4),
        "standard_error": round(math.sqrt(score * (1 - score) / judged), 4) if sampled else 0.0,
        "mutants": [{"name": name, "status": status[name], "diff": diffs[name]} for name in chosen],
    }
    record = {"note": options.note, **record}
    for path in {options.output, options.out} - {""}:
        Path(path).write_text(json.dumps(record, indent=1) + "\n")
    return record


def define_flags() -> None:
    """The runner's flags (defined only when it runs: :mod:`benchmarks.harness`)."""
    flags.DEFINE_string("workdir", "/tmp/mutation_models", "Scratch copy of the sources, tests and mutants.")
    flags.DEFINE_integer("sample", 0, "Mutants to run, a uniform random sample; 0: all.")
    flags.DEFINE_integer("batch", 10, "Mutants per mutmut run (the record is written after each).")
    flags.DEFINE_float("budget_s", math.inf, "Start no batch after this many seconds.")
    flags.DEFINE_integer("seed", 0, "Seed of the sample's order.")
    flags.DEFINE_integer("max_children", 1, "Mutants mutmut runs at once.")
    flags.DEFINE_bool("fresh", False, "Wipe --workdir (else mutmut's test map is reused).")
    flags.DEFINE_string("output", str(ROOT / "benchmarks/results/mutation_models.json"), "The record's JSON.")


def main(argv: list[str]) -> None:
    """Generate, sample, run and record the mutants (``--quick``: two of them)."""
    del argv
    options = flags.FLAGS
    work = Path(options.workdir)
    if options.fresh or not (work / "mutants").exists():
        _prepare(work)
        subprocess.run([sys.executable, "-c", _GENERATE], cwd=work, check=True)
    every = sorted(_exit_codes(work))
    size = 2 if options.quick else (options.sample or len(every))
    order = random.Random(options.seed).sample(every, size)  # A uniform sample in random order.
    start, chosen, record = time.time(), [], {}
    while len(chosen) < len(order) and time.time() - start < options.budget_s:
        batch = order[len(chosen):len(chosen) + options.batch]
        subprocess.run([sys.executable, "-c", _RUN, "run", "--max-children", str(options.max_children), *batch],
                       cwd=work, check=True)
        chosen += batch
        record = _record(work, every, chosen, start)  # After every batch: an interrupted run keeps its part.
    print(json.dumps({key: value for key, value in record.items() if key != "mutants"}, indent=1))


if __name__ == "__main__":
    harness.run(main, define_flags)

r"""Time to a BLEU target: train a config, score the whole dev split at every evaluation; JSON and a plot.

Run from the repository root (2 quiet cores: nothing else running, or the minutes mean little)::

    python benchmarks/time_to_bleu.py --out=benchmarks/results/time_to_bleu_small_corpus.json
    python benchmarks/time_to_bleu.py --config=configs/small_corpus.py --corpus=../shared/data/messages_en_de \
        --eval_every_steps=100 --dev_bleu_target=26 --test_bleu_target=25 --override=num_train_steps=2400 \
        --note="2 quiet cores of ..." --out=benchmarks/results/time_to_bleu_small_corpus.json
    python benchmarks/time_to_bleu.py --quick --out=/tmp/time_to_bleu_quick.json     # < 1 minute

What it does: runs ``python -m attention_jax.main`` (the real training command, the train loop unchanged)
on ``--config`` with ``--config.dataset=tsv:CORPUS``, evaluating every ``--eval_every_steps`` on the
whole dev split: the dev perplexity (teacher forcing, no label smoothing) and the beam-search BLEU of
every dev sentence (``num_bleu_examples`` above any split's size, beam 4, alpha 0.6). At each
evaluation it records:

- ``train_s`` / ``train_minutes``: the training wall time when the evaluation began, *evaluation
  excluded*: the train loop's ``run_wall_s`` (its clock since setup, in ``metrics.jsonl``) minus the
  ``eval_s`` of the evaluations before. Compilation and checkpoint writes count as training; the data
  preparation (tokenizer training on a fresh corpus) before the loop's clock starts does not (it is
  inside ``command_wall_s``);
- ``eval_s``: that evaluation's own wall time, beside it;
- ``dev_ppl`` and ``dev_bleu``.

The target rule (MLPerf's time to a target quality, with a held-out check): the first evaluation whose
dev BLEU reaches ``--dev_bleu_target`` is *the target checkpoint*; its time is the time to the target,
and that checkpoint is then decoded on the test split (``python -m attention_jax.evaluate
--checkpoint=STEP --split=test``, same search), which says whether the test target
(``--test_bleu_target``) holds there. Both splits are reported. A target never reached is reported as
``"reached": false`` with no time. With ``--stop_at_target`` (the default) training is stopped
(SIGTERM: a checkpoint, exit 75) as soon as the target evaluation is written; ``--nostop_at_target``
trains the config's whole budget and keeps every evaluation's checkpoint.

Output: ``--out`` (JSON) and the same path with ``.png``: dev BLEU against training minutes, the
target line and the target checkpoint's test BLEU. The training run (checkpoints, ``metrics.jsonl``,
``train_log.txt``, the test report) stays in ``--workdir``, which must be new or empty.

``--quick`` (formerly ``--smoke``): :data:`harness.QUICK_TRAINING` (one layer of width 32 on
``synthetic_en_de/small``: 100 dev and 100 test pairs, 12 steps), an evaluation every 6, dev target 0
(reached at the first evaluation), training on to the end unless ``--stop_at_target`` is given: every
code path in well under a minute on quiet cores, numbers meaningless.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Sequence

from absl import flags

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from attention_jax.foundation import run_files  # noqa: E402  (no JAX: this process only drives and reads)
from benchmarks import harness  # noqa: E402

DEFAULT_CONFIG = "configs/small_corpus.py"
DEFAULT_CORPUS = REPO_ROOT.parent / "shared" / "data" / "messages_en_de"
WHOLE_SPLIT = 1_000_000_000  # num_bleu_examples above any split's size: BLEU of every dev sentence.
POLL_S = 0.5  # How often metrics.jsonl is read while training runs.
TRAIN_LOG = "train_log.txt"
TEST_REPORT = "time_to_bleu_test.json"

# The protocol: what every evaluation measures, whatever the config says (--override can still change it).
PROTOCOL = dict(num_bleu_examples=WHOLE_SPLIT, num_eval_batches=0, beam_size=4, length_penalty_alpha=0.6,
                final_bleu=False, checkpoint_every_minutes=0.0, early_stopping_patience=0)

SMOKE_EVAL_EVERY_STEPS = 6


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """One evaluation of the run, with its training time.

    Attributes
    ----------
    step : int
        Training step evaluated.
    train_s : float
        Training wall time when the evaluation began, earlier evaluations excluded.
    eval_s : float
        This evaluation's wall time (dev loss, perplexity, whole-split decoding and BLEU).
    dev_ppl : float or None
        Dev perplexity (teacher forcing, no label smoothing).
    dev_bleu : float or None
        BLEU of the beam-search translations of the whole dev split.
    """

    step: int
    train_s: float
    eval_s: float
    dev_ppl: float | None
    dev_bleu: float | None

    def to_json(self) -> dict[str, Any]:
        """The JSON record: the fields plus ``train_minutes``."""
        return dict(dataclasses.asdict(self), train_minutes=self.train_s / 60.0)


def evaluations_from_records(records: Sequence[dict[str, Any]]) -> list[Evaluation]:
    """The evaluations of a run's ``metrics.jsonl`` records, with training time excluding evaluation.

    Parameters
    ----------
    records : Sequence[dict]
        Parsed lines of ``metrics.jsonl`` in file order (train records are skipped).

    Returns
    -------
    list[Evaluation]
        One per ``eval/`` record that carries ``eval/run_wall_s``, in step order.

    Notes
    -----
    ``train_s`` of evaluation ``i`` is its ``run_wall_s`` minus the ``seconds`` of evaluations
    ``0 .. i-1``; it is non-decreasing because each ``run_wall_s`` is at least the previous one plus
    its evaluation. Raises ``ValueError`` when an evaluation lacks ``run_wall_s`` (a train loop older
    than this benchmark).
    """
    evaluations: list[Evaluation] = []
    earlier_eval_s = 0.0
    for record in sorted((r for r in records if "eval/seconds" in r), key=lambda r: r["step"]):
        if record.get("eval/run_wall_s") is None:
            raise ValueError(f"the evaluation of step {record['step']} has no eval/run_wall_s: the train loop "
                             "predates this benchmark (attention_jax/training/run_evaluation.py writes it).")
        seconds = float(record["eval/seconds"])
        evaluations.append(Evaluation(step=int(record["step"]),
                                      train_s=float(record["eval/run_wall_s"]) - earlier_eval_s,
                                      eval_s=seconds, dev_ppl=record.get("eval/perplexity"),
                                      dev_bleu=record.get("eval/bleu")))
        earlier_eval_s += seconds
    return evaluations


def first_reaching(evaluations: Sequence[Evaluation], dev_bleu_target: float) -> Evaluation | None:
    """The first evaluation (by step) whose dev BLEU is at or above the target, or ``None``.

    Parameters
    ----------
    evaluations : Sequence[Evaluation]
        In step order.
    dev_bleu_target : float
        Dev BLEU threshold.

    Returns
    -------
    Evaluation or None
        ``None`` when no evaluation reached it.
    """
    return next((e for e in evaluations if e.dev_bleu is not None and e.dev_bleu >= dev_bleu_target), None)


def target_summary(evaluations: Sequence[Evaluation], dev_bleu_target: float, test_bleu_target: float,
                   test_report: dict[str, Any] | None) -> dict[str, Any]:
    """The ``target`` section of the JSON: when the dev target was first reached and the test score there.

    Parameters
    ----------
    evaluations : Sequence[Evaluation]
        The run's evaluations, in step order.
    dev_bleu_target, test_bleu_target : float
        The thresholds.
    test_report : dict or None
        ``attention_jax.evaluate``'s report of the target checkpoint on the test split (``bleu``,
        ``perplexity``, ``num_examples``, ``bleu_signature``); ``None`` when the target was not reached.

    Returns
    -------
    dict
        ``reached`` (bool) and, when reached, ``step``, ``train_s``, ``train_minutes``, ``dev_bleu``,
        ``dev_ppl``, ``test_bleu``, ``test_ppl``, ``test_sentences``, ``test_bleu_signature`` and
        ``test_target_reached``; when not, ``best_dev_bleu`` and ``best_dev_bleu_step`` (``None``
        without any BLEU) and no time.
    """
    summary: dict[str, Any] = {"dev_bleu_target": dev_bleu_target, "test_bleu_target": test_bleu_target}
    reached = first_reaching(evaluations, dev_bleu_target)
    if reached is None:
        scored = [e for e in evaluations if e.dev_bleu is not None]
        best = max(scored, key=lambda e: e.dev_bleu, default=None)
        return summary | {"reached": False, "best_dev_bleu": None if best is None else best.dev_bleu,
                          "best_dev_bleu_step": None if best is None else best.step}
    summary |= {"reached": True, "step": reached.step, "train_s": reached.train_s,
                "train_minutes": reached.train_s / 60.0, "dev_bleu": reached.dev_bleu, "dev_ppl": reached.dev_ppl}
    if test_report is not None:
        summary |= {"test_bleu": test_report["bleu"], "test_ppl": test_report["perplexity"],
                    "test_sentences": test_report["num_examples"],
                    "test_bleu_signature": test_report["bleu_signature"],
                    "test_target_reached": test_report["bleu"] >= test_bleu_target}
    return summary


def describe(target: dict[str, Any], last_step: int | None) -> str:
    """One line saying when the target was reached (or that it was not), for the console.

    Parameters
    ----------
    target : dict
        :func:`target_summary`'s result.
    last_step : int or None
        The last evaluated step (named when the target was not reached).

    Returns
    -------
    str
        The sentence.
    """
    if not target["reached"]:
        best = ("no dev BLEU" if target["best_dev_bleu"] is None else
                f"best dev BLEU {target['best_dev_bleu']:.2f} at step {target['best_dev_bleu_step']}")
        return f"dev BLEU {target['dev_bleu_target']:g} not reached by step {last_step} ({best})."
    line = (f"dev BLEU {target['dev_bleu_target']:g} first reached at step {target['step']} after "
            f"{target['train_minutes']:.2f} min of training (evaluation excluded): dev BLEU {target['dev_bleu']:.2f}")
    if "test_bleu" in target:
        verdict = "reached" if target["test_target_reached"] else "NOT reached"
        line += (f", test BLEU {target['test_bleu']:.2f} on that checkpoint (test target "
                 f"{target['test_bleu_target']:g}: {verdict})")
    return line + "."


def read_records(path: pathlib.Path) -> list[dict[str, Any]]:
    """The complete JSON lines of a run's ``metrics.jsonl``, read while the run may still write it.

    Parameters
    ----------
    path : pathlib.Path
        The file (absent before the first record).

    Returns
    -------
    list[dict]
        The parsed records; a line being written (not yet valid JSON) is left for the next read.
    """
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records


def _overrides(args: Settings) -> dict[str, str]:
    """``--config.KEY=VALUE`` pairs for the training command: corpus, protocol, checkpoints, then --override."""
    settings: dict[str, Any] = {}
    if args.quick:
        settings |= harness.QUICK_TRAINING
    else:
        settings["dataset"] = f"tsv:{pathlib.Path(args.corpus).resolve()}"
    settings |= PROTOCOL | {"eval_every_steps": args.eval_every_steps,
                            "checkpoint_every_steps": args.eval_every_steps,
                            # Stopping at the target: the target's checkpoint and the stop's. Otherwise all.
                            "keep_checkpoints": 3 if args.stop_at_target else 1_000_000}
    settings = {key: str(value) for key, value in settings.items()}
    for item in args.override:
        key, separator, value = item.partition("=")
        if not separator or not key:
            harness.fail(f"--override takes KEY=VALUE; got {item!r}.")
        settings[key] = value
    return settings


def _device(env: dict[str, str]) -> str:
    """The JAX device the run used (asked once training is over, in a child: no GPU memory held meanwhile)."""
    completed = harness.run_captured([sys.executable, "-c", "import jax; d = jax.devices(); "
                              "print(f'{len(d)} x {d[0].device_kind} ({jax.default_backend()})')"], env)
    return completed.stdout.strip() or f"unknown (exit {completed.returncode})"


def _dev_sentences(dataset: str) -> int | None:
    """Sentences of a TSV corpus's dev split (what every dev BLEU decodes); ``None`` for other datasets."""
    if not dataset.startswith("tsv:"):
        return None
    path = pathlib.Path(dataset[len("tsv:"):]) / "dev.tsv"
    if not path.is_file():
        return None
    return sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def train(args: Settings, config: str, settings: dict[str, str], run_dir: pathlib.Path,
          env: dict[str, str]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run the training command, watching its evaluations; stop it at the target if asked.

    Parameters
    ----------
    args : Settings
        ``dev_bleu_target`` and ``stop_at_target`` are read.
    config : str
        Config file given to ``attention_jax.main``.
    settings : dict[str, str]
        ``--config.KEY=VALUE`` overrides.
    run_dir : pathlib.Path
        The training work directory (new).
    env : dict[str, str]
        The child's environment.

    Returns
    -------
    tuple
        The final ``metrics.jsonl`` records, and ``{"exit_status", "stopped_at_target", "command",
        "command_wall_s"}``.
    """
    command = [sys.executable, "-m", "attention_jax.main", f"--config={config}", f"--workdir={run_dir}",
               *[f"--config.{key}={value}" for key, value in settings.items()]]
    metrics_path = run_dir / run_files.METRICS_FILE
    log_path = run_dir.parent / TRAIN_LOG
    seen, signalled = 0, False
    started = time.perf_counter()
    with open(log_path, "w", encoding="utf-8") as log:
        trainer = subprocess.Popen(command, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                   env=dict(env, PYTHONUNBUFFERED="1"))
        try:
            while True:
                exited = trainer.poll() is not None
                evaluations = evaluations_from_records(read_records(metrics_path))
                for evaluation in evaluations[seen:]:
                    print(f"step {evaluation.step}: {evaluation.train_s / 60:.2f} min of training, "
                          f"evaluation {evaluation.eval_s:.1f} s, dev ppl {evaluation.dev_ppl}, "
                          f"dev BLEU {evaluation.dev_bleu}", file=sys.stderr, flush=True)
                seen = len(evaluations)
                if (not exited and not signalled and args.stop_at_target
                        and first_reaching(evaluations, args.dev_bleu_target) is not None):
                    trainer.send_signal(signal.SIGTERM)  # The loop checkpoints and exits 75.
                    signalled = True
                if exited:
                    break
                time.sleep(POLL_S)
        except BaseException:
            trainer.kill()
            raise
    status = trainer.wait()
    command_wall_s = time.perf_counter() - started
    allowed = (0, run_files.STOPPED_EXIT_STATUS, -signal.SIGTERM) if signalled else (0,)
    if status not in allowed:
        tail = "".join(log_path.read_text(errors="replace").splitlines(keepends=True)[-40:])
        raise SystemExit(f"time_to_bleu: training failed (exit {status}); {log_path} ends:\n{tail}")
    return read_records(metrics_path), {"exit_status": status, "stopped_at_target": signalled,
                                        "command": command, "command_wall_s": command_wall_s}


def score_on_test(run_dir: pathlib.Path, step: int, env: dict[str, str]) -> tuple[dict[str, Any], float]:
    """Decode the test split with the checkpoint of ``step`` through ``python -m attention_jax.evaluate``.

    Parameters
    ----------
    run_dir : pathlib.Path
        The training work directory.
    step : int
        The target checkpoint's step.
    env : dict[str, str]
        The child's environment.

    Returns
    -------
    tuple[dict, float]
        The evaluate command's report (``bleu``, ``perplexity``, ``num_examples``, ``bleu_signature``,
        written to ``RUN_DIR/time_to_bleu_test.json``) and the seconds it took, process start included.
    """
    report_path = run_dir / TEST_REPORT
    command = [sys.executable, "-m", "attention_jax.evaluate", f"--workdir={run_dir}", "--split=test",
               f"--checkpoint={step}", f"--output={report_path}"]
    started = time.perf_counter()
    completed = harness.run_captured(command, env)
    if completed.returncode != 0:
        raise SystemExit(f"time_to_bleu: scoring step {step} on test failed (exit {completed.returncode}):\n"
                         f"{completed.stderr[-3000:]}")
    return json.loads(report_path.read_text(encoding="utf-8")), time.perf_counter() - started


def plot(report: dict[str, Any], path: pathlib.Path) -> None:
    """Dev BLEU against training minutes, the dev target, and the target checkpoint's test BLEU.

    Parameters
    ----------
    report : dict
        The benchmark's JSON (``evaluations`` and ``target``).
    path : pathlib.Path
        PNG to write.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scored = [e for e in report["evaluations"] if e["dev_bleu"] is not None]
    target = report["target"]
    fig, axis = plt.subplots(figsize=(7, 4.5))
    axis.plot([e["train_minutes"] for e in scored], [e["dev_bleu"] for e in scored], "o-",
              label="dev BLEU (whole split, beam 4)")
    axis.axhline(target["dev_bleu_target"], color="C1", linestyle="--",
                 label=f"dev target {target['dev_bleu_target']:g}")
    if target["reached"]:
        axis.axvline(target["train_minutes"], color="C1", linestyle=":", alpha=0.6)
        if "test_bleu" in target:
            axis.plot([target["train_minutes"]], [target["test_bleu"]], "*", color="C2", markersize=13,
                      label=f"test BLEU {target['test_bleu']:.2f} at step {target['step']} "
                            f"({target['train_minutes']:.1f} min)")
    axis.set_xlim(left=0.0)
    axis.set_ylim(bottom=0.0)
    axis.set_xlabel("training minutes (evaluation excluded)")
    axis.set_ylabel("BLEU")
    axis.set_title(f"{report['config_name']} on {report['dataset']}\n{report['machine']['device']}, "
                   f"{report['machine']['cpu_count']} cores", fontsize=9)
    axis.grid(True, alpha=0.3)
    axis.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


@dataclasses.dataclass(frozen=True)
class Settings:
    """One measurement's settings, checked (:func:`settings_from_flags`); ``--quick`` already applied."""

    config: str
    corpus: str
    eval_every_steps: int
    dev_bleu_target: float
    test_bleu_target: float
    stop_at_target: bool
    override: tuple[str, ...]
    workdir: str
    note: str
    out: pathlib.Path
    quick: bool


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.harness`)."""
    flags.DEFINE_string("config", DEFAULT_CONFIG, "Config file for attention_jax.main.")
    flags.DEFINE_string("corpus", str(DEFAULT_CORPUS), "Directory of train.tsv, dev.tsv, test.tsv "
                        "(config.dataset=tsv:DIR).")
    flags.DEFINE_integer("eval_every_steps", 100, "Steps between evaluations (each decodes the whole dev split; "
                         "its time is excluded).")
    flags.DEFINE_float("dev_bleu_target", 26.0, "Dev BLEU that marks the target checkpoint (default 26: the "
                       "recipe's measured run had dev 29.75 against test 28.86, so ~1 above the test target).")
    flags.DEFINE_float("test_bleu_target", 25.0, "Test BLEU the target checkpoint is checked against.")
    flags.DEFINE_bool("stop_at_target", None, "Stop training once the dev target is reached (else train the whole "
                      "budget); default: on, off with --quick.")
    flags.DEFINE_multi_string("override", [], "Extra --config.KEY=VALUE for the training command, as KEY=VALUE "
                              "(repeatable; applied last).")
    flags.DEFINE_string("workdir", "", "New or empty directory for the run (default: a temporary one).")


def settings_from_flags(values: flags.FlagValues) -> Settings:
    """The checked settings of the parsed flags, ``--quick``'s applied; one line and exit 2 for a mistake.

    Parameters
    ----------
    values : absl.flags.FlagValues
        The flags of :func:`define_flags`, parsed.

    Returns
    -------
    Settings
        What :func:`main` measures.
    """
    out = pathlib.Path(values.out)
    if out.suffix != ".json":
        harness.fail(f"--out must name a .json file (the plot goes beside it); got {values.out or 'none'}.")
    config, eval_every_steps, dev_bleu_target = values.config, values.eval_every_steps, values.dev_bleu_target
    if values.quick:
        config, eval_every_steps, dev_bleu_target = harness.QUICK_CONFIG, SMOKE_EVAL_EVERY_STEPS, 0.0
    elif not (pathlib.Path(values.corpus) / "dev.tsv").is_file():
        harness.fail(f"--corpus={values.corpus} holds no dev.tsv (train.tsv, dev.tsv, test.tsv expected).")
    if eval_every_steps <= 0:
        harness.fail(f"--eval_every_steps must be positive; got {eval_every_steps}.")
    if values.workdir and pathlib.Path(values.workdir).exists() and any(pathlib.Path(values.workdir).iterdir()):
        harness.fail(f"--workdir={values.workdir} is not empty: the timings need a fresh run.")
    stop_at_target = not values.quick if values.stop_at_target is None else values.stop_at_target
    return Settings(config=config, corpus=values.corpus, eval_every_steps=eval_every_steps,
                    dev_bleu_target=dev_bleu_target, test_bleu_target=values.test_bleu_target,
                    stop_at_target=stop_at_target, override=tuple(values.override), workdir=values.workdir,
                    note=values.note, out=out, quick=values.quick)


def main(argv: list[str]) -> None:
    """Train, watch, score the target checkpoint on test; write the JSON and the plot.

    Parameters
    ----------
    argv : list of str
        The program name (the flags are parsed already).
    """
    del argv
    args = settings_from_flags(flags.FLAGS)
    started = time.perf_counter()
    workdir = pathlib.Path(args.workdir or tempfile.mkdtemp(prefix="time_to_bleu_")).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    run_dir = workdir / "run"
    settings = _overrides(args)
    env = harness.repository_environment()
    records, training = train(args, args.config, settings, run_dir, env)
    evaluations = evaluations_from_records(records)
    reached = first_reaching(evaluations, args.dev_bleu_target)
    test_report, test_scoring_s = (None, None) if reached is None else score_on_test(run_dir, reached.step, env)
    target = target_summary(evaluations, args.dev_bleu_target, args.test_bleu_target, test_report)
    config_written = json.loads((run_dir / run_files.CONFIG_FILE).read_text(encoding="utf-8"))
    report = {
        "what": "time to a BLEU target: training minutes (evaluation excluded) until the whole dev split's "
                "beam-search BLEU first reaches the dev target; that checkpoint scored on test",
        "note": args.note,
        "quick": args.quick,
        "config": args.config,
        "config_name": config_written.get("name"),
        "dataset": settings["dataset"],
        "overrides": settings,
        "protocol": {"eval_every_steps": args.eval_every_steps, "beam_size": int(settings["beam_size"]),
                     "length_penalty_alpha": float(settings["length_penalty_alpha"]),
                     "dev_bleu": "every dev sentence", "dev_sentences": _dev_sentences(settings["dataset"]),
                     "stop_at_target": args.stop_at_target},
        "machine": harness.machine() | {"device": _device(env)},
        "evaluations": [evaluation.to_json() for evaluation in evaluations],
        "target": target,
        "timings": {"command_wall_s": training["command_wall_s"], "test_scoring_s": test_scoring_s,
                    "eval_s_total": sum(e.eval_s for e in evaluations),
                    "end_to_end_s": time.perf_counter() - started},
        "training": {"exit_status": training["exit_status"], "stopped_at_target": training["stopped_at_target"],
                     "last_step": evaluations[-1].step if evaluations else None,
                     "command": " ".join(training["command"][1:])},
        "workdir": str(workdir),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    run_files.write_json_atomically(str(args.out), report, indent=1)
    plot(report, args.out.with_suffix(".png"))
    print(describe(target, report["training"]["last_step"]))
    print(json.dumps({"json": str(args.out), "png": str(args.out.with_suffix(".png"))}))


if __name__ == "__main__":
    harness.run(main, define_flags)

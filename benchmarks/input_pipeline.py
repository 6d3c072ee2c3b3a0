r"""How fast the input pipeline delivers training batches; prints one JSON object.

Run from the repository root::

    python benchmarks/input_pipeline.py                                  # base config's batching
    python benchmarks/input_pipeline.py --config=configs/base.py --config.tokens_per_batch=4096 --steps=300 \
        --messages_dir=../shared/data/messages_en_de --data_dir=/tmp/tfds --synthetic=synthetic_en_de/small
    python benchmarks/input_pipeline.py --quick     # synthetic_en_de/small only, the --quick run's batching

For each corpus found (messages_en_de from ``--messages_dir``, default ``$ATTENTION_JAX_SHARED`` or
``../shared``; the embedded ``synthetic_en_de`` when its module exists) it reports the first
``get_datasets`` call (preparing, tokenizer training, tokenizing; cold when ``--data_dir`` is empty, a
fresh temporary directory), the second (cached), and the train iterator's throughput after
``--warmup_steps`` batches: non-pad source + target tokens per second, batches per second, and the
padding fraction.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from typing import Any

from absl import flags
from ml_collections import config_flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

from attention_jax.data import input_pipeline  # noqa: E402
from attention_jax.experiment import sections  # noqa: E402
from benchmarks import harness  # noqa: E402


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.harness`)."""
    config_flags.DEFINE_config_file("config", os.path.join(REPO_ROOT, "configs", "base.py"),
                                    "Config file; --config.FIELD=VALUE overrides a field.")
    flags.DEFINE_string("messages_dir", "", "messages_en_de directory; '' finds ../shared.")
    flags.DEFINE_string("data_dir", "", "TFDS data/cache directory; '' uses a fresh temporary one.")
    flags.DEFINE_integer("steps", 300, "Timed batches.")
    flags.DEFINE_integer("warmup_steps", 20, "Untimed batches first.")
    flags.DEFINE_integer("rows_multiple", 1, "Data-parallel devices the rows must divide over.")
    flags.DEFINE_string("synthetic", "synthetic_en_de", "config.dataset for the synthetic corpus, e.g. "
                        "'synthetic_en_de/small'; '' skips it.")


def _messages_dir(messages_dir: str) -> str | None:
    if messages_dir:
        return messages_dir
    shared = os.environ.get("ATTENTION_JAX_SHARED") or os.path.join(REPO_ROOT, "..", "shared")
    path = os.path.join(shared, "data", "messages_en_de")
    return path if os.path.isdir(path) else None


def _has_synthetic() -> bool:
    try:
        from attention_jax.data import synthetic_en_de  # noqa: F401
    except ImportError:
        return False
    return True


def measure(config: Any, data_dir: str, steps: int = 300, warmup_steps: int = 20,
            rows_multiple: int = 1) -> dict[str, Any]:
    """Time ``get_datasets`` (cold, then cached) and the train iterator on one corpus.

    Parameters
    ----------
    config : ml_collections.ConfigDict
        Config with ``dataset`` set; ``data_dir`` is replaced by ``data_dir``.
    data_dir : str
        TFDS data and cache directory.
    steps, warmup_steps : int
        Timed training batches, and untimed batches before them.
    rows_multiple : int
        Data-parallel devices the rows must divide over.

    Returns
    -------
    dict[str, Any]
        Timings, throughput and the pipeline's stats summary.
    """
    config = config.copy_and_resolve_references()
    config.data_dir = data_dir
    data_config = sections.build_experiment(config, "--config").data
    started = time.perf_counter()
    input_pipeline.get_datasets(data_config, rows_multiple=rows_multiple)
    first_call_s = time.perf_counter() - started
    started = time.perf_counter()
    data = input_pipeline.get_datasets(data_config, rows_multiple=rows_multiple)
    cached_call_s = time.perf_counter() - started

    iterator = data.train_iterator(seed=0)
    for _ in range(warmup_steps):
        next(iterator)
    real_tokens = padded_tokens = 0
    started = time.perf_counter()
    for _ in range(steps):
        batch = next(iterator)
        real_tokens += int((batch["inputs"] != 0).sum() + (batch["targets"] != 0).sum())
        padded_tokens += batch["inputs"].size + batch["targets"].size
    elapsed_s = time.perf_counter() - started
    return {
        "first_get_datasets_s": round(first_call_s, 3),
        "cached_get_datasets_s": round(cached_call_s, 3),
        "train_tokens_per_s": round(real_tokens / elapsed_s),
        "train_padded_tokens_per_s": round(padded_tokens / elapsed_s),
        "train_batches_per_s": round(steps / elapsed_s, 1),
        "mean_real_tokens_per_batch": round(real_tokens / steps),
        "timed_steps": steps,
        "tokenizer_vocab_size": data.tokenizer.vocab_size,
        "examples": data.stats["examples"],
        "dropped_too_long": data.stats["dropped_too_long"],
        "train_padding_fraction": round(data.stats["train_padding_fraction"]["total"], 4),
        "local_batch_shapes": data.stats["local_batch_shapes"],
    }


def main(argv: list[str]) -> None:
    """Measure the pipeline on messages_en_de (when found) and the synthetic corpus; print the JSON."""
    del argv
    options = flags.FLAGS
    config = options.config
    steps, warmup_steps = options.steps, options.warmup_steps
    datasets = {}
    if options.quick:  # One small corpus, the --quick training run's batching.
        config.update({key: value for key, value in harness.QUICK_TRAINING.items() if key in config})
        datasets[harness.QUICK_TRAINING["dataset"]] = harness.QUICK_TRAINING["dataset"]
        steps = steps if options["steps"].present else 5
        warmup_steps = warmup_steps if options["warmup_steps"].present else 1
    else:
        if (messages_dir := _messages_dir(options.messages_dir)) is not None:
            datasets["messages_en_de"] = f"tsv:{os.path.abspath(messages_dir)}"
        if options.synthetic and _has_synthetic():
            datasets[options.synthetic] = options.synthetic
    results = {"quick": options.quick,
        "settings": {
            "vocab_size": config.vocab_size,
            "max_len": config.max_len,
            "tokens_per_batch": config.tokens_per_batch,
            "rows_multiple": options.rows_multiple,
            "data_threads": config.data_threads,
            "cpu_count": os.cpu_count(),
        }
    }
    with tempfile.TemporaryDirectory() as temporary_dir:
        for name, dataset in datasets.items():
            config.dataset = dataset
            data_dir = options.data_dir or os.path.join(temporary_dir, name.replace("/", "_"))
            with contextlib.redirect_stdout(sys.stderr):  # TFDS prints progress to stdout; keep it JSON.
                results[name] = measure(config, data_dir, steps, warmup_steps, options.rows_multiple)
    harness.emit(results, options.out)


if __name__ == "__main__":
    harness.run(main, define_flags)

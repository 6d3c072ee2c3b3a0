r"""Decoding speed: beam search (beam 4) and greedy, with and without the key/value cache; prints JSON.

Run from the repository root::

    python benchmarks/decode.py                                   # tiny and base shapes
    python benchmarks/decode.py --models=base --batch_size=8 --output_len=64 --repeats=3
    python benchmarks/decode.py --quick                           # one-layer stand-in, 8 tokens

Models have the shapes of ``configs/tiny.py`` and ``configs/base.py`` with random parameters (speed does
not depend on the values). Every output is forced to exactly ``--output_len`` tokens: EOS gets a
logit of -1e4 until the last position, where it is the only choice (a source of ``output_len - 50``
tokens gives that limit), so cached and uncached runs do the same number of steps. The cache holds
``decode.cache_length(output_len, ...)`` positions, as the Translator sizes it. Each configuration is
compiled and run once untimed, then timed ``--repeats`` times; the best time counts (the mean is
reported too). ``benchmarks/peer_flax.py`` runs the beam search side by side with the Flax WMT
example's. Reported per run: sentences/s and output tokens/s, and per model and search the cache's
speedup over recomputing the whole prefix every step.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import types
from typing import Any

from absl import flags

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)

import flax.linen as nn  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from attention_jax.decoding import beam_search, decode, decode_steps  # noqa: E402
from attention_jax.experiment import sections  # noqa: E402
from attention_jax.experiment.sections import (
    DecodeSettings,  # noqa: E402
    TransformerConfig,  # noqa: E402
)
from attention_jax.models.model import EOS_ID, Transformer  # noqa: E402
from benchmarks import harness  # noqa: E402
from configs import base as base_config  # noqa: E402
from configs import tiny as tiny_config  # noqa: E402


def define_flags() -> None:
    """The benchmark's flags (defined only when it runs: :mod:`benchmarks.harness`)."""
    flags.DEFINE_list("models", ["tiny", "base"], "Model shapes: tiny, base.")
    flags.DEFINE_integer("batch_size", 0, "Sentences per batch (0: 32 for tiny, 4 for base).")
    flags.DEFINE_integer("output_len", 64, "Output tokens per sentence (EOS included); > 50 without --source_len.")
    flags.DEFINE_integer("source_len", 0, "Source tokens (EOS included); 0: output_len - 50, so that output_len "
                         "is the paper's limit. Longer sources cost more per step.")
    flags.DEFINE_integer("repeats", 2, "Timed runs per configuration (the best is reported).")
    flags.DEFINE_list("searches", ["beam", "greedy"], "beam (size 4) and/or greedy.")
    flags.DEFINE_bool("uncached", True, "Also time uncached decoding (slow for base on a CPU).")
    flags.DEFINE_integer("cache_stages", DecodeSettings.cache_stages,
                         "Stages in which the cache grows (config.cache_stages); 1: sized for the whole output.")


MAX_EXTRA_LEN = 50
DEFAULT_BATCH = {"tiny": 32, "base": 4}
QUICK = dict(models=["tiny"], batch_size=2, output_len=8, source_len=8, repeats=1)


def model_config_for(name: str, quick: bool = False) -> TransformerConfig:
    """The model shapes of ``configs/<name>.py``, or :data:`harness.QUICK_MODEL` (dropout off: unused)."""
    config = {"tiny": tiny_config, "base": base_config}[name].get_config()
    config.update(harness.QUICK_MODEL if quick else {})
    return sections.build_experiment(config, f"configs/{name}.py").model.replace(dropout_rate=0.0)


@functools.partial(jax.jit, static_argnames=("model_config", "method", "max_decode_len", "use_cache",
                                             "cache_stages"))
def forced_length_search(params: Any, inputs: jax.Array, max_lengths: jax.Array, *, model_config: TransformerConfig,
                         method: str, max_decode_len: int, use_cache: bool,
                         cache_stages: int) -> beam_search.SearchResult:
    """``decode.decode_batch`` with EOS suppressed before each sentence's last position."""
    beam_size = 4 if method == "beam" else 1
    step_fn, state, stages = decode_steps.search_setup(
        model_config, params, inputs, rows_per_sentence=beam_size, max_decode_len=max_decode_len,
        use_cache=use_cache, cache_stages=cache_stages)

    def no_early_eos(state: Any, token_ids: jax.Array) -> tuple[jax.Array, Any]:
        logits, state = step_fn(state, token_ids)
        return logits.at[:, EOS_ID].add(-1e4), state

    if method == "greedy":
        return beam_search.greedy_search(no_early_eos, state, max_lengths, max_decode_len=max_decode_len, **stages)
    return beam_search.beam_search(no_early_eos, state, max_lengths, beam_size=beam_size, alpha=0.6,
                                   max_decode_len=max_decode_len, **stages)


def random_params(model_config: TransformerConfig) -> Any:
    """Parameters of ``model_config``'s shapes, initialized from key 0 (speed does not depend on them).

    Parameters
    ----------
    model_config : TransformerConfig
        The model.

    Returns
    -------
    pytree
        Unboxed parameters.
    """
    ids = jnp.ones((1, 4), jnp.int32)
    params = jax.jit(lambda key: Transformer(model_config).init(key, ids, ids)["params"])(jax.random.key(0))
    return nn.meta.unbox(params)


def forced_inputs(model_config: TransformerConfig, batch_size: int, source_len: int,
                  output_len: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Random sources of ``source_len`` tokens (EOS included) and the limits of a forced search.

    Parameters
    ----------
    model_config : TransformerConfig
        The model (vocabulary size, ``max_len``).
    batch_size : int
        Sentences.
    source_len : int
        Source tokens per sentence, EOS included (padded to its bucket).
    output_len : int
        Output tokens every sentence is forced to.

    Returns
    -------
    tuple
        ``inputs`` ``[batch_size, bucket]``, ``max_lengths`` (``output_len`` each) and the
        ``max_decode_len`` the Translator would size the cache to.
    """
    rng = np.random.default_rng(0)
    inputs = np.zeros((batch_size, decode.bucket_length(source_len, model_config.max_len)), np.int32)
    inputs[:, : source_len - 1] = rng.integers(4, model_config.vocab_size, (batch_size, source_len - 1))
    inputs[:, source_len - 1] = EOS_ID
    max_lengths = np.full((batch_size,), output_len, np.int32)
    max_decode_len = decode.cache_length(output_len, min(inputs.shape[1] + MAX_EXTRA_LEN, model_config.max_len))
    return inputs, max_lengths, max_decode_len


def time_search(params: Any, model_config: TransformerConfig, batch_size: int, method: str, use_cache: bool,
                output_len: int, source_len: int, repeats: int,
                cache_stages: int = DecodeSettings.cache_stages) -> dict[str, Any]:
    """Compile, then time one configuration; returns its JSON record (``cache_stages``: config.cache_stages)."""
    inputs, max_lengths, max_decode_len = forced_inputs(model_config, batch_size, source_len, output_len)
    run = functools.partial(forced_length_search, params, jnp.asarray(inputs), jnp.asarray(max_lengths),
                            model_config=model_config, method=method, max_decode_len=max_decode_len,
                            use_cache=use_cache, cache_stages=cache_stages)
    start = time.perf_counter()
    result = jax.block_until_ready(run())
    first_s = time.perf_counter() - start
    lengths = np.asarray(result.lengths[:, 0])
    assert np.all(lengths == output_len), lengths
    times = harness.timing(harness.time_calls(lambda: jax.block_until_ready(run()), repeats))
    best = times["min_s"]
    return {
        "search": "beam4" if method == "beam" else "greedy",
        "cache": use_cache,
        "cache_stages": cache_stages if use_cache else None,
        "batch_size": batch_size,
        "output_len": output_len,
        "source_len": source_len,
        "steps": int(result.num_steps),
        "seconds_per_batch": round(best, 4),
        "mean_seconds_per_batch": round(times["mean_s"], 4),
        "compile_and_first_run_s": round(first_s, 2),
        "sentences_per_s": round(batch_size / best, 2),
        "tokens_per_s": round(batch_size * output_len / best, 1),
    }


def benchmark_model(name: str, options: Any) -> dict[str, Any]:
    """All searches, cached and uncached, for one model shape.

    Parameters
    ----------
    name : str
        ``"tiny"`` or ``"base"``.
    options : Any
        The flags of :func:`define_flags` (attributes), ``--quick``'s applied.

    Returns
    -------
    dict[str, Any]
        The model's runs and the cache's speedup per search.
    """
    model_config = model_config_for(name, options.quick)
    batch_size = options.batch_size or DEFAULT_BATCH[name]
    params = random_params(model_config)
    runs, speedups = [], {}
    for method in options.searches:
        by_cache = {}
        for use_cache in ([True, False] if options.uncached else [True]):
            record = time_search(params, model_config, batch_size, method, use_cache, options.output_len,
                                 options.source_len or options.output_len - MAX_EXTRA_LEN, options.repeats,
                                 options.cache_stages)
            runs.append(record)
            by_cache[use_cache] = record["seconds_per_batch"]
            print(json.dumps({"model": name, **record}), file=sys.stderr)
        if False in by_cache:
            speedups[runs[-1]["search"]] = round(by_cache[False] / by_cache[True], 2)
    return {"model": name, "num_params": int(sum(leaf.size for leaf in jax.tree_util.tree_leaves(params))),
            "runs": runs, "cache_speedup": speedups}


def main(argv: list[str]) -> None:
    """Benchmark each requested model and print one JSON object."""
    del argv
    values = flags.FLAGS
    options = types.SimpleNamespace(**{name: getattr(values, name) for name in (
        "models", "batch_size", "output_len", "source_len", "repeats", "searches", "uncached", "cache_stages",
        "quick")})
    for name, value in QUICK.items():  # --quick's sizes, unless given.
        if values.quick and not values[name].present:
            setattr(options, name, value)
    if not options.source_len and options.output_len <= MAX_EXTRA_LEN:
        harness.fail(f"--output_len must exceed {MAX_EXTRA_LEN} without --source_len (the source is output_len - 50 "
                     "tokens).")
    if options.source_len and options.source_len + MAX_EXTRA_LEN < options.output_len:
        harness.fail("--source_len + 50 must be at least --output_len (the output length limit).")
    unknown = sorted(set(options.models) - set(DEFAULT_BATCH)) + sorted(set(options.searches) - {"beam", "greedy"})
    if unknown:
        harness.fail(f"unknown --models or --searches {unknown}; models: {sorted(DEFAULT_BATCH)}, searches: "
                     "beam, greedy.")
    harness.emit({"quick": options.quick, "device": str(jax.devices()[0].device_kind),
                  "backend": jax.default_backend(), "jax": jax.__version__,
                  "models": [benchmark_model(name, options) for name in options.models]}, values.out)


if __name__ == "__main__":
    harness.run(main, define_flags)

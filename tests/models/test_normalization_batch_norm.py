"""BatchNorm for sequences (issue 76): statistics over the real tokens, running averages, the global batch.

Against the NumPy oracle (``tests/support/normalization_reference.py``): the masked per-feature statistics
(padding and the padding between a packed row's pairs excluded), outputs and gradients in training, the
bias-corrected running averages over several steps (an all-padding batch moves nothing; after one step
evaluation normalises with that step's statistics), evaluation with the running averages alone; micro-batches'
statistics combined into their union's; the train step moving them, accumulation equal to one big batch; the
statistics of a batch sharded over 8 devices equal to the whole batch's
(slow: a subprocess); cached decoding, beam search and generation of a model with batch_norm (slow); a
two-step training run, its checkpoints, their average and its evaluation's beam search (slow).
"""

from __future__ import annotations

import functools
import json
import math
import os
import pathlib
import subprocess
import sys
import textwrap

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from attention_jax.checkpointing import params_checkpoints
from attention_jax.decoding import decode, generation
from attention_jax.experiment import sections
from attention_jax.experiment.sections import TransformerConfig
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import UserInputError
from attention_jax.models import language_model, model, normalization, normalization_registry
from attention_jax.training import setup_checks, train, train_state
from tests.support import normalization_reference as oracle
from tests.support import train_support
from tests.support.decoding_helpers import assert_logits_match, full_logits, incremental_logits, random_batch
from tests.support.reference import random_normal
from tests.support.sweep_cli import REPO_ROOT, TINY_TRAINING, tiny_data_dir  # noqa: F401 (a fixture)

SMALL = TransformerConfig(vocab_size=40, num_layers=2, d_model=16, d_ff=24, num_heads=2, key_dim=4, value_dim=6,
                          dropout_rate=0.0, max_len=40, normalization="batch_norm")
MOMENTUM = normalization_registry.BATCH_NORM_MOMENTUM
STATISTICS = normalization_registry.STATISTICS_COLLECTION


def _random(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return random_normal(shape, seed, dtype=np.float64)


def _packed_valid() -> np.ndarray:
    """Real tokens of two packed rows: row 0 holds pairs of 3 and 2 tokens then padding, row 1 one of 4."""
    segmentation = np.array([[1, 1, 1, 2, 2, 0, 0], [1, 1, 1, 1, 0, 0, 0]])
    return segmentation > 0


def _module_and_params(seed: int = 0) -> tuple[normalization.SequenceBatchNorm, dict]:
    module = normalization._batch_norm(SMALL, "norm")
    params = nn.meta.unbox(module.init(jax.random.key(0), jnp.zeros((1, 1, 5)))["params"])
    assert set(params) == {"scale", "bias", "running_mean", "running_var", "running_weight"}
    params.update(scale=_random((5,), seed + 1), bias=_random((5,), seed + 2))
    return module, {key: np.asarray(value, np.float64) for key, value in params.items()}


def _compiled_init(module: nn.Module, *args: jax.Array, seed: int) -> dict:
    """``module``'s unboxed parameters from ``module.init``, compiled as one program.

    Run op by op, a whole model's init (and apply, and a train step's gradient) compiles each of its
    operations on its own, which takes tens of seconds on 2 cores; the values are the same.
    """
    return nn.meta.unbox(jax.jit(module.init)(jax.random.key(seed), *args)["params"])


def _f32(tree: dict) -> dict:
    return {key: jnp.asarray(value, jnp.float32) for key, value in tree.items()}


@pytest.mark.reference
def test_training_statistics_are_over_the_real_tokens_only() -> None:
    module, params = _module_and_params()
    valid = _packed_valid()
    x = _random((2, 7, 5), 3) * 2 + 1
    output, written = module.apply({"params": _f32(params)}, jnp.asarray(x, jnp.float32), jnp.asarray(valid),
                                   deterministic=False, mutable=[STATISTICS])
    mean, variance = oracle.masked_batch_statistics(x, valid)
    expected = oracle.batch_norm(params, x, mean, variance)
    np.testing.assert_allclose(np.asarray(output)[valid], expected[valid], atol=2e-5, rtol=2e-5)
    garbage = np.where(valid[..., None], x, 1e3)  # What sits at padding changes nothing at the real tokens.
    again = module.apply({"params": _f32(params)}, jnp.asarray(garbage, jnp.float32), jnp.asarray(valid),
                         deterministic=False)
    np.testing.assert_allclose(np.asarray(again)[valid], np.asarray(output)[valid], atol=1e-5)
    unmasked = module.apply({"params": _f32(params)}, jnp.asarray(garbage, jnp.float32), None, deterministic=False)
    assert not np.allclose(np.asarray(unmasked)[valid], np.asarray(output)[valid], atol=1e-2)  # The mask counts.
    new = written[STATISTICS]
    assert float(new["tokens"]) == valid.sum()
    np.testing.assert_allclose(new["mean"], mean, atol=1e-5)
    np.testing.assert_allclose(new["variance"], variance, atol=1e-5)


@pytest.mark.reference
def test_training_gradients_equal_the_oracle() -> None:
    """The gradient flows through the batch statistics (each token's output depends on every real token)."""
    module, params = _module_and_params(1)
    valid = _packed_valid()
    x = _random((2, 7, 5), 4)
    weights = _random(x.shape, 5) * valid[..., None]  # A loss over the real tokens.

    def ours(x_in: jax.Array, p: dict) -> jax.Array:
        return jnp.sum(module.apply({"params": p}, x_in, jnp.asarray(valid), deterministic=False) * weights)

    def theirs(x_in: np.ndarray, p: dict) -> float:
        mean, variance = oracle.masked_batch_statistics(x_in, valid)
        return float(np.sum(oracle.batch_norm(p, x_in, mean, variance) * weights))

    x_gradient, params_gradient = jax.grad(ours, argnums=(0, 1))(jnp.asarray(x, jnp.float32), _f32(params))
    np.testing.assert_allclose(x_gradient, oracle.numerical_gradient(lambda v: theirs(v, params), x),
                               atol=3e-4, rtol=3e-4)
    for key in ("scale", "bias"):
        def of_param(value: np.ndarray, key: str = key) -> float:
            return theirs(x, {**params, key: value})

        np.testing.assert_allclose(params_gradient[key], oracle.numerical_gradient(of_param, params[key]),
                                   atol=3e-4, rtol=3e-4)
    for key in ("running_mean", "running_var", "running_weight"):  # Statistics, not trained: no gradient.
        assert not np.any(np.asarray(params_gradient[key]))


def _step(module: nn.Module, params: dict, x: np.ndarray, valid: np.ndarray) -> dict:
    """``params`` after one training forward pass on ``(x, valid)`` moved the running averages."""
    _, written = module.apply({"params": params}, jnp.asarray(x, jnp.float32), jnp.asarray(valid),
                              deterministic=False, mutable=[STATISTICS])
    return normalization.with_running_statistics(params, written[STATISTICS])


def _evaluation_statistics(params: dict) -> tuple[np.ndarray, np.ndarray]:
    return tuple(np.asarray(value) for value in normalization._evaluation_statistics(
        params["running_mean"], params["running_var"], params["running_weight"]))


@pytest.mark.reference
def test_running_averages_over_several_steps_and_evaluation_with_them() -> None:
    module, params = _module_and_params(2)
    batches = [(_random((2, 7, 5), 10 + step) * (1 + step) + step, _packed_valid()[:, ::-1] if step % 2
                else _packed_valid()) for step in range(4)]
    batches.insert(2, (_random((2, 7, 5), 30), np.zeros((2, 7), bool)))  # No real token: skipped.
    current = _f32(params)
    for x, valid in batches:
        current = _step(module, current, x, valid)
    mean, variance = oracle.running_averages(batches, MOMENTUM)
    np.testing.assert_allclose(_evaluation_statistics(current)[0], mean, atol=1e-5)
    np.testing.assert_allclose(_evaluation_statistics(current)[1], variance, rtol=1e-5)
    x = _random((3, 4, 5), 20)  # Evaluation: the running averages, each token on its own, no mask read.
    evaluated = module.apply({"params": current}, jnp.asarray(x, jnp.float32), None, deterministic=True)
    numpy_current = {key: np.asarray(value, np.float64) for key, value in current.items()}
    np.testing.assert_allclose(evaluated, oracle.batch_norm(numpy_current, x, mean, variance), atol=2e-5, rtol=2e-5)
    np.testing.assert_allclose(module.apply({"params": current}, jnp.asarray(x[:1, :1], jnp.float32), None,
                                            deterministic=True), np.asarray(evaluated)[:1, :1], atol=1e-6)


@pytest.mark.reference
def test_evaluation_after_one_step_normalises_with_the_first_batchs_statistics() -> None:
    """Bias correction: no stale start (mean 0, variance 1 before any step; the first batch's after one)."""
    module, params = _module_and_params(3)
    x, valid = _random((2, 7, 5), 40) * 3 + 2, _packed_valid()
    numpy_params = dict(params)
    before = module.apply({"params": _f32(params)}, jnp.asarray(x, jnp.float32), None, deterministic=True)
    np.testing.assert_allclose(before, oracle.batch_norm(numpy_params, x, np.zeros(5), np.ones(5)), atol=2e-5)
    current = _step(module, _f32(params), x, valid)
    mean, variance = oracle.masked_batch_statistics(x, valid)
    np.testing.assert_allclose(_evaluation_statistics(current)[0], mean, atol=1e-5)
    np.testing.assert_allclose(_evaluation_statistics(current)[1], variance, rtol=1e-5)
    training = module.apply({"params": current}, jnp.asarray(x, jnp.float32), jnp.asarray(valid), deterministic=False)
    evaluation = module.apply({"params": current}, jnp.asarray(x, jnp.float32), None, deterministic=True)
    np.testing.assert_allclose(np.asarray(evaluation)[valid], np.asarray(training)[valid], atol=1e-4)


def test_a_batch_without_a_real_token_leaves_the_running_averages_unchanged() -> None:
    module, params = _module_and_params(4)
    current = _step(module, _f32(params), _random((2, 7, 5), 50), _packed_valid())
    unchanged = _step(module, current, _random((2, 7, 5), 51) + 5, np.zeros((2, 7), bool))
    for key in ("running_mean", "running_var", "running_weight"):
        np.testing.assert_array_equal(unchanged[key], current[key])
    assert float(current["running_weight"]) == pytest.approx(1 - MOMENTUM)


@pytest.mark.reference
def test_micro_batches_statistics_combine_into_those_of_all_their_real_tokens() -> None:
    """Weighted by real tokens, with the spread of the micro-batches' means: one big batch's mean and variance."""
    module, params = _module_and_params(5)
    micro = [(_random((2, 7, 5), 60) * 2 + 3, _packed_valid()),
             (_random((1, 4, 5), 61) - 1, np.array([[True, True, False, False]])),
             (_random((1, 4, 5), 62), np.zeros((1, 4), bool)),  # No real token: counts for nothing.
             (_random((3, 5, 5), 63) * 0.5, np.ones((3, 5), bool))]
    combined = None
    for x, valid in micro:
        _, written = module.apply({"params": _f32(params)}, jnp.asarray(x, jnp.float32), jnp.asarray(valid),
                                  deterministic=False, mutable=[STATISTICS])
        combined = written[STATISTICS] if combined is None else normalization.combined_statistics(combined,
                                                                                                  written[STATISTICS])
    tokens = np.concatenate([x[valid] for x, valid in micro])[None]  # [1, all real tokens, D]
    mean, variance = oracle.masked_batch_statistics(tokens, np.ones(tokens.shape[:2], bool))
    assert float(combined["tokens"]) == tokens.shape[1]
    np.testing.assert_allclose(combined["mean"], mean, atol=1e-5)
    np.testing.assert_allclose(combined["variance"], variance, rtol=1e-5)
    moved = normalization.with_running_statistics(_f32(params), combined)
    np.testing.assert_allclose(moved["running_var"], (1 - MOMENTUM) * variance, rtol=1e-5)


@pytest.mark.integration
@pytest.mark.parametrize("normalization_name", ["batch_norm", "layer_norm"])
def test_accumulated_micro_batches_equal_one_big_batch(normalization_name: str) -> None:
    """Two micro-batches of unequal real tokens against one step on their rows: the running averages of the
    first norm of each stack (whose input no norm precedes) and, with layer_norm, the gradient.

    With batch_norm each micro-batch is normalised by its own statistics, so only the norms no other
    norm precedes see the same inputs either way; their running averages must be the union's.
    """
    config = SMALL.replace(normalization=normalization_name)
    transformer = model.Transformer(config)
    inputs, targets, _ = random_batch(3, batch=4, source_len=6, target_len=5)
    inputs, targets = np.array(inputs), np.array(targets)
    inputs[0, 2:], targets[0, 1:], targets[3, 3:] = 0, 0, 0  # Unequal real tokens in the micro-batches.
    params = _compiled_init(transformer, jnp.asarray(inputs), jnp.asarray(targets), seed=4)
    optimizer = optax.sgd(1.0)  # params - gradient: the step's per-token gradient, read off the parameters.
    state = train_state.TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=optimizer.init(params),
                                   rng=jax.random.key_data(jax.random.key(1)))
    common = dict(transformer=transformer, optimizer=optimizer, label_smoothing=0.1)
    one_batch, _ = jax.jit(functools.partial(train_state.train_step, **common))(
        state, {"inputs": inputs, "targets": targets})
    micro = [{"inputs": inputs[rows], "targets": targets[rows]} for rows in (slice(0, 1), slice(1, 4))]
    carry = jax.jit(functools.partial(train_state._accumulate_gradients, transformer=transformer,
                                      label_smoothing=0.1))(state, None, micro[0], jnp.int32(0))
    accumulated, _ = jax.jit(functools.partial(train_state.train_step, micro_index=1, **common))(
        state, micro[1], carry)
    if normalization_name == "layer_norm":
        jax.tree.map(functools.partial(np.testing.assert_allclose, atol=2e-5), accumulated.params, one_batch.params)
        return
    for stack, block in (("encoder_0", "attention_block"), ("decoder_0", "self_attention_block")):
        first, whole = (state.params[stack][block]["layer_norm"] for state in (accumulated, one_batch))
        assert float(first["running_weight"]) == pytest.approx(1 - MOMENTUM)
        for key in ("running_mean", "running_var"):
            np.testing.assert_allclose(first[key], whole[key], atol=1e-6)
    # After the first step every norm's evaluation statistics are the batch's, in the parameters.
    _, written = jax.jit(lambda p: transformer.apply({"params": p}, inputs, targets, deterministic=False,
                                                     mutable=[STATISTICS]))(params)
    batch_statistics = flax.traverse_util.flatten_dict(written[STATISTICS])
    trained = flax.traverse_util.flatten_dict(one_batch.params)
    norms = {path[:-1] for path in batch_statistics}
    assert len(norms) == 5 * SMALL.num_layers
    for path in norms:
        mean, variance = _evaluation_statistics({key: trained[(*path, key)] for key in
                                                 ("running_mean", "running_var", "running_weight")})
        np.testing.assert_allclose(mean, batch_statistics[(*path, "mean")], atol=1e-5)
        np.testing.assert_allclose(variance, batch_statistics[(*path, "variance")], rtol=1e-4, atol=1e-6)
        assert np.abs(np.asarray(trained[(*path, "scale")]) - 1).max() > 1e-5  # Trained.
    assert model.count_params(one_batch.params) == model.count_params(params)  # Statistics are leaves, no more.


def test_resuming_a_checkpoint_from_before_running_weight_is_refused_in_one_line(tmp_path: pathlib.Path) -> None:
    """A batch_norm checkpoint of an older version (no ``running_weight``) is named, not a traceback."""
    params = jax.eval_shape(model.Transformer(SMALL).init, jax.random.key(0), jnp.ones((1, 4), jnp.int32),
                            jnp.ones((1, 4), jnp.int32))["params"]
    current = jax.tree.map(lambda leaf: np.zeros(leaf.shape, leaf.dtype), nn.meta.unbox(params))
    flat = flax.traverse_util.flatten_dict(current)
    old = flax.traverse_util.unflatten_dict({path: leaf for path, leaf in flat.items() if path[-1] != "running_weight"})
    directory = str(tmp_path / run_files.CHECKPOINT_DIR)
    params_checkpoints._save_params(directory, 3, old, {})
    refusal = r"checkpoints/3 holds other parameters.*running_weight'\]: missing"
    with pytest.raises(UserInputError, match=refusal) as error:
        setup_checks._check_checkpoint_parameters(str(tmp_path), 3, current)
    assert "\n" not in str(error.value)
    params_checkpoints._save_params(directory, 4, current, {})
    setup_checks._check_checkpoint_parameters(str(tmp_path), 4, current)  # This version's: no complaint.


# --- The global batch under data parallelism (a subprocess with 8 CPU devices) -----------------------

SHARDED_SCRIPT = textwrap.dedent("""
    import flax.linen as nn
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
    from attention_jax.models import normalization, normalization_registry
    from attention_jax.experiment.sections import TransformerConfig
    from tests.support import normalization_reference as oracle

    assert jax.device_count() == 8
    module = normalization._batch_norm(TransformerConfig(normalization="batch_norm"), "norm")
    x = np.random.default_rng(0).normal(size=(8, 6, 4)) * 3 + 1
    valid = np.random.default_rng(1).random((8, 6)) < 0.6
    valid[:, 0] = True
    params = nn.meta.unbox(module.init(jax.random.key(0), jnp.zeros((1, 1, 4)))["params"])
    rows = NamedSharding(Mesh(np.array(jax.devices()), ("data",)), PartitionSpec("data"))
    def forward(x, valid):
        return module.apply({"params": params}, x, valid, deterministic=False,
                            mutable=[normalization_registry.STATISTICS_COLLECTION])
    sharded_x = jax.device_put(jnp.asarray(x, jnp.float32), rows)
    assert len(sharded_x.sharding.device_set) == 8
    out, written = jax.jit(forward)(sharded_x, jax.device_put(jnp.asarray(valid), rows))
    mean, variance = oracle.masked_batch_statistics(x, valid)
    stats = written[normalization_registry.STATISTICS_COLLECTION]
    assert float(stats["tokens"]) == valid.sum()
    np.testing.assert_allclose(stats["mean"], mean, atol=1e-5)
    np.testing.assert_allclose(stats["variance"], variance, rtol=1e-5)
    expected = oracle.batch_norm(jax.tree.map(np.asarray, params), x, mean, variance)
    np.testing.assert_allclose(np.asarray(out)[valid], expected[valid], atol=2e-5, rtol=2e-5)
    one_device, _ = jax.jit(forward)(jnp.asarray(x[:1], jnp.float32), jnp.asarray(valid[:1]))
    assert not np.allclose(np.asarray(out)[:1][valid[:1]], np.asarray(one_device)[valid[:1]], atol=1e-3)
    print("GLOBAL_STATISTICS_OK")
""")


@pytest.mark.slow
def test_statistics_of_a_batch_sharded_over_eight_devices_are_the_global_batchs() -> None:
    environment = dict(os.environ, JAX_PLATFORMS="cpu",
                       XLA_FLAGS=train_support.child_xla_flags("--xla_force_host_platform_device_count=8"))
    completed = subprocess.run([sys.executable, "-c", SHARDED_SCRIPT], cwd=REPO_ROOT, env=environment,
                               capture_output=True, text=True, timeout=600)
    assert "GLOBAL_STATISTICS_OK" in completed.stdout, completed.stderr[-3000:]


# --- Decoding with the running averages (slow: jitted loops) ----------------------------------------

def _with_random_statistics(params: dict, seed: int) -> dict:
    """Running averages away from 0 and 1 and a weight, as after training, so that evaluation's norm does
    something."""
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    rng = np.random.default_rng(seed)

    def replace(path: tuple, leaf: jax.Array) -> jax.Array:
        name = jax.tree_util.keystr(path[-1:])
        if "running_mean" in name:
            return jnp.asarray(rng.normal(size=leaf.shape) * 0.5, jnp.float32)
        if "running_var" in name:
            return jnp.asarray(rng.uniform(0.5, 2.0, size=leaf.shape), jnp.float32)
        if "running_weight" in name:  # Not 1: evaluation divides the averages by it.
            return jnp.asarray(rng.uniform(0.3, 0.9), jnp.float32)
        return leaf

    assert any("running_mean" in jax.tree_util.keystr(path) for path, _ in flat)
    return jax.tree_util.tree_map_with_path(replace, params)


@pytest.mark.slow
@pytest.mark.parametrize("position", ["post", "pre"])
def test_cached_decoding_and_beam_search_use_the_running_averages(position: str) -> None:
    config = SMALL.replace(layer_norm_position=position)
    ids = jnp.ones((1, 4), jnp.int32)
    params = _with_random_statistics(nn.meta.unbox(model.Transformer(config).init(jax.random.key(1), ids,
                                                                                  ids)["params"]), 2)
    inputs, targets, _ = random_batch(0, batch=2, source_len=6, target_len=8)
    full = full_logits(params, inputs, targets, model_config=config)
    assert_logits_match(incremental_logits(params, inputs, targets, model_config=config), full)
    results = [jax.tree.map(np.asarray, decode.decode_batch(params, inputs[:, :5], jnp.array([10, 14], jnp.int32),
                                                            model_config=config, beam_size=2, max_decode_len=16,
                                                            use_cache=use_cache))
               for use_cache in (True, False)]
    np.testing.assert_array_equal(results[0].tokens, results[1].tokens)
    np.testing.assert_allclose(results[0].scores, results[1].scores, atol=1e-4)


@pytest.mark.slow
def test_language_model_generates_with_the_running_averages() -> None:
    lm = language_model.LanguageModel(SMALL.replace(layer_norm_position="pre"))
    params = _with_random_statistics(_compiled_init(lm, jnp.ones((1, 4), jnp.int32), seed=0), 3)
    prompt = [5, 9, 12]
    settings = generation.SamplingSettings(temperature=0.0, max_new_tokens=8)
    generated = generation.Generator(lm.config, params, tokenizer=None).generate_ids([prompt], settings)[0]
    sequence = [model.BOS_ID, *prompt, *generated]
    logits = np.array(jax.jit(lm.apply)({"params": params}, jnp.asarray([sequence[1:]])))  # Reads sequence[:-1].
    logits[..., [model.PAD_ID, model.UNK_ID, model.BOS_ID]] = -np.inf  # Never generated.
    np.testing.assert_array_equal(logits[0, len(prompt):].argmax(-1), generated)


# --- End to end: a training run, its checkpoints, their average, the evaluation's beam search -----

@pytest.mark.slow
@pytest.mark.end_to_end
def test_a_batch_norm_run_trains_checkpoints_averages_and_evaluates(tiny_data_dir: pathlib.Path,  # noqa: F811
                                                                    tmp_path: pathlib.Path) -> None:
    from configs import tiny  # Tests may import configs; the library may not.

    config = tiny.get_config()
    config.update(TINY_TRAINING)
    config.update(dict(data_dir=str(tiny_data_dir), num_train_steps=2, eval_every_steps=2, checkpoint_every_steps=1,
                       keep_checkpoints=2, packing=True, num_bleu_examples=2, compilation_cache_dir="",
                       normalization="batch_norm"))
    workdir = tmp_path / "run"
    results = train.train_and_evaluate(sections.build_experiment(config, "test"), str(workdir))
    assert results["finished"] and math.isfinite(results["eval_loss"])
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert any("eval/bleu" in record for record in records)  # The evaluation's beam search ran.
    assert any("train/init/grad_norm/encoder_0" in record for record in records)

    def running_mean(params: dict) -> np.ndarray:
        return np.asarray(params["encoder_0"]["attention_block"]["layer_norm"]["running_mean"])

    first, second = (params_checkpoints.load_for_inference(str(workdir), step)[0] for step in ("1", "2"))
    assert np.abs(running_mean(first)).max() > 0 and not np.allclose(running_mean(first), running_mean(second))
    averaged, steps = params_checkpoints.average_last_params(str(workdir), 2)
    assert steps == [1, 2]
    np.testing.assert_allclose(running_mean(averaged), (running_mean(first) + running_mean(second)) / 2, atol=1e-6)

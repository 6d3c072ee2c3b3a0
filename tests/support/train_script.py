"""Train a tiny model on fake data in its own process (used by the kill-and-resume tests).

Usage::

    python tests/support/train_script.py WORKDIR '{"num_train_steps": 10}' '{"sigterm_at": 4}'

The second argument overrides ``fake_data.tiny_config()``, the third ``FakeData``'s arguments. With
``JAX_COORDINATOR_ADDRESS``, ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID`` set, each process joins a
multi-process job and reads its share of the rows. Prints
``RESULT {...}`` with the results dict of ``train.train_and_evaluate``, or ``RESULT {"error": message}``
when training stopped on a non-finite loss.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from absl import logging  # noqa: E402

import jax  # noqa: E402

from attention_jax.training import distributed, train  # noqa: E402
from tests.support import fake_data  # noqa: E402


def main(workdir: str, config_overrides: str, data_arguments: str) -> None:
    distributed.maybe_initialize(timeout_s=120)  # Multi-process when JAX_COORDINATOR_ADDRESS is set.
    config = fake_data.tiny_experiment(**json.loads(config_overrides))
    data_kwargs = dict(json.loads(data_arguments), process_index=jax.process_index(),
                       process_count=jax.process_count())
    if "shapes" in data_kwargs:
        data_kwargs["shapes"] = tuple(tuple(shape) for shape in data_kwargs["shapes"])
    try:
        results = train.train_and_evaluate(config, workdir, data=fake_data.FakeData(**data_kwargs))
    except train.NonFiniteLossError as error:
        results = {"error": str(error)}
    print("RESULT " + json.dumps(results))


if __name__ == "__main__":
    logging.set_verbosity(logging.INFO)
    main(*sys.argv[1:4])

"""What ``generate`` prints: ``--num_samples`` lines per prompt, as text or JSON lines (no flags here)."""

from __future__ import annotations

import dataclasses
import json

from attention_jax.decoding.generation import Generator, SamplingSettings
from attention_jax.foundation.user_errors import UserInputError


def _sample_lines(generator: Generator, prompts: list[str], settings: SamplingSettings, *, num_samples: int = 1,
                 echo_prompt: bool = False, output_format: str = "text") -> list[str]:
    """Return the output lines (no newlines): ``num_samples`` per prompt, sample k drawn with ``settings.seed + k``.

    Raises ``UserInputError``: when the last sample's seed passes 32 bits.
    """
    if settings.seed + num_samples - 1 >= 2**32:
        raise UserInputError(f"--seed={settings.seed} --num_samples={num_samples}: sample k's seed is seed + k, "
                             f"which must stay below 2**32; lower --seed.")
    echo = echo_prompt and output_format == "text"
    by_sample = [generator.generate(prompts, dataclasses.replace(settings, seed=settings.seed + k), echo_prompt=echo)
                 for k in range(num_samples)]
    if output_format == "text":
        return [by_sample[k][i].replace("\n", " ") for i in range(len(prompts)) for k in range(num_samples)]
    return [json.dumps({"prompt": prompt, "sample": k, "seed": settings.seed + k, "continuation": by_sample[k][i]},
                       ensure_ascii=False) for i, prompt in enumerate(prompts) for k in range(num_samples)]

"""Fast checks written for mutants of ``attention_jax/models/`` that survived the fast tier (docs/testing.md,
"Mutation score of models/"): each compares with the NumPy oracle (``tests/support/reference.py``) or a formula.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from attention_jax.models import attention_functions
from tests.support import reference
from tests.support.reference import random_normal

SEGMENTS = np.array([[1, 1, 2, 2, 2, 0], [1, 2, 2, 3, 3, 3]])
"""Two packed rows: pair ids per position, 0 = padding."""


def _packed_dense_mask(causal: bool) -> np.ndarray:
    """``[B, 1, T, T]``: same nonzero segment (and ``s <= t`` when causal), written without the library."""
    same = (SEGMENTS[:, :, None] == SEGMENTS[:, None, :]) & (SEGMENTS[:, :, None] != 0)
    if causal:
        same &= np.tril(np.ones((SEGMENTS.shape[1],) * 2, bool))
    return same[:, None]


@pytest.mark.reference
@pytest.mark.parametrize("causal", [False, True], ids=["packed", "packed_causal"])
def test_linear_attention_on_packed_segments_equals_the_oracle(causal: bool) -> None:
    # Kills the structured paths' mutants (segment sums, each query's own segment) that the integration
    # tier's all-function test alone would catch; chunks of 4 make the causal sums cross a chunk boundary.
    length, heads = SEGMENTS.shape[1], 2
    query, key = random_normal((2, length, heads, 4), 0), random_normal((2, length, heads, 4), 1)
    value = random_normal((2, length, heads, 3), 2)
    segments = jnp.asarray(SEGMENTS)
    mask = attention_functions.StructuredMask(query_valid=segments != 0, key_valid=segments != 0,
                                              query_segments=segments, key_segments=segments, causal=causal)
    ours = jax.jit(lambda q, k, v, m: attention_functions.linear_attention(q, k, v, m, chunk_size=4))(
        query, key, value, mask)
    expected = reference.linear_attention(*(np.float64(a) for a in (query, key, value)), _packed_dense_mask(causal))
    np.testing.assert_allclose(ours, expected, atol=2e-5)

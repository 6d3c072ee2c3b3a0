"""Independent NumPy implementations of the paper's equations, used as test oracles.

Written from the paper's text only (Sections 3.1-3.5; the other attention functions from Bahdanau et al.,
2015 and Katharopoulos et al., 2020; the positional encodings that act in attention from Shaw et al., 2018,
Su et al., 2021 and Press et al., 2022; the feed-forward variants from Shazeer, 2020), with none of the
library's code, in float64.
Parameter dictionaries follow the Flax layout of ``attention_jax.models.model`` so the same weights can be fed
to both implementations.
"""

from __future__ import annotations

import math

import numpy as np


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row softmax over the last axis."""
    shifted = scores - scores.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def attention(query: np.ndarray, key: np.ndarray, value: np.ndarray,
              mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q K^T / sqrt(d_k)) V per batch and head, by explicit loops.

    ``query`` [B,T,H,K], ``key`` [B,S,H,K], ``value`` [B,S,H,V], ``mask`` broadcastable to [B,H,T,S].
    Fully masked rows give zero weights. Returns (output [B,T,H,V], weights [B,H,T,S]).
    """
    batch, length_q, heads, key_dim = query.shape
    length_k = key.shape[1]
    mask = np.ones((batch, heads, length_q, length_k), bool) if mask is None else np.broadcast_to(
        mask, (batch, heads, length_q, length_k))
    weights = np.zeros((batch, heads, length_q, length_k))
    output = np.zeros((batch, length_q, heads, value.shape[-1]))
    for b in range(batch):
        for h in range(heads):
            scores = query[b, :, h, :] @ key[b, :, h, :].T / np.sqrt(key_dim)
            for t in range(length_q):
                allowed = mask[b, h, t]
                if not allowed.any():
                    continue
                row = np.full(length_k, -np.inf)
                row[allowed] = scores[t, allowed]
                weights[b, h, t] = softmax(row)
            output[b, :, h, :] = weights[b, h] @ value[b, :, h, :]
    return output, weights


def multi_head_attention(params: dict, inputs_q: np.ndarray, inputs_kv: np.ndarray,
                         mask: np.ndarray | None, attention_function: str = "scaled_dot_product") -> np.ndarray:
    """Concat(head_1..head_h) W^O with head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V), plus biases.

    ``attention_function`` picks Attention: the paper's (default), ``dot_product``, ``additive`` (its
    vector ``w`` is ``params["score_vector"]``) or ``linear``.
    """
    def project(x: np.ndarray, name: str) -> np.ndarray:
        kernel, bias = np.asarray(params[name]["kernel"], np.float64), np.asarray(params[name]["bias"])
        return np.einsum("bld,dhk->blhk", x, kernel) + bias

    query, key, value = project(inputs_q, "query"), project(inputs_kv, "key"), project(inputs_kv, "value")
    if attention_function == "scaled_dot_product":
        heads, _ = attention(query, key, value, mask)
    elif attention_function == "dot_product":
        heads, _ = dot_product_attention(query, key, value, mask)
    elif attention_function == "additive":
        heads, _ = additive_attention(query, key, value, np.asarray(params["score_vector"], np.float64), mask)
    else:
        heads = linear_attention(query, key, value, mask)
    batch, length = heads.shape[:2]
    concatenated = heads.reshape(batch, length, -1)  # Concat over heads.
    w_out = np.asarray(params["out"]["kernel"], np.float64)
    w_out = w_out.reshape(-1, w_out.shape[-1])
    return concatenated @ w_out + np.asarray(params["out"]["bias"])


def _broadcast_mask(mask: np.ndarray | None, shape: tuple[int, int, int, int]) -> np.ndarray:
    return np.ones(shape, bool) if mask is None else np.broadcast_to(mask, shape)


def attention_from_scores(score, query: np.ndarray, key: np.ndarray, value: np.ndarray,
                          mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(score(q_t, K, h)) V per batch, head and query row, by explicit loops.

    ``score(q [K], keys [S, K], head) -> [S]``. Shapes and masking as :func:`attention`: fully masked
    rows give zero weights. Returns (output [B,T,H,V], weights [B,H,T,S]).
    """
    batch, length_q, heads, _ = query.shape
    length_k = key.shape[1]
    mask = _broadcast_mask(mask, (batch, heads, length_q, length_k))
    weights = np.zeros((batch, heads, length_q, length_k))
    output = np.zeros((batch, length_q, heads, value.shape[-1]))
    for b in range(batch):
        for h in range(heads):
            for t in range(length_q):
                allowed = mask[b, h, t]
                if not allowed.any():
                    continue
                row = np.full(length_k, -np.inf)
                row[allowed] = score(query[b, t, h], key[b, :, h], h)[allowed]
                weights[b, h, t] = softmax(row)
            output[b, :, h, :] = weights[b, h] @ value[b, :, h, :]
    return output, weights


def dot_product_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                          mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """softmax(Q K^T) V: the paper's footnote 4 case, without the 1/sqrt(d_k) scaling."""
    return attention_from_scores(lambda q, keys, head: keys @ q, query, key, value, mask)


def additive_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray, score_vector: np.ndarray,
                       mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Bahdanau et al. (2015): score(q, k) = w_h^T tanh(q + k), ``score_vector`` w ``[H, K]``."""
    return attention_from_scores(lambda q, keys, head: np.tanh(q[None, :] + keys) @ score_vector[head],
                                 query, key, value, mask)


def elu_plus_one(x: np.ndarray) -> np.ndarray:
    """phi(x) = elu(x) + 1: x + 1 for x > 0, exp(x) otherwise."""
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray,
                     mask: np.ndarray | None) -> np.ndarray:
    """Katharopoulos et al. (2020), Eq. (4) with phi = elu + 1, by explicit loops over queries and keys.

    out_t = sum_s m_ts phi(q_t).phi(k_s) v_s / sum_s m_ts phi(q_t).phi(k_s); rows with no allowed key
    give zeros. Returns the output [B,T,H,V].
    """
    batch, length_q, heads, _ = query.shape
    length_k = key.shape[1]
    mask = _broadcast_mask(mask, (batch, heads, length_q, length_k))
    output = np.zeros((batch, length_q, heads, value.shape[-1]))
    for b in range(batch):
        for h in range(heads):
            for t in range(length_q):
                similarity = np.array([elu_plus_one(query[b, t, h]) @ elu_plus_one(key[b, s, h])
                                       if mask[b, h, t, s] else 0.0 for s in range(length_k)])
                if similarity.sum() > 0:
                    output[b, t, h] = similarity @ value[b, :, h] / similarity.sum()
    return output


def rotate_by_position(x: np.ndarray, positions: np.ndarray, base: float = 10000.0) -> np.ndarray:
    """Su et al. (2021), Eq. 34: each pair (x_2p, x_2p+1) of ``x`` [L, K] times the 2 x 2 rotation by
    m theta_p, theta_p = base^(-2p / K), m the row's position."""
    rotated = np.zeros(x.shape)
    for row, position in enumerate(positions):
        for pair in range(x.shape[1] // 2):
            angle = position * base ** (-2 * pair / x.shape[1])
            rotation = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
            rotated[row, 2 * pair:2 * pair + 2] = rotation @ x[row, 2 * pair:2 * pair + 2]
    return rotated


def alibi_slopes(num_heads: int) -> list[float]:
    """Press et al. (2022): the geometric sequence starting at 2^(-8/n) with that ratio, n = H a power of
    two; otherwise n = the power of two below H, then every other slope of 2n heads."""
    def geometric(count: int) -> list[float]:
        start = 2 ** (-8 / count)
        return [start * start ** head for head in range(count)]

    below = 1
    while below * 2 <= num_heads:
        below *= 2
    return geometric(below) + geometric(2 * below)[0::2][:num_heads - below]


def positional_attention(query: np.ndarray, key: np.ndarray, value: np.ndarray, mask: np.ndarray | None, *,
                         encoding: str, query_positions: np.ndarray, key_positions: np.ndarray,
                         causal: bool = False, relative_keys: np.ndarray | None = None,
                         relative_values: np.ndarray | None = None, scaled: bool = True,
                         score_vector: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """One self-attention with ``encoding`` in ``relative``, ``rotary``, ``alibi``, by explicit loops.

    relative (Shaw et al., Eqs. 3-4): e_ts = q_t (k_s + wK[clip(s - t, k)])^T / sqrt(d_k), z_t = sum_s
    a_ts (v_s + wV[clip(s - t, k)]), k = (len(wK) - 1) / 2, offsets of the positions given. rotary: q_t and
    k_s rotated by their positions first. alibi: e_ts - m_h (t - s) (``causal``) or - m_h |t - s|.
    ``scaled=False``: footnote 4's unscaled products; ``score_vector`` [H, K]: additive scores instead.
    Shapes as :func:`attention`; positions [B, T] and [B, S]. Returns (output [B,T,H,V], weights [B,H,T,S]).
    """
    batch, length_q, heads, key_dim = query.shape
    length_k = key.shape[1]
    mask = _broadcast_mask(mask, (batch, heads, length_q, length_k))
    weights = np.zeros((batch, heads, length_q, length_k))
    output = np.zeros((batch, length_q, heads, value.shape[-1]))
    slopes = alibi_slopes(heads)
    scale = np.sqrt(key_dim) if scaled else 1.0
    for b in range(batch):
        for h in range(heads):
            queries, keys = query[b, :, h], key[b, :, h]
            if encoding == "rotary":
                queries = rotate_by_position(queries, query_positions[b])
                keys = rotate_by_position(keys, key_positions[b])
            for t in range(length_q):
                scores = np.full(length_k, -np.inf)
                for s in range(length_k):
                    if not mask[b, h, t, s]:
                        continue
                    offset = key_positions[b, s] - query_positions[b, t]  # j - i
                    if score_vector is not None:
                        score = np.tanh(queries[t] + keys[s]) @ score_vector[h]
                    else:
                        score = queries[t] @ keys[s] / scale
                    if encoding == "relative":
                        distance = (len(relative_keys) - 1) // 2
                        score += queries[t] @ relative_keys[min(max(offset, -distance), distance) + distance] / scale
                    if encoding == "alibi":
                        score -= slopes[h] * (-offset if causal else abs(offset))
                    scores[s] = score
                if not np.isfinite(scores).any():
                    continue
                weights[b, h, t] = softmax(scores)
                output[b, t, h] = weights[b, h, t] @ value[b, :, h]
                if encoding == "relative" and relative_values is not None:
                    distance = (len(relative_values) - 1) // 2
                    for s in range(length_k):
                        offset = key_positions[b, s] - query_positions[b, t]
                        output[b, t, h] += weights[b, h, t, s] * relative_values[
                            min(max(offset, -distance), distance) + distance]
    return output, weights


def positional_self_attention(params: dict, x: np.ndarray, mask: np.ndarray | None, *, encoding: str,
                              positions: np.ndarray, causal: bool = False,
                              attention_function: str = "scaled_dot_product") -> tuple[np.ndarray, np.ndarray]:
    """Multi-head self-attention (projections with biases, W^O) with :func:`positional_attention` heads.

    ``params`` in the Flax layout of one ``self_attention``: ``relative_key_embedding`` (and
    ``relative_value_embedding``) for ``relative``, ``score_vector`` for ``additive``. Returns (output
    [B, L, D], weights [B, H, L, L]).
    """
    def project(name: str) -> np.ndarray:
        return np.einsum("bld,dhk->blhk", x, np.asarray(params[name]["kernel"], np.float64)) + params[name]["bias"]

    def table(name: str) -> np.ndarray | None:
        return np.asarray(params[name], np.float64) if name in params else None

    score_vector = table("score_vector") if attention_function == "additive" else None
    heads, weights = positional_attention(
        project("query"), project("key"), project("value"), mask, encoding=encoding, query_positions=positions,
        key_positions=positions, causal=causal, relative_keys=table("relative_key_embedding"),
        relative_values=table("relative_value_embedding"), scaled=attention_function != "dot_product",
        score_vector=score_vector)
    w_out = np.asarray(params["out"]["kernel"], np.float64)
    output = heads.reshape(*heads.shape[:2], -1) @ w_out.reshape(-1, w_out.shape[-1]) + params["out"]["bias"]
    return output, weights


def layer_norm(params: dict, x: np.ndarray, epsilon: float = 1e-6) -> np.ndarray:
    """Ba et al. (2016): ``(x - mu) / sqrt(sigma^2 + eps) g + b``, mu, sigma^2 (biased) over the last axis."""
    mu = x.mean(axis=-1, keepdims=True)
    sigma_squared = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(sigma_squared + epsilon) * params["scale"] + params["bias"]


def rms_norm(params: dict, x: np.ndarray, epsilon: float = 1e-6) -> np.ndarray:
    """Zhang and Sennrich (2019), Eq. 4: ``x / sqrt(mean(x^2) + eps) g`` over the last axis (no centring, no bias)."""
    return x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + epsilon) * params["scale"]


def random_normal(shape: tuple[int, ...], seed: int, scale: float = 1.0, dtype: type = np.float32) -> np.ndarray:
    """Standard normal samples times ``scale``, from ``seed``: the tests' inputs and weights."""
    return (scale * np.random.default_rng(seed).normal(size=shape)).astype(dtype)


def gelu_exact(h: np.ndarray) -> np.ndarray:
    """GELU (Hendrycks and Gimpel, 2016), exact: h Phi(h) = h (1 + erf(h / sqrt 2)) / 2."""
    return 0.5 * h * (1.0 + np.vectorize(math.erf)(h / math.sqrt(2.0)))


FEED_FORWARD_ACTIVATIONS = {
    "relu": lambda h: np.maximum(0.0, h), "gelu": gelu_exact, "swish": lambda h: h / (1.0 + np.exp(-h)),
    "glu": lambda h: 1.0 / (1.0 + np.exp(-h)), "bilinear": lambda h: h, "reglu": lambda h: np.maximum(0.0, h),
    "geglu": gelu_exact, "swiglu": lambda h: h / (1.0 + np.exp(-h)),
}
"""Each feed-forward variant's activation (Shazeer, 2020, Eqs. 5-6 and Section 2: swish with beta 1)."""
GATED_FEED_FORWARDS = ("glu", "bilinear", "reglu", "geglu", "swiglu")


def feed_forward(params: dict, x: np.ndarray, variant: str = "relu") -> np.ndarray:
    """act(x W1 + b1) W2 + b2 (Eq. 2: act = relu), or gated (Shazeer, 2020) (act(x W + b) * (x V + c)) W2 + b2.

    ``params`` in the Flax layout of one ``ffn``: ``inner`` (W1, or V when gated), ``gate`` (W) and
    ``outer`` (W2), each ``{"kernel", "bias"}``; a missing ``bias`` is no bias.
    """
    def linear(h: np.ndarray, name: str) -> np.ndarray:
        bias = params[name].get("bias")
        return h @ np.asarray(params[name]["kernel"], np.float64) + (0.0 if bias is None else np.asarray(bias))

    activation = FEED_FORWARD_ACTIVATIONS[variant]
    if variant in GATED_FEED_FORWARDS:
        hidden = activation(linear(x, "gate")) * linear(x, "inner")
    else:
        hidden = activation(linear(x, "inner"))
    return linear(hidden, "outer")


def feed_forward_param_count(variant: str, d_model: int, d_ff: int, match_params: bool = True,
                             bias: bool = True) -> int:
    """Parameters of one feed-forward sublayer: a gated one's width is 2/3 d_ff to the nearest multiple of 8."""
    gated = variant in GATED_FEED_FORWARDS
    width = max(8, 8 * math.floor(2 * d_ff / 3 / 8 + 0.5)) if gated and match_params else d_ff
    matrices = 3 if gated else 2
    return matrices * d_model * width + ((matrices - 1) * width + d_model if bias else 0)


def encoder_layer(params: dict, x: np.ndarray, mask: np.ndarray | None, post_norm: bool) -> np.ndarray:
    """One encoder layer without dropout; post: LN(x + Sublayer(x)), pre: x + Sublayer(LN(x))."""
    def block(x: np.ndarray, block_params: dict, sublayer) -> np.ndarray:
        if post_norm:
            return layer_norm(block_params["layer_norm"], x + sublayer(x))
        return x + sublayer(layer_norm(block_params["layer_norm"], x))

    x = block(x, params["attention_block"],
              lambda h: multi_head_attention(params["self_attention"], h, h, mask))
    return block(x, params["ffn_block"], lambda h: feed_forward(params["ffn"], h))


def sinusoidal_encoding(length: int, d_model: int) -> np.ndarray:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d_model))."""
    table = np.zeros((length, d_model))
    for pos in range(length):
        for channel in range(d_model):
            i = channel // 2
            angle = pos / 10000 ** (2 * i / d_model)
            table[pos, channel] = np.sin(angle) if channel % 2 == 0 else np.cos(angle)
    return table


def transformer_param_count(vocab_size: int, num_layers: int, d_model: int, d_ff: int, num_heads: int,
                            key_dim: int, value_dim: int, share_embeddings: bool = True,
                            learned_positions: int = 0, pre_norm: bool = False, feed_forward: str = "relu") -> int:
    """Closed-form parameter count of the encoder-decoder (projections with biases, LayerNorm gains)."""
    attention_params = (2 * (d_model * num_heads * key_dim + num_heads * key_dim)  # W^Q, W^K
                        + d_model * num_heads * value_dim + num_heads * value_dim  # W^V
                        + num_heads * value_dim * d_model + d_model)  # W^O
    ffn_params = feed_forward_param_count(feed_forward, d_model, d_ff)
    norm_params = 2 * d_model
    encoder = attention_params + ffn_params + 2 * norm_params
    decoder = 2 * attention_params + ffn_params + 3 * norm_params
    embeddings = vocab_size * d_model * (1 if share_embeddings else 3)
    final_norms = 2 * norm_params if pre_norm else 0
    position_tables = 2 * learned_positions * d_model  # One learned table per stack.
    return embeddings + num_layers * (encoder + decoder) + final_norms + position_tables


def learning_rate(step: int, *, d_model: int, warmup_steps: int, scale: float = 1.0, schedule: str = "paper") -> float:
    """The rate of update ``step`` (1-based) of Section 5.3's schedule or of its constant-start variant.

    ``paper`` (Equation 3): a straight line from 0 to the peak ``scale (d_model warmup)^-0.5`` at
    ``warmup_steps``, then ``scale (d_model step)^-0.5``. ``constant_then_inverse_sqrt``: the peak until
    ``warmup_steps``, then the same decay.
    """
    peak = scale / np.sqrt(d_model * warmup_steps)
    if step > warmup_steps:
        return float(scale / np.sqrt(d_model * step))
    return float(peak * step / warmup_steps if schedule == "paper" else peak)

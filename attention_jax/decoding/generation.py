"""Text generation with the decoder-only language model: cached greedy, top-k or nucleus sampling.

Prompt tokens go through the same cached steps unsampled, so prompts of any length share a batch.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from attention_jax.models.language_model import LanguageModel
from attention_jax.models.model import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from attention_jax.models.transformer_config import TransformerConfig

Array = jax.Array


@dataclasses.dataclass(frozen=True)
class SamplingSettings:
    """How the next token is chosen.

    Raises
    ------
    ValueError
        For a setting out of range.
    """

    temperature: float = 1.0  # 0: greedy; otherwise the logits are divided by it.
    top_k: int = 0  # Sample among the top_k most likely tokens (0: no limit).
    top_p: float = 1.0  # Sample among the fewest most likely tokens whose probability reaches top_p (1: no limit).
    max_new_tokens: int = 50  # Fewer when EOS comes first or the model's length runs out.
    seed: int = 0  # Same seed, prompts and model: same text.

    def __post_init__(self) -> None:
        if not self.temperature >= 0.0:
            raise ValueError(f"temperature must be >= 0 (0 is greedy); got {self.temperature!r}.")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be a non-negative integer (0: no limit); got {self.top_k!r}.")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must lie in (0, 1] (1: no limit); got {self.top_p!r}.")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be a positive integer; got {self.max_new_tokens!r}.")


def filter_logits(logits: Array, top_k: int = 0, top_p: float = 1.0) -> Array:
    """Set the logits outside the top-k and top-p (nucleus) sets to -inf.

    Parameters
    ----------
    logits : Array
        float ``[B, N]``.
    top_k : int
        Keep each row's ``top_k`` largest, ties included (0: all).
    top_p : float
        Keep the fewest largest whose probability reaches ``top_p``, the most likely always (1.0: all).

    Returns
    -------
    Array
        ``[B, N]``.
    """
    if top_k > 0:
        kth_largest = jax.lax.top_k(logits, min(top_k, logits.shape[-1]))[0][:, -1:]  # [B,1]
        logits = jnp.where(logits < kth_largest, -jnp.inf, logits)
    if top_p < 1.0:
        sorted_logits = jnp.sort(logits, axis=-1)[:, ::-1]  # [B,N] descending
        sorted_probs = jax.nn.softmax(sorted_logits, axis=-1)
        mass_before = jnp.cumsum(sorted_probs, axis=-1) - sorted_probs  # Probability of the tokens ahead.
        kept = mass_before < top_p  # The first token always (mass 0); stop once top_p is reached.
        threshold = jnp.min(jnp.where(kept, sorted_logits, jnp.inf), axis=-1, keepdims=True)  # [B,1]
        logits = jnp.where(logits < threshold, -jnp.inf, logits)
    return logits


def _choose_next_token(rng: Array, logits: Array, settings: SamplingSettings) -> Array:
    """Return int32 ``[B]`` next tokens, greedy or sampled from the filtered, tempered logits; never PAD/UNK/BOS."""
    never = jnp.zeros(logits.shape[-1], bool).at[jnp.array([PAD_ID, UNK_ID, BOS_ID])].set(True)
    logits = jnp.where(never, -jnp.inf, logits.astype(jnp.float32))
    if settings.temperature == 0.0:
        return jnp.argmax(logits, axis=-1).astype(jnp.int32)
    logits = filter_logits(logits / settings.temperature, settings.top_k, settings.top_p)
    return jax.random.categorical(rng, logits, axis=-1).astype(jnp.int32)


def _sample_loop(params: Any, cache: Any, tokens: Array, prompt_lengths: Array, rng: Array, *,
                 lm: LanguageModel, settings: SamplingSettings) -> Array:
    """Fill ``tokens`` ``[B, L]`` (BOS, prompt, zeros) step by step until EOS or ``L``; return it."""
    batch, length = tokens.shape

    def _step(carry: tuple) -> tuple:
        index, tokens, cache, finished, rng = carry
        rng, step_rng = jax.random.split(rng)
        logits, updated = lm.apply({"params": params, "cache": cache}, tokens[:, index, None],
                                   method=LanguageModel.logits, mutable=["cache"])  # [B,1,N]
        chosen = _choose_next_token(step_rng, logits[:, 0], settings)  # [B]
        in_prompt = index + 1 <= prompt_lengths  # Position index + 1 still holds a prompt token.
        next_token = jnp.where(in_prompt, tokens[:, index + 1], jnp.where(finished, PAD_ID, chosen))
        finished = jnp.logical_or(finished, jnp.logical_and(~in_prompt, next_token == EOS_ID))
        tokens = tokens.at[:, index + 1].set(next_token)
        return index + 1, tokens, updated["cache"], finished, rng

    def _not_done(carry: tuple) -> Array:
        index, _, _, finished, _ = carry
        return jnp.logical_and(index < length - 1, ~jnp.all(finished))

    start = (jnp.array(0, jnp.int32), tokens, cache, jnp.zeros((batch,), bool), rng)
    return jax.lax.while_loop(_not_done, _step, start)[1]


class Generator:
    """Continue prompts with a trained decoder-only language model.

    Parameters
    ----------
    model_config : TransformerConfig
        The model's hyperparameters.
    params : pytree
        Plain parameters of a :class:`~attention_jax.models.language_model.LanguageModel`.
    tokenizer : object
        ``encode(text, add_eos)`` and ``decode(ids)``.
    max_length : int, optional
        Most positions, BOS + prompt + new tokens; default ``model_config.max_len``.
    """

    def __init__(self, model_config: TransformerConfig, params: Any, tokenizer: Any,
                 max_length: int | None = None) -> None:
        self.model_config = model_config.replace(decode=True, dropout_rate=0.0, attention_dropout_rate=0.0)
        self._max_length = min(max_length or model_config.max_len, model_config.max_len)
        self.params = params
        self.tokenizer = tokenizer
        self._lm = LanguageModel(self.model_config)
        self._compiled: dict[SamplingSettings, Any] = {}  # Jitted loops by sampling rule.

    @property
    def max_length(self) -> int:
        """The longest sequence the model takes, BOS, prompt and new tokens.

        Returns
        -------
        int
            Positions.
        """
        return self._max_length

    def encode_prompt(self, prompt: str) -> list[int]:
        """Return the token ids of a prompt, without EOS.

        Parameters
        ----------
        prompt : str
            Text to continue.

        Returns
        -------
        list[int]
            Its ids.

        Raises
        ------
        ValueError
            For an empty prompt, or one that leaves no room for a new token.
        """
        if not prompt.strip():
            raise ValueError("The prompt is empty: give some text to continue (--prompt=TEXT or one "
                             "prompt per line on stdin).")
        ids = list(self.tokenizer.encode(prompt, add_eos=False))
        if len(ids) + 2 > self.max_length:
            raise ValueError(f"The prompt has {len(ids)} tokens, but the model takes at most "
                             f"{self.max_length} positions (BOS, prompt and at least one new token): "
                             f"shorten it to at most {self.max_length - 2} tokens.")
        return ids

    def generate_ids(self, prompts: Sequence[Sequence[int]], settings: SamplingSettings) -> list[list[int]]:
        """Return the generated ids after each prompt, up to and including EOS.

        Parameters
        ----------
        prompts : sequence of sequence of int
            Prompt ids, no BOS or EOS.
        settings : SamplingSettings
            How to choose tokens and how many.

        Returns
        -------
        list[list[int]]
            One continuation per prompt.
        """
        longest = max(len(prompt) for prompt in prompts)
        length = min(1 + longest + settings.max_new_tokens, self.max_length)
        tokens = np.zeros((len(prompts), length), np.int32)
        tokens[:, 0] = BOS_ID
        for row, prompt in enumerate(prompts):
            tokens[row, 1:1 + len(prompt)] = prompt
        lengths = np.array([len(prompt) for prompt in prompts], np.int32)
        cache = self._empty_cache(len(prompts), length)
        filled = np.asarray(self._loop(settings)(self.params, cache, jnp.asarray(tokens), jnp.asarray(lengths),
                                                 jax.random.key(settings.seed)))
        outputs = []
        for row, prompt in enumerate(prompts):
            new = filled[row, 1 + len(prompt):1 + len(prompt) + settings.max_new_tokens].tolist()
            outputs.append(new[:new.index(EOS_ID) + 1] if EOS_ID in new else [t for t in new if t != PAD_ID])
        return outputs

    def generate(self, prompts: Sequence[str], settings: SamplingSettings = SamplingSettings(), *,
                 echo_prompt: bool = False) -> list[str]:
        """Continue each prompt; return the generated text without EOS.

        Parameters
        ----------
        prompts : sequence of str
            Texts to continue.
        settings : SamplingSettings
            How to choose tokens.
        echo_prompt : bool
            Put the prompt, as given, before its continuation.

        Returns
        -------
        list[str]
            One text per prompt.

        Raises
        ------
        ValueError
            For an empty or too long prompt.
        """
        if not prompts:
            return []
        encoded = [self.encode_prompt(prompt) for prompt in prompts]
        texts = []
        for prompt, prompt_ids, ids in zip(prompts, encoded, self.generate_ids(encoded, settings)):
            new_ids = [t for t in ids if t != EOS_ID]
            if not echo_prompt:
                texts.append(self.tokenizer.decode(new_ids))
                continue
            # Decoded together, so the tokenizer decides the space between them; the prompt is kept as typed.
            whole, prefix = self.tokenizer.decode(prompt_ids + new_ids), self.tokenizer.decode(prompt_ids)
            texts.append(prompt + whole[len(prefix):] if whole.startswith(prefix) else whole)
        return texts

    def _empty_cache(self, batch: int, length: int) -> Any:
        ids = jnp.ones((batch, length), jnp.int32)
        shapes = jax.eval_shape(lambda: self._lm.init(jax.random.key(0), ids))["cache"]
        return jax.tree.map(lambda leaf: jnp.zeros(leaf.shape, leaf.dtype), shapes)

    def _loop(self, settings: SamplingSettings) -> Any:
        static = dataclasses.replace(settings, seed=0, max_new_tokens=1)  # Only these shape the program.
        if static not in self._compiled:
            self._compiled[static] = jax.jit(functools.partial(_sample_loop, lm=self._lm, settings=static))
        return self._compiled[static]


def length_warning(max_length: int, prompt_lengths: list[int], max_new_tokens: int) -> str | None:
    """Return the warning for a ``--max_new_tokens`` the model's rows cannot hold (no sliding window).

    Parameters
    ----------
    max_length : int
        Positions of a row: BOS, the prompt and the new tokens.
    prompt_lengths : list[int]
        Tokens of each prompt.
    max_new_tokens : int
        ``--max_new_tokens``.

    Returns
    -------
    str or None
        One line; ``None`` when all fit.
    """
    if not prompt_lengths:
        return None
    room = max_length - 1 - max(prompt_lengths)  # After BOS and the longest prompt.
    if max_new_tokens <= room:
        return None
    which = "the continuation" if len(prompt_lengths) == 1 else "the longest prompt's continuation"
    return (f"--max_new_tokens={max_new_tokens} is more than fits: the model's rows hold {max_length} positions "
            f"(BOS and the prompt included), so {which} stops after {room} new tokens.")

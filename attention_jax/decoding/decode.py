"""Translate with a Transformer: batched, bucketed, cached incremental decoding (Section 6.1).

Batch size and source length are padded to powers of two, so a few compilations serve any input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata
import json
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, Protocol, overload

import jax
import numpy as np

from attention_jax.decoding import beam_search
from attention_jax.decoding.beam_search import EOS_ID, PAD_ID
from attention_jax.decoding.text_batches import _checked_ids, _checked_sentences
from attention_jax.experiment.sections import DecodeSettings, TransformerConfig
from attention_jax.foundation import cache_dirs, run_files

# Shapes: B sentences, K beam size, S source length (bucketed), L maximum output length (static), V vocabulary.
Array = jax.Array
SEARCH_METHODS = ("beam", "greedy")
MIN_SOURCE_BUCKET = 8


class TextCodec(Protocol):
    """What decoding needs from a tokenizer: ``vocab_size``, ``encode`` (ids ending in EOS), ``decode`` (to EOS)."""

    @property
    def vocab_size(self) -> int: ...  # numpydoc ignore=GL08

    def encode(self, text: str) -> list[int]: ...  # numpydoc ignore=GL08

    def decode(self, ids: Sequence[int]) -> str: ...  # numpydoc ignore=GL08


@functools.partial(jax.jit, static_argnames=("model_config", "method", "beam_size", "alpha",
                                             "max_decode_len", "use_cache", "early_stop", "mesh",
                                             "cache_stages", "num_best"))
def decode_batch(params: Any, inputs: Array, max_lengths: Array, *, model_config: TransformerConfig,
                 method: str = "beam", beam_size: int = 4, alpha: float = 0.6, max_decode_len: int,
                 use_cache: bool = True, early_stop: bool = True,
                 mesh: jax.sharding.Mesh | None = None,
                 cache_stages: int = DecodeSettings.cache_stages, num_best: int = 1) -> beam_search.SearchResult:
    """Translate a padded batch of source ids (jitted; with a mesh, per device under ``shard_map``: docs/design.md).

    Parameters
    ----------
    params : pytree
        Plain model parameters.
    inputs, max_lengths : Array
        int32 ``[B, S]`` source ids ending in EOS, 0-padded; ``[B]`` output limits (EOS in; 0 skips a row).
    model_config : TransformerConfig
        The model.
    method : str
        ``"beam"`` or ``"greedy"``.
    beam_size : int
        ``K``.
    alpha : float
        Length-penalty strength.
    max_decode_len : int
        ``L``: cache size and output length, at most ``model_config.max_len``.
    use_cache, early_stop : bool
        Use the key/value cache (else recompute the prefix); stop early as ``beam_search.beam_search`` does.
    mesh : jax.sharding.Mesh, optional
        Split the batch over its ``"data"`` axis.
    cache_stages, num_best : int
        Stages the cache grows in (same outputs for any); hypotheses early termination waits for.

    Returns
    -------
    beam_search.SearchResult
        ``[B, K', ...]``, best first (``K' = 1`` for greedy).

    Raises
    ------
    ValueError
        For an unknown ``method`` or ``max_decode_len`` beyond ``max_len``.
    """
    if method not in SEARCH_METHODS:
        raise ValueError(f"method must be one of {SEARCH_METHODS}; got {method!r}.")
    if max_decode_len > model_config.max_len:
        raise ValueError(f"max_decode_len={max_decode_len} exceeds the model's max_len={model_config.max_len}.")
    search = functools.partial(_search, model_config=model_config, method=method, beam_size=beam_size,
                               alpha=alpha, max_decode_len=max_decode_len, use_cache=use_cache,
                               early_stop=early_stop, cache_stages=cache_stages, num_best=num_best)
    if mesh is None:
        return search(params, inputs, max_lengths)
    # Any: these fill SearchResult's array fields with the PartitionSpec of each (shard_map's out_specs).
    by_sentence: Any = jax.sharding.PartitionSpec("data")
    replicated: Any = jax.sharding.PartitionSpec()
    out_specs = beam_search.SearchResult(by_sentence, by_sentence, by_sentence, by_sentence, replicated)

    def _local_search(params: Any, inputs: Array, max_lengths: Array) -> beam_search.SearchResult:
        result = search(params, inputs, max_lengths)
        return result._replace(num_steps=jax.lax.pmax(result.num_steps, "data"))

    # check_vma=False: the loop starts from constants (replicated) and carries per-device values.
    return jax.shard_map(_local_search, mesh=mesh, in_specs=(jax.sharding.PartitionSpec(), by_sentence, by_sentence),
                         out_specs=out_specs, check_vma=False)(params, inputs, max_lengths)


def _search(params: Any, inputs: Array, max_lengths: Array, *, model_config: TransformerConfig, method: str,
            beam_size: int, alpha: float, max_decode_len: int, use_cache: bool,
            early_stop: bool, cache_stages: int, num_best: int) -> beam_search.SearchResult:
    from attention_jax.decoding import decode_steps  # Flax: not imported by a translator of exported searches.

    step_fn, state, stages = decode_steps.search_setup(
        model_config, params, inputs, rows_per_sentence=beam_size if method == "beam" else 1,
        max_decode_len=max_decode_len, use_cache=use_cache, cache_stages=cache_stages)
    if method == "greedy":
        return beam_search.greedy_search(step_fn, state, max_lengths, alpha=alpha, max_decode_len=max_decode_len,
                                         **stages)
    return beam_search.beam_search(step_fn, state, max_lengths, beam_size=beam_size, alpha=alpha,
                                   max_decode_len=max_decode_len, early_stop=early_stop, num_best=num_best,
                                   **stages)


def bucket_length(length: int, maximum: int, minimum: int = MIN_SOURCE_BUCKET) -> int:
    """Return the padded source length: the next power of two within ``[minimum, maximum]``.

    Parameters
    ----------
    length, maximum, minimum : int
        Longest source in the batch (EOS included); largest and smallest bucket.

    Returns
    -------
    int
        The bucket.
    """
    bucket = minimum
    while bucket < length:
        bucket *= 2
    return min(bucket, maximum)


def cache_length(longest_output: int, limit: int, multiple: int = 16) -> int:
    """Return ``L``: the batch's longest possible output, rounded up (each step costs in proportion to ``L``).

    Parameters
    ----------
    longest_output, limit, multiple : int
        Largest maximum output length (EOS included); largest ``L``; ``decode_steps.POSITION_MULTIPLE``.

    Returns
    -------
    int
        ``L``.
    """
    return min(-(-longest_output // multiple) * multiple, limit)


def bucket_rows(num_rows: int, maximum: int, multiple: int = 1) -> int:
    """Return the padded batch size: the next power of two, at most ``maximum``.

    Parameters
    ----------
    num_rows, maximum, multiple : int
        Sentences in the batch; the batch size; round up to a multiple of this (devices on the data axis).

    Returns
    -------
    int
        Rows to pad to.
    """
    bucket = 1
    while bucket < num_rows:
        bucket *= 2
    bucket = min(bucket, maximum)
    return -(-bucket // multiple) * multiple


def replace_invalid_characters(text: str) -> str:
    """Replace lone surrogates (undecodable ``sys.argv`` bytes), which UTF-8 cannot encode, by U+FFFD.

    Parameters
    ----------
    text : str
        Any string.

    Returns
    -------
    str
        ``text`` safe for the tokenizer.
    """
    if not any("\ud800" <= character <= "\udfff" for character in text):
        return text
    return "".join("\ufffd" if "\ud800" <= character <= "\udfff" else character for character in text)


def _check_params_match(model_config: TransformerConfig, params: Any) -> None:
    """Refuse parameters whose shapes ``model_config`` does not imply, before any compilation.

    Raises ``ValueError``: listing the first differences.
    """
    expected = _expected_shapes(model_config)
    found = _shapes_by_path(params)
    problems = [f"missing {path} {shape}" for path, shape in expected.items() if path not in found]
    problems += [f"unexpected {path} {shape}" for path, shape in found.items() if path not in expected]
    problems += [f"{path}: checkpoint {found[path]}, config {shape}" for path, shape in expected.items()
                 if path in found and found[path] != shape]
    if problems:
        raise ValueError(
            "The parameters do not match the model config (was the checkpoint trained with another "
            f"config?): {'; '.join(problems[:5])}" + (f"; and {len(problems) - 5} more" if len(problems) > 5 else ""))


def _shapes_by_path(params: Any) -> dict[str, tuple[int, ...]]:
    leaves = jax.tree_util.tree_leaves_with_path(_unboxed(params))
    return {jax.tree_util.keystr(path): tuple(leaf.shape) for path, leaf in leaves}


def _expected_shapes(model_config: TransformerConfig) -> dict[str, tuple[int, ...]]:
    """The shapes ``model_config`` implies, kept as JSON under the compilation cache: read again without Flax."""
    path, directory = None, getattr(jax.config, "jax_compilation_cache_dir", None)
    if directory:  # Keyed as models.model's traced shapes are.
        key = "\n".join([repr(model_config.replace(decode=False)), jax.__version__,
                         importlib.metadata.version("flax"), cache_dirs.source_digest()])
        path = os.path.join(directory, "param_shapes", hashlib.sha256(key.encode()).hexdigest()[:40] + ".json")
        with contextlib.suppress(Exception), open(path, encoding="utf-8") as file:  # Missing, unreadable: traced.
            return {name: tuple(shape) for name, shape in json.load(file).items()}
    from attention_jax.models.model import abstract_params

    expected = _shapes_by_path(abstract_params(model_config))
    with contextlib.suppress(OSError):  # Unwritable: the next process traces too.
        if path:
            run_files.write_atomically(path, json.dumps(expected))
    return expected


def _unboxed(params: Any) -> Any:
    """``flax.linen.meta.unbox``: a boxed leaf exists only once Flax is imported, so plain trees need no Flax."""
    meta = sys.modules.get("flax.core.meta")
    return params if meta is None else meta.unbox(params)


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """One finished beam-search hypothesis."""

    ids: tuple[int, ...]  # Ending in EOS.
    text: str
    score: float  # log P(Y | X), natural log, EOS included.
    normalized_score: float  # score / lp(|Y|) (Section 6.1): what beam search ranks by.


@dataclasses.dataclass
class _Batch:
    indices: list[int]  # Positions of the batch's sentences in the caller's list.
    inputs: np.ndarray  # [B, S] padded source ids.
    max_lengths: np.ndarray  # [B]


class Translator:
    """Translate sentences with beam search (or greedy decoding) in length-sorted, bucketed batches.

    Parameters
    ----------
    model_config : TransformerConfig
        The model (dropout is off when decoding).
    params : pytree
        Its parameters, boxed or plain.
    tokenizer : TextCodec
        Text to ids and back.
    settings : DecodeSettings
        Beam size (1: greedy), length-penalty alpha, output margin; the paper's (4, 0.6, 50) by default.
    batch_size : int
        Sentences decoded together.
    use_cache : bool
        Decode with the key/value cache; ``False`` recomputes the prefix each step.
    mesh : jax.sharding.Mesh, optional
        Shard each batch over the mesh's ``"data"`` axis.
    exported_searches : background_warm_up.ExportedSearches, optional
        With :attr:`fixed_shapes` on, search through its ``jax.export`` artifacts (traced once per cache
        directory), else as without it; unused with a mesh.

    Raises
    ------
    ValueError
        For settings, tokenizer, mesh or parameters that do not fit the model.
    """

    def __init__(self, model_config: TransformerConfig, params: Any, tokenizer: TextCodec, *,
                 settings: DecodeSettings = DecodeSettings(), batch_size: int = 64, use_cache: bool = True,
                 mesh: jax.sharding.Mesh | None = None, exported_searches: Any = None) -> None:
        if not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer; got {batch_size!r}.")
        max_extra_len = settings.max_decode_extra_len
        if tokenizer.vocab_size > model_config.vocab_size:
            raise ValueError(
                f"The tokenizer has {tokenizer.vocab_size} ids but the model embeds only "
                f"{model_config.vocab_size}: they do not belong together (check config.vocab_size).")
        self.max_source_len = model_config.max_len - max_extra_len
        if self.max_source_len < 1:
            raise ValueError(
                f"max_decode_extra_len={max_extra_len} leaves no room for input in the model's max_len="
                f"{model_config.max_len} positions; lower max_decode_extra_len.")
        if mesh is not None and "data" not in mesh.axis_names:
            raise ValueError(f"The mesh needs a 'data' axis to shard batches over; it has {mesh.axis_names}.")
        _check_params_match(model_config, params)
        self.model_config = model_config.replace(decode=False)
        self.tokenizer = tokenizer
        self.settings = settings
        self.beam_size = settings.beam_size
        self.alpha = settings.length_penalty_alpha
        self.max_extra_len = settings.max_decode_extra_len
        self.batch_size = int(batch_size)
        self.use_cache = use_cache
        self.mesh = mesh
        self.params = self._place(_unboxed(params), replicated=True)
        self.fixed_shapes = False  # True: one decode length per source bucket (see warm_up).
        self.exported_searches = exported_searches if mesh is None else None

    @overload
    def translate(self, sources: str) -> str: ...  # type: ignore[overload-overlap]  # numpydoc ignore=GL08

    @overload
    def translate(self, sources: Sequence[str]) -> list[str]: ...  # numpydoc ignore=GL08

    def translate(self, sources: str | Sequence[str]) -> str | list[str]:
        """Translate sentences, in input order.

        Parameters
        ----------
        sources : str or Sequence[str]
            Untokenized sentences, or one; blank ones give ``""``.

        Returns
        -------
        str or list[str]
            Translations; one ``str`` for a ``str``.

        Raises
        ------
        TypeError
            For a source that is not a ``str``.
        """
        if isinstance(sources, str):  # One sentence, not an iterable of characters.
            return self.translate([sources])[0]
        return [best[0].text if best else "" for best in self.translate_nbest(sources)]

    def encode_sources(self, sources: Sequence[str]) -> list[list[int]]:
        """Tokenize sentences, truncating those longer than :attr:`max_source_len` (with one warning).

        Parameters
        ----------
        sources : Sequence[str]
            Source sentences.

        Returns
        -------
        list[list[int]]
            Ids ending in EOS; ``[]`` for blank sentences.

        Raises
        ------
        TypeError
            For one ``str`` or an item that is no ``str``.
        """
        sources = _checked_sentences(sources)
        cleaned = [replace_invalid_characters(text) for text in sources]
        invalid = sum(clean != text for clean, text in zip(cleaned, sources))
        if invalid:
            warnings.warn(f"{invalid} source sentences held characters that are not valid Unicode text (such as "
                          "undecodable bytes passed on the command line); they were replaced by U+FFFD.",
                          stacklevel=2)
        encoded = [list(self.tokenizer.encode(text)) if text.strip() else [] for text in cleaned]
        too_long = [i for i, ids in enumerate(encoded) if len(ids) > self.max_source_len]
        if too_long:
            longest = max(len(encoded[i]) for i in too_long)
            warnings.warn(
                f"{len(too_long)} of {len(encoded)} source sentences are longer than the model's maximum input "
                f"of {self.max_source_len} tokens (EOS included; the longest has {longest}) and were "
                f"truncated to it. Split long inputs into sentences to translate them whole.",
                stacklevel=2)
            for i in too_long:
                encoded[i] = encoded[i][: self.max_source_len - 1] + [EOS_ID]
        return encoded

    def translate_ids(self, source_ids: Sequence[Sequence[int]]) -> list[list[int]]:
        """Translate tokenized sentences, in input order.

        Parameters
        ----------
        source_ids : Sequence[Sequence[int]]
            Ids ending in EOS, at most :attr:`max_source_len` each; empty ones give ``[]``.

        Returns
        -------
        list[list[int]]
            The best hypothesis of each, ending in EOS.
        """
        return [list(best[0].ids) if best else [] for best in self.translate_ids_nbest(source_ids)]

    def translate_nbest(self, sources: Sequence[str], nbest: int = 1) -> list[list[Hypothesis]]:
        """Return the ``nbest`` best hypotheses of each sentence with their scores (see :meth:`translate_ids_nbest`).

        Parameters
        ----------
        sources : Sequence[str]
            Untokenized sentences (truncated as :meth:`encode_sources` does).
        nbest : int
            Hypotheses per sentence, 1 to :attr:`beam_size`.

        Returns
        -------
        list[list[Hypothesis]]
            One list per source, in input order; ``[]`` for a blank source.
        """
        return self.translate_ids_nbest(self.encode_sources(sources), nbest)

    def translate_ids_nbest(self, source_ids: Sequence[Sequence[int]], nbest: int = 1) -> list[list[Hypothesis]]:
        """Return the ``nbest`` best hypotheses of tokenized sentences, best first (the first: :meth:`translate_ids`).

        Parameters
        ----------
        source_ids : Sequence[Sequence[int]]
            Ids ending in EOS, at most :attr:`max_source_len` each; empty ones give ``[]``.
        nbest : int
            Hypotheses per sentence, 1 to :attr:`beam_size`.

        Returns
        -------
        list[list[Hypothesis]]
            One list per sentence, in input order; shorter only when the length limit leaves fewer outputs.

        Raises
        ------
        TypeError
            For ids that are not integer sequences.
        ValueError
            For ids outside the vocabulary, or ``nbest`` out of range.
        """
        if not 1 <= nbest <= self.beam_size:
            raise ValueError(f"nbest must be between 1 and the beam size {self.beam_size}; got {nbest}.")
        source_ids = _checked_ids(source_ids, self.tokenizer.vocab_size)
        outputs: list[list[Hypothesis]] = [[] for _ in source_ids]
        for batch in self._batches(source_ids):
            result = jax.device_get(self._decode(batch, nbest))
            tokens, lengths, log_probs, scores = (np.asarray(array)[:, :nbest] for array in (
                result.tokens, result.lengths, result.log_probs, result.scores))
            for row, index in enumerate(batch.indices):
                for k in np.flatnonzero(np.isfinite(scores[row])):  # -inf: a slot no hypothesis reached.
                    ids = tuple(tokens[row, k, : lengths[row, k]].tolist())
                    outputs[index].append(Hypothesis(ids, self.tokenizer.decode(ids), float(log_probs[row, k]),
                                                     float(scores[row, k])))
        return outputs

    def warm_up(self, max_tokens: int, num_best: int = 1) -> list[int]:
        """Compile the search of every source bucket up to ``max_tokens``, one program per bucket from then on.

        Parameters
        ----------
        max_tokens, num_best : int
            The longest source (EOS included) whose bucket is warmed; the ``nbest`` to be asked for (compiled).

        Returns
        -------
        list[int]
            The source buckets warmed.
        """
        buckets = self.source_buckets(max_tokens)
        for length in buckets:
            self.warm_bucket(length, num_best)
        return buckets

    def source_buckets(self, max_tokens: int) -> list[int]:
        """Return the source buckets, shortest first, that hold sources of up to ``max_tokens`` tokens.

        Parameters
        ----------
        max_tokens : int
            The longest source, EOS included.

        Returns
        -------
        list[int]
            Powers of two from ``MIN_SOURCE_BUCKET``, the last cut to :attr:`max_source_len`.
        """
        longest, buckets = bucket_length(min(max_tokens, self.max_source_len), self.max_source_len), list[int]()
        while not buckets or buckets[-1] < longest:
            buckets.append(min(MIN_SOURCE_BUCKET * 2 ** len(buckets), self.max_source_len))
        return buckets

    def warm_bucket(self, length: int, num_best: int = 1) -> None:
        """Turn on :attr:`fixed_shapes` and compile the search of source bucket ``length`` on a one-token output.

        Parameters
        ----------
        length, num_best : int
            The source bucket; the ``nbest`` the caller will ask for.
        """
        self.fixed_shapes = True
        rows = bucket_rows(1, self.batch_size, self.mesh.shape["data"] if self.mesh is not None else 1)
        inputs = np.full((rows, length), PAD_ID, np.int32)
        inputs[0] = EOS_ID
        max_lengths = np.zeros((rows,), np.int32)
        max_lengths[0] = 1
        jax.block_until_ready(self._decode(_Batch([0], inputs, max_lengths), num_best))

    def _batches(self, source_ids: Sequence[Sequence[int]]) -> list[_Batch]:
        """Group non-empty sources, longest first, into padded, bucketed batches."""
        for ids in source_ids:
            if len(ids) > self.max_source_len:
                raise ValueError(f"A source has {len(ids)} ids, more than max_source_len={self.max_source_len}; "
                                 "use encode_sources to truncate.")
        order = sorted((i for i, ids in enumerate(source_ids) if len(ids)), key=lambda i: -len(source_ids[i]))
        multiple = self.mesh.shape["data"] if self.mesh is not None else 1
        batches = []
        for start in range(0, len(order), self.batch_size):
            indices = order[start: start + self.batch_size]
            length = bucket_length(len(source_ids[indices[0]]), self.max_source_len)
            rows = bucket_rows(len(indices), self.batch_size, multiple)
            inputs = np.full((rows, length), PAD_ID, np.int32)
            max_lengths = np.zeros((rows,), np.int32)
            for row, index in enumerate(indices):
                ids = source_ids[index]
                inputs[row, : len(ids)] = ids
                max_lengths[row] = min(len(ids) + self.max_extra_len, self.model_config.max_len)
            batches.append(_Batch(indices, inputs, max_lengths))
        return batches

    def _decode(self, batch: _Batch, num_best: int = 1) -> beam_search.SearchResult:
        if self.fixed_shapes and self.exported_searches is not None:
            found = self.exported_searches.search(self, batch, num_best)
            if found is not None:  # None: the artifact failed (warned); the plain search serves.
                return found
        method = self.settings.method
        limit = min(batch.inputs.shape[1] + self.max_extra_len, self.model_config.max_len)
        max_decode_len = limit if self.fixed_shapes else cache_length(int(batch.max_lengths.max()), limit)
        return decode_batch(
            self.params, self._place(batch.inputs), self._place(batch.max_lengths),
            model_config=self.model_config, method=method, beam_size=self.beam_size, alpha=self.alpha,
            max_decode_len=max_decode_len, use_cache=self.use_cache, mesh=self.mesh,
            cache_stages=self.settings.cache_stages, num_best=num_best)

    def _place(self, tree: Any, replicated: bool = False) -> Any:
        """Put arrays on the mesh: batch-sharded over ``"data"``, or replicated."""
        if self.mesh is None:
            return tree
        spec = jax.sharding.PartitionSpec() if replicated else jax.sharding.PartitionSpec("data")
        return jax.device_put(tree, jax.sharding.NamedSharding(self.mesh, spec))

"""Shared source/target subword vocabulary: SentencePiece BPE (Section 5.1, "about 37000 tokens").

Fixed ids: pad 0 (ignored by the loss), unk 1, bos 2 (the model prepends it; batches never hold it), eos 3.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Sequence

import numpy as np
import sentencepiece as spm
from absl import logging

from attention_jax.data import first_use
from attention_jax.foundation import run_files
from attention_jax.foundation.user_errors import MissingInputError, UserInputError

PAD_ID = 0
UNK_ID = 1
BOS_ID = 2
EOS_ID = 3

# Character coverages tried in order: every character first (exact round trips for en/de text); if the
# corpus has more distinct characters than the vocabulary has room for, SentencePiece's own default.
_CHARACTER_COVERAGES = (1.0, 0.9995)
# SentencePiece skips longer training sentences (bytes); tokenizing them later still works.
_MAX_TRAINING_SENTENCE_BYTES = 4192


class Tokenizer:
    """SentencePiece BPE tokenizer with fixed special ids; ``encode`` gives a batch row's ids (EOS, no BOS).

    Parameters
    ----------
    model_proto : bytes
        A serialized SentencePiece model with pad/unk/bos/eos ids 0/1/2/3.
    """

    pad_id: int = PAD_ID
    unk_id: int = UNK_ID
    bos_id: int = BOS_ID
    eos_id: int = EOS_ID

    def __init__(self, model_proto: bytes) -> None:
        self._model_proto = bytes(model_proto)
        self._processor = spm.SentencePieceProcessor(model_proto=self._model_proto)
        found = (
            self._processor.pad_id(),
            self._processor.unk_id(),
            self._processor.bos_id(),
            self._processor.eos_id(),
        )
        if found != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise ValueError(
                f"SentencePiece model has pad/unk/bos/eos ids {found}; this project needs "
                f"({PAD_ID}, {UNK_ID}, {BOS_ID}, {EOS_ID}). Train it with attention_jax.data.tokenizer.train_tokenizer."
            )

    @classmethod
    def load(cls, model_path: str) -> Tokenizer:
        """Load a tokenizer from a ``.model`` file.

        Parameters
        ----------
        model_path : str
            A SentencePiece model file.

        Returns
        -------
        Tokenizer
            The tokenizer.

        Raises
        ------
        FileNotFoundError
            When the file does not exist.
        UserInputError
            Naming the file when it is damaged or not ours (SentencePiece's error names none).
        """
        if not os.path.exists(model_path):
            raise FileNotFoundError(f"No SentencePiece model at {model_path}.")
        with open(model_path, "rb") as model_file:
            model_proto = model_file.read()
        try:
            return cls(model_proto)
        except (RuntimeError, ValueError) as error:
            reason = " ".join(str(error).split())[:160]
            raise UserInputError(
                f"{model_path} is not a readable SentencePiece model ({len(model_proto)} bytes: {reason}): the file "
                f"is damaged or truncated. Restore it from a copy of the run; the weights need its token ids."
            ) from None

    @property
    def vocab_size(self) -> int:
        """Return the number of ids the tokenizer can produce.

        Returns
        -------
        int
            Ids are ``0 .. vocab_size - 1``.
        """
        return self._processor.vocab_size()

    @property
    def model_proto(self) -> bytes:
        """Return the serialized SentencePiece model.

        Returns
        -------
        bytes
            The model.
        """
        return self._model_proto

    def encode(self, text: str, add_eos: bool = True) -> list[int]:
        """Turn one sentence into token ids.

        Parameters
        ----------
        text : str
            The sentence.
        add_eos : bool
            Append EOS.

        Returns
        -------
        list[int]
            Subword ids.
        """
        return self._processor.encode(text, add_eos=add_eos)

    def encode_batch(self, texts: Sequence[str], add_eos: bool = True, num_threads: int = -1) -> list[list[int]]:
        """Turn many sentences into token ids at once (multithreaded in SentencePiece).

        Parameters
        ----------
        texts : Sequence[str]
            The sentences.
        add_eos : bool
            Append EOS to each.
        num_threads : int
            -1: every core.

        Returns
        -------
        list[list[int]]
            One id list per sentence.
        """
        if not texts:
            return []
        return self._processor.encode(list(texts), add_eos=add_eos, num_threads=num_threads)

    def decode(self, ids: Iterable[int]) -> str:
        """Return the text of the ids before the first EOS; pad, bos and ids past the vocabulary are dropped.

        Parameters
        ----------
        ids : Iterable[int]
            A batch row or decoder output.

        Returns
        -------
        str
            The text.
        """
        pieces = []
        for token_id in np.asarray(ids).reshape(-1).tolist():
            if token_id == EOS_ID:
                break
            if token_id in (PAD_ID, BOS_ID) or not 0 <= token_id < self.vocab_size:
                continue
            pieces.append(token_id)
        return self._processor.decode(pieces)

    def id_to_piece(self, token_id: int) -> str:
        """Return the subword string of one id, e.g. ``"▁the"``.

        Parameters
        ----------
        token_id : int
            Below :attr:`vocab_size`.

        Returns
        -------
        str
            The SentencePiece piece.
        """
        return self._processor.id_to_piece(token_id)


def train_tokenizer(sentences: Iterable[str], vocab_size: int) -> Tokenizer:
    """Train a SentencePiece BPE model on sentences in memory; deterministic for a sentence list.

    ``hard_vocab_limit=False`` lets a small corpus end with fewer pieces; character coverage is 1.0 (exact
    round trips), else 0.9995 when the characters do not fit.

    Parameters
    ----------
    sentences : Iterable[str]
        Both languages mixed; re-iterable.
    vocab_size : int
        Upper bound, special ids included.

    Returns
    -------
    Tokenizer
        The tokenizer.

    Raises
    ------
    UserInputError
        For no text, or a ``vocab_size`` below the corpus's distinct characters.
    """
    sentences = [sentence for sentence in sentences if sentence]
    if not sentences:
        raise UserInputError("Cannot train a tokenizer on no text: the training split has no non-empty sentences.")
    last_error: Exception | None = None
    for character_coverage in _CHARACTER_COVERAGES:
        model_buffer = io.BytesIO()
        try:
            spm.SentencePieceTrainer.train(
                sentence_iterator=iter(sentences),
                model_writer=model_buffer,
                model_type="bpe",
                vocab_size=vocab_size,
                hard_vocab_limit=False,
                character_coverage=character_coverage,
                pad_id=PAD_ID,
                unk_id=UNK_ID,
                bos_id=BOS_ID,
                eos_id=EOS_ID,
                input_sentence_size=0,  # The caller already capped the sentence count.
                max_sentence_length=_MAX_TRAINING_SENTENCE_BYTES,
                num_threads=max(1, os.cpu_count() or 1),
                minloglevel=2,
            )
        except RuntimeError as error:
            if "required_chars" not in str(error):
                raise
            last_error = error
            continue
        tokenizer = Tokenizer(model_buffer.getvalue())
        if tokenizer.vocab_size > vocab_size:
            raise RuntimeError(
                f"SentencePiece made {tokenizer.vocab_size} pieces, more than the {vocab_size} asked for."
            )
        return tokenizer
    raise UserInputError(
        f"vocab_size={vocab_size} is too small for the {len(sentences)} training sentences: "
        f"they have more distinct characters than fit ({last_error}). Increase config.vocab_size."
    )


def load_or_train_tokenizer(
    model_path: str, training_sentences: Callable[[], Iterable[str]], vocab_size: int
) -> Tokenizer:
    """Load the cached tokenizer at ``model_path``, or train one (once across processes) and write it atomically.

    Parameters
    ----------
    model_path : str
        The ``.model`` file.
    training_sentences : Callable[[], Iterable[str]]
        Called only when training is needed.
    vocab_size : int
        Upper bound on the vocabulary size.

    Returns
    -------
    Tokenizer
        The tokenizer.
    """
    trained: list[Tokenizer] = []

    def _train_and_write() -> None:
        logging.info("Training a %d-piece BPE tokenizer for %s", vocab_size, model_path)
        trained.append(train_tokenizer(training_sentences(), vocab_size))
        run_files.write_atomically(model_path, trained[0].model_proto)

    first_use._prepare_once(model_path + first_use.LOCK_SUFFIX, f"the tokenizer {model_path}",
                           lambda: os.path.exists(model_path), _train_and_write)
    if trained:
        return trained[0]
    logging.info("Reusing tokenizer %s", model_path)
    return Tokenizer.load(model_path)


def _tokenizer_for(fine_tune_from: str) -> Tokenizer | None:
    """Return the tokenizer of the run ``fine_tune_from`` names: fine-tuned weights keep their token ids.

    Raises ``MissingInputError``: when that run has no ``tokenizer.model``.
    """
    source_workdir = fine_tune_from
    if not source_workdir:
        return None
    path = os.path.join(source_workdir, run_files.TOKENIZER_FILE)
    if not os.path.exists(path):
        raise MissingInputError(f"config.fine_tune_from={source_workdir}: {path} not found; fine-tuning reuses the "
                                f"run's own tokenizer.model (name a training run's work directory).")
    logging.info("Tokenizing with the run's own vocabulary, %s", path)
    return Tokenizer.load(path)


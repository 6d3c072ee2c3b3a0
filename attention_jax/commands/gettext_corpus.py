"""``python -m attention_jax.data.gettext_corpus``: a corpus from the machine's gettext catalogs (flags, ``main``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from absl import app, flags

from attention_jax.commands import entry_points
from attention_jax.data.gettext_corpus import DEFAULT_LOCALE_DIR, build_corpus, write_corpus
from attention_jax.foundation.user_errors import exit_with_error

_LANGUAGE: Any = None  # Set by _define_flags.
_OUT: Any = None
_LOCALE_DIR: Any = None
_PROGRAM = "attention_jax.data.gettext_corpus"  # Its error lines' prefix in-process.


def main(argv: Sequence[str]) -> None:
    """Build and write the corpus; print its sizes.

    Parameters
    ----------
    argv : Sequence[str]
        What absl leaves of the command line.
    """
    if len(argv) > 1 or not _LANGUAGE.value or not _OUT.value:
        raise app.UsageError("usage: python -m attention_jax.data.gettext_corpus --language=fr --out=DIR")
    try:
        corpus = build_corpus(_LANGUAGE.value, _LOCALE_DIR.value)
    except (FileNotFoundError, ValueError) as error:
        exit_with_error(_PROGRAM, str(error))
    write_corpus(corpus, _OUT.value, _LANGUAGE.value)
    print({name: len(pairs) for name, pairs in corpus.pairs.items()}, f"from {len(corpus.packages)} packages")


def _define_flags() -> None:
    """Define the command's flags: only when it runs, so importing the module defines none."""
    global _LANGUAGE, _OUT, _LOCALE_DIR
    _LANGUAGE = flags.DEFINE_string("language", None, "Locale of the translations, e.g. fr, es, pt_BR.")
    _OUT = flags.DEFINE_string("out", None, "Directory to write train/dev/test.tsv into.")
    _LOCALE_DIR = flags.DEFINE_string("locale_dir", DEFAULT_LOCALE_DIR, "Where the locales are.")


def run() -> None:
    """Define the flags, then run :func:`main`, a mistake in one line."""
    _define_flags()
    entry_points.run_in_one_line(_PROGRAM, main)

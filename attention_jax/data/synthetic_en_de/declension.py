"""German determiner and adjective endings by gender or plural (m, f, n, pl) and case (nom, acc, dat)."""

from __future__ import annotations

from attention_jax.data.synthetic_en_de.lexicon import CASES, Determiner


def _table(rows: str) -> dict[tuple[str, str], str]:
    """Parse "m: der den dem | f: ..." into {(gender_or_pl, case): ending}; "-" is the empty ending."""
    table = {}
    for row in rows.split("|"):
        gender, endings = row.split(":")
        for case, ending in zip(CASES, endings.split()):
            table[gender.strip(), case] = "" if ending == "-" else ending
    return table


_DEFINITE_ARTICLE = _table("m: der den dem | f: die die der | n: das das dem | pl: die die den")
_DER_WORD_ENDINGS = _table("m: er en em | f: e e er | n: es es em | pl: e e en")  # dieser, jeder
_EIN_WORD_ENDINGS = _table("m: - en em | f: e e er | n: - - em | pl: e e en")  # ein, kein, mein
_WEAK_ADJECTIVE = _table("m: e en en | f: e e en | n: e e en | pl: en en en")  # after der-words
_MIXED_ADJECTIVE = _table("m: er en en | f: e e en | n: es es en | pl: en en en")  # after ein-words
_STRONG_ADJECTIVE = _table("m: er en em | f: e e er | n: es es em | pl: e e en")  # no inflected det.


def german_determiner(determiner: Determiner, gender_or_plural: str, case: str, negative: bool) -> str:
    """Return the German determiner of a noun phrase, or "" for a bare plural.

    Parameters
    ----------
    determiner : Determiner
        The English-side determiner.
    gender_or_plural : str
        "m", "f", "n" or "pl".
    case : str
        "nom", "acc" or "dat".
    negative : bool
        The phrase carries the clause negation ("kein Hund"); kinds "ein_word" and "bare" only.

    Returns
    -------
    str
        The determiner.
    """
    key = (gender_or_plural, case)
    if negative:
        return "kein" + _EIN_WORD_ENDINGS[key]
    if determiner.kind == "definite":
        return _DEFINITE_ARTICLE[key]
    if determiner.kind in ("der_word", "quantifier"):
        return determiner.german_stem + _DER_WORD_ENDINGS[key]
    if determiner.kind == "ein_word":
        return determiner.german_stem + _EIN_WORD_ENDINGS[key]
    return determiner.german_stem  # Numbers do not inflect; "" for the bare plural.


def german_adjective_ending(determiner: Determiner, gender_or_plural: str, case: str,
                            negative: bool) -> str:
    """Return the attributive adjective ending: weak after der-words, mixed after ein-words, strong otherwise.

    Parameters
    ----------
    determiner : Determiner
        The noun phrase's determiner.
    gender_or_plural, case : str
        As in `german_determiner`.
    negative : bool
        The determiner became "kein" (an ein-word).

    Returns
    -------
    str
        "e", "en", "er" or "es".
    """
    key = (gender_or_plural, case)
    if determiner.kind in ("definite", "der_word"):
        return _WEAK_ADJECTIVE[key]
    if determiner.kind == "ein_word" or negative:
        return _MIXED_ADJECTIVE[key]
    return _STRONG_ADJECTIVE[key]



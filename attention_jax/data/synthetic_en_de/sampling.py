"""Random sentences of the synthetic EN->DE task: weighted draws from the lexicon and clause frames."""

from __future__ import annotations

import bisect
import functools
import itertools
import random
import typing
from collections.abc import Iterator, Sequence

from attention_jax.data.synthetic_en_de.clauses import (
    TEMPLATES,
    Clause,
    NounPhrase,
    PrepositionalPhrase,
    Sentence,
    adjunct,
    prepositional_object,
    render_sentence,
)
from attention_jax.data.synthetic_en_de.lexicon import (
    ADJECTIVES,
    ADVERBS,
    ALL_NOUNS,
    CONCRETE,
    CONJUNCTIONS,
    COORDINATORS,
    DETERMINERS,
    MODALS,
    NAMES,
    NEGATABLE_OBJECT_DETERMINERS,
    NOUNS,
    PLACE_DETERMINERS,
    PRONOUNS,
    SPATIAL_ADJUNCTS,
    THE,
    VERBS,
    A,
    Adjective,
    Determiner,
    Noun,
    Verb,
)

SEED = 20170612  # arXiv v1 date of "Attention Is All You Need".
MAX_WORDS = 30  # Longest English sentence kept, in words (punctuation not counted).


def _cumulative(weights: tuple[float, ...]) -> tuple[float, ...]:
    """Cumulative sums of `weights`, for `_draw`."""
    return tuple(itertools.accumulate(weights))


_Item = typing.TypeVar("_Item")


def _pick(rng: random.Random, items: Sequence[_Item]) -> _Item:
    """A uniformly random element of `items` (`rng.choice` without its overhead)."""
    return items[int(rng.random() * len(items))]


def _draw(rng: random.Random, items: Sequence[_Item], cumulative_weights: tuple[float, ...]) -> _Item:
    """One of `items`, drawn with cumulative weights (`rng.choices` without its overhead)."""
    return items[bisect.bisect(cumulative_weights, rng.random() * cumulative_weights[-1])]


_COUNTS = (0, 1, 2)
_ADJECTIVE_COUNT_WEIGHTS = _cumulative((0.55, 0.33, 0.12))
_ADJUNCT_COUNT_WEIGHTS = _cumulative((0.45, 0.42, 0.13))
_KIND_WEIGHTS = {"definite": 0.36, "ein_word": 0.34, "bare": 0.08, "der_word": 0.08,
                 "quantifier": 0.04, "number": 0.10}
_LOCATION_NOUNS = tuple(noun for noun in NOUNS if noun.locations)
_DESTINATION_NOUNS = tuple(noun for noun in NOUNS if noun.destination)
_VERBS_BY_FRAME = {frame: tuple(verb for verb in VERBS if verb.frame == frame)
                   for frame in {verb.frame for verb in VERBS}}
_MAIN_FRAMES = ("intransitive", "accusative", "dative", "ditransitive", "prepositional", "copula",
                "that")
_MAIN_FRAME_WEIGHTS = _cumulative((0.22, 0.30, 0.08, 0.08, 0.08, 0.10, 0.08))
_SUBORDINATE_FRAMES = _MAIN_FRAMES[:-1]  # No "that" clause inside a subordinate clause.
_SUBORDINATE_FRAME_WEIGHTS = _MAIN_FRAME_WEIGHTS[:-1]
_PERSON = frozenset({"person"})
_ANY_NOUN = frozenset(ALL_NOUNS.split())
_MOVABLE = frozenset(CONCRETE.split())
_ADJUNCT_TAGS = {"for": _PERSON, "with": frozenset({"person", "animal"}),
                 "to": frozenset({"person", "place"}), "from": frozenset({"person", "place"})}


@functools.cache
def _nouns_with(tags: frozenset[str]) -> tuple[Noun, ...]:
    """Nouns that carry at least one of `tags`, in lexicon order."""
    return tuple(noun for noun in NOUNS if noun.tags & tags)


@functools.cache
def _adjectives_for(tags: frozenset[str]) -> tuple[tuple[Adjective, ...], ...]:
    """(all, non-color, color) adjectives that fit a noun with `tags`."""
    fitting = tuple(adjective for adjective in ADJECTIVES if adjective.tags & tags)
    return (fitting, tuple(a for a in fitting if not a.is_color), tuple(a for a in fitting if a.is_color))


@functools.cache
def _determiner_weights(determiners: tuple[Determiner, ...]) -> tuple[float, ...]:
    """Cumulative weights: `_KIND_WEIGHTS` per kind, shared by its determiners ("the", "a": 4x)."""
    def weight(determiner: Determiner) -> float:
        return 4.0 if determiner is THE or determiner is A else 1.0

    kind_totals: dict[str, float] = {}
    for determiner in determiners:
        kind_totals[determiner.kind] = kind_totals.get(determiner.kind, 0.0) + weight(determiner)
    return _cumulative(tuple(_KIND_WEIGHTS[d.kind] * weight(d) / kind_totals[d.kind]
                             for d in determiners))


def _sample_adjectives(rng: random.Random, noun: Noun, max_adjectives: int) -> tuple[Adjective, ...]:
    """0-2 adjectives that fit the noun: at most one non-color followed by at most one color."""
    count = min(max_adjectives, _draw(rng, _COUNTS, _ADJECTIVE_COUNT_WEIGHTS))
    fitting, plain, colors = _adjectives_for(noun.tags)
    if count == 2 and colors:
        return (_pick(rng, plain), _pick(rng, colors))
    if count >= 1:
        return (_pick(rng, fitting),)
    return ()


def _sample_noun_phrase(rng: random.Random, tags: frozenset[str], *, max_adjectives: int = 2,
                        determiners: tuple[Determiner, ...] = DETERMINERS,
                        nouns: tuple[Noun, ...] | None = None, name_rate: float = 0.08) -> NounPhrase:
    """A noun phrase headed by one of `nouns` (default: nouns with one of `tags`) or a name."""
    if "person" in tags and rng.random() < name_rate:
        return NounPhrase(name=_pick(rng, NAMES))
    noun = _pick(rng, nouns or _nouns_with(tags))
    determiner = _draw(rng, determiners, _determiner_weights(determiners))
    numbers = determiner.numbers
    plural = numbers[0] if len(numbers) == 1 else rng.random() < 0.3
    return NounPhrase(noun, determiner, _sample_adjectives(rng, noun, max_adjectives), plural)


def _sample_subject(rng: random.Random, tags: frozenset[str], max_adjectives: int) -> NounPhrase:
    """A subject: a pronoun (for persons, 15%), a name or a noun phrase."""
    if "person" in tags and rng.random() < 0.15:
        return NounPhrase(pronoun=_pick(rng, PRONOUNS))
    return _sample_noun_phrase(rng, tags, max_adjectives=max_adjectives, name_rate=0.12)


def _sample_location(rng: random.Random, max_adjectives: int) -> PrepositionalPhrase:
    """A location ("under the old tree"): a noun that has location prepositions, and one of them."""
    noun = _pick(rng, _LOCATION_NOUNS)
    preposition = _pick(rng, noun.locations)
    noun_phrase = _sample_noun_phrase(rng, noun.tags, max_adjectives=max_adjectives,
                                      determiners=PLACE_DETERMINERS, nouns=(noun,))
    return adjunct("loc", noun_phrase, preposition)


def _sample_adjunct(rng: random.Random, kind: str, max_adjectives: int) -> PrepositionalPhrase:
    """An adjunct: a location, a destination/origin (to/from), a person (for), a companion (with)."""
    if kind == "loc":
        return _sample_location(rng, max_adjectives)
    if kind in ("to", "from"):
        noun_phrase = _sample_noun_phrase(rng, _ADJUNCT_TAGS[kind], max_adjectives=max_adjectives,
                                          determiners=PLACE_DETERMINERS, nouns=_DESTINATION_NOUNS)
    else:
        noun_phrase = _sample_noun_phrase(rng, _ADJUNCT_TAGS[kind], max_adjectives=max_adjectives)
    return adjunct(kind, noun_phrase)


def _sample_adjuncts(rng: random.Random, verb: Verb, negated: bool, max_adjuncts: int,
                     max_adjectives: int) -> tuple[PrepositionalPhrase, ...]:
    """0-2 adjuncts the verb allows, at most one spatial; a negated clause keeps only directional ones.

    With free adjuncts the position of "nicht" depends on focus, which a one-to-one mapping cannot express.
    """
    allowed = [kind for kind in verb.adjuncts if not negated or kind in ("to", "from")]
    count = min(max_adjuncts, len(allowed), _draw(rng, _COUNTS, _ADJUNCT_COUNT_WEIGHTS))
    kinds: list[str] = []
    for kind in rng.sample(allowed, count):
        spatial_taken = any(taken in SPATIAL_ADJUNCTS for taken in kinds)
        if not (kind in SPATIAL_ADJUNCTS and spatial_taken):
            kinds.append(kind)
    return tuple(_sample_adjunct(rng, kind, max_adjectives) for kind in kinds)


def _sample_objects(rng: random.Random, verb: Verb, negated: bool,
                    max_adjectives: int) -> tuple[tuple[tuple[str, NounPhrase], ...],
                                                  PrepositionalPhrase | None]:
    """Nominal objects and prepositional object required by the verb's frame."""
    determiners = NEGATABLE_OBJECT_DETERMINERS if negated else DETERMINERS

    def noun_phrase(tags: frozenset[str]) -> NounPhrase:
        return _sample_noun_phrase(rng, tags, max_adjectives=max_adjectives, determiners=determiners)

    if verb.frame == "accusative":
        return (("acc", noun_phrase(verb.object_tags)),), None
    if verb.frame == "dative":
        return (("dat", noun_phrase(verb.object_tags)),), None
    if verb.frame == "ditransitive":
        recipient = noun_phrase(_PERSON)
        return (("dat", recipient), ("acc", noun_phrase(verb.object_tags))), None
    if verb.frame == "prepositional":
        return (), prepositional_object(verb, noun_phrase(verb.object_tags))
    return (), None


def _sample_copula_clause(rng: random.Random, negated: bool, max_adjectives: int) -> Clause:
    """A copula clause: "The car is red.", "I am not in the garden."."""
    if rng.random() < 0.35:  # A location; places are not located in other places.
        subject = _sample_subject(rng, _MOVABLE, max_adjectives)
        return Clause(subject, None, predicate=_sample_location(rng, max_adjectives), negated=negated)
    subject = _sample_subject(rng, _ANY_NOUN, max_adjectives)
    predicates = tuple(a for a in _adjectives_for(subject.tags)[0] if a not in subject.adjectives)
    return Clause(subject, None, predicate=_pick(rng, predicates), negated=negated)


def _sample_clause(rng: random.Random, *, subordinate: bool = False, max_adjuncts: int = 2,
                  max_adjectives: int = 2) -> Clause:
    """Draw one clause (a subordinate one takes no "that" complement); a function of the rng state."""
    if subordinate:
        frame = _draw(rng, _SUBORDINATE_FRAMES, _SUBORDINATE_FRAME_WEIGHTS)
    else:
        frame = _draw(rng, _MAIN_FRAMES, _MAIN_FRAME_WEIGHTS)
    negated = rng.random() < 0.2
    if frame == "copula":
        return _sample_copula_clause(rng, negated, max_adjectives)
    verb = _pick(rng, _VERBS_BY_FRAME[frame])
    subject = _sample_subject(rng, verb.subject_tags, max_adjectives)
    modal = None
    if frame != "that" and rng.random() < 0.15:
        modal = _pick(rng, MODALS[:1] + MODALS[2:] if negated else MODALS)  # No negated "must".
    objects, prepositional_object = _sample_objects(rng, verb, negated, max_adjectives)
    adjuncts = _sample_adjuncts(rng, verb, negated, max_adjuncts, max_adjectives)
    complement = None
    if frame == "that":
        complement = _sample_clause(rng, subordinate=True, max_adjuncts=1, max_adjectives=1)
    return Clause(subject, verb, objects, prepositional_object, adjuncts, None, modal, negated,
                  complement)


_TEMPLATE_WEIGHTS = _cumulative((0.38, 0.14, 0.18, 0.12, 0.18))


def _sample_sentence(rng: random.Random) -> Sentence:
    """Draw one sentence: a template, its clauses (simpler in two-clause templates) and its connective."""
    template = _draw(rng, TEMPLATES, _TEMPLATE_WEIGHTS)
    if template == "simple":
        return Sentence(template, _sample_clause(rng))
    if template == "adverb":
        return Sentence(template, _sample_clause(rng), None, _pick(rng, ADVERBS))
    main = _sample_clause(rng, subordinate=True, max_adjuncts=2, max_adjectives=1)
    other = _sample_clause(rng, subordinate=True, max_adjuncts=1, max_adjectives=2)
    connective = _pick(rng, COORDINATORS if template == "coordinated" else CONJUNCTIONS)
    return Sentence(template, main, other, connective)


def _sample_pair(rng: random.Random) -> tuple[str, str]:
    """Draw one (English, German) sentence pair of at most `MAX_WORDS` English words."""
    while True:
        english, german = render_sentence(_sample_sentence(rng))
        if len(english.split()) <= MAX_WORDS:
            return english, german


def iter_pairs(seed: int = SEED) -> Iterator[tuple[str, str]]:
    """Return an endless stream of (English, German) pairs, duplicates included.

    Parameters
    ----------
    seed : int
        Seed of the stream's `random.Random`.

    Returns
    -------
    Iterator[tuple[str, str]]
        The pairs.
    """
    rng = random.Random(seed)
    while True:
        yield _sample_pair(rng)



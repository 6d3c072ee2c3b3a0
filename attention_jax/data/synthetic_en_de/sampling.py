"""Random sentences of the synthetic EN->DE task: weighted draws from the lexicon, rendered in both languages.

German determiner and adjective endings go by gender or plural (m, f, n, pl) and case (nom, acc, dat).
"""

from __future__ import annotations

import bisect
import functools
import itertools
import random
import typing
from collections.abc import Iterator, Sequence

from attention_jax.data.synthetic_en_de.lexicon import (
    ADJECTIVES,
    ADJUNCT_PREPOSITIONS,
    ADVERBS,
    ALL_NOUNS,
    BARE_PLURAL,
    CASES,
    CONCRETE,
    CONJUNCTIONS,
    CONTRACTIONS,
    COORDINATORS,
    DETERMINERS,
    ENGLISH_ADJUNCT_ORDER,
    ENGLISH_BE,
    GERMAN_ADJUNCT_ORDER,
    GERMAN_BE,
    LOCATION_PREPOSITIONS,
    MODALS,
    NAMES,
    NEGATABLE_OBJECT_DETERMINERS,
    NOUNS,
    PERSON_INDEX,
    PLACE_DETERMINERS,
    PRONOUNS,
    SPATIAL_ADJUNCTS,
    THE,
    VERBS,
    A,
    Adjective,
    Determiner,
    Modal,
    Noun,
    Pronoun,
    Verb,
)


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


def _german_determiner(determiner: Determiner, gender_or_plural: str, case: str, negative: bool) -> str:
    """Return the German determiner of a noun phrase ("" for a bare plural); ``negative``: "kein ..."."""
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


def _german_adjective_ending(determiner: Determiner, gender_or_plural: str, case: str, negative: bool) -> str:
    """Return the attributive adjective ending: weak after der-words, mixed after ein-words, strong otherwise."""
    key = (gender_or_plural, case)
    if determiner.kind in ("definite", "der_word"):
        return _WEAK_ADJECTIVE[key]
    if determiner.kind == "ein_word" or negative:
        return _MIXED_ADJECTIVE[key]
    return _STRONG_ADJECTIVE[key]


class _NounPhrase(typing.NamedTuple):
    """A noun phrase: a common noun with determiner and adjectives, a name, or a pronoun."""

    noun: Noun | None = None  # Head noun; None for a name or pronoun.
    determiner: Determiner = THE  # BARE_PLURAL for none.
    adjectives: tuple[Adjective, ...] = ()  # Attributive, in order.
    plural: bool = False
    name: str = ""  # From NAMES, instead of a noun.
    pronoun: Pronoun | None = None  # A subject pronoun instead of a noun.

    @property
    def person(self) -> str:
        """The verb agreement: "1sg", "3sg" or "pl"."""
        if self.pronoun is not None:
            return self.pronoun.person
        return "pl" if self.plural else "3sg"

    @property
    def _takes_kein(self) -> bool:
        """Whether clause negation turns this (object) phrase into a kein-phrase."""
        return self.noun is not None and self.determiner in (A, BARE_PLURAL)

    @property
    def tags(self) -> frozenset[str]:
        """The head noun's semantic classes (names and pronouns are persons)."""
        return self.noun.tags if self.noun is not None else frozenset({"person"})

    def english(self) -> list[str]:
        """The English words: "a big red car", "three dogs", "Anna", "I"."""
        if self.pronoun is not None:
            return [self.pronoun.english]
        if self.name:
            return [self.name]
        assert self.noun is not None  # A phrase is a pronoun, a name or a noun.
        modifiers = [adjective.english for adjective in self.adjectives]
        noun = self.noun.english_plural if self.plural else self.noun.english
        determiner = self.determiner.english_plural if self.plural else self.determiner.english
        if determiner == "a" and (modifiers or [noun])[0][0] in "aeiou":
            determiner = "an"
        return [word for word in (determiner, *modifiers, noun) if word]

    def german(self, case: str, negative: bool = False) -> list[str]:
        """The German words in `case` ("nom", "acc" or "dat"); `negative` uses kein- (only when `_takes_kein`)."""
        if self.pronoun is not None:
            return [self.pronoun.german]
        if self.name:
            return [self.name]
        assert self.noun is not None  # A phrase is a pronoun, a name or a noun.
        gender = "pl" if self.plural else self.noun.gender
        determiner = _german_determiner(self.determiner, gender, case, negative)
        ending = _german_adjective_ending(self.determiner, gender, case, negative)
        modifiers = [adjective.german_stem + ending for adjective in self.adjectives]
        words = [determiner, *modifiers, self.noun.german_form(case, self.plural)]
        return [word for word in words if word]


class _PrepositionalPhrase(typing.NamedTuple):
    """A prepositional phrase; build it with `_adjunct` or `_prepositional_object`."""

    kind: str  # "loc", "with", "for", "to", "from", or "object" (of a prepositional verb).
    english_preposition: str  # "next to"
    german_preposition: str  # "neben"
    case: str  # German case governed here: "acc" or "dat".
    noun_phrase: _NounPhrase

    def english(self) -> list[str]:
        """The English words: "in front of the house"."""
        return [*self.english_preposition.split(), *self.noun_phrase.english()]

    def german(self) -> list[str]:
        """The German words, contracted: "vor dem Haus", "im Garten", "zur Schule"."""
        words = self.noun_phrase.german(self.case)
        contraction = CONTRACTIONS.get((self.german_preposition, words[0]))
        if contraction and self.noun_phrase.determiner is THE and self.noun_phrase.noun is not None:
            return [contraction, *words[1:]]
        return [self.german_preposition, *words]


def _adjunct(kind: str, noun_phrase: _NounPhrase, location: str = "") -> _PrepositionalPhrase:
    """An adjunct of `kind` ("loc", "with", "for", "to", "from"; "loc" takes `location`, dative in German)."""
    if kind == "loc":
        return _PrepositionalPhrase("loc", location, LOCATION_PREPOSITIONS[location], "dat", noun_phrase)
    english, german, case = ADJUNCT_PREPOSITIONS[kind]
    return _PrepositionalPhrase(kind, english, german, case, noun_phrase)


def _prepositional_object(verb: Verb, noun_phrase: _NounPhrase) -> _PrepositionalPhrase:
    """The object of a "prepositional" frame verb ("waits for the bus" -> "wartet auf den Bus")."""
    return _PrepositionalPhrase("object", verb.english.split()[-1], verb.german_preposition,
                               verb.object_case, noun_phrase)


class _Clause(typing.NamedTuple):
    """One clause before word order is decided."""

    subject: _NounPhrase
    verb: Verb | None  # None for the copula "to be".
    objects: tuple[tuple[str, _NounPhrase], ...] = ()  # (case, phrase), both languages' order ("dem Kind einen Ball").
    prepositional_object: _PrepositionalPhrase | None = None  # "waits for the bus" -> "wartet auf den Bus".
    adjuncts: tuple[_PrepositionalPhrase, ...] = ()  # Any order; each language orders them by kind.
    predicate: Adjective | _PrepositionalPhrase | None = None  # Of the copula ("is tired", "is in the garden").
    modal: Modal | None = None
    negated: bool = False
    complement: "_Clause | None" = None  # The "dass" clause of a "that"-frame verb.


def _english_verb_group(clause: _Clause) -> list[str]:
    """English finite verb with do-support, modal and negation: "does not want to call"."""
    person = PERSON_INDEX[clause.subject.person]
    verb = clause.verb
    if verb is None:
        return [ENGLISH_BE[person], *(["not"] if clause.negated else [])]
    if clause.modal is not None:
        modal = clause.modal.english_negated if clause.negated else clause.modal.english
        if not modal:
            raise ValueError(f"Modal {clause.modal.english[0]!r} cannot be negated here "
                             "(German would need a different modal); drop the negation.")
        return [*modal[person].split(), *verb.english.split()]
    if clause.negated:
        return ["does" if person == 1 else "do", "not", *verb.english.split()]
    return (verb.english_3sg if person == 1 else verb.english).split()


def _english_clause(clause: _Clause) -> list[str]:
    """English words of a clause, subject-verb-object, uncapitalized, no final punctuation."""
    words = [*clause.subject.english(), *_english_verb_group(clause)]
    for _, noun_phrase in clause.objects:
        words += noun_phrase.english()
    if clause.prepositional_object is not None:
        words += clause.prepositional_object.noun_phrase.english()  # Preposition is in the verb.
    if isinstance(clause.predicate, Adjective):
        words.append(clause.predicate.english)
    elif clause.predicate is not None:
        words += clause.predicate.english()
    for phrase in sorted(clause.adjuncts, key=lambda pp: ENGLISH_ADJUNCT_ORDER.index(pp.kind)):
        words += phrase.english()
    if clause.complement is not None:
        words += ["that", *_english_clause(clause.complement)]
    return words


def _german_middle_field(clause: _Clause) -> list[str]:
    """Objects, negation, prepositional object, predicate and adjuncts, in German order."""
    words, kein_used = [], False
    for index, (case, noun_phrase) in enumerate(clause.objects):
        negative = clause.negated and index == len(clause.objects) - 1 and noun_phrase._takes_kein
        kein_used = kein_used or negative
        words += noun_phrase.german(case, negative)
    if clause.negated and not kein_used:
        # Sentence negation: "nicht" follows the nominal objects and precedes prepositional objects,
        # directional phrases and predicates ("sieht den Hund nicht", "geht nicht zur Schule").
        words.append("nicht")
    if clause.prepositional_object is not None:
        words += clause.prepositional_object.german()
    if isinstance(clause.predicate, Adjective):
        words.append(clause.predicate.german_predicative)
    elif clause.predicate is not None:
        words += clause.predicate.german()
    for phrase in sorted(clause.adjuncts, key=lambda pp: GERMAN_ADJUNCT_ORDER.index(pp.kind)):
        words += phrase.german()
    return words


def _german_verb_parts(clause: _Clause) -> tuple[str, list[str], list[str]]:
    """(finite verb of a main clause, main-clause right bracket, subordinate-clause verb cluster)."""
    person = PERSON_INDEX[clause.subject.person]
    verb = clause.verb
    if verb is None:
        return GERMAN_BE[person], [], [GERMAN_BE[person]]
    if clause.modal is not None:
        finite = clause.modal.german[person]
        return finite, [verb.german_infinitive], [verb.german_infinitive, finite]
    finite = verb.german_present[person]
    return finite, [verb.particle] if verb.particle else [], [verb.particle + finite]


def _german_main_clause(clause: _Clause, prefield: list[str] | None = None) -> list[str]:
    """German main clause, verb second; ``prefield`` (a fronted adverb or clause) puts the subject after the verb."""
    finite, right_bracket, _ = _german_verb_parts(clause)
    subject = clause.subject.german("nom")
    if prefield:
        words = [*prefield, finite, *subject]
    else:
        words = [*subject, finite]
    words += [*_german_middle_field(clause), *right_bracket]
    if clause.complement is not None:
        words += [",", "dass", *_german_subordinate_clause(clause.complement)]
    return words


def _german_subordinate_clause(clause: _Clause) -> list[str]:
    """German subordinate clause body, verb last, without the conjunction."""
    _, _, verb_cluster = _german_verb_parts(clause)
    return [*clause.subject.german("nom"), *_german_middle_field(clause), *verb_cluster]


def _join_words(words: list[str]) -> str:
    """Join words, attach commas, capitalize the first word, end with a period."""
    text = " ".join(words).replace(" ,", ",")
    return text[0].upper() + text[1:] + "."


# Sentence shapes: one clause, a fronted adverb, main + subordinate (either order), two coordinated.
TEMPLATES = ("simple", "adverb", "main_subordinate", "subordinate_main", "coordinated")


class _Sentence(typing.NamedTuple):
    """A sentence: a template, its clauses and the word that connects them.

    Templates: "simple", "adverb" ("Heute spielt ..."), "main_subordinate" ("..., weil ..."), "subordinate_main"
    ("Weil ..., spielt ...") or "coordinated" ("... und ...", "..., aber ...").
    """

    template: str  # "simple", "adverb", "main_subordinate", "subordinate_main" or "coordinated" (see the class).
    main: _Clause  # The first one for "coordinated".
    other: _Clause | None = None  # The subordinate clause, or the second main clause.
    connective: tuple[str, str] = ("", "")  # (English, German), from ADVERBS, CONJUNCTIONS or COORDINATORS.


def _sentence_words(sentence: _Sentence) -> tuple[list[str], list[str]]:
    """English and German words of a sentence, following its template."""
    english_connective, german_connective = (words.split() for words in sentence.connective)
    main, other = sentence.main, sentence.other
    if sentence.template == "simple":
        return _english_clause(main), _german_main_clause(main)
    if sentence.template == "adverb":
        return [*english_connective, *_english_clause(main)], _german_main_clause(main, german_connective)
    assert other is not None  # The other templates join two clauses.
    if sentence.template == "coordinated":
        return ([*_english_clause(main), *english_connective, *_english_clause(other)],
                [*_german_main_clause(main), *german_connective, *_german_main_clause(other)])
    german_subordinate = [*german_connective, *_german_subordinate_clause(other)]
    if sentence.template == "main_subordinate":
        return ([*_english_clause(main), *english_connective, *_english_clause(other)],
                [*_german_main_clause(main), ",", *german_subordinate])
    if sentence.template == "subordinate_main":
        return ([*english_connective, *_english_clause(other), ",", *_english_clause(main)],
                _german_main_clause(main, [*german_subordinate, ","]))
    raise ValueError(f"Unknown sentence template {sentence.template!r}; choose from {TEMPLATES}.")


def _render_sentence(sentence: _Sentence) -> tuple[str, str]:
    """The English and German text of a sentence, capitalized, commas attached, ending in "."."""
    english, german = _sentence_words(sentence)
    return _join_words(english), _join_words(german)


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
                        nouns: tuple[Noun, ...] | None = None, name_rate: float = 0.08) -> _NounPhrase:
    """A noun phrase headed by one of `nouns` (default: nouns with one of `tags`) or a name."""
    if "person" in tags and rng.random() < name_rate:
        return _NounPhrase(name=_pick(rng, NAMES))
    noun = _pick(rng, nouns or _nouns_with(tags))
    determiner = _draw(rng, determiners, _determiner_weights(determiners))
    numbers = determiner.numbers
    plural = numbers[0] if len(numbers) == 1 else rng.random() < 0.3
    return _NounPhrase(noun, determiner, _sample_adjectives(rng, noun, max_adjectives), plural)


def _sample_subject(rng: random.Random, tags: frozenset[str], max_adjectives: int) -> _NounPhrase:
    """A subject: a pronoun (for persons, 15%), a name or a noun phrase."""
    if "person" in tags and rng.random() < 0.15:
        return _NounPhrase(pronoun=_pick(rng, PRONOUNS))
    return _sample_noun_phrase(rng, tags, max_adjectives=max_adjectives, name_rate=0.12)


def _sample_location(rng: random.Random, max_adjectives: int) -> _PrepositionalPhrase:
    """A location ("under the old tree"): a noun that has location prepositions, and one of them."""
    noun = _pick(rng, _LOCATION_NOUNS)
    preposition = _pick(rng, noun.locations)
    noun_phrase = _sample_noun_phrase(rng, noun.tags, max_adjectives=max_adjectives,
                                      determiners=PLACE_DETERMINERS, nouns=(noun,))
    return _adjunct("loc", noun_phrase, preposition)


def _sample_adjunct(rng: random.Random, kind: str, max_adjectives: int) -> _PrepositionalPhrase:
    """An adjunct: a location, a destination/origin (to/from), a person (for), a companion (with)."""
    if kind == "loc":
        return _sample_location(rng, max_adjectives)
    if kind in ("to", "from"):
        noun_phrase = _sample_noun_phrase(rng, _ADJUNCT_TAGS[kind], max_adjectives=max_adjectives,
                                          determiners=PLACE_DETERMINERS, nouns=_DESTINATION_NOUNS)
    else:
        noun_phrase = _sample_noun_phrase(rng, _ADJUNCT_TAGS[kind], max_adjectives=max_adjectives)
    return _adjunct(kind, noun_phrase)


def _sample_adjuncts(rng: random.Random, verb: Verb, negated: bool, max_adjuncts: int,
                     max_adjectives: int) -> tuple[_PrepositionalPhrase, ...]:
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
                    max_adjectives: int) -> tuple[tuple[tuple[str, _NounPhrase], ...],
                                                  _PrepositionalPhrase | None]:
    """Nominal objects and prepositional object required by the verb's frame."""
    determiners = NEGATABLE_OBJECT_DETERMINERS if negated else DETERMINERS

    def noun_phrase(tags: frozenset[str]) -> _NounPhrase:
        return _sample_noun_phrase(rng, tags, max_adjectives=max_adjectives, determiners=determiners)

    if verb.frame == "accusative":
        return (("acc", noun_phrase(verb.object_tags)),), None
    if verb.frame == "dative":
        return (("dat", noun_phrase(verb.object_tags)),), None
    if verb.frame == "ditransitive":
        recipient = noun_phrase(_PERSON)
        return (("dat", recipient), ("acc", noun_phrase(verb.object_tags))), None
    if verb.frame == "prepositional":
        return (), _prepositional_object(verb, noun_phrase(verb.object_tags))
    return (), None


def _sample_copula_clause(rng: random.Random, negated: bool, max_adjectives: int) -> _Clause:
    """A copula clause: "The car is red.", "I am not in the garden."."""
    if rng.random() < 0.35:  # A location; places are not located in other places.
        subject = _sample_subject(rng, _MOVABLE, max_adjectives)
        return _Clause(subject, None, predicate=_sample_location(rng, max_adjectives), negated=negated)
    subject = _sample_subject(rng, _ANY_NOUN, max_adjectives)
    predicates = tuple(a for a in _adjectives_for(subject.tags)[0] if a not in subject.adjectives)
    return _Clause(subject, None, predicate=_pick(rng, predicates), negated=negated)


def _sample_clause(rng: random.Random, *, subordinate: bool = False, max_adjuncts: int = 2,
                  max_adjectives: int = 2) -> _Clause:
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
    return _Clause(subject, verb, objects, prepositional_object, adjuncts, None, modal, negated,
                  complement)


_TEMPLATE_WEIGHTS = _cumulative((0.38, 0.14, 0.18, 0.12, 0.18))


def _sample_sentence(rng: random.Random) -> _Sentence:
    """Draw one sentence: a template, its clauses (simpler in two-clause templates) and its connective."""
    template = _draw(rng, TEMPLATES, _TEMPLATE_WEIGHTS)
    if template == "simple":
        return _Sentence(template, _sample_clause(rng))
    if template == "adverb":
        return _Sentence(template, _sample_clause(rng), None, _pick(rng, ADVERBS))
    main = _sample_clause(rng, subordinate=True, max_adjuncts=2, max_adjectives=1)
    other = _sample_clause(rng, subordinate=True, max_adjuncts=1, max_adjectives=2)
    connective = _pick(rng, COORDINATORS if template == "coordinated" else CONJUNCTIONS)
    return _Sentence(template, main, other, connective)


def _sample_pair(rng: random.Random) -> tuple[str, str]:
    """Draw one (English, German) sentence pair of at most `MAX_WORDS` English words."""
    while True:
        english, german = _render_sentence(_sample_sentence(rng))
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



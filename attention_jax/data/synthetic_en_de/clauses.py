"""Phrases, clauses and sentences of the synthetic EN->DE task, in English and in German.

German determiner and adjective endings go by gender or plural (m, f, n, pl) and case (nom, acc, dat).
"""

from __future__ import annotations

import typing

from attention_jax.data.synthetic_en_de.lexicon import (
    ADJUNCT_PREPOSITIONS,
    BARE_PLURAL,
    CASES,
    CONTRACTIONS,
    ENGLISH_ADJUNCT_ORDER,
    ENGLISH_BE,
    GERMAN_ADJUNCT_ORDER,
    GERMAN_BE,
    LOCATION_PREPOSITIONS,
    PERSON_INDEX,
    THE,
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


class NounPhrase(typing.NamedTuple):
    """A noun phrase: a common noun with determiner and adjectives, a name, or a pronoun."""

    noun: Noun | None = None  # Head noun; None for a name or pronoun.
    determiner: Determiner = THE  # BARE_PLURAL for none.
    adjectives: tuple[Adjective, ...] = ()  # Attributive, in order.
    plural: bool = False
    name: str = ""  # From NAMES, instead of a noun.
    pronoun: Pronoun | None = None  # A subject pronoun instead of a noun.

    @property
    def person(self) -> str:
        """Return the verb agreement: "1sg", "3sg" or "pl".

        Returns
        -------
        str
            The person.
        """
        if self.pronoun is not None:
            return self.pronoun.person
        return "pl" if self.plural else "3sg"

    @property
    def _takes_kein(self) -> bool:
        """Whether clause negation turns this (object) phrase into a kein-phrase."""
        return self.noun is not None and self.determiner in (A, BARE_PLURAL)

    @property
    def tags(self) -> frozenset[str]:
        """Return the head noun's semantic classes (names and pronouns are persons).

        Returns
        -------
        frozenset[str]
            The tags.
        """
        return self.noun.tags if self.noun is not None else frozenset({"person"})

    def english(self) -> list[str]:
        """Return the English words: "a big red car", "three dogs", "Anna", "I".

        Returns
        -------
        list[str]
            The words.
        """
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
        """Return the German words of the phrase.

        Parameters
        ----------
        case : str
            "nom", "acc" or "dat".
        negative : bool
            Use kein- (only when ``_takes_kein``).

        Returns
        -------
        list[str]
            The words.
        """
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


class PrepositionalPhrase(typing.NamedTuple):
    """A prepositional phrase; build it with `adjunct` or `prepositional_object`."""

    kind: str  # "loc", "with", "for", "to", "from", or "object" (of a prepositional verb).
    english_preposition: str  # "next to"
    german_preposition: str  # "neben"
    case: str  # German case governed here: "acc" or "dat".
    noun_phrase: NounPhrase

    def english(self) -> list[str]:
        """Return the English words: "in front of the house".

        Returns
        -------
        list[str]
            The words.
        """
        return [*self.english_preposition.split(), *self.noun_phrase.english()]

    def german(self) -> list[str]:
        """Return the German words, contracted: "vor dem Haus", "im Garten", "zur Schule".

        Returns
        -------
        list[str]
            The words.
        """
        words = self.noun_phrase.german(self.case)
        contraction = CONTRACTIONS.get((self.german_preposition, words[0]))
        if contraction and self.noun_phrase.determiner is THE and self.noun_phrase.noun is not None:
            return [contraction, *words[1:]]
        return [self.german_preposition, *words]


def adjunct(kind: str, noun_phrase: NounPhrase, location: str = "") -> PrepositionalPhrase:
    """Build an adjunct prepositional phrase, with its German preposition and case.

    Parameters
    ----------
    kind : str
        "loc", "with", "for", "to" or "from".
    noun_phrase : NounPhrase
        The preposition's object.
    location : str
        For "loc": "in", "on", "under", "behind", "next to" or "in front of" (German: dative).

    Returns
    -------
    PrepositionalPhrase
        The phrase.
    """
    if kind == "loc":
        return PrepositionalPhrase("loc", location, LOCATION_PREPOSITIONS[location], "dat", noun_phrase)
    english, german, case = ADJUNCT_PREPOSITIONS[kind]
    return PrepositionalPhrase(kind, english, german, case, noun_phrase)


def prepositional_object(verb: Verb, noun_phrase: NounPhrase) -> PrepositionalPhrase:
    """Return the object of a "prepositional" frame verb ("waits for the bus" -> "wartet auf den Bus").

    Parameters
    ----------
    verb : Verb
        Frame "prepositional".
    noun_phrase : NounPhrase
        The object.

    Returns
    -------
    PrepositionalPhrase
        Its English preposition is part of ``verb.english``.
    """
    return PrepositionalPhrase("object", verb.english.split()[-1], verb.german_preposition,
                               verb.object_case, noun_phrase)


class Clause(typing.NamedTuple):
    """One clause before word order is decided."""

    subject: NounPhrase
    verb: Verb | None  # None for the copula "to be".
    objects: tuple[tuple[str, NounPhrase], ...] = ()  # (case, phrase), both languages' order ("dem Kind einen Ball").
    prepositional_object: PrepositionalPhrase | None = None  # "waits for the bus" -> "wartet auf den Bus".
    adjuncts: tuple[PrepositionalPhrase, ...] = ()  # Any order; each language orders them by kind.
    predicate: Adjective | PrepositionalPhrase | None = None  # Of the copula ("is tired", "is in the garden").
    modal: Modal | None = None
    negated: bool = False
    complement: "Clause | None" = None  # The "dass" clause of a "that"-frame verb.


def _english_verb_group(clause: Clause) -> list[str]:
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


def _english_clause(clause: Clause) -> list[str]:
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


def _german_middle_field(clause: Clause) -> list[str]:
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


def _german_verb_parts(clause: Clause) -> tuple[str, list[str], list[str]]:
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


def _german_main_clause(clause: Clause, prefield: list[str] | None = None) -> list[str]:
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


def _german_subordinate_clause(clause: Clause) -> list[str]:
    """German subordinate clause body, verb last, without the conjunction."""
    _, _, verb_cluster = _german_verb_parts(clause)
    return [*clause.subject.german("nom"), *_german_middle_field(clause), *verb_cluster]


def _join_words(words: list[str]) -> str:
    """Join words, attach commas, capitalize the first word, end with a period."""
    text = " ".join(words).replace(" ,", ",")
    return text[0].upper() + text[1:] + "."


# Sentence shapes: one clause, a fronted adverb, main + subordinate (either order), two coordinated.
TEMPLATES = ("simple", "adverb", "main_subordinate", "subordinate_main", "coordinated")


class Sentence(typing.NamedTuple):
    """A sentence: a template, its clauses and the word that connects them.

    Templates: "simple", "adverb" ("Heute spielt ..."), "main_subordinate" ("..., weil ..."), "subordinate_main"
    ("Weil ..., spielt ...") or "coordinated" ("... und ...", "..., aber ...").
    """

    template: str  # "simple", "adverb", "main_subordinate", "subordinate_main" or "coordinated" (see the class).
    main: Clause  # The first one for "coordinated".
    other: Clause | None = None  # The subordinate clause, or the second main clause.
    connective: tuple[str, str] = ("", "")  # (English, German), from ADVERBS, CONJUNCTIONS or COORDINATORS.


def _sentence_words(sentence: Sentence) -> tuple[list[str], list[str]]:
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


def render_sentence(sentence: Sentence) -> tuple[str, str]:
    """Return the English and German text of a sentence, capitalized, commas attached, ending in ".".

    Parameters
    ----------
    sentence : Sentence
        The sentence.

    Returns
    -------
    tuple[str, str]
        English and German.
    """
    english, german = _sentence_words(sentence)
    return _join_words(english), _join_words(german)



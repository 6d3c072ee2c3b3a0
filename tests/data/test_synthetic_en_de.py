"""Tests of the synthetic English->German task: hand-checked German, splits, TFDS round trip."""

import collections
import hashlib
import itertools
import os
import statistics
import subprocess
import sys

import pytest

import attention_jax.data.synthetic_en_de as synthetic
from attention_jax.data.synthetic_en_de import lexicon, sampling
from attention_jax.data.synthetic_en_de.sampling import _Clause as Clause
from attention_jax.data.synthetic_en_de.sampling import _NounPhrase as NounPhrase
from attention_jax.data.synthetic_en_de.sampling import _Sentence as Sentence

# ---------------------------------------------------------------------------------------------------
# Helpers that build sentences from readable English descriptions, using the module's lexicon.
# ---------------------------------------------------------------------------------------------------


def _find(items: tuple, **fields: str):
    """The one lexicon entry whose attributes equal `fields`."""
    found = [item for item in items if all(getattr(item, k) == v for k, v in fields.items())]
    assert len(found) == 1, (fields, found)
    return found[0]


def phrase(text: str) -> NounPhrase:
    """NounPhrase from "the old man", "five small dogs", "red apples", "Anna" or "she"."""
    words = text.split()
    if text in lexicon.NAMES:
        return NounPhrase(name=text)
    pronouns = [pronoun for pronoun in lexicon.PRONOUNS if pronoun.english == text]
    if pronouns:
        return NounPhrase(pronoun=pronouns[0])
    head = words[-1]
    noun = next(n for n in lexicon.NOUNS if head in (n.english, n.english_plural))
    plural = head == noun.english_plural
    first = "a" if words[0] == "an" else words[0]  # The module picks "a"/"an" itself.
    determiners = [d for d in lexicon.DETERMINERS
                   if first == (d.english_plural if plural else d.english) and first]
    determiner = determiners[0] if determiners else lexicon.BARE_PLURAL
    adjective_words = words[1 if determiners else 0:-1]
    adjectives = tuple(_find(lexicon.ADJECTIVES, english=word) for word in adjective_words)
    return NounPhrase(noun, determiner, adjectives, plural)


def verb(english: str, german_infinitive: str | None = None) -> lexicon.Verb:
    """Verb by English base form (and German infinitive where the English is ambiguous: "eat")."""
    fields = {"english": english}
    if german_infinitive:
        fields["german_infinitive"] = german_infinitive
    return _find(lexicon.VERBS, **fields)


def modal(english_3sg: str) -> lexicon.Modal:
    """Modal by its English third-person form: "can", "must", "wants to"."""
    return next(m for m in lexicon.MODALS if m.english[1] == english_3sg)


def clause(subject: str, verb_english: str, *objects: tuple[str, str], adjuncts=(), **kwargs) -> Clause:
    """Clause from strings: clause("the man", "give", ("dat", "the child"), ("acc", "a ball"))."""
    german_infinitive = kwargs.pop("german", None)
    content_verb = verb(verb_english, german_infinitive)
    if "modal" in kwargs:
        kwargs["modal"] = modal(kwargs["modal"])
    if content_verb.frame == "prepositional":
        (_, object_text), = objects
        kwargs["prepositional_object"] = sampling._prepositional_object(content_verb, phrase(object_text))
        objects = ()
    built_adjuncts = tuple(sampling._adjunct(kind, phrase(text), *location)
                           for kind, text, *location in adjuncts)
    return Clause(phrase(subject), content_verb, tuple((case, phrase(text)) for case, text in objects),
                  adjuncts=built_adjuncts, **kwargs)


def copula(subject: str, predicate: str, *, location: str = "", negated: bool = False) -> Clause:
    """"X is ADJECTIVE" or, with `location`, "X is LOCATION PREDICATE"."""
    if location:
        complement = sampling._adjunct("loc", phrase(predicate), location)
    else:
        complement = _find(lexicon.ADJECTIVES, english=predicate)
    return Clause(phrase(subject), None, predicate=complement, negated=negated)


# (sentence, English, German): the German is written by hand, not produced by the module.
HAND_CHECKED = {
    "dative_and_accusative_objects": (
        Sentence("simple", clause("the old man", "give", ("dat", "the small child"),
                                  ("acc", "a red ball"))),
        "The old man gives the small child a red ball.",
        "Der alte Mann gibt dem kleinen Kind einen roten Ball."),
    "dative_verb_weak_masculine_noun": (
        Sentence("simple", clause("a young woman", "help", ("dat", "the tired boy"))),
        "A young woman helps the tired boy.",
        "Eine junge Frau hilft dem müden Jungen."),
    "mixed_declension_after_possessive": (
        Sentence("simple", clause("my big dog", "see", ("acc", "a white cat"))),
        "My big dog sees a white cat.",
        "Mein großer Hund sieht eine weiße Katze."),
    "der_words_neuter_and_masculine": (
        Sentence("simple", clause("this beautiful horse", "like", ("acc", "every green apple"))),
        "This beautiful horse likes every green apple.",
        "Dieses schöne Pferd mag jeden grünen Apfel."),
    "predicative_adjective_uninflected": (
        Sentence("simple", copula("our new car", "red")),
        "Our new car is red.",
        "Unser neues Auto ist rot."),
    "an_and_accusative_preposition": (
        Sentence("simple", clause("Anna", "buy", ("acc", "an expensive car"),
                                  adjuncts=[("for", "her small girl")])),
        "Anna buys an expensive car for her small girl.",
        "Anna kauft ein teures Auto für ihr kleines Mädchen."),
    "prepositional_object_separable": (
        Sentence("simple", clause("the farmer", "think about", ("acc", "the old horse"))),
        "The farmer thinks about the old horse.",
        "Der Bauer denkt über das alte Pferd nach."),
    "prepositional_object_pronoun": (
        Sentence("simple", clause("she", "wait for", ("acc", "the bus"))),
        "She waits for the bus.",
        "Sie wartet auf den Bus."),
    "animals_fressen": (
        Sentence("simple", clause("the dog", "eat", ("acc", "an apple"), german="fressen")),
        "The dog eats an apple.",
        "Der Hund frisst einen Apfel."),
    "people_essen": (
        Sentence("simple", clause("the boy", "eat", ("acc", "an egg"), german="essen")),
        "The boy eats an egg.",
        "Der Junge isst ein Ei."),
    "number_strong_plural_contraction": (
        Sentence("simple", copula("three red cars", "the garden", location="in")),
        "Three red cars are in the garden.",
        "Drei rote Autos sind im Garten."),
    "dative_plural_after_number": (
        Sentence("simple", clause("the children", "play", adjuncts=[("with", "five small dogs")])),
        "The children play with five small dogs.",
        "Die Kinder spielen mit fünf kleinen Hunden."),
    "quantifier_plural": (
        Sentence("simple", clause("many old men", "read", ("acc", "the newspapers"))),
        "Many old men read the newspapers.",
        "Viele alte Männer lesen die Zeitungen."),
    "dative_plural_recipient": (
        Sentence("simple", clause("the woman", "give", ("dat", "the teachers"), ("acc", "two cakes"))),
        "The woman gives the teachers two cakes.",
        "Die Frau gibt den Lehrern zwei Kuchen."),
    "bare_plural": (
        Sentence("simple", copula("red apples", "sweet")),
        "Red apples are sweet.",
        "Rote Äpfel sind süß."),
    "irregular_plurals_dative_location": (
        Sentence("simple", clause("twelve mice", "sleep", adjuncts=[("loc", "the old tables", "under")])),
        "Twelve mice sleep under the old tables.",
        "Zwölf Mäuse schlafen unter den alten Tischen."),
    "separable_dative_verb": (
        Sentence("simple", clause("the students", "listen to", ("dat", "the teacher"),
                                  adjuncts=[("loc", "the school", "in")])),
        "The students listen to the teacher in the school.",
        "Die Studenten hören dem Lehrer in der Schule zu."),
    "subordinate_verb_final": (
        Sentence("main_subordinate", clause("the dog", "sleep"),
                 clause("the man", "see", ("acc", "the ball")), ("because", "weil")),
        "The dog sleeps because the man sees the ball.",
        "Der Hund schläft, weil der Mann den Ball sieht."),
    "fronted_subordinate_modal_negation": (
        Sentence("subordinate_main", clause("she", "wait", adjuncts=[("loc", "the house", "in front of")]),
                 clause("the girl", "find", ("acc", "her key"), modal="can", negated=True),
                 ("because", "weil")),
        "Because the girl cannot find her key, she waits in front of the house.",
        "Weil das Mädchen ihren Schlüssel nicht finden kann, wartet sie vor dem Haus."),
    "that_clause_separable_verb_final": (
        Sentence("simple", clause("Anna", "say", complement=clause("the boy", "call", ("acc", "the doctor")))),
        "Anna says that the boy calls the doctor.",
        "Anna sagt, dass der Junge den Arzt anruft."),
    "separable_main_and_adjunct_order": (
        Sentence("main_subordinate", clause("I", "get up"),
                 clause("my father", "go", adjuncts=[("with", "the dog"), ("to", "the station")]),
                 ("before", "bevor")),
        "I get up before my father goes to the station with the dog.",
        "Ich stehe auf, bevor mein Vater mit dem Hund zum Bahnhof geht."),
    "fronted_adverb_inversion": (
        Sentence("adverb", clause("the bird", "fly", adjuncts=[("to", "the tree")]), None,
                 ("today", "heute")),
        "Today the bird flies to the tree.",
        "Heute fliegt der Vogel zum Baum."),
    "modal_separable_infinitive": (
        Sentence("simple", clause("I", "pick up", ("acc", "the ball"), modal="wants to")),
        "I want to pick up the ball.",
        "Ich will den Ball aufheben."),
    "separable_main_clause": (
        Sentence("simple", clause("the boy", "call", ("acc", "the doctor"))),
        "The boy calls the doctor.",
        "Der Junge ruft den Arzt an."),
    "negation_kein": (
        Sentence("simple", clause("the man", "see", ("acc", "a dog"), negated=True)),
        "The man does not see a dog.",
        "Der Mann sieht keinen Hund."),
    "negation_nicht_after_definite_object": (
        Sentence("simple", clause("the man", "see", ("acc", "the dog"), negated=True)),
        "The man does not see the dog.",
        "Der Mann sieht den Hund nicht."),
    "negation_before_direction": (
        Sentence("simple", clause("we", "go", adjuncts=[("to", "the school")], negated=True)),
        "We do not go to the school.",
        "Wir gehen nicht zur Schule."),
    "negation_kein_plural": (
        Sentence("simple", clause("the child", "like", ("acc", "red apples"), negated=True)),
        "The child does not like red apples.",
        "Das Kind mag keine roten Äpfel."),
    "negation_after_both_objects": (
        Sentence("simple", clause("the queen", "give", ("dat", "a child"), ("acc", "the book"),
                                  negated=True)),
        "The queen does not give a child the book.",
        "Die Königin gibt einem Kind das Buch nicht."),
    "negated_modal_weak_noun": (
        Sentence("simple", clause("he", "call", ("acc", "his neighbor"), modal="wants to", negated=True)),
        "He does not want to call his neighbor.",
        "Er will seinen Nachbarn nicht anrufen."),
    "coordination_aber": (
        Sentence("coordinated", clause("the dog", "sleep"), clause("the cat", "play"), (", but", ", aber")),
        "The dog sleeps, but the cat plays.",
        "Der Hund schläft, aber die Katze spielt."),
    "coordination_und_first_person_copula": (
        Sentence("coordinated", clause("the bears", "come back", adjuncts=[("from", "the river")]),
                 copula("I", "tired"), ("and", "und")),
        "The bears come back from the river and I am tired.",
        "Die Bären kommen vom Fluss zurück und ich bin müde."),
}


@pytest.mark.parametrize("name", sorted(HAND_CHECKED))
def test_hand_checked_translation(name: str) -> None:
    sentence, english, german = HAND_CHECKED[name]
    assert sampling._render_sentence(sentence) == (english, german)


# ---------------------------------------------------------------------------------------------------
# Generated data.
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def full_splits() -> dict[str, list[tuple[str, str]]]:
    """The shipped splits at their full default sizes (generated once for this module)."""
    return synthetic.generate_splits(synthetic.default_split_sizes())


@pytest.mark.integration
def test_default_sizes_and_disjoint_splits(full_splits: dict[str, list[tuple[str, str]]]) -> None:
    assert {split: len(pairs) for split, pairs in full_splits.items()} == {
        "train": synthetic.TRAIN_SIZE, "validation": 2_000, "test": 2_000}
    english_by_split = {split: {english for english, _ in pairs} for split, pairs in full_splits.items()}
    for split, pairs in full_splits.items():
        assert len(english_by_split[split]) == len(pairs), f"duplicate sentence inside {split}"
        assert all(synthetic.split_of(english) == split for english, _ in pairs[:5000])
    assert not english_by_split["train"] & english_by_split["validation"]
    assert not english_by_split["train"] & english_by_split["test"]
    assert not english_by_split["validation"] & english_by_split["test"]


def test_lengths_span_a_range(full_splits: dict[str, list[tuple[str, str]]]) -> None:
    lengths = [len(english.split()) for english, _ in full_splits["train"]]
    assert min(lengths) <= 3 and 25 <= max(lengths) <= synthetic.MAX_WORDS
    assert 8 <= statistics.mean(lengths) <= 14
    histogram = collections.Counter(length // 5 for length in lengths)
    assert all(histogram[bucket] > 100 for bucket in range(5)), histogram  # 0-4, ..., 20-24 words.


def test_sentences_are_capitalized_and_end_with_a_period(
        full_splits: dict[str, list[tuple[str, str]]]) -> None:
    for english, german in full_splits["validation"]:
        for text in (english, german):
            assert text[0].isupper() and text.endswith(".") and "  " not in text and " ," not in text


def test_constructs_occur_in_the_data(full_splits: dict[str, list[tuple[str, str]]]) -> None:
    german = " ".join(g for _, g in full_splits["train"][:20_000])
    for marker in (", weil ", "Weil ", ", dass ", " kein", " nicht", " zum ", " im ", "Heute ",
                   " Hunden", " Jungen", " dem ", " den ", " der ", " muss ", " anruft"):
        assert marker in german, marker


@pytest.mark.integration
def test_each_english_sentence_has_one_german_translation() -> None:
    translations: dict[str, str] = {}
    repeats = 0
    for english, german in itertools.islice(synthetic.iter_pairs(), 30_000):
        if english in translations:
            repeats += 1
            assert translations[english] == german, english
        translations[english] = german
    assert repeats > 100  # Short sentences recur, so the check above is not vacuous.


def test_generation_is_deterministic_and_prefix_stable() -> None:
    first = synthetic.generate_split("train", 2000)
    assert synthetic.generate_split("train", 2000) == first
    assert synthetic.generate_split("train", 500) == first[:500]
    # A split's pairs do not depend on the sizes asked for the other splits.
    assert synthetic.generate_splits({"train": 2000, "validation": 20})["train"] == first
    validation = synthetic.generate_split("validation", 20)
    assert synthetic.generate_splits({"validation": 20, "test": 20})["validation"] == validation


def _digest_in_subprocess(hash_seed: str) -> str:
    """Digest of the first 200 train pairs, computed in a fresh interpreter with PYTHONHASHSEED."""
    code = ("import hashlib, attention_jax.data.synthetic_en_de as s; "
            "print(hashlib.sha256(repr(s.generate_split('train', 200)).encode()).hexdigest())")
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                            check=True, cwd=root)
    return result.stdout.strip()


@pytest.mark.slow
def test_generation_does_not_depend_on_string_hashing() -> None:
    expected = hashlib.sha256(repr(synthetic.generate_split("train", 200)).encode()).hexdigest()
    assert _digest_in_subprocess("1") == _digest_in_subprocess("2") == expected


def test_bad_split_requests_raise() -> None:
    with pytest.raises(ValueError, match="Unknown split"):
        synthetic.generate_split("dev")
    with pytest.raises(ValueError, match=">= 0"):
        synthetic.generate_splits({"train": -1})


# ---------------------------------------------------------------------------------------------------
# TFDS builder.
# ---------------------------------------------------------------------------------------------------


@pytest.mark.integration
def test_tfds_builder_round_trip(tmp_path) -> None:
    import tensorflow_datasets as tfds

    builder = synthetic.SyntheticEnDe(data_dir=str(tmp_path), config="small", file_format="array_record")
    builder.download_and_prepare()
    sizes = builder.builder_config._split_sizes()
    expected = synthetic.generate_splits(sizes)
    assert sizes == {"train": 10_000, "validation": 100, "test": 100}
    for split in synthetic.SPLITS:
        source = builder.as_data_source(split)
        assert len(source) == sizes[split]
        examples = source.__getitems__(range(len(source)))
        assert [(ex["en"].decode(), ex["de"].decode()) for ex in examples] == expected[split]
    assert builder.info.supervised_keys == ("en", "de")
    assert builder.info.features["de"] is not None
    by_name = tfds.data_source("synthetic_en_de/small", split="test", data_dir=str(tmp_path))
    assert by_name[0] == {"de": expected["test"][0][1].encode(), "en": expected["test"][0][0].encode()}

"""A synthetic English->German translation task, embedded (no download), and its TFDS builder.

Sentences come from a small grammar and lexicon (74 nouns, 25 adjectives, 55 verbs; about 480 English
and 640 German word types) chosen so that a tiny Transformer must learn what real EN->DE needs: German
gender (m/f/n) and case (nominative, accusative, dative) agreement of determiners, adjectives and nouns
(weak, mixed and strong adjective declension, weak masculine nouns, dative plural -n), plurals with
numbers and quantifiers, verb-second main clauses (inverted after a fronted adverb or subordinate
clause), verb-final subordinate clauses, separable and modal verbs that send a verb part to the end,
negation with "nicht"/"kein", and dative, accusative and prepositional objects. Every English sentence
has exactly one German translation, so the task can be learned to (nearly) 100 BLEU. Examples::

    The happy king calls Anna.
    Der glückliche König ruft Anna an.

    Today she helps this happy monkey under a lamp.
    Heute hilft sie diesem glücklichen Affen unter einer Lampe.

    The queen invites my small friend while I carry the old window to Maria.
    Die Königin lädt meinen kleinen Freund ein, während ich das alte Fenster zu Maria trage.

    Because the girl cannot find her key, she waits in front of the house.
    Weil das Mädchen ihren Schlüssel nicht finden kann, wartet sie vor dem Haus.

Splits are deterministic and disjoint: one random stream (seed `SEED`) is deduplicated on the English
side and each sentence goes to the split named by a hash of its English text, so the first N pairs of
a split do not change when another split's size changes.

Build and read it with TFDS (no TensorFlow needed; "array_record" is this builder's default format)::

    from attention_jax.synthetic_en_de import SyntheticEnDe
    builder = SyntheticEnDe(data_dir=d, file_format="array_record")
    builder.download_and_prepare()         # about 20 s of CPU for the full size
    train = builder.as_data_source("train")  # train[i] == {"de": b"...", "en": b"..."}

or, once this module is imported, ``tfds.data_source("synthetic_en_de", split="train", data_dir=d)``.
The "small" config (``SyntheticEnDe(config="small", ...)``, 10,000/100/100 pairs) is for smoke tests.
Without TFDS, ``generate_split("train")`` returns the same (english, german) pairs in the same order.
"""

import bisect
import dataclasses
import functools
import hashlib
import itertools
import random
import typing
from collections.abc import Iterator, Mapping, Sequence

import tensorflow_datasets as tfds

SEED = 20170612  # arXiv v1 date of "Attention Is All You Need".
TRAIN_SIZE = 200_000
VALIDATION_SIZE = 2_000
TEST_SIZE = 2_000
SPLITS = ("train", "validation", "test")
MAX_WORDS = 30  # Longest English sentence kept, in words (punctuation not counted).
_HASH_BUCKETS = 100  # Bucket 0 -> test, 1 -> validation, the other 98 -> train.

# =====================================================================================================
# Lexicon
# =====================================================================================================

CASES = ("nom", "acc", "dat")


@dataclasses.dataclass(frozen=True, eq=False)
class Noun:
    """A common noun with its English and German forms.

    Attributes
    ----------
    english, english_plural : str
        English singular and plural.
    gender : str
        German grammatical gender: "m", "f" or "n".
    german, german_plural : str
        German nominative singular and plural (capitalized).
    tags : frozenset[str]
        Semantic classes ("person", "animal", "thing", ...) that verbs and adjectives select for.
    german_oblique : str
        Accusative/dative singular of weak masculine nouns ("Jungen"); empty for other nouns.
    locations : tuple[str, ...]
        English prepositions that can locate something at this noun ("in", "under", ...).
    destination : bool
        Whether "to the X"/"from the X" (German zu/von) reads naturally.
    """

    english: str
    english_plural: str
    gender: str
    german: str
    german_plural: str
    tags: frozenset[str]
    german_oblique: str = ""
    locations: tuple[str, ...] = ()
    destination: bool = False

    def german_form(self, case: str, plural: bool) -> str:
        """German form in `case` ("nom"/"acc"/"dat"): dative plural adds -n, weak nouns add -(e)n."""
        if plural:
            dative_n = case == "dat" and not self.german_plural.endswith(("n", "s"))
            return self.german_plural + ("n" if dative_n else "")
        if case != "nom" and self.german_oblique:
            return self.german_oblique
        return self.german


def _noun(english: str, german: str, tags: str, locations: str = "", *, oblique: str = "",
          destination: bool = False) -> Noun:
    """Noun from "sg/pl" strings: english "dog/dogs", german "m:Hund/Hunde"; locations "in|under"."""
    english_singular, english_plural = english.split("/")
    gender, german_forms = german.split(":")
    german_singular, german_plural = german_forms.split("/")
    return Noun(english_singular, english_plural, gender, german_singular, german_plural,
                frozenset(tags.split()), oblique, tuple(filter(None, locations.split("|"))),
                destination or "person" in tags)


NOUNS = (
    # People.
    _noun("man/men", "m:Mann/Männer", "person"),
    _noun("woman/women", "f:Frau/Frauen", "person"),
    _noun("child/children", "n:Kind/Kinder", "person"),
    _noun("boy/boys", "m:Junge/Jungen", "person", oblique="Jungen"),
    _noun("girl/girls", "n:Mädchen/Mädchen", "person"),
    _noun("teacher/teachers", "m:Lehrer/Lehrer", "person"),
    _noun("doctor/doctors", "m:Arzt/Ärzte", "person"),
    _noun("student/students", "m:Student/Studenten", "person", oblique="Studenten"),
    _noun("neighbor/neighbors", "m:Nachbar/Nachbarn", "person", oblique="Nachbarn"),
    _noun("friend/friends", "m:Freund/Freunde", "person"),
    _noun("farmer/farmers", "m:Bauer/Bauern", "person", oblique="Bauern"),
    _noun("king/kings", "m:König/Könige", "person"),
    _noun("queen/queens", "f:Königin/Königinnen", "person"),
    _noun("mother/mothers", "f:Mutter/Mütter", "person"),
    _noun("father/fathers", "m:Vater/Väter", "person"),
    # Animals.
    _noun("dog/dogs", "m:Hund/Hunde", "animal"),
    _noun("cat/cats", "f:Katze/Katzen", "animal"),
    _noun("horse/horses", "n:Pferd/Pferde", "animal"),
    _noun("bird/birds", "m:Vogel/Vögel", "animal flyer"),
    _noun("mouse/mice", "f:Maus/Mäuse", "animal"),
    _noun("cow/cows", "f:Kuh/Kühe", "animal"),
    _noun("lion/lions", "m:Löwe/Löwen", "animal", oblique="Löwen"),
    _noun("bear/bears", "m:Bär/Bären", "animal", oblique="Bären"),
    _noun("monkey/monkeys", "m:Affe/Affen", "animal", oblique="Affen"),
    _noun("duck/ducks", "f:Ente/Enten", "animal flyer"),
    _noun("rabbit/rabbits", "n:Kaninchen/Kaninchen", "animal"),
    _noun("elephant/elephants", "m:Elefant/Elefanten", "animal", oblique="Elefanten"),
    # Things.
    _noun("ball/balls", "m:Ball/Bälle", "thing"),
    _noun("book/books", "n:Buch/Bücher", "thing readable openable"),
    _noun("letter/letters", "m:Brief/Briefe", "thing readable openable"),
    _noun("newspaper/newspapers", "f:Zeitung/Zeitungen", "thing readable"),
    _noun("cup/cups", "f:Tasse/Tassen", "thing"),
    _noun("bottle/bottles", "f:Flasche/Flaschen", "thing openable"),
    _noun("key/keys", "m:Schlüssel/Schlüssel", "thing"),
    _noun("bag/bags", "f:Tasche/Taschen", "thing openable", "in"),
    _noun("box/boxes", "f:Kiste/Kisten", "thing openable", "in|next to"),
    _noun("hat/hats", "m:Hut/Hüte", "thing"),
    _noun("flower/flowers", "f:Blume/Blumen", "thing"),
    _noun("picture/pictures", "n:Bild/Bilder", "thing"),
    _noun("shoe/shoes", "m:Schuh/Schuhe", "thing"),
    _noun("clock/clocks", "f:Uhr/Uhren", "thing"),
    _noun("lamp/lamps", "f:Lampe/Lampen", "thing", "under|next to"),
    _noun("table/tables", "m:Tisch/Tische", "thing", "on|under|next to"),
    _noun("chair/chairs", "m:Stuhl/Stühle", "thing", "on|under|next to"),
    _noun("window/windows", "n:Fenster/Fenster", "thing openable", "in front of|next to"),
    _noun("door/doors", "f:Tür/Türen", "thing openable", "in front of|behind|next to"),
    # Vehicles.
    _noun("car/cars", "n:Auto/Autos", "vehicle", "in|in front of|behind|next to"),
    _noun("bicycle/bicycles", "n:Fahrrad/Fahrräder", "vehicle", "next to"),
    _noun("boat/boats", "n:Boot/Boote", "vehicle", "in"),
    _noun("bus/buses", "m:Bus/Busse", "vehicle", "in"),
    _noun("train/trains", "m:Zug/Züge", "vehicle", "in"),
    # Food.
    _noun("apple/apples", "m:Apfel/Äpfel", "food"),
    _noun("cake/cakes", "m:Kuchen/Kuchen", "food"),
    _noun("egg/eggs", "n:Ei/Eier", "food"),
    _noun("banana/bananas", "f:Banane/Bananen", "food"),
    _noun("carrot/carrots", "f:Karotte/Karotten", "food"),
    _noun("pear/pears", "f:Birne/Birnen", "food"),
    _noun("orange/oranges", "f:Orange/Orangen", "food"),
    # Places.
    _noun("garden/gardens", "m:Garten/Gärten", "place", "in|behind"),
    _noun("park/parks", "m:Park/Parks", "place", "in", destination=True),
    _noun("house/houses", "n:Haus/Häuser", "place", "in|behind|in front of|next to", destination=True),
    _noun("kitchen/kitchens", "f:Küche/Küchen", "place", "in"),
    _noun("school/schools", "f:Schule/Schulen", "place", "in|behind|in front of|next to",
          destination=True),
    _noun("city/cities", "f:Stadt/Städte", "place", "in"),
    _noun("station/stations", "m:Bahnhof/Bahnhöfe", "place", "in|behind|in front of|next to",
          destination=True),
    _noun("forest/forests", "m:Wald/Wälder", "place", "in"),
    _noun("river/rivers", "m:Fluss/Flüsse", "place", "in", destination=True),
    _noun("bridge/bridges", "f:Brücke/Brücken", "place", "on|under", destination=True),
    _noun("tree/trees", "m:Baum/Bäume", "place", "under|behind|next to", destination=True),
    _noun("church/churches", "f:Kirche/Kirchen", "place", "in|behind|in front of|next to",
          destination=True),
    _noun("shop/shops", "m:Laden/Läden", "place", "in|in front of|next to", destination=True),
    _noun("library/libraries", "f:Bibliothek/Bibliotheken", "place", "in|in front of",
          destination=True),
    _noun("room/rooms", "n:Zimmer/Zimmer", "place", "in"),
    _noun("office/offices", "n:Büro/Büros", "place", "in", destination=True),
)

NAMES = ("Anna", "Maria", "Lisa", "Peter", "Thomas", "Paul")  # Same in both languages, tag "person".


@dataclasses.dataclass(frozen=True, eq=False)
class Adjective:
    """An adjective: English word, German stem for attributive endings, German predicative form.

    Attributes
    ----------
    english : str
        English word ("tired").
    german_stem : str
        Stem that takes the declension ending ("müd" -> "müde", "teur" -> "teure").
    german_predicative : str
        Uninflected form after "sein" ("müde", "teuer").
    is_color : bool
        Colors follow the other adjectives, in both languages ("the big red car").
    tags : frozenset[str]
        Noun classes the adjective can describe.
    """

    english: str
    german_stem: str
    german_predicative: str
    is_color: bool
    tags: frozenset[str]


def _adjective(english: str, german: str, tags: str, *, is_color: bool = False) -> Adjective:
    """Adjective from a German "stem/predicative" string ("teur/teuer") or a single stem ("rot")."""
    stem, _, predicative = german.partition("/")
    return Adjective(english, stem, predicative or stem, is_color, frozenset(tags.split()))


_ALL_NOUNS = "person animal thing vehicle food place"
ADJECTIVES = (
    _adjective("big", "groß", _ALL_NOUNS),
    _adjective("small", "klein", _ALL_NOUNS),
    _adjective("old", "alt", "person animal thing vehicle place"),
    _adjective("young", "jung", "person animal"),
    _adjective("new", "neu", "thing vehicle place"),
    _adjective("beautiful", "schön", _ALL_NOUNS),
    _adjective("tired", "müd/müde", "person animal"),
    _adjective("hungry", "hungrig", "person animal"),
    _adjective("happy", "glücklich", "person animal"),
    _adjective("friendly", "freundlich", "person animal"),
    _adjective("clever", "klug", "person animal"),
    _adjective("fast", "schnell", "animal vehicle"),
    _adjective("heavy", "schwer", "thing"),
    _adjective("expensive", "teur/teuer", "thing vehicle"),
    _adjective("cheap", "billig", "thing vehicle food"),
    _adjective("clean", "sauber", "thing vehicle place"),
    _adjective("fresh", "frisch", "food"),
    _adjective("sweet", "süß", "food"),
    _adjective("red", "rot", "thing vehicle food place", is_color=True),
    _adjective("blue", "blau", "thing vehicle place", is_color=True),
    _adjective("green", "grün", "thing vehicle food place", is_color=True),
    _adjective("yellow", "gelb", "thing vehicle food", is_color=True),
    _adjective("black", "schwarz", "thing vehicle animal", is_color=True),
    _adjective("white", "weiß", "thing vehicle animal place", is_color=True),
    _adjective("brown", "braun", "thing animal", is_color=True),
)


@dataclasses.dataclass(frozen=True, eq=False)
class Determiner:
    """A determiner and how it declines in German.

    Attributes
    ----------
    english, english_plural : str
        English singular and plural forms; "" where the determiner has no such number (or is absent,
        for the bare plural "red cars").
    german_stem : str
        Stem that takes the case ending ("dies", "ein", "unser", "viel") or the invariant word ("drei").
    kind : str
        "definite" (der/die/das), "der_word" (dieser, jeder: weak adjectives follow), "ein_word"
        (ein, kein, mein: mixed adjectives), "quantifier" (viele, einige: strong adjectives), "number"
        (invariant, strong adjectives) or "bare" (no determiner, strong adjectives).
    """

    english: str
    english_plural: str
    german_stem: str
    kind: str

    @functools.cached_property
    def numbers(self) -> tuple[bool, ...]:
        """The values of `plural` this determiner allows."""
        return tuple(plural for plural, word in ((False, self.english), (True, self.english_plural))
                     if word or self.kind == "bare" and plural)


THE = Determiner("the", "the", "d", "definite")
A = Determiner("a", "", "ein", "ein_word")
BARE_PLURAL = Determiner("", "", "", "bare")
DETERMINERS = (
    THE,
    A,
    BARE_PLURAL,
    Determiner("this", "these", "dies", "der_word"),
    Determiner("every", "", "jed", "der_word"),
    Determiner("my", "my", "mein", "ein_word"),
    Determiner("his", "his", "sein", "ein_word"),
    Determiner("her", "her", "ihr", "ein_word"),
    Determiner("our", "our", "unser", "ein_word"),
    Determiner("their", "their", "ihr", "ein_word"),
    Determiner("", "many", "viel", "quantifier"),
    Determiner("", "some", "einig", "quantifier"),
    *(Determiner("", english, german, "number") for english, german in (
        ("two", "zwei"), ("three", "drei"), ("four", "vier"), ("five", "fünf"), ("six", "sechs"),
        ("seven", "sieben"), ("eight", "acht"), ("nine", "neun"), ("ten", "zehn"), ("eleven", "elf"),
        ("twelve", "zwölf"))),
)
# Determiners allowed on the objects of a negated clause: "nicht" then follows the object.
_NEGATABLE_OBJECT_DETERMINERS = (THE, A, BARE_PLURAL, *(d for d in DETERMINERS if d.german_stem in (
    "dies", "mein", "sein", "ihr", "unser")))
# Determiners for places and destinations ("in the garden", "zu meinem Freund"; not "in three gardens").
_PLACE_DETERMINERS = tuple(d for d in DETERMINERS if d.kind not in ("number", "quantifier", "bare"))


@dataclasses.dataclass(frozen=True, eq=False)
class Pronoun:
    """A subject pronoun ("I" -> "ich"); `person` is "1sg", "3sg" or "pl" (verb agreement)."""

    english: str
    german: str
    person: str


PRONOUNS = (Pronoun("I", "ich", "1sg"), Pronoun("he", "er", "3sg"), Pronoun("she", "sie", "3sg"),
            Pronoun("we", "wir", "pl"), Pronoun("they", "sie", "pl"))


@dataclasses.dataclass(frozen=True, eq=False)
class Verb:
    """A verb with its argument frame.

    Attributes
    ----------
    english, english_3sg : str
        English base and third-person-singular forms, including a particle or the preposition of a
        prepositional object ("pick up", "waits for").
    german_infinitive : str
        German infinitive, particle included ("anrufen").
    german_present : tuple[str, str, str]
        German present tense for 1sg, 3sg and plural, without the separable particle ("rufe", "ruft",
        "rufen").
    particle : str
        Separable particle ("an"); it goes to the end of a main clause and joins the verb in a
        subordinate clause ("..., weil er sie anruft").
    frame : str
        "intransitive", "accusative", "dative", "ditransitive" (dative + accusative), "prepositional"
        (German preposition + case), "that" (a "dass" clause) or "copula".
    subject_tags, object_tags : frozenset[str]
        Noun classes allowed as subject and objects.
    adjuncts : tuple[str, ...]
        Optional prepositional phrases: "loc" (in the garden), "with", "for", "to", "from".
    german_preposition, object_case : str
        For the "prepositional" frame: the German preposition and its case ("auf", "acc").
    """

    english: str
    english_3sg: str
    german_infinitive: str
    german_present: tuple[str, str, str]
    particle: str
    frame: str
    subject_tags: frozenset[str]
    object_tags: frozenset[str]
    adjuncts: tuple[str, ...]
    german_preposition: str = ""
    object_case: str = ""


_ANIMATE = "person animal"
_CONCRETE = "person animal thing vehicle food"


def _verb(english: str, german: str, frame: str, subject: str = _ANIMATE, objects: str = "",
          adjuncts: str = "", preposition: str = "") -> Verb:
    """Verb from compact strings.

    english "see/sees"; german "sehen: sehe sieht sehen" or, separable, "an|rufen: rufe ruft rufen";
    preposition "auf+acc" for the prepositional frame.
    """
    english_base, english_3sg = english.split("/")
    infinitive, forms = german.split(": ")
    particle, _, _ = infinitive.rpartition("|")
    german_preposition, _, object_case = preposition.partition("+")
    return Verb(english_base, english_3sg, infinitive.replace("|", ""), tuple(forms.split()), particle,
                frame, frozenset(subject.split()), frozenset(objects.split()), tuple(adjuncts.split()),
                german_preposition, object_case)


VERBS = (
    # Intransitive.
    _verb("sleep/sleeps", "schlafen: schlafe schläft schlafen", "intransitive", adjuncts="loc"),
    _verb("play/plays", "spielen: spiele spielt spielen", "intransitive", adjuncts="with loc"),
    _verb("work/works", "arbeiten: arbeite arbeitet arbeiten", "intransitive", "person",
          adjuncts="with for loc"),
    _verb("laugh/laughs", "lachen: lache lacht lachen", "intransitive", "person", adjuncts="with loc"),
    _verb("sing/sings", "singen: singe singt singen", "intransitive", "person flyer",
          adjuncts="for loc"),
    _verb("dance/dances", "tanzen: tanze tanzt tanzen", "intransitive", "person", adjuncts="with loc"),
    _verb("swim/swims", "schwimmen: schwimme schwimmt schwimmen", "intransitive", adjuncts="with loc"),
    _verb("wait/waits", "warten: warte wartet warten", "intransitive", adjuncts="loc"),
    _verb("go/goes", "gehen: gehe geht gehen", "intransitive", adjuncts="with to"),
    _verb("run/runs", "laufen: laufe läuft laufen", "intransitive", adjuncts="to loc"),
    _verb("drive/drives", "fahren: fahre fährt fahren", "intransitive", "person",
          adjuncts="with to from"),
    _verb("come/comes", "kommen: komme kommt kommen", "intransitive", adjuncts="with from"),
    _verb("fly/flies", "fliegen: fliege fliegt fliegen", "intransitive", "flyer", adjuncts="to"),
    _verb("get up/gets up", "auf|stehen: stehe steht stehen", "intransitive", "person"),
    _verb("come back/comes back", "zurück|kommen: komme kommt kommen", "intransitive",
          adjuncts="with from"),
    # Accusative object.
    _verb("see/sees", "sehen: sehe sieht sehen", "accusative", objects=_CONCRETE + " place",
          adjuncts="loc"),
    _verb("buy/buys", "kaufen: kaufe kauft kaufen", "accusative", "person", "thing vehicle food",
          "for loc"),
    _verb("find/finds", "finden: finde findet finden", "accusative", objects=_CONCRETE,
          adjuncts="loc"),
    _verb("have/has", "haben: habe hat haben", "accusative", objects="animal thing vehicle food"),
    _verb("need/needs", "brauchen: brauche braucht brauchen", "accusative", "person",
          "thing vehicle food"),
    _verb("like/likes", "mögen: mag mag mögen", "accusative", objects=_CONCRETE + " place"),
    _verb("read/reads", "lesen: lese liest lesen", "accusative", "person", "readable", "loc"),
    _verb("eat/eats", "essen: esse isst essen", "accusative", "person", "food", "with loc"),
    _verb("eat/eats", "fressen: fresse frisst fressen", "accusative", "animal", "food", "loc"),
    _verb("wash/washes", "waschen: wasche wäscht waschen", "accusative", "person",
          "person animal thing vehicle", "loc"),
    _verb("carry/carries", "tragen: trage trägt tragen", "accusative", "person", "thing food", "to"),
    _verb("visit/visits", "besuchen: besuche besucht besuchen", "accusative", "person",
          "person place", "with"),
    _verb("draw/draws", "zeichnen: zeichne zeichnet zeichnen", "accusative", "person",
          _CONCRETE + " place", "for loc"),
    _verb("love/loves", "lieben: liebe liebt lieben", "accusative", objects=_ANIMATE),
    _verb("hear/hears", "hören: höre hört hören", "accusative", objects=_ANIMATE, adjuncts="loc"),
    _verb("open/opens", "öffnen: öffne öffnet öffnen", "accusative", "person", "openable", "for"),
    _verb("look for/looks for", "suchen: suche sucht suchen", "accusative", objects=_CONCRETE,
          adjuncts="loc"),
    _verb("call/calls", "an|rufen: rufe ruft rufen", "accusative", "person", "person"),
    _verb("pick up/picks up", "auf|heben: hebe hebt heben", "accusative", "person", "thing food",
          "loc"),
    _verb("invite/invites", "ein|laden: lade lädt laden", "accusative", "person", "person"),
    _verb("look at/looks at", "an|sehen: sehe sieht sehen", "accusative", objects=_CONCRETE + " place",
          adjuncts="loc"),
    # Dative object.
    _verb("help/helps", "helfen: helfe hilft helfen", "dative", "person", _ANIMATE, "loc"),
    _verb("thank/thanks", "danken: danke dankt danken", "dative", "person", "person"),
    _verb("follow/follows", "folgen: folge folgt folgen", "dative", objects=_ANIMATE, adjuncts="to"),
    _verb("answer/answers", "antworten: antworte antwortet antworten", "dative", "person", "person"),
    _verb("listen to/listens to", "zu|hören: höre hört hören", "dative", objects=_ANIMATE,
          adjuncts="loc"),
    # Dative (recipient) and accusative (theme) objects.
    _verb("give/gives", "geben: gebe gibt geben", "ditransitive", "person", "thing food"),
    _verb("show/shows", "zeigen: zeige zeigt zeigen", "ditransitive", "person", "thing food vehicle"),
    _verb("send/sends", "schicken: schicke schickt schicken", "ditransitive", "person", "thing food"),
    _verb("bring/brings", "bringen: bringe bringt bringen", "ditransitive", "person", "thing food"),
    # Prepositional object (English preposition is part of the verb).
    _verb("wait for/waits for", "warten: warte wartet warten", "prepositional",
          objects="person animal vehicle", preposition="auf+acc"),
    _verb("talk to/talks to", "sprechen: spreche spricht sprechen", "prepositional", "person",
          "person", preposition="mit+dat"),
    _verb("think of/thinks of", "denken: denke denkt denken", "prepositional", "person", _CONCRETE,
          preposition="an+acc"),
    _verb("think about/thinks about", "nach|denken: denke denkt denken", "prepositional", "person",
          _CONCRETE + " place", preposition="über+acc"),
    _verb("laugh at/laughs at", "lachen: lache lacht lachen", "prepositional", "person", _CONCRETE,
          preposition="über+acc"),
    # "that" clause.
    _verb("say/says", "sagen: sage sagt sagen", "that", "person"),
    _verb("know/knows", "wissen: weiß weiß wissen", "that", "person"),
    _verb("think/thinks", "denken: denke denkt denken", "that", "person"),
    _verb("believe/believes", "glauben: glaube glaubt glauben", "that", "person"),
    _verb("hope/hopes", "hoffen: hoffe hofft hoffen", "that", "person"),
)
# English/German "to be": 1sg, 3sg, plural.
_ENGLISH_BE = ("am", "is", "are")
_GERMAN_BE = ("bin", "ist", "sind")
_PERSON_INDEX = {"1sg": 0, "3sg": 1, "pl": 2}


@dataclasses.dataclass(frozen=True, eq=False)
class Modal:
    """A modal verb: the content verb goes to the end as an infinitive ("kann ... sehen").

    Attributes
    ----------
    english, english_negated : tuple[str, str, str]
        English forms for 1sg, 3sg and plural subjects ("wants to"), and negated ("does not want to");
        `english_negated` is empty where negation would change the German modal (must not = darf nicht).
    german : tuple[str, str, str]
        German present tense for 1sg, 3sg and plural.
    """

    english: tuple[str, str, str]
    english_negated: tuple[str, str, str]
    german: tuple[str, str, str]


MODALS = (
    Modal(("can",) * 3, ("cannot",) * 3, ("kann", "kann", "können")),
    Modal(("must",) * 3, (), ("muss", "muss", "müssen")),
    Modal(("want to", "wants to", "want to"), ("do not want to", "does not want to", "do not want to"),
          ("will", "will", "wollen")),
)

# Fronted adverbials: the German finite verb then comes before the subject (verb second).
ADVERBS = (("today", "heute"), ("tomorrow", "morgen"), ("now", "jetzt"), ("sometimes", "manchmal"),
           ("often", "oft"), ("every day", "jeden Tag"), ("in the morning", "am Morgen"),
           ("in the evening", "am Abend"))
# Subordinating conjunctions: the German finite verb goes to the end of the clause.
COORDINATORS = (("and", "und"), (", but", ", aber"))  # Main clauses keep verb second after these.
CONJUNCTIONS = (("because", "weil"), ("although", "obwohl"), ("while", "während"), ("when", "wenn"),
                ("if", "wenn"), ("before", "bevor"))
# English location prepositions -> German two-way prepositions (dative for a location).
_LOCATION_PREPOSITIONS = {"in": "in", "on": "auf", "under": "unter", "behind": "hinter",
                          "next to": "neben", "in front of": "vor"}
# Adjunct kind -> (English preposition, German preposition, German case); "loc" depends on the noun.
_ADJUNCT_PREPOSITIONS = {"with": ("with", "mit", "dat"), "for": ("for", "für", "acc"),
                         "to": ("to", "zu", "dat"), "from": ("from", "von", "dat")}
# Word order of adjuncts. German: comitative/benefactive, then place, then direction (last before the
# verb bracket); English: direction first ("goes to school with the dog").
_GERMAN_ADJUNCT_ORDER = ("with", "for", "loc", "to", "from")
_ENGLISH_ADJUNCT_ORDER = ("to", "from", "with", "for", "loc")
_SPATIAL_ADJUNCTS = ("loc", "to", "from")  # At most one of these per clause.
# Preposition + definite article contractions (standard German).
_CONTRACTIONS = {("in", "dem"): "im", ("zu", "dem"): "zum", ("zu", "der"): "zur", ("von", "dem"): "vom",
                 ("an", "dem"): "am"}

# =====================================================================================================
# German declension (rows: m, f, n, pl; columns: nom, acc, dat)
# =====================================================================================================


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
    """German determiner for a noun phrase.

    Parameters
    ----------
    determiner : Determiner
        The English-side determiner.
    gender_or_plural : str
        "m", "f", "n" or "pl".
    case : str
        "nom", "acc" or "dat".
    negative : bool
        Whether the noun phrase carries the clause negation ("a dog" -> "kein Hund",
        "dogs" -> "keine Hunde"); only for determiner kinds "ein_word" (the article "a") and "bare".

    Returns
    -------
    str
        The determiner, or "" for a bare plural.
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
    """Attributive adjective ending: weak after der-words, mixed after ein-words, strong otherwise.

    Parameters
    ----------
    determiner : Determiner
        The noun phrase's determiner.
    gender_or_plural, case : str
        As in `german_determiner`.
    negative : bool
        Whether the determiner became "kein" (an ein-word).

    Returns
    -------
    str
        The ending ("e", "en", "er", "es").
    """
    key = (gender_or_plural, case)
    if determiner.kind in ("definite", "der_word"):
        return _WEAK_ADJECTIVE[key]
    if determiner.kind == "ein_word" or negative:
        return _MIXED_ADJECTIVE[key]
    return _STRONG_ADJECTIVE[key]


# =====================================================================================================
# Phrases and clauses, realized in both languages
# =====================================================================================================


class NounPhrase(typing.NamedTuple):
    """A noun phrase: a common noun with determiner and adjectives, a name, or a pronoun.

    Phrases and clauses are named tuples, not dataclasses: the stream builds millions of them.

    Attributes
    ----------
    noun : Noun | None
        Head noun; None for a name or pronoun.
    determiner : Determiner
        Determiner (`BARE_PLURAL` for none).
    adjectives : tuple[Adjective, ...]
        Attributive adjectives, in order.
    plural : bool
        Grammatical number.
    name : str
        A name from `NAMES` instead of a noun.
    pronoun : Pronoun | None
        A subject pronoun instead of a noun.
    """

    noun: Noun | None = None
    determiner: Determiner = THE
    adjectives: tuple[Adjective, ...] = ()
    plural: bool = False
    name: str = ""
    pronoun: Pronoun | None = None

    @property
    def person(self) -> str:
        """Verb agreement: "1sg", "3sg" or "pl"."""
        if self.pronoun is not None:
            return self.pronoun.person
        return "pl" if self.plural else "3sg"

    @property
    def takes_kein(self) -> bool:
        """Whether clause negation turns this (object) phrase into a kein-phrase."""
        return self.noun is not None and self.determiner in (A, BARE_PLURAL)

    @property
    def tags(self) -> frozenset[str]:
        """Semantic classes of the head noun (names and pronouns are persons)."""
        return self.noun.tags if self.noun is not None else frozenset({"person"})

    def english(self) -> list[str]:
        """English words: "a big red car", "three dogs", "Anna", "I"."""
        if self.pronoun is not None:
            return [self.pronoun.english]
        if self.name:
            return [self.name]
        modifiers = [adjective.english for adjective in self.adjectives]
        noun = self.noun.english_plural if self.plural else self.noun.english
        determiner = self.determiner.english_plural if self.plural else self.determiner.english
        if determiner == "a" and (modifiers or [noun])[0][0] in "aeiou":
            determiner = "an"
        return [word for word in (determiner, *modifiers, noun) if word]

    def german(self, case: str, negative: bool = False) -> list[str]:
        """German words in `case`; `negative` uses kein- (only valid when `takes_kein`)."""
        if self.pronoun is not None:
            return [self.pronoun.german]
        if self.name:
            return [self.name]
        gender = "pl" if self.plural else self.noun.gender
        determiner = german_determiner(self.determiner, gender, case, negative)
        ending = german_adjective_ending(self.determiner, gender, case, negative)
        modifiers = [adjective.german_stem + ending for adjective in self.adjectives]
        words = [determiner, *modifiers, self.noun.german_form(case, self.plural)]
        return [word for word in words if word]


class PrepositionalPhrase(typing.NamedTuple):
    """A prepositional phrase; build it with `adjunct` or `prepositional_object`.

    Attributes
    ----------
    kind : str
        Adjunct kind ("loc", "with", "for", "to", "from") or "object" (of a prepositional verb).
    english_preposition, german_preposition : str
        The prepositions ("next to", "neben").
    case : str
        German case the preposition governs here ("acc" or "dat").
    noun_phrase : NounPhrase
        The preposition's object.
    """

    kind: str
    english_preposition: str
    german_preposition: str
    case: str
    noun_phrase: NounPhrase

    def english(self) -> list[str]:
        """English words: "in front of the house"."""
        return [*self.english_preposition.split(), *self.noun_phrase.english()]

    def german(self) -> list[str]:
        """German words with the standard contractions: "vor dem Haus", "im Garten", "zur Schule"."""
        words = self.noun_phrase.german(self.case)
        contraction = _CONTRACTIONS.get((self.german_preposition, words[0]))
        if contraction and self.noun_phrase.determiner is THE and self.noun_phrase.noun is not None:
            return [contraction, *words[1:]]
        return [self.german_preposition, *words]


def adjunct(kind: str, noun_phrase: NounPhrase, location: str = "") -> PrepositionalPhrase:
    """Build an adjunct prepositional phrase.

    Parameters
    ----------
    kind : str
        "loc", "with", "for", "to" or "from".
    noun_phrase : NounPhrase
        The preposition's object.
    location : str
        For kind "loc": the English preposition ("in", "on", "under", "behind", "next to",
        "in front of"); German takes the dative for a location.

    Returns
    -------
    PrepositionalPhrase
        The phrase, with its German preposition and case.
    """
    if kind == "loc":
        return PrepositionalPhrase("loc", location, _LOCATION_PREPOSITIONS[location], "dat", noun_phrase)
    english, german, case = _ADJUNCT_PREPOSITIONS[kind]
    return PrepositionalPhrase(kind, english, german, case, noun_phrase)


def prepositional_object(verb: Verb, noun_phrase: NounPhrase) -> PrepositionalPhrase:
    """The object of a "prepositional" frame verb ("waits for the bus" -> "wartet auf den Bus").

    Parameters
    ----------
    verb : Verb
        A verb with frame "prepositional".
    noun_phrase : NounPhrase
        The object.

    Returns
    -------
    PrepositionalPhrase
        The phrase; its English preposition is part of `verb.english`.
    """
    return PrepositionalPhrase("object", verb.english.split()[-1], verb.german_preposition,
                               verb.object_case, noun_phrase)


class Clause(typing.NamedTuple):
    """One clause before word order is decided.

    Attributes
    ----------
    subject : NounPhrase
        Subject (nominative).
    verb : Verb | None
        Content verb; None for the copula "to be".
    objects : tuple[tuple[str, NounPhrase], ...]
        (case, phrase) pairs in the order both languages use ("gives the child a ball" ->
        "gibt dem Kind einen Ball").
    prepositional_object : PrepositionalPhrase | None
        Object of a prepositional verb ("waits for the bus" -> "wartet auf den Bus").
    adjuncts : tuple[PrepositionalPhrase, ...]
        Optional adjuncts, in any order (each language orders them by kind).
    predicate : Adjective | PrepositionalPhrase | None
        Complement of the copula ("is tired", "is in the garden").
    modal : Modal | None
        Modal verb, if any.
    negated : bool
        Whether the clause is negated.
    complement : Clause | None
        The "that" clause of a "that"-frame verb.
    """

    subject: NounPhrase
    verb: Verb | None
    objects: tuple[tuple[str, NounPhrase], ...] = ()
    prepositional_object: PrepositionalPhrase | None = None
    adjuncts: tuple[PrepositionalPhrase, ...] = ()
    predicate: Adjective | PrepositionalPhrase | None = None
    modal: Modal | None = None
    negated: bool = False
    complement: "Clause | None" = None


def _english_verb_group(clause: Clause) -> list[str]:
    """English finite verb with do-support, modal and negation: "does not want to call"."""
    person = _PERSON_INDEX[clause.subject.person]
    verb = clause.verb
    if verb is None:
        return [_ENGLISH_BE[person], *(["not"] if clause.negated else [])]
    if clause.modal is not None:
        modal = clause.modal.english_negated if clause.negated else clause.modal.english
        if not modal:
            raise ValueError(f"Modal {clause.modal.english[0]!r} cannot be negated here "
                             "(German would need a different modal); drop the negation.")
        return [*modal[person].split(), *verb.english.split()]
    if clause.negated:
        return ["does" if person == 1 else "do", "not", *verb.english.split()]
    return (verb.english_3sg if person == 1 else verb.english).split()


def english_clause(clause: Clause) -> list[str]:
    """English words of a clause (subject-verb-object order, no final punctuation).

    Parameters
    ----------
    clause : Clause
        The clause.

    Returns
    -------
    list[str]
        Words; the first is not capitalized (`render_sentence` does that).
    """
    words = [*clause.subject.english(), *_english_verb_group(clause)]
    for _, noun_phrase in clause.objects:
        words += noun_phrase.english()
    if clause.prepositional_object is not None:
        words += clause.prepositional_object.noun_phrase.english()  # Preposition is in the verb.
    if isinstance(clause.predicate, Adjective):
        words.append(clause.predicate.english)
    elif clause.predicate is not None:
        words += clause.predicate.english()
    for phrase in sorted(clause.adjuncts, key=lambda pp: _ENGLISH_ADJUNCT_ORDER.index(pp.kind)):
        words += phrase.english()
    if clause.complement is not None:
        words += ["that", *english_clause(clause.complement)]
    return words


def _german_middle_field(clause: Clause) -> list[str]:
    """Objects, negation, prepositional object, predicate and adjuncts, in German order."""
    words, kein_used = [], False
    for index, (case, noun_phrase) in enumerate(clause.objects):
        negative = clause.negated and index == len(clause.objects) - 1 and noun_phrase.takes_kein
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
    for phrase in sorted(clause.adjuncts, key=lambda pp: _GERMAN_ADJUNCT_ORDER.index(pp.kind)):
        words += phrase.german()
    return words


def _german_verb_parts(clause: Clause) -> tuple[str, list[str], list[str]]:
    """(finite verb of a main clause, main-clause right bracket, subordinate-clause verb cluster)."""
    person = _PERSON_INDEX[clause.subject.person]
    verb = clause.verb
    if verb is None:
        return _GERMAN_BE[person], [], [_GERMAN_BE[person]]
    if clause.modal is not None:
        finite = clause.modal.german[person]
        return finite, [verb.german_infinitive], [verb.german_infinitive, finite]
    finite = verb.german_present[person]
    return finite, [verb.particle] if verb.particle else [], [verb.particle + finite]


def german_main_clause(clause: Clause, prefield: list[str] | None = None) -> list[str]:
    """German main clause, verb second.

    Parameters
    ----------
    clause : Clause
        The clause.
    prefield : list[str] | None
        Words before the finite verb (a fronted adverb or subordinate clause with its comma); the
        subject then follows the verb. None puts the subject first.

    Returns
    -------
    list[str]
        Words (the "dass" complement included), no final punctuation.
    """
    finite, right_bracket, _ = _german_verb_parts(clause)
    subject = clause.subject.german("nom")
    if prefield:
        words = [*prefield, finite, *subject]
    else:
        words = [*subject, finite]
    words += [*_german_middle_field(clause), *right_bracket]
    if clause.complement is not None:
        words += [",", "dass", *german_subordinate_clause(clause.complement)]
    return words


def german_subordinate_clause(clause: Clause) -> list[str]:
    """German subordinate clause body, verb last ("der Hund den Ball nicht sehen kann").

    Parameters
    ----------
    clause : Clause
        The clause (no "that" complement).

    Returns
    -------
    list[str]
        Words without the conjunction.
    """
    _, _, verb_cluster = _german_verb_parts(clause)
    return [*clause.subject.german("nom"), *_german_middle_field(clause), *verb_cluster]


def _join_words(words: list[str]) -> str:
    """Join words, attach commas, capitalize the first word, end with a period."""
    text = " ".join(words).replace(" ,", ",")
    return text[0].upper() + text[1:] + "."


class Sentence(typing.NamedTuple):
    """A whole sentence: a template, its clauses and the word that connects them.

    Attributes
    ----------
    template : str
        "simple" (one main clause), "adverb" (fronted adverb, then verb second: "Heute spielt ..."),
        "main_subordinate" ("..., weil ..."), "subordinate_main" ("Weil ..., spielt ...") or
        "coordinated" ("... und ...", "..., aber ...").
    main : Clause
        The main clause (the first one for "coordinated").
    other : Clause | None
        The subordinate clause, or the second main clause.
    connective : tuple[str, str]
        (English, German) adverb, conjunction or coordinator, from `ADVERBS`, `CONJUNCTIONS` or
        `COORDINATORS`.
    """

    template: str
    main: Clause
    other: Clause | None = None
    connective: tuple[str, str] = ("", "")


def _sentence_words(sentence: Sentence) -> tuple[list[str], list[str]]:
    """English and German words of a sentence, following its template."""
    english_connective, german_connective = (words.split() for words in sentence.connective)
    main, other = sentence.main, sentence.other
    if sentence.template == "simple":
        return english_clause(main), german_main_clause(main)
    if sentence.template == "adverb":
        return [*english_connective, *english_clause(main)], german_main_clause(main, german_connective)
    if sentence.template == "coordinated":
        return ([*english_clause(main), *english_connective, *english_clause(other)],
                [*german_main_clause(main), *german_connective, *german_main_clause(other)])
    german_subordinate = [*german_connective, *german_subordinate_clause(other)]
    if sentence.template == "main_subordinate":
        return ([*english_clause(main), *english_connective, *english_clause(other)],
                [*german_main_clause(main), ",", *german_subordinate])
    if sentence.template == "subordinate_main":
        return ([*english_connective, *english_clause(other), ",", *english_clause(main)],
                german_main_clause(main, [*german_subordinate, ","]))
    raise ValueError(f"Unknown sentence template {sentence.template!r}; choose from {_TEMPLATES}.")


def render_sentence(sentence: Sentence) -> tuple[str, str]:
    """The English and German text of a sentence.

    Parameters
    ----------
    sentence : Sentence
        The sentence.

    Returns
    -------
    tuple[str, str]
        English and German, first word capitalized, commas attached, ending with ".".
    """
    english, german = _sentence_words(sentence)
    return _join_words(english), _join_words(german)


# =====================================================================================================
# Sampling
# =====================================================================================================


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
_ANY_NOUN = frozenset(_ALL_NOUNS.split())
_MOVABLE = frozenset(_CONCRETE.split())
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
                                      determiners=_PLACE_DETERMINERS, nouns=(noun,))
    return adjunct("loc", noun_phrase, preposition)


def _sample_adjunct(rng: random.Random, kind: str, max_adjectives: int) -> PrepositionalPhrase:
    """An adjunct: a location, a destination/origin (to/from), a person (for), a companion (with)."""
    if kind == "loc":
        return _sample_location(rng, max_adjectives)
    if kind in ("to", "from"):
        noun_phrase = _sample_noun_phrase(rng, _ADJUNCT_TAGS[kind], max_adjectives=max_adjectives,
                                          determiners=_PLACE_DETERMINERS, nouns=_DESTINATION_NOUNS)
    else:
        noun_phrase = _sample_noun_phrase(rng, _ADJUNCT_TAGS[kind], max_adjectives=max_adjectives)
    return adjunct(kind, noun_phrase)


def _sample_adjuncts(rng: random.Random, verb: Verb, negated: bool, max_adjuncts: int,
                     max_adjectives: int) -> tuple[PrepositionalPhrase, ...]:
    """0-2 adjuncts the verb allows, at most one spatial (location, direction or origin).

    A negated clause keeps only directional adjuncts ("geht nicht zur Schule"): with free adjuncts
    the position of "nicht" depends on focus, which a one-to-one mapping cannot express.
    """
    allowed = [kind for kind in verb.adjuncts if not negated or kind in ("to", "from")]
    count = min(max_adjuncts, len(allowed), _draw(rng, _COUNTS, _ADJUNCT_COUNT_WEIGHTS))
    kinds: list[str] = []
    for kind in rng.sample(allowed, count):
        spatial_taken = any(taken in _SPATIAL_ADJUNCTS for taken in kinds)
        if not (kind in _SPATIAL_ADJUNCTS and spatial_taken):
            kinds.append(kind)
    return tuple(_sample_adjunct(rng, kind, max_adjectives) for kind in kinds)


def _sample_objects(rng: random.Random, verb: Verb, negated: bool,
                    max_adjectives: int) -> tuple[tuple[tuple[str, NounPhrase], ...],
                                                  PrepositionalPhrase | None]:
    """Nominal objects and prepositional object required by the verb's frame."""
    determiners = _NEGATABLE_OBJECT_DETERMINERS if negated else DETERMINERS

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


def sample_clause(rng: random.Random, *, subordinate: bool = False, max_adjuncts: int = 2,
                  max_adjectives: int = 2) -> Clause:
    """Draw one clause from the grammar.

    Parameters
    ----------
    rng : random.Random
        Source of randomness (the only one: the result is a function of its state).
    subordinate : bool
        Whether the clause will be subordinate; such clauses take no "that" complement.
    max_adjuncts, max_adjectives : int
        Caps on prepositional adjuncts per clause and adjectives per noun phrase.

    Returns
    -------
    Clause
        The clause.
    """
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
        complement = sample_clause(rng, subordinate=True, max_adjuncts=1, max_adjectives=1)
    return Clause(subject, verb, objects, prepositional_object, adjuncts, None, modal, negated,
                  complement)


_TEMPLATES = ("simple", "adverb", "main_subordinate", "subordinate_main", "coordinated")
_TEMPLATE_WEIGHTS = _cumulative((0.38, 0.14, 0.18, 0.12, 0.18))


def sample_sentence(rng: random.Random) -> Sentence:
    """Draw one sentence: a template, its clauses and its connective.

    Parameters
    ----------
    rng : random.Random
        Source of randomness.

    Returns
    -------
    Sentence
        The sentence; two-clause templates use simpler clauses (fewer adjuncts or adjectives).
    """
    template = _draw(rng, _TEMPLATES, _TEMPLATE_WEIGHTS)
    if template == "simple":
        return Sentence(template, sample_clause(rng))
    if template == "adverb":
        return Sentence(template, sample_clause(rng), None, _pick(rng, ADVERBS))
    main = sample_clause(rng, subordinate=True, max_adjuncts=2, max_adjectives=1)
    other = sample_clause(rng, subordinate=True, max_adjuncts=1, max_adjectives=2)
    connective = _pick(rng, COORDINATORS if template == "coordinated" else CONJUNCTIONS)
    return Sentence(template, main, other, connective)


def sample_pair(rng: random.Random) -> tuple[str, str]:
    """Draw one (English, German) sentence pair of at most `MAX_WORDS` English words.

    Parameters
    ----------
    rng : random.Random
        Source of randomness.

    Returns
    -------
    tuple[str, str]
        English and German sentences, capitalized, ending with ".".
    """
    while True:
        english, german = render_sentence(sample_sentence(rng))
        if len(english.split()) <= MAX_WORDS:
            return english, german


def iter_pairs(seed: int = SEED) -> Iterator[tuple[str, str]]:
    """Endless stream of sentence pairs, duplicates included.

    Parameters
    ----------
    seed : int
        Seed of the stream's `random.Random`.

    Returns
    -------
    Iterator[tuple[str, str]]
        (English, German) pairs.
    """
    rng = random.Random(seed)
    while True:
        yield sample_pair(rng)


# =====================================================================================================
# Splits
# =====================================================================================================


def split_of(english: str) -> str:
    """The split an English sentence belongs to, from a hash of its text.

    Parameters
    ----------
    english : str
        An English sentence.

    Returns
    -------
    str
        "test" (1 in 100 sentences), "validation" (1 in 100) or "train".
    """
    digest = hashlib.blake2b(english.encode("utf-8"), digest_size=8).digest()
    bucket = int.from_bytes(digest, "big") % _HASH_BUCKETS
    return {0: "test", 1: "validation"}.get(bucket, "train")


def default_split_sizes() -> dict[str, int]:
    """{"train": TRAIN_SIZE, "validation": VALIDATION_SIZE, "test": TEST_SIZE}, read at call time."""
    return {"train": TRAIN_SIZE, "validation": VALIDATION_SIZE, "test": TEST_SIZE}


def generate_splits(sizes: Mapping[str, int], seed: int = SEED) -> dict[str, list[tuple[str, str]]]:
    """The first `sizes[split]` pairs of each split, in one pass over the stream.

    Parameters
    ----------
    sizes : Mapping[str, int]
        Number of pairs wanted per split name ("train", "validation", "test"); missing splits get none.
    seed : int
        Seed of the stream.

    Returns
    -------
    dict[str, list[tuple[str, str]]]
        (English, German) pairs per requested split, in stream order. No English sentence occurs
        twice, in one split or across splits.

    Notes
    -----
    The stream is deduplicated on the English side and each sentence goes to the split `split_of`
    names, so a split's first N pairs do not depend on the sizes asked for the other splits.
    """
    unknown = set(sizes) - set(SPLITS)
    if unknown:
        raise ValueError(f"Unknown split(s) {sorted(unknown)}; choose from {SPLITS}.")
    if any(size < 0 for size in sizes.values()):
        raise ValueError(f"Split sizes must be >= 0, got {dict(sizes)}.")
    splits: dict[str, list[tuple[str, str]]] = {split: [] for split in sizes}
    missing = sum(sizes.values())
    seen: set[str] = set()
    pairs = iter_pairs(seed)
    while missing:
        english, german = next(pairs)
        if english in seen:
            continue
        seen.add(english)
        split = split_of(english)
        if split in splits and len(splits[split]) < sizes[split]:
            splits[split].append((english, german))
            missing -= 1
    return splits


def generate_split(split: str, num_examples: int | None = None) -> list[tuple[str, str]]:
    """The (English, German) pairs of one split, without TFDS.

    Parameters
    ----------
    split : str
        "train", "validation" or "test".
    num_examples : int | None
        How many pairs; None takes the module's size for the split (`TRAIN_SIZE`, `VALIDATION_SIZE`,
        `TEST_SIZE`). Smaller values give a prefix of the full split.

    Returns
    -------
    list[tuple[str, str]]
        Pairs, identical to what the TFDS builder stores for the split, in the same order.
    """
    if split not in SPLITS:
        raise ValueError(f"Unknown split {split!r}; choose from {SPLITS}.")
    size = default_split_sizes()[split] if num_examples is None else num_examples
    return generate_splits({split: size})[split]


# =====================================================================================================
# TFDS builder
# =====================================================================================================


@dataclasses.dataclass(eq=False)
class SyntheticEnDeConfig(tfds.core.BuilderConfig):
    """Builder config: the number of pairs per split (None: the module constants at build time)."""

    train_size: int | None = None
    validation_size: int | None = None
    test_size: int | None = None

    def split_sizes(self) -> dict[str, int]:
        """Pairs per split for this config."""
        sizes = default_split_sizes()
        given = {"train": self.train_size, "validation": self.validation_size, "test": self.test_size}
        return {split: sizes[split] if size is None else size for split, size in given.items()}


_DESCRIPTION = (
    "Synthetic English->German translation from a small grammar: gender/case agreement, plurals and "
    "numbers, verb-second and verb-final word order, separable and modal verbs, negation. Generated "
    "by attention_jax.synthetic_en_de; no download.")


class SyntheticEnDe(tfds.core.GeneratorBasedBuilder):
    """TFDS builder "synthetic_en_de": the synthetic task with the layout of wmt14_translate.

    Examples are {"de": str, "en": str} (`tfds.features.Translation`); splits "train", "validation",
    "test"; the stored order is `generate_split`'s order. Configs: "default" (`TRAIN_SIZE`,
    `VALIDATION_SIZE`, `TEST_SIZE`) and "small" (10,000 / 100 / 100 pairs, for smoke tests).

    Notes
    -----
    The file format defaults to "array_record" (readable with `as_data_source` and no TensorFlow)::

        builder = SyntheticEnDe(data_dir=d, file_format="array_record")
        builder.download_and_prepare()
        train = builder.as_data_source("train")
    """

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}
    BUILDER_CONFIGS = [
        SyntheticEnDeConfig(name="default", description="Full size (module constants)."),
        SyntheticEnDeConfig(name="small", description="10k/100/100 pairs for smoke tests.",
                            train_size=10_000, validation_size=100, test_size=100),
    ]

    @tfds.core.utils.classproperty
    @classmethod
    def code_path(cls) -> None:
        """No source path: there are no download checksums to look up next to this file.

        TFDS 4.9.10 locates a builder's source through the `importlib_resources` backport, which it
        does not declare as a dependency (tensorflow/datasets#11212); returning None skips that.
        """
        return None

    def __init__(self, *, file_format: str | None = None, **kwargs: typing.Any) -> None:
        """Create the builder; `file_format` defaults to "array_record", other kwargs go to TFDS."""
        super().__init__(file_format=file_format or "array_record", **kwargs)

    def _info(self) -> tfds.core.DatasetInfo:
        """Features, supervised keys and description."""
        return tfds.core.DatasetInfo(
            builder=self,
            description=_DESCRIPTION,
            features=tfds.features.Translation(languages=("de", "en")),
            supervised_keys=("en", "de"),
            disable_shuffling=True,  # Keep generate_split's order.
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict:
        """All splits from one pass over the stream; nothing is downloaded."""
        del dl_manager
        pairs = generate_splits(self.builder_config.split_sizes())
        return {split: self._generate_examples(pairs[split]) for split in SPLITS}

    def _generate_examples(self, pairs: list[tuple[str, str]]) -> Iterator[tuple[int, dict[str, str]]]:
        """Yield (index, {"de": german, "en": english})."""
        for index, (english, german) in enumerate(pairs):
            yield index, {"de": german, "en": english}

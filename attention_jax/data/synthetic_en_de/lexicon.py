"""The lexicon of the synthetic EN->DE task: every word class with its English and German forms."""

from __future__ import annotations

import dataclasses
import functools

CASES = ("nom", "acc", "dat")


@dataclasses.dataclass(frozen=True, eq=False)
class Noun:
    """A common noun with its English and German forms."""

    english: str
    english_plural: str
    gender: str  # German grammatical gender: "m", "f" or "n".
    german: str  # German nominative, capitalized.
    german_plural: str
    tags: frozenset[str]  # Semantic classes ("person", "animal", "thing", ...) that verbs and adjectives select for.
    german_oblique: str = ""  # Acc./dat. singular of weak masculine nouns ("Jungen").
    locations: tuple[str, ...] = ()  # English prepositions that can locate something at this noun ("in", "under").
    destination: bool = False  # Whether "to the X"/"from the X" (zu/von) reads naturally.

    def german_form(self, case: str, plural: bool) -> str:
        """Return the German form: dative plural adds -n, weak nouns add -(e)n.

        Parameters
        ----------
        case : str
            "nom", "acc" or "dat".
        plural : bool
            Plural form.

        Returns
        -------
        str
            The form.
        """
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
    """An adjective: English word, German stem for attributive endings, German predicative form."""

    english: str
    german_stem: str  # Takes the declension ending ("müd" -> "müde", "teur" -> "teure").
    german_predicative: str  # Uninflected, after "sein" ("müde", "teuer").
    is_color: bool  # Colors follow the other adjectives in both languages ("the big red car").
    tags: frozenset[str]  # Noun classes the adjective can describe.


def _adjective(english: str, german: str, tags: str, *, is_color: bool = False) -> Adjective:
    """Adjective from a German "stem/predicative" string ("teur/teuer") or a single stem ("rot")."""
    stem, _, predicative = german.partition("/")
    return Adjective(english, stem, predicative or stem, is_color, frozenset(tags.split()))


ALL_NOUNS = "person animal thing vehicle food place"
ADJECTIVES = (
    _adjective("big", "groß", ALL_NOUNS),
    _adjective("small", "klein", ALL_NOUNS),
    _adjective("old", "alt", "person animal thing vehicle place"),
    _adjective("young", "jung", "person animal"),
    _adjective("new", "neu", "thing vehicle place"),
    _adjective("beautiful", "schön", ALL_NOUNS),
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

    ``kind``: "definite" (der/die/das), "der_word" (dieser: weak adjectives follow), "ein_word" (ein, kein:
    mixed), "quantifier" (viele: strong), "number" (invariant, strong) or "bare" (none, strong).
    """

    english: str  # "" where the determiner lacks a number (or is absent: the bare plural "red cars").
    english_plural: str
    german_stem: str  # Takes the case ending ("dies", "ein", "unser") or is invariant ("drei").
    kind: str  # "definite", "der_word", "ein_word", "quantifier", "number" or "bare" (see the class).

    @functools.cached_property
    def numbers(self) -> tuple[bool, ...]:
        """Return the values of ``plural`` this determiner allows.

        Returns
        -------
        tuple[bool, ...]
            Allowed values.
        """
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
NEGATABLE_OBJECT_DETERMINERS = (THE, A, BARE_PLURAL, *(d for d in DETERMINERS if d.german_stem in (
    "dies", "mein", "sein", "ihr", "unser")))
# Determiners for places and destinations ("in the garden", "zu meinem Freund"; not "in three gardens").
PLACE_DETERMINERS = tuple(d for d in DETERMINERS if d.kind not in ("number", "quantifier", "bare"))


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
    """A verb with its argument frame ("ditransitive": dative + accusative; "that": a "dass" clause)."""

    english: str  # Particle or preposition included ("pick up", "waits for").
    english_3sg: str
    german_infinitive: str  # Particle included ("anrufen").
    german_present: tuple[str, str, str]  # 1sg, 3sg, plural, no separable particle ("rufe", "ruft", "rufen").
    particle: str  # Separable: main clause end, joined to the verb in a subordinate one ("..., weil er sie anruft").
    frame: str  # "intransitive", "accusative", "dative", "ditransitive", "prepositional", "that" or "copula".
    subject_tags: frozenset[str]  # Noun classes allowed as subject.
    object_tags: frozenset[str]  # Noun classes allowed as objects.
    adjuncts: tuple[str, ...]  # Optional prepositional phrases: "loc", "with", "for", "to", "from".
    german_preposition: str = ""  # Prepositional frame: the German preposition ("auf") ...
    object_case: str = ""  # ... and its case ("acc").


_ANIMATE = "person animal"
CONCRETE = "person animal thing vehicle food"


def _verb(english: str, german: str, frame: str, subject: str = _ANIMATE, objects: str = "",
          adjuncts: str = "", preposition: str = "") -> Verb:
    """Verb from "see/sees", "sehen: sehe sieht sehen" (separable "an|rufen: ..."), preposition "auf+acc"."""
    english_base, english_3sg = english.split("/")
    infinitive, forms = german.split(": ")
    particle, _, _ = infinitive.rpartition("|")
    german_preposition, _, object_case = preposition.partition("+")
    first_singular, third_singular, plural = forms.split()
    return Verb(english_base, english_3sg, infinitive.replace("|", ""), (first_singular, third_singular, plural),
                particle, frame, frozenset(subject.split()), frozenset(objects.split()), tuple(adjuncts.split()),
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
    _verb("see/sees", "sehen: sehe sieht sehen", "accusative", objects=CONCRETE + " place",
          adjuncts="loc"),
    _verb("buy/buys", "kaufen: kaufe kauft kaufen", "accusative", "person", "thing vehicle food",
          "for loc"),
    _verb("find/finds", "finden: finde findet finden", "accusative", objects=CONCRETE,
          adjuncts="loc"),
    _verb("have/has", "haben: habe hat haben", "accusative", objects="animal thing vehicle food"),
    _verb("need/needs", "brauchen: brauche braucht brauchen", "accusative", "person",
          "thing vehicle food"),
    _verb("like/likes", "mögen: mag mag mögen", "accusative", objects=CONCRETE + " place"),
    _verb("read/reads", "lesen: lese liest lesen", "accusative", "person", "readable", "loc"),
    _verb("eat/eats", "essen: esse isst essen", "accusative", "person", "food", "with loc"),
    _verb("eat/eats", "fressen: fresse frisst fressen", "accusative", "animal", "food", "loc"),
    _verb("wash/washes", "waschen: wasche wäscht waschen", "accusative", "person",
          "person animal thing vehicle", "loc"),
    _verb("carry/carries", "tragen: trage trägt tragen", "accusative", "person", "thing food", "to"),
    _verb("visit/visits", "besuchen: besuche besucht besuchen", "accusative", "person",
          "person place", "with"),
    _verb("draw/draws", "zeichnen: zeichne zeichnet zeichnen", "accusative", "person",
          CONCRETE + " place", "for loc"),
    _verb("love/loves", "lieben: liebe liebt lieben", "accusative", objects=_ANIMATE),
    _verb("hear/hears", "hören: höre hört hören", "accusative", objects=_ANIMATE, adjuncts="loc"),
    _verb("open/opens", "öffnen: öffne öffnet öffnen", "accusative", "person", "openable", "for"),
    _verb("look for/looks for", "suchen: suche sucht suchen", "accusative", objects=CONCRETE,
          adjuncts="loc"),
    _verb("call/calls", "an|rufen: rufe ruft rufen", "accusative", "person", "person"),
    _verb("pick up/picks up", "auf|heben: hebe hebt heben", "accusative", "person", "thing food",
          "loc"),
    _verb("invite/invites", "ein|laden: lade lädt laden", "accusative", "person", "person"),
    _verb("look at/looks at", "an|sehen: sehe sieht sehen", "accusative", objects=CONCRETE + " place",
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
    _verb("think of/thinks of", "denken: denke denkt denken", "prepositional", "person", CONCRETE,
          preposition="an+acc"),
    _verb("think about/thinks about", "nach|denken: denke denkt denken", "prepositional", "person",
          CONCRETE + " place", preposition="über+acc"),
    _verb("laugh at/laughs at", "lachen: lache lacht lachen", "prepositional", "person", CONCRETE,
          preposition="über+acc"),
    # "that" clause.
    _verb("say/says", "sagen: sage sagt sagen", "that", "person"),
    _verb("know/knows", "wissen: weiß weiß wissen", "that", "person"),
    _verb("think/thinks", "denken: denke denkt denken", "that", "person"),
    _verb("believe/believes", "glauben: glaube glaubt glauben", "that", "person"),
    _verb("hope/hopes", "hoffen: hoffe hofft hoffen", "that", "person"),
)
# English/German "to be": 1sg, 3sg, plural.
ENGLISH_BE = ("am", "is", "are")
GERMAN_BE = ("bin", "ist", "sind")
PERSON_INDEX = {"1sg": 0, "3sg": 1, "pl": 2}


@dataclasses.dataclass(frozen=True, eq=False)
class Modal:
    """A modal verb: the content verb goes to the end as an infinitive ("kann ... sehen")."""

    english: tuple[str, str, str]  # 1sg, 3sg and plural ("wants to").
    english_negated: tuple[str, str, str] | tuple[()]  # Empty where negation changes the German modal (darf nicht).
    german: tuple[str, str, str]  # Present tense for 1sg, 3sg and plural.


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
LOCATION_PREPOSITIONS = {"in": "in", "on": "auf", "under": "unter", "behind": "hinter",
                          "next to": "neben", "in front of": "vor"}
# Adjunct kind -> (English preposition, German preposition, German case); "loc" depends on the noun.
ADJUNCT_PREPOSITIONS = {"with": ("with", "mit", "dat"), "for": ("for", "für", "acc"),
                         "to": ("to", "zu", "dat"), "from": ("from", "von", "dat")}
# Word order of adjuncts. German: comitative/benefactive, then place, then direction (last before the
# verb bracket); English: direction first ("goes to school with the dog").
GERMAN_ADJUNCT_ORDER = ("with", "for", "loc", "to", "from")
ENGLISH_ADJUNCT_ORDER = ("to", "from", "with", "for", "loc")
SPATIAL_ADJUNCTS = ("loc", "to", "from")  # At most one of these per clause.
# Preposition + definite article contractions (standard German).
CONTRACTIONS = {("in", "dem"): "im", ("zu", "dem"): "zum", ("zu", "der"): "zur", ("von", "dem"): "vom",
                 ("an", "dem"): "am"}


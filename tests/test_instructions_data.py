"""The evaluation data for recognising user instructions (tests/data/instructions/) keeps its
shape: schema, the sizes issue 31 asks for, no text shared between the held-out sets and the
tuning side (both tuning sets; nor between one held-out set and an earlier one), and the
issue's own examples on the tuning side only."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data" / "instructions"
LANGS = {"en", "pt", "es"}
KINDS = {"rule", "constraint", "fact", "preference", "goal", "lift", "none"}
INSTRUCTION_KINDS = KINDS - {"lift", "none"}
# In the order they were written: each held-out set is kept apart from every earlier side.
SIDES = [
    "tuning",
    "heldout",
    "heldout2",
    "heldout3",
    "heldout4",
    "heldout5",
    "heldout6",
    "heldout7",
    "heldout8",
    "heldout9",
    "heldout10",
    "heldout11",
    "heldout12",
    "heldout13",
    "heldout14",
    "heldout15",
    "heldout16",
    "heldout17",
    "heldout18",
    "heldout19",
    "heldout20",
    "heldout21",
    "heldout22",
    "heldout23",
    "heldout24",
    "heldout25",
]
HELDOUT_SIDES = SIDES[1:]
# Least (same point, different point) reversal pairs per side.
PAIR_LEAST = {
    "tuning": (60, 30),
    "heldout": (60, 30),
    "heldout2": (25, 13),
    "heldout3": (25, 13),
    "heldout4": (30, 15),
    "heldout5": (24, 12),
    "heldout6": (40, 20),
    "heldout7": (42, 21),
    "heldout8": (42, 21),
    "heldout9": (42, 21),
    "heldout10": (42, 21),
    "heldout11": (42, 21),
    "heldout12": (43, 21),
    "heldout13": (45, 22),
    "heldout14": (45, 22),
    "heldout15": (46, 23),
    "heldout16": (48, 24),
    "heldout17": (48, 24),
    "heldout18": (50, 26),
    "heldout19": (50, 26),
    "heldout20": (56, 30),
    "heldout21": (56, 30),
    "heldout22": (56, 30),
    "heldout23": (56, 30),
    "heldout24": (56, 30),
    "heldout25": (56, 30),
}
# The sentence files of each side of the separation checks.
TUNING_SENTENCES = tuple(f"tuning{n}.jsonl" for n in ("", 2, 3, 4, 5, 7, 8, 9, 10, 11, 12))
SENTENCE_FILES = {"tuning": TUNING_SENTENCES} | {side: (f"{side}.jsonl",) for side in HELDOUT_SIDES}
# The reversal pair files of each side, and the least pairs of a later tuning one.
LATER_TUNING_PAIRS = {
    "reversals-tuning4.jsonl": (60, 30),
    "reversals-tuning5.jsonl": (60, 30),
    "reversals-tuning6.jsonl": (150, 55),
    "reversals-tuning7.jsonl": (130, 65),
    "reversals-tuning8.jsonl": (100, 50),
    "reversals-tuning9.jsonl": (100, 50),
    "reversals-tuning10.jsonl": (100, 50),
    "reversals-tuning11.jsonl": (90, 45),
    "reversals-tuning12.jsonl": (95, 48),
}
PAIR_FILES = {"tuning": ("reversals-tuning.jsonl", *LATER_TUNING_PAIRS)} | {
    side: (f"reversals-{side}.jsonl",) for side in HELDOUT_SIDES
}

ISSUE_REVERSALS = [
    ("Never push to main.", "Pushing to main is OK now."),
    ("Do not use the staging cluster.", "The staging cluster is back, feel free to use it."),
    (
        "Never deploy on Fridays.",
        "Forget what I said about Friday deploys; we can deploy any day now.",
    ),
    ("Nunca faça push na main.", "Pode fazer push na main agora."),
]
ISSUE_SENTENCES = [
    "Under no circumstances touch the production database.",
    "It is forbidden to run migrations during business hours.",
    "Customer emails are off limits for you.",
    "Em hipótese alguma apague os backups do cliente.",
    "Bajo ninguna circunstancia borres la base de datos de producción.",
    "Keep spending below four thousand euros.",
]


@cache
def rows(name: str) -> tuple[dict[str, Any], ...]:
    with (DATA / name).open(encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())


@cache
def dense() -> dict[str, Any]:
    with (DATA / "dense-sessions.json").open(encoding="utf-8") as fh:
        data: dict[str, Any] = json.load(fh)
    return data


def normalised(text: str) -> str:
    """Lowercased, accents and punctuation stripped, whitespace collapsed."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return " ".join(re.sub(r"[^\w\s]", " ", bare).split())


def dense_texts() -> list[str]:
    texts = []
    for language in dense()["languages"].values():
        texts += language["chatter"]
        for item in (i for s in language["item_sets"] for i in s["items"]):
            texts.append(item["text"])
            if "superseded_by" in item:
                texts.append(item["superseded_by"]["text"])
    return texts


def side_texts(side: str) -> list[str]:
    """Every text on one side: sentences, lifted statements, reversal pairs, pasted lines."""
    texts = []
    for row in (row for name in SENTENCE_FILES[side] for row in rows(name)):
        texts += [row["text"], row.get("lifts", "")]
    for pair in (pair for name in PAIR_FILES[side] for pair in rows(name)):
        texts += [pair["first"], pair["later"]]
    texts += [row["text"] for row in rows("pasted-lines.jsonl") if row["set"] == side]
    if side == "heldout":
        texts += dense_texts()
    return [t for t in texts if t]


@pytest.mark.parametrize(
    "side", [*(n.removesuffix(".jsonl") for n in TUNING_SENTENCES), *HELDOUT_SIDES]
)
def test_sentence_rows_have_the_schema(side: str) -> None:
    ids = Counter(row["id"] for row in rows(f"{side}.jsonl"))
    assert not [i for i, n in ids.items() if n > 1]
    for row in rows(f"{side}.jsonl"):
        assert {"id", "text", "lang", "kind", "style", "source"} <= row.keys(), row
        assert row["lang"] in LANGS and row["kind"] in KINDS, row
        assert row["text"].strip() and "\n" not in row["text"], row
        assert row["style"] and row["source"], row
        assert bool(row.get("lifts")) == (row["kind"] == "lift"), row


@pytest.mark.parametrize(("side", "least"), [("heldout", 360), ("tuning", 300)])
def test_sentence_sets_have_their_sizes(side: str, least: int) -> None:
    kinds = Counter(row["kind"] for row in rows(f"{side}.jsonl"))
    instructions = sum(kinds[k] for k in INSTRUCTION_KINDS)
    assert instructions >= least
    assert kinds["rule"] + kinds["constraint"] >= 200
    assert kinds["none"] >= instructions + kinds["lift"]
    langs = Counter(row["lang"] for row in rows(f"{side}.jsonl"))
    assert min(langs[lang] for lang in LANGS) >= 0.25 * sum(langs.values())


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    """The least a later held-out set holds: instructions, rules and constraints, nones (and
    whether the nones must also outnumber the instructions), and each language's share."""

    instructions: int
    rules: int
    nones: int
    balanced: bool
    english: float
    others: float
    lifts: int = 0


# The brief the sixth to ninth sets were written to: about half English, over a fifth each
# Portuguese and Spanish.
BRIEF_SIZES = Sizes(
    instructions=363, rules=255, nones=180, balanced=False, english=0.45, others=0.22
)
TENTH_SIZES = Sizes(
    instructions=375, rules=265, nones=185, balanced=False, english=0.45, others=0.22
)
LATER_SIZES = {
    # The second set: as many nones as instructions, mostly English.
    "heldout2": Sizes(
        instructions=300, rules=170, nones=300, balanced=True, english=0.55, others=0.18
    ),
    # The third set: about half English, a quarter each Portuguese and Spanish.
    "heldout3": Sizes(
        instructions=350, rules=260, nones=330, balanced=False, english=0.45, others=0.22
    ),
    # The fourth set: about half English, a quarter each Portuguese and Spanish.
    "heldout4": Sizes(
        instructions=400, rules=290, nones=280, balanced=False, english=0.45, others=0.22
    ),
    # The fifth set: about half English, a quarter each Portuguese and Spanish.
    "heldout5": Sizes(
        instructions=350, rules=260, nones=170, balanced=False, english=0.45, others=0.22
    ),
    # The sixth to ninth sets: the same brief.
    "heldout6": BRIEF_SIZES,
    "heldout7": BRIEF_SIZES,
    "heldout8": BRIEF_SIZES,
    "heldout9": BRIEF_SIZES,
    # The tenth set on: about half English, over a fifth each Portuguese and Spanish (the
    # eleventh, thirteenth and fourteenth with a few lifts, judged by the pairs, not the
    # sentences).
    "heldout10": TENTH_SIZES,
    "heldout11": replace(TENTH_SIZES, lifts=10),
    "heldout12": TENTH_SIZES,
    "heldout13": replace(TENTH_SIZES, lifts=10),
    "heldout14": replace(TENTH_SIZES, lifts=10),
}


@pytest.mark.parametrize("side", sorted(LATER_SIZES))
def test_later_heldout_sets_have_their_sizes(side: str) -> None:
    least = LATER_SIZES[side]
    kinds = Counter(row["kind"] for row in rows(f"{side}.jsonl"))
    instructions = sum(kinds[k] for k in INSTRUCTION_KINDS)
    assert instructions >= least.instructions
    assert kinds["rule"] + kinds["constraint"] >= least.rules
    assert kinds["lift"] <= least.lifts
    assert kinds["none"] >= least.nones
    assert kinds["none"] >= instructions or not least.balanced
    langs = Counter(row["lang"] for row in rows(f"{side}.jsonl"))
    total = sum(langs.values())
    assert langs["en"] >= least.english * total
    assert min(langs["pt"], langs["es"]) >= least.others * total
    prefix = side.removeprefix("heldout")
    assert all(row["id"].startswith(f"h{prefix}-{row['lang']}-") for row in rows(f"{side}.jsonl"))


@dataclass(frozen=True, slots=True, kw_only=True)
class Mix:
    """The least a held-out set holds of each kind, of hard negatives, of written voices, and
    of mined rows and their sources."""

    rows: int
    kinds: dict[str, int]
    hard_nones: int
    voices: int
    mined: int
    mined_sources: int


# The briefs of the later sets: the sixth and seventh, then the eighth on.
MIX_560 = Mix(
    rows=560,
    kinds={"rule": 160, "constraint": 95, "fact": 50, "preference": 38, "goal": 20, "none": 180},
    hard_nones=150,
    voices=22,
    mined=40,
    mined_sources=6,
)
MIX_580 = replace(
    MIX_560,
    rows=580,
    kinds={"rule": 165, "constraint": 100, "fact": 50, "preference": 40, "goal": 20, "none": 185},
)
MIXES = {
    "heldout4": Mix(
        rows=650,
        kinds={
            "rule": 200,
            "constraint": 90,
            "fact": 50,
            "preference": 40,
            "goal": 20,
            "none": 280,
        },
        hard_nones=210,
        voices=22,
        mined=20,
        mined_sources=12,
    ),
    "heldout5": Mix(
        rows=560,
        kinds={
            "rule": 160,
            "constraint": 95,
            "fact": 45,
            "preference": 38,
            "goal": 20,
            "none": 180,
        },
        hard_nones=150,
        voices=22,
        mined=40,
        mined_sources=7,
    ),
    "heldout6": MIX_560,
    "heldout7": MIX_560,
    "heldout8": MIX_580,
    "heldout9": MIX_580,
    "heldout10": MIX_580,
    "heldout11": MIX_580,
    # The twelfth: three constraints fewer than the brief's, more facts.
    "heldout12": replace(MIX_580, kinds=MIX_580.kinds | {"constraint": 95}),
    "heldout13": replace(MIX_580, mined=100, mined_sources=15),
    "heldout14": replace(MIX_580, mined=100, mined_sources=18),
    "heldout15": replace(MIX_580, mined=100, mined_sources=18),
    "heldout16": replace(MIX_580, mined=100, mined_sources=14),
    "heldout17": replace(MIX_580, mined=100, mined_sources=18),
    "heldout18": replace(MIX_580, mined=100, mined_sources=18),
    "heldout19": replace(MIX_580, mined=100, mined_sources=16),
    "heldout20": replace(MIX_580, mined=105, mined_sources=17),
    "heldout21": replace(MIX_580, mined=105, mined_sources=17),
    "heldout22": replace(MIX_580, mined=105, mined_sources=17),
    "heldout23": replace(MIX_580, mined=105, mined_sources=17),
    "heldout24": replace(MIX_580, mined=105, mined_sources=17),
    "heldout25": replace(MIX_580, mined=105, mined_sources=17),
}
SOFT_NONE_STYLES = {"chatter", "thanks", "meta", "question"}


@pytest.mark.parametrize("side", sorted(MIXES))
def test_later_heldout_sets_have_their_kinds_voices_and_sources(side: str) -> None:
    """Each kind's least count, mostly hard negatives, the set's own voices, mined rows."""
    least = MIXES[side]
    data = rows(f"{side}.jsonl")
    kinds = Counter(row["kind"] for row in data)
    assert len(data) >= least.rows
    assert all(kinds[kind] >= n for kind, n in least.kinds.items()), kinds
    nones = [row for row in data if row["kind"] == "none"]
    assert sum(row["style"] not in SOFT_NONE_STYLES for row in nones) >= least.hard_nones
    prefix = side.removeprefix("heldout")
    voices = {row["group"] for row in data if row["source"] == "written"}
    assert len(voices) >= least.voices
    assert all(re.fullmatch(rf"voice:\w\w-h{prefix}-[\w-]+", v) for v in voices), voices
    mined = [row for row in data if row["source"] != "written"]
    assert len(mined) >= least.mined
    assert len({row["source"] for row in mined}) >= least.mined_sources
    assert all(row["group"].startswith("mined:") for row in mined)


@dataclass(frozen=True, slots=True, kw_only=True)
class TuningSizes:
    """The least a later tuning set holds (rows, written voices), its share of `none`, and the
    most it holds of lifts and of mined rows (a share)."""

    rows: int
    voices: int
    nones: tuple[float, float]
    lifts: int = 30
    mined: float = 0.1


# The fifth, seventh, eighth and ninth tuning sets' briefs asked for about a third `none`, the
# earlier ones for 40 to 50%; the seventh's for a lift in each voice and about 120 mined rows.
TUNING_SIZES = {
    "tuning2": TuningSizes(rows=900, voices=16, nones=(0.4, 0.5)),
    "tuning3": TuningSizes(rows=1000, voices=20, nones=(0.4, 0.5)),
    "tuning4": TuningSizes(rows=900, voices=22, nones=(0.4, 0.5)),
    "tuning5": TuningSizes(rows=1000, voices=26, nones=(0.28, 0.4)),
    "tuning7": TuningSizes(rows=1000, voices=28, nones=(0.28, 0.4), lifts=40, mined=0.15),
    "tuning8": TuningSizes(rows=800, voices=28, nones=(0.28, 0.4)),
    "tuning9": TuningSizes(rows=800, voices=24, nones=(0.28, 0.4)),
    # The tenth's brief asked for about 40% `none`, nearly all hard negatives.
    "tuning10": TuningSizes(rows=800, voices=26, nones=(0.35, 0.45)),
    # The eleventh's asked for about 42% `none`, nearly all hard negatives.
    "tuning11": TuningSizes(rows=750, voices=23, nones=(0.37, 0.47)),
    # The twelfth's asked for about 35% `none` and rules in words with no rule word.
    "tuning12": TuningSizes(rows=750, voices=24, nones=(0.3, 0.4)),
}


@pytest.mark.parametrize("name", sorted(TUNING_SIZES))
def test_later_tuning_sets_have_their_sizes(name: str) -> None:
    """About half English, some of it `none`, few lifts, few mined rows, new sources."""
    least = TUNING_SIZES[name]
    data = rows(f"{name}.jsonl")
    prefix = f"t{name.removeprefix('tuning')}-"
    kinds = Counter(row["kind"] for row in data)
    langs = Counter(row["lang"] for row in data)
    assert len(data) >= least.rows and kinds["lift"] <= least.lifts
    assert least.nones[0] * len(data) <= kinds["none"] <= least.nones[1] * len(data)
    assert langs["en"] >= 0.45 * len(data)
    assert min(langs["pt"], langs["es"]) >= 0.22 * len(data)
    assert all(row["id"].startswith(f"{prefix}{row['lang']}-") for row in data)
    written = [row for row in data if row["source"] == "written"]
    assert len(data) - len(written) <= least.mined * len(data)
    voices = {row["group"] for row in written}
    assert len(voices) >= least.voices
    assert all(re.fullmatch(rf"voice:\w\w-{prefix}[\w-]+", v) for v in voices)
    # No mined file or thread of another set, and no voice of one.
    others = [row for side in SIDES for name in SENTENCE_FILES[side] for row in rows(name)]
    others = [row for row in others if not row["id"].startswith(prefix)]
    shared = sources(data) & sources(others)
    assert not shared, shared


def sources(data: Iterable[dict[str, Any]]) -> set[str]:
    """The groups and sources of some sentence rows, `written` aside."""
    return {row[key] for row in data for key in ("group", "source")} - {"written"}


@pytest.mark.parametrize(
    ("name", "least"),
    [(f"reversals-{side}.jsonl", PAIR_LEAST[side]) for side in SIDES]
    + list(LATER_TUNING_PAIRS.items()),
)
def test_reversal_pairs_have_the_schema(name: str, least: tuple[int, int]) -> None:
    pairs = rows(name)
    assert len({pair["id"] for pair in pairs}) == len(pairs)
    for pair in pairs:
        assert pair.keys() == {"id", "lang", "first", "later", "relation", "same_point"}, pair
        assert pair["lang"] in LANGS and pair["relation"] in {"lift", "change"}, pair
        assert normalised(pair["first"]) != normalised(pair["later"]), pair
    same = Counter(pair["same_point"] for pair in pairs)
    least_same, least_other = least
    assert same[True] >= least_same and same[False] >= least_other
    assert {pair["lang"] for pair in pairs} == LANGS


def test_the_issue_examples_are_tuning_only() -> None:
    tuning_pairs = {(p["first"], p["later"]) for p in rows("reversals-tuning.jsonl")}
    assert set(ISSUE_REVERSALS) <= tuning_pairs
    tuning = {row["text"] for row in rows("tuning.jsonl")}
    assert set(ISSUE_SENTENCES) <= tuning
    heldout = {normalised(t) for side in HELDOUT_SIDES for t in side_texts(side)}
    quoted = ISSUE_SENTENCES + [t for pair in ISSUE_REVERSALS for t in pair]
    assert not [t for t in quoted if normalised(t) in heldout]


SIDE_PAIRS = [(side, earlier) for i, side in enumerate(SIDES) for earlier in SIDES[:i]]


@pytest.mark.parametrize(("side", "other"), SIDE_PAIRS)
def test_no_text_is_on_both_sides(side: str, other: str) -> None:
    heldout, tuning = side_texts(side), side_texts(other)
    assert not set(heldout) & set(tuning)
    assert not {normalised(t) for t in heldout} & {normalised(t) for t in tuning}


@pytest.mark.parametrize(("side", "other"), SIDE_PAIRS)
def test_no_source_is_on_both_sides(side: str, other: str) -> None:
    """No voice, mined file or thread of a held-out set is in an earlier side."""
    later = [row for name in SENTENCE_FILES[side] for row in rows(name)]
    earlier = [row for name in SENTENCE_FILES[other] for row in rows(name)]
    shared = sources(later) & sources(earlier)
    assert not shared, shared


@pytest.mark.parametrize(("side", "other"), SIDE_PAIRS)
def test_no_near_copy_is_on_both_sides(side: str, other: str) -> None:
    """No held-out sentence shares 70% of its words with a sentence of an earlier set."""
    tuning = {frozenset(normalised(t).split()) for t in side_texts(other)}
    heldout = {t: frozenset(normalised(t).split()) for t in side_texts(side)}
    frequency = Counter(w for words in [*tuning, *heldout.values()] for w in words)

    def prefix(words: frozenset[str]) -> list[str]:
        # Prefix filtering: two sets 70% alike share a word among each one's rarest
        # len - ceil(0.7 * len) + 1 words.
        rarest = sorted(words, key=lambda w: (frequency[w], w))
        return rarest[: len(words) - math.ceil(0.7 * len(words)) + 1]

    index: dict[str, list[frozenset[str]]] = {}
    for words in tuning:
        for word in prefix(words):
            index.setdefault(word, []).append(words)
    for text, words in heldout.items():
        others = {t for word in prefix(words) for t in index.get(word, ())}
        close = [t for t in others if len(words & t) >= 0.7 * len(words | t)]
        assert not close, text


def test_pasted_lines_are_marked_and_sourced() -> None:
    lines = rows("pasted-lines.jsonl")
    assert len(lines) >= 100
    for row in lines:
        assert row["pasted"] is True and row["kind"] == "none", row
        assert row["style"] in {"pasted", "injection"} and row["source"], row
        assert row["set"] in {"heldout", "tuning"} and row["lang"] in LANGS, row
    origins = Counter(row["origin"] for row in lines if row["style"] == "pasted")
    assert origins["stdlib-docstring"] and origins["package-metadata"] and origins["html-page"]


@pytest.mark.parametrize("lang", sorted(LANGS))
def test_dense_sessions_have_their_items(lang: str) -> None:
    language = dense()["languages"][lang]
    chatter = language["chatter"]
    assert len(chatter) >= 40
    assert len(language["item_sets"]) >= 3
    for item_set in language["item_sets"]:
        items = item_set["items"]
        assert len(items) == 20
        assert sum("superseded_by" in i for i in items) == 4
        for item in items:
            assert item["kind"] in INSTRUCTION_KINDS
            keeps = [(item["must_keep"], item["text"])]
            if "superseded_by" in item:
                later = item["superseded_by"]
                keeps.append((later["must_keep"], later["text"]))
                assert item["final"]["must_keep"] == later["must_keep"]
            for keep, text in keeps:
                assert keep.lower() in text.lower(), item
                assert not [c for c in chatter if keep.lower() in c.lower()], keep

"""The shape estimate (`chatcli.tokens.shape_tokens`, what `MarginEstimator` counts with)
against real tokenizers on real text, and the properties retention relies on.

Real text: the standard library's docstrings (prose), its sources (code) and the same
sources as a coding agent's `read_file` returns them (numbered lines), none of which the
weights were fitted on; the Universal Declaration's first article in six languages. Counted
by tiktoken o200k and cl100k, seeded offline.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import email
import inspect
import json
import logging
import random
import re
import string
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.messages import Message, ToolCall
from chatcli.tokens.estimate import MarginEstimator, TextShape, message_shape_tokens, shape_tokens
from chatcli.tokens.exact import load_encoding
from tests.strategies import conversations, texts

ENCODINGS = tuple(load_encoding(name) for name in ("o200k_base", "cl100k_base"))
DOCUMENTED = (argparse, json, logging, collections, difflib, email)
PROSE = "\n\n".join(inspect.getdoc(module) or "" for module in DOCUMENTED)
CODE = "\n".join(inspect.getsource(module) for module in (textwrap, json, difflib))
NUMBERED = "\n".join(f"{n:6}\t{line}" for n, line in enumerate(CODE.splitlines(), start=1))
# Article 1 of the Universal Declaration of Human Rights.
ARTICLE_1 = {
    "zh": "人人生而自由，在尊严和权利上一律平等。他们赋有理性和良心，并应以兄弟关系的精神相对待。",
    "ja": (
        "すべての人間は、生まれながらにして自由であり、かつ、尊厳と権利とについて平等である。"
        "人間は、理性と良心とを授けられており、互いに同胞の精神をもって行動しなければならない。"
    ),
    "ru": (
        "Все люди рождаются свободными и равными в своем достоинстве и правах. Они наделены "
        "разумом и совестью и должны поступать в отношении друг друга в духе братства."
    ),
    "ar": (
        "يولد جميع الناس أحرارًا متساوين في الكرامة والحقوق. وهم قد وهبوا العقل والوجدان "
        "وعليهم أن يعامل بعضهم بعضًا بروح الإخاء."
    ),
    "fr": (
        "Tous les êtres humains naissent libres et égaux en dignité et en droits. Ils sont "
        "doués de raison et de conscience et doivent agir les uns envers les autres dans un "
        "esprit de fraternité."
    ),
    "de": (
        "Alle Menschen sind frei und gleich an Würde und Rechten geboren. Sie sind mit Vernunft "
        "und Gewissen begabt und sollen einander im Geist der Brüderlichkeit begegnen."
    ),
}
PROPERTY = settings(max_examples=80, deadline=None)


def tokens(text: str) -> list[int]:
    """o200k's and cl100k's counts of `text`."""
    assert all(ENCODINGS), "tiktoken's encodings load offline (the tiktoken extra)"
    return [len(encoding.encode_ordinary(text)) for encoding in ENCODINGS if encoding]


@pytest.mark.parametrize("text", [PROSE, CODE, NUMBERED], ids=["prose", "code", "numbered"])
def test_the_shape_estimate_lands_near_both_tokenizers(text: str) -> None:
    for real in tokens(text):
        assert shape_tokens(text) == pytest.approx(real, rel=0.08)


def test_its_worst_miss_is_under_half_a_flat_ratios() -> None:
    # 4 chars per token: 4-5% high on prose, 13.5% low on numbered code; the shape: at most
    # 6% off, on plain code.
    def worst(estimate: float, text: str) -> float:
        return max(abs(estimate / real - 1.0) for real in tokens(text))

    shape = max(worst(shape_tokens(text), text) for text in (PROSE, CODE, NUMBERED))
    flat = max(worst(len(text) / 4, text) for text in (PROSE, CODE, NUMBERED))
    assert flat > 0.12 and shape < flat / 2


def test_a_run_of_letters_no_word_is_as_long_costs_what_tokenizers_count() -> None:
    # A hash, an encoding or a repeated letter is cut into pieces of 2-3 letters (~0.5 token
    # a letter), where the weights of words would count 0.11; a CamelCase name stays words.
    rng = random.Random(1)
    scrambled = "".join(rng.choice(string.ascii_lowercase) for _ in range(2_000))
    for text in ("q" * 200, scrambled):
        o200k, _ = tokens(text)
        assert shape_tokens(text) == pytest.approx(o200k, rel=0.1)
    name = "RawDescriptionHelpFormatter"
    assert shape_tokens(name) <= 1.5 * max(tokens(name))


@pytest.mark.parametrize("language", sorted(ARTICLE_1))
def test_other_scripts_land_between_the_tokenizers(language: str) -> None:
    # o200k packs every script tighter than cl100k: the estimate is no lower than o200k's
    # count (less a tenth) and no higher than cl100k's (plus a tenth). 4 chars per token
    # counts Chinese and Japanese at a third of o200k's count.
    text = ARTICLE_1[language]
    o200k, cl100k = tokens(text)
    assert 0.9 * o200k <= shape_tokens(text) <= 1.1 * cl100k


def test_a_message_costs_its_text_and_its_calls() -> None:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "Lib/textwrap.py"})
    message = Message.assistant("Reading it.", tool_calls=(call,))
    expected = sum(map(shape_tokens, ("Reading it.", call.name, call.arguments_json)))
    assert message_shape_tokens(message) == pytest.approx(expected)
    assert message_shape_tokens(Message.user("")) == 0.0


# The runs `shape_tokens` counts, as regular expressions (it counts them faster by their starts).
WORD = re.compile(rb"[A-Za-z]+")
ONE_CASE = re.compile(rb"[a-z]+|[A-Z]+")
BLANK_RUN = re.compile(rb"[ \t]*[\n\t][ \t\n]*| {2,}")
PIECES = st.lists(
    st.sampled_from(
        ["a", "Zz", "q" * 19, "Q" * 19, " ", "  ", "\n", "\t", "\r", "7", ".", "é", "日"]
    )
)


@PROPERTY
@given(st.one_of(texts(), PIECES.map("".join)))
def test_the_runs_are_the_ones_the_regular_expressions_find(text: str) -> None:
    data = text.encode("utf-8", "surrogatepass")
    letters_and_digits = sum(c.isascii() and c.isalnum() for c in text)
    shape = TextShape()
    letters = sum(c.isascii() and c.isalpha() for c in text)
    expected = (
        shape.word * len(WORD.findall(data))
        + shape.letter * letters
        + shape.long_run * sum(len(run) // 20 for run in ONE_CASE.findall(data))
        + shape.digit * (letters_and_digits - letters)
        + shape.punctuation
        * sum(c.isascii() and c.isprintable() and not c.isalnum() and c != " " for c in text)
        + shape.blank_run * len(BLANK_RUN.findall(data))
        + shape.two_byte_char * sum(len(c.encode("utf-8", "surrogatepass")) == 2 for c in text)
        + shape.three_byte_char * sum(len(c.encode("utf-8", "surrogatepass")) == 3 for c in text)
        + shape.four_byte_char * sum(len(c.encode("utf-8", "surrogatepass")) == 4 for c in text)
    )
    assert shape_tokens(text) == pytest.approx(expected)


@PROPERTY
@given(texts(), st.integers(0, 10_000))
def test_a_cut_text_never_costs_more(text: str, keep: int) -> None:
    # Retention cuts a message's text to fit: a shorter head (or tail) must not cost more.
    assert shape_tokens(text[:keep]) <= shape_tokens(text)
    assert shape_tokens(text[keep:]) <= shape_tokens(text)


@PROPERTY
@given(conversations(), st.integers(0, 40), st.floats(0.25, 8.0), st.floats(0.0, 0.25))
def test_the_count_is_subadditive_and_grows_with_messages(
    messages: list[Message], split: int, scale: float, margin: float
) -> None:
    # What retention requires of its count (`chatcli.history.retain`): a sequence costs at
    # most the sum of its parts, and adding a message never lowers it.
    estimator = MarginEstimator(scale=scale, margin=margin)
    head, tail = messages[:split], messages[split:]
    whole = estimator.count(messages)
    assert whole <= estimator.count(head) + estimator.count(tail)
    assert estimator.count(head) <= whole and estimator.count(tail) <= whole

"""Tests for chatcli.history.text: cuts on character boundaries with an exact marker."""

from __future__ import annotations

import re
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.history.text import (
    MIN_CUT_CHARS,
    cut_middle,
    cut_tail,
    is_cut_boundary,
    original_length,
)
from tests.strategies import GRAPHEME_CLUSTERS, texts

MIDDLE = re.compile(r"\n\[\.\.\. ([\d,]+) chars cut \.\.\.\]\n")
TAIL = re.compile(r"\n\[\.\.\. ([\d,]+) more chars cut\]$")


def split_middle(text: str, out: str) -> tuple[str, int, str]:
    """(head, removed count stated by the marker, tail) of a cut_middle result."""
    match = MIDDLE.search(out)
    assert match is not None, out
    return out[: match.start()], int(match[1].replace(",", "")), out[match.end() :]


# --- exact results ---------------------------------------------------------------------


def test_text_that_fits_is_returned_unchanged() -> None:
    assert cut_middle("abc", 3) == "abc"
    assert cut_tail("abc", 10) == "abc"
    assert cut_middle("", 0) == ""


def test_cut_middle_keeps_head_and_tail_and_counts_the_marker() -> None:
    text = "abcdefghij" * 10
    # The marker for 100 removed chars is 25 long, leaving 15: 8 for the head, 7 for the tail.
    assert cut_middle(text, 40) == "abcdefgh\n[... 85 chars cut ...]\ndefghij"


def test_cut_tail_keeps_the_head() -> None:
    text = "x" * 100
    out = cut_tail(text, 40)
    # The marker for 100 removed chars is 25 long, leaving 15 for the head; the actual
    # marker (85 removed) is one char shorter, so the result is 39 long.
    assert out == "x" * 15 + "\n[... 85 more chars cut]"


def test_large_counts_use_thousands_separators() -> None:
    # Marker of 31 chars, head of 69.
    assert cut_tail("y" * 1_234_567, 100) == "y" * 69 + "\n[... 1,234,498 more chars cut]"


def test_cut_moves_to_a_nearby_line_break() -> None:
    lines = [f"line {n:03}\n" for n in range(100)]  # 9 chars per line, 900 in all
    # Room 175 (marker 25): the head would end at 88, inside line 009; it ends at the line
    # break after line 008 instead. The tail would start at 813, inside line 090; it starts
    # at line 091.
    expected_head = "".join(lines[:9])[:-1]
    expected_tail = "".join(lines[91:])
    removed = 900 - len(expected_head) - len(expected_tail)
    assert cut_middle("".join(lines), 200) == (
        f"{expected_head}\n[... {removed} chars cut ...]\n{expected_tail}"
    )


def test_cut_tail_moves_to_a_nearby_line_break() -> None:
    text = "".join(f"line {n:03}\n" for n in range(100))
    # Room 75: the head ends at the line break after line 007 (at 71), not inside line 008.
    head = "".join(f"line {n:03}\n" for n in range(8))[:-1]
    assert cut_tail(text, 100) == head + "\n[... 829 more chars cut]"


def test_a_far_line_break_is_not_used() -> None:
    text = "a\n" + "b" * 1000
    # Room 473; the only line break is 472 chars before the cut, too far to move to.
    assert cut_tail(text, 500) == text[:473] + "\n[... 529 more chars cut]"


def test_cut_never_separates_combining_marks() -> None:
    text = "e\u0301" * 50  # 100 code points, 50 characters
    out = cut_middle(text, 50)
    head, removed, tail = split_middle(text, out)
    assert head == "e\u0301" * (len(head) // 2)
    assert tail == "e\u0301" * (len(tail) // 2)
    assert len(head) + removed + len(tail) == len(text)


@pytest.mark.parametrize("cluster", GRAPHEME_CLUSTERS)
def test_clusters_are_kept_whole_or_dropped_whole(cluster: str) -> None:
    text = cluster * 60
    for max_chars in range(40, 90):
        head, _, tail = split_middle(text, cut_middle(text, max_chars))
        assert head == cluster * (len(head) // len(cluster))
        assert tail == cluster * (len(tail) // len(cluster))
        kept = cut_tail(text, max_chars).rsplit("\n[...", 1)[0]
        assert kept == cluster * (len(kept) // len(cluster))


def test_surrogate_pairs_are_not_split() -> None:
    # Text decoded with surrogatepass holds UTF-16 halves; they must stay paired.
    pair = "\ud83d\ude00"
    text = pair * 40
    for max_chars in range(40, 60):
        for out in (cut_middle(text, max_chars), cut_tail(text, max_chars)):
            assert out.replace(pair, "").count("\ud83d") == 0
            assert out.replace(pair, "").count("\ude00") == 0


def test_flags_keep_their_pairs() -> None:
    text = "🇫🇷🇩🇪🇯🇵" * 20  # 120 regional indicators, 60 flags
    for index in range(len(text) + 1):
        assert is_cut_boundary(text, index) == (index % 2 == 0)


def test_tiny_limits_give_the_bare_marker_or_the_text() -> None:
    assert cut_middle("z" * 100, 5) == "\n[... 100 chars cut ...]\n"
    assert cut_tail("z" * 100, 0) == "\n[... 100 more chars cut]"
    assert cut_middle("z" * 20, 5) == "z" * 20  # the marker would be longer than the text


def test_a_cut_of_a_cut_states_the_whole_amount_removed() -> None:
    # Seen in the chat: a 20k paste cut twice kept a marker saying 7,268 characters were cut
    # when 17,335 were missing (the second cut counted only its own).
    paste = "\n".join(f"line {i:05d} of the pasted document" for i in range(600))
    once = cut_middle(paste, 9000)
    twice = cut_middle(once, 3000)
    assert twice.count("chars cut") == 1  # the first marker went with the middle
    head, removed, tail = split_middle(paste, twice)
    assert paste.startswith(head) and paste.endswith(tail)
    assert len(head) + removed + len(tail) == len(paste) == original_length(twice)
    cut = cut_tail(once, 2000)
    match = TAIL.search(cut)
    assert match is not None and cut.count("chars cut") == 1
    assert len(cut) - len(match[0]) + int(match[1].replace(",", "")) == len(paste)


def test_a_marker_is_never_cut_in_half() -> None:
    once = cut_middle("x" * 500 + "\n" + "y" * 500, 200)
    for size in range(MIN_CUT_CHARS, len(once)):
        out = cut_middle(once, size)
        assert original_length(out) == 1001, (size, out)


# --- properties --------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(texts(), st.integers(0, 3000), st.integers(0, 3000))
def test_cuts_of_cuts_keep_the_original_length(text: str, first: int, second: int) -> None:
    twice = cut_middle(cut_middle(text, first), second)
    assert original_length(twice) == len(text)
    assert original_length(cut_tail(cut_middle(text, first), second)) == len(text)


@settings(max_examples=300, deadline=None)
@given(texts(), st.integers(0, 5000))
def test_cut_middle_properties(text: str, max_chars: int) -> None:
    out = cut_middle(text, max_chars)
    assert len(out) <= len(text)
    if len(text) <= max_chars:
        assert out == text
        return
    if max_chars >= MIN_CUT_CHARS:
        assert len(out) <= max_chars
    if out == text:
        return  # even the bare marker would be longer
    head, removed, tail = split_middle(text, out)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + removed + len(tail) == len(text)
    assert_clean_cut(text, len(head))
    assert_clean_cut(text, len(text) - len(tail))
    assert out.encode("utf-8").decode("utf-8") == out


@settings(max_examples=300, deadline=None)
@given(texts(), st.integers(0, 5000))
def test_cut_tail_properties(text: str, max_chars: int) -> None:
    out = cut_tail(text, max_chars)
    assert len(out) <= len(text)
    if len(text) <= max_chars:
        assert out == text
        return
    if max_chars >= MIN_CUT_CHARS:
        assert len(out) <= max_chars
    if out == text:
        return  # even the bare marker would be longer
    match = TAIL.search(out)
    assert match is not None
    head = out[: match.start()]
    assert text.startswith(head)
    assert len(head) + int(match[1].replace(",", "")) == len(text)
    assert_clean_cut(text, len(head))
    assert out.encode("utf-8").decode("utf-8") == out


def assert_clean_cut(text: str, index: int) -> None:
    """No combining mark, joiner or modifier on either side of the cut is left dangling."""
    if 0 < index < len(text):
        assert unicodedata.category(text[index])[0] != "M", (text[index - 3 : index + 3], index)
        assert text[index] not in "\u200d\U0001f3fb\U0001f3fc\U0001f3fd\U0001f3fe\U0001f3ff"
        assert text[index - 1] != "\u200d"
        assert text[index - 1 : index + 1] != "\r\n"

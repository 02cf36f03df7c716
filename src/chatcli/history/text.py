"""Cutting text to a size, on character boundaries, with a visible marker of what was removed.

Two shapes: `cut_middle` keeps the head and the tail (tool results: the first lines say what
ran, the last ones how it ended) and `cut_tail` keeps the head (assistant messages).

Guarantees, for every `text` and `max_chars >= 0`:

- The marker counts toward `max_chars`: the result is at most `max_chars` long whenever
  `max_chars` leaves room for the marker (about 30 chars; `MIN_CUT_CHARS` always does).
  Below that, the result is the bare marker, or `text` itself when even the marker would not
  be shorter. A cut never makes text longer.
- The kept pieces are an exact prefix (and suffix) of `text`, and the marker states the exact
  number of characters removed between them, counted in the text before any cut: a cut of a
  text an earlier cut marked (a view cut again by a later level or turn) counts what the
  earlier marker says it removed, so the one marker left states the whole amount. A marker is
  removed whole or kept whole (`original_length` reads any text's size before its cuts).
- Cuts fall on code points (Python `str` indexes code points, so a UTF-8 sequence is never
  split) and never inside a user-perceived character: not between a base and its combining
  marks, not inside a surrogate pair, an emoji ZWJ / modifier / tag sequence, a flag, an Indic
  conjunct, or CRLF.
  This approximates Unicode grapheme clusters with the stdlib only; rarer clusters (e.g.
  decomposed Hangul jamo) may still be split between code points, never inside one.
- When a line break lies close to the cut point, the cut moves to it, so lines stay whole.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = [
    "LINE_SNAP_CHARS",
    "MIN_CUT_CHARS",
    "cut_middle",
    "cut_tail",
    "is_cut_boundary",
    "kept_length",
    "original_length",
    "without_markers",
]

# A cut moves to a line break at most this far away (and never more than a quarter of the
# kept piece, so short pieces are not emptied to reach one).
LINE_SNAP_CHARS = 200
# Room for the longest marker (removal counts below 10**15), so results always fit.
MIN_CUT_CHARS = 48

# A cut marker, whole: this module's ("\n[... 1,234 chars cut ...]\n", "\n[... 1,234 more
# chars cut]", with a note) and microcompaction's, which has the same form; group 1 is the
# count of chars it says were removed.
_CUT_MARKER = re.compile(r"\n?\[\.\.\. ([\d,]+) (?:more )?chars cut[^\]\n]*\]\n?")

_ZWJ = "\u200d"
_EXTEND_CATEGORIES = frozenset({"Mn", "Mc", "Me"})
_VIRAMA_CLASS = 9  # canonical combining class of viramas


def cut_middle(text: str, max_chars: int, *, note: str = "") -> str:
    """`text` if it fits, else its head and tail joined by a marker, at most `max_chars` long.
    `note` is added to the marker after the count ("[... 1,234 chars cut{note} ...]")."""
    if len(text) <= max_chars:
        return text
    whole = original_length(text)
    room = max_chars - len(_middle_marker(whole, note))
    if room <= 0:
        return _bare_marker(text, _middle_marker(whole, note))
    head_end = _snap_head(text, (room + 1) // 2)
    tail_start = _snap_tail(text, len(text) - room // 2)
    head_end, tail_start = _around_markers(text, head_end, tail_start)
    removed = original_length(text[head_end:tail_start])
    return text[:head_end] + _middle_marker(removed, note) + text[tail_start:]


def cut_tail(text: str, max_chars: int) -> str:
    """`text` if it fits, else its head and a marker, at most `max_chars` long."""
    if len(text) <= max_chars:
        return text
    whole = original_length(text)
    room = max_chars - len(_tail_marker(whole))
    if room <= 0:
        return _bare_marker(text, _tail_marker(whole))
    head_end, _ = _around_markers(text, _snap_head(text, room), len(text))
    return text[:head_end] + _tail_marker(original_length(text[head_end:]))


def original_length(text: str) -> int:
    """The length `text` had before the cuts marked in it: each whole marker counts as the
    chars it says were removed."""
    return kept_length(text) + sum(removed for _, removed in _markers(text))


def kept_length(text: str) -> int:
    """The chars of `text` that are the original's: all but its cut markers."""
    return len(text) - sum(length for length, _ in _markers(text))


def without_markers(text: str) -> str:
    """`text` without its cut markers, each replaced by a paragraph break: what of it is the
    original's, the pieces on either side of a cut kept apart."""
    if "chars cut" not in text:
        return text
    return _CUT_MARKER.sub("\n\n", text)


def _markers(text: str) -> list[tuple[int, int]]:
    """(its length, the chars it says were removed) of each cut marker in `text`."""
    if "chars cut" not in text:  # no marker: a plain search, not the expression's scan
        return []
    return [(len(m.group(0)), int(m.group(1).replace(",", ""))) for m in _CUT_MARKER.finditer(text)]


def _around_markers(text: str, start: int, end: int) -> tuple[int, int]:
    """`text[start:end]`, the span a cut removes, widened to every marker it overlaps: an
    earlier marker goes whole (its count joins the new one) or stays whole."""
    if "chars cut" not in text:
        return start, end
    for marker in _CUT_MARKER.finditer(text):  # in order: a widened end meets the next ones
        if marker.start() < end and marker.end() > start:
            start, end = min(start, marker.start()), max(end, marker.end())
    return start, end


def _middle_marker(removed: int, note: str = "") -> str:
    return f"\n[... {removed:,} chars cut{note} ...]\n"


def _tail_marker(removed: int) -> str:
    return f"\n[... {removed:,} more chars cut]"


def _bare_marker(text: str, marker: str) -> str:
    # `marker` already counts all of `text` as removed.
    return marker if len(marker) < len(text) else text


def _snap_head(text: str, end: int) -> int:
    """The end of the head: `end`, or a nearby earlier line break, moved to a boundary."""
    window = min(LINE_SNAP_CHARS, end // 4)
    newline = text.rfind("\n", end - window, end + 1)
    if newline != -1:
        end = newline
    while not is_cut_boundary(text, end):
        end -= 1
    return end


def _snap_tail(text: str, start: int) -> int:
    """The start of the tail: `start`, or just after a nearby later line break, on a boundary."""
    window = min(LINE_SNAP_CHARS, (len(text) - start) // 4)
    newline = text.find("\n", start - 1, start + window)
    if newline != -1:
        start = newline + 1
    while not is_cut_boundary(text, start):
        start += 1
    return start


def is_cut_boundary(text: str, index: int) -> bool:
    """Whether `text[:index]` / `text[index:]` splits no user-perceived character."""
    if index <= 0 or index >= len(text):
        return True
    before, after = text[index - 1], text[index]
    if _extends(after) or before == _ZWJ or (before, after) == ("\r", "\n"):
        return False
    if unicodedata.combining(before) == _VIRAMA_CLASS and unicodedata.category(after)[0] == "L":
        return False  # a virama joins two consonants into one conjunct (Indic scripts)
    if _is_regional_indicator(before) and _is_regional_indicator(after):
        # Flags are pairs of indicators: only an even run before the cut keeps pairs whole.
        return _regional_run_before(text, index) % 2 == 0
    return True


def _extends(char: str) -> bool:
    """Whether `char` belongs to the character before it (never starts a new one)."""
    code = ord(char)
    return (
        unicodedata.category(char) in _EXTEND_CATEGORIES  # combining marks, variation selectors
        or char == _ZWJ
        or 0x1F3FB <= code <= 0x1F3FF  # emoji skin-tone modifiers
        or 0xE0020 <= code <= 0xE007F  # emoji tag sequences (subdivision flags)
        or 0xDC00 <= code <= 0xDFFF  # low half of a surrogate pair
    )


def _is_regional_indicator(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _regional_run_before(text: str, index: int) -> int:
    start = index
    while start > 0 and _is_regional_indicator(text[start - 1]):
        start -= 1
    return index - start

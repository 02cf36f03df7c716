"""What an old tool result looks like at each microcompaction stage: the texts, nothing else.

Stage 1 keeps a result's head and tail around a marker, stage 2 replaces it with a one-line
stub (tool, kind, lines, original chars, where the full output is: its call id, and its
transcript message number when the caller knows it). Each text depends only on the result
itself (its content, call id, tool name, error flag, transcript number) and the settings:
the number a message has in the transcript never changes, and the texts never depend on
when it was made or how old the result is, so a provider's prompt cache keeps it byte for
byte from one request to the next. `chatcli.history.microcompact` decides which stage each
result is at.

Both texts state the original size, so `original_size` reads it back from any stage, also
from a result the tool-result budget cut (`chatcli.history.text`'s marker).
"""

from __future__ import annotations

import re

from chatcli.history.text import is_cut_boundary, original_length

__all__ = [
    "DESCRIBED_CHARS",
    "STUB_PREFIX",
    "cut_head_tail",
    "describe_content",
    "is_microcompacted",
    "nominal_cut_chars",
    "original_size",
    "stub",
]

STUB_PREFIX = "[microcompacted tool result"
_OWN_MARKER = "chars cut by microcompaction"
# How much of a result `describe_content` reads for its lines.
DESCRIBED_CHARS = 4_096
# The original size a stub states, just before its fixed ending.
_STUB_CHARS = re.compile(r", ([\d,]+) chars; the full output is kept in the transcript")

_TIMESTAMP_OR_LEVEL = re.compile(
    r"\W{0,2}(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\d{2}:\d{2}:\d{2}|"
    r"(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL)\b)"
)
# How a line of source code starts (after its indentation), or ends.
_CODE_START = re.compile(
    r"(def |class |import |from \S+ import |function |const |let |var |#include|package |"
    r"public |private |fn |func |return\b|if \(|for \()"
)
_CODE_ENDS = (";", "{", "}")
_DIFF_LINE = re.compile(r"(diff --git |@@ -\d|\+\+\+ |--- a/)")


def original_size(content: str) -> int:
    """The size of a tool result before any marked cut or stub: what the marker or stub says."""
    if content.startswith(STUB_PREFIX):
        stated = _STUB_CHARS.findall(content)
        if stated:
            return int(stated[-1].replace(",", ""))
    return original_length(content)


def is_microcompacted(content: str, stage: int) -> bool:
    """Whether `content` is already at `stage` (1: cut by microcompaction, 2: a stub) or later."""
    if content.startswith(STUB_PREFIX):
        return True
    return stage == 1 and _OWN_MARKER in content


def cut_head_tail(
    content: str, original: int, call_id: str, head: int, tail: int, number: int | None = None
) -> str:
    """The first `head` and last `tail` chars around a marker, cut on character boundaries.

    `chatcli.history.text.cut_middle` splits its room evenly; this stage keeps more head than
    tail (the head says what ran, the tail how it ended), so it snaps its own cut points with
    the shared boundary rule. The marker states chars cut relative to the `original` size, so
    `original_size` of the result is the original size again. Returns `content` itself when
    cutting would not make it shorter. `number`: the result's transcript message number,
    which the marker names when known.
    """
    head_end, tail_start = head, len(content) - tail
    if head_end >= tail_start:
        return content
    while not is_cut_boundary(content, head_end):
        head_end -= 1
    while not is_cut_boundary(content, tail_start):
        tail_start += 1
    kept = content[:head_end], content[tail_start:]
    shortened = kept[0] + _marker(original - len(kept[0]) - len(kept[1]), call_id, number) + kept[1]
    return shortened if head_end < tail_start and len(shortened) < len(content) else content


def nominal_cut_chars(
    original: int, call_id: str, head: int, tail: int, number: int | None = None
) -> int:
    """The size of a result of `original` chars at stage 1, before snapping to boundaries
    (what the pressure estimate counts, so that it needs no text)."""
    if original <= head + tail:
        return original
    return min(original, head + tail + len(_marker(original - head - tail, call_id, number)))


def _marker(removed: int, call_id: str, number: int | None) -> str:
    return f"\n[... {removed:,} {_OWN_MARKER}; {_where(call_id, number)} ...]\n"


def stub(
    content: str,
    *,
    original: int,
    call_id: str,
    tool: str,
    is_error: bool,
    number: int | None = None,
) -> str:
    """The one-line stub of a result: what it was and where the full output is (its
    transcript message `number` too, when known)."""
    # A newline ends a line: "a\nb\n" is two lines, like `wc -l` plus an unterminated last one.
    lines = content.count("\n") + (not content.endswith("\n"))
    line_text = f"{lines:,}+ lines" if original > len(content) else f"{lines:,} lines"
    kind = describe_content(content)
    if is_error:
        kind = f"error output ({kind})"
    return (
        f"{STUB_PREFIX}: {tool}, call {call_id}: {kind}, {line_text}, {original:,} chars; "
        f"{_where(call_id, number)}, or run the tool again.]"
    )


def _where(call_id: str, number: int | None) -> str:
    place = "/history" if number is None else f"/history #{number}"
    return f"the full output is kept in the transcript ({place}, call id {call_id})"


def describe_content(text: str) -> str:
    """What kind of text a tool result is: JSON, diff, log, source code or text.

    Deterministic heuristics on the text alone: JSON by its first and last characters (a cut
    result still starts and ends like the original), the other kinds by the lines of its
    first `DESCRIBED_CHARS` (a stub is remade at every request: its cost must not grow with
    the result).
    """
    stripped = text.strip()
    if _is_json(stripped):
        return "JSON"
    lines = [line for line in stripped[:DESCRIBED_CHARS].splitlines() if line.strip()]
    if not lines:
        return "text"
    if any(_DIFF_LINE.match(line) for line in lines):
        return "diff"
    if sum(1 for line in lines if _TIMESTAMP_OR_LEVEL.match(line)) >= 0.3 * len(lines):
        return "log"
    if sum(1 for line in lines if _is_code_line(line)) >= 0.2 * len(lines):
        return "source code"
    return "text"


def _is_json(text: str) -> bool:
    """An object or an array by its ends (what any that parses has, and a cut one keeps)."""
    return bool(text) and (text[0], text[-1]) in (("{", "}"), ("[", "]"))


def _is_code_line(line: str) -> bool:
    """A line that starts like a statement or ends with `;`, `{` or `}`."""
    return line.rstrip().endswith(_CODE_ENDS) or _CODE_START.match(line.lstrip()) is not None

"""Microcompaction: age-based shrinking of old tool results in the working view (no model call).

Runs on every request, on the full transcript. A tool result's age is the number of assistant
messages after it (each is one model turn that has already read it). With the defaults of
`MicrocompactConfig`:

- a result of at least 3,000 chars that is 2+ turns old is cut to its first 2,000 and last 500
  chars, with a marker saying how much was cut and where the full output is;
- a result of at least 3,000 chars that is 4+ turns old becomes a one-line stub saying what it
  was (tool, kind, lines, chars) and how to see it again.

The size that decides is the ORIGINAL size: the transform normally sees the full transcript,
and when it sees a result that was already cut (by the tool-result budget or by an earlier
microcompaction) it adds back the chars the marker says were cut. So a result cut to 2,500
chars still reaches the stub stage.

Invariants: the input is never mutated; only tool-result contents change (no message is
added, dropped or reordered, so tool pairing is untouched); the same input always gives the
same output (the provider's prompt cache stays valid); applying it twice changes nothing more.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from chatcli.config import MicrocompactConfig
from chatcli.history.result import TransformResult, build_result
from chatcli.history.text import is_cut_boundary
from chatcli.messages import Message, Role

__all__ = ["STUB_PREFIX", "describe_content", "microcompact"]

STUB_PREFIX = "[microcompacted tool result"
_OWN_MARKER = "chars cut by microcompaction"
# A whole cut marker of `chatcli.history.text` ("\n[... 1,234 chars cut ...]\n",
# "\n[... 1,234 more chars cut]") or of this module, so an earlier cut can be undone in the
# size computation.
_CUT_MARKER = re.compile(r"\n?\[\.\.\. ([\d,]+) (?:more )?chars cut[^\]\n]*\]\n?")

_TIMESTAMP_OR_LEVEL = re.compile(
    r"^\W{0,2}(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}|\d{2}:\d{2}:\d{2}|"
    r"(TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL|CRITICAL)\b)"
)
_CODE_LINE = re.compile(
    r"^\s*(def |class |import |from \S+ import |function |const |let |var |#include|package |"
    r"public |private |fn |func |return\b|if \(|for \()|[;{}]\s*$"
)
_DIFF_LINE = re.compile(r"^(diff --git |@@ -\d|\+\+\+ |--- a/)")


@dataclass(frozen=True, slots=True, kw_only=True)
class _Seen:
    """What microcompaction knows about one tool result."""

    call_id: str
    tool: str
    age: int
    original_chars: int
    is_error: bool


def microcompact(
    messages: Sequence[Message], config: MicrocompactConfig | None = None
) -> TransformResult:
    """Cut tool results 2+ turns old, stub those 4+ turns old (see the module docstring)."""
    config = config or MicrocompactConfig()
    tools = _tool_names(messages)
    ages = _assistant_turns_after(messages)
    new: list[Message] = []
    cut: list[str] = []
    for message, age in zip(messages, ages, strict=True):
        result = message.tool_result
        if result is None:
            new.append(message)
            continue
        seen = _Seen(
            call_id=result.call_id,
            tool=tools.get(result.call_id, "unknown tool"),
            age=age,
            original_chars=original_size(result.content),
            is_error=result.is_error,
        )
        content, action = _shrink(result.content, seen, config)
        new.append(message if action is None else message.with_text(content))
        if action is not None:
            cut.append(action)
    return build_result("microcompact", tuple(messages), tuple(new), cut=cut)


def _shrink(content: str, seen: _Seen, config: MicrocompactConfig) -> tuple[str, str | None]:
    """The new content and a report line, or (content, None) when nothing changes."""
    if seen.original_chars < config.min_content or content.startswith(STUB_PREFIX):
        return content, None
    label = f"tool result {seen.call_id} ({seen.tool}, {seen.age} turns old)"
    if seen.age >= config.summarize_turns:
        return _stub(content, seen), f"{label}: {len(content):,} chars -> one-line stub"
    if seen.age >= config.truncate_turns and _OWN_MARKER not in content:
        shortened = _cut_head_tail(content, seen, config.head_chars, config.tail_chars)
        if len(shortened) < len(content):
            return shortened, f"{label}: {len(content):,} -> {len(shortened):,} chars"
    return content, None


def original_size(content: str) -> int:
    """The size of a tool result before any marked cut: kept chars plus the chars cut."""
    size = len(content)
    for marker in _CUT_MARKER.finditer(content):
        size += int(marker.group(1).replace(",", "")) - len(marker.group(0))
    return size


def _cut_head_tail(content: str, seen: _Seen, head: int, tail: int) -> str:
    """The first `head` and last `tail` chars around a marker, cut on character boundaries.

    `chatcli.history.text.cut_middle` splits its room evenly; this stage keeps more head than
    tail (the head says what ran, the tail how it ended), so it snaps its own cut points with
    the shared boundary rule. The marker states chars cut relative to the ORIGINAL size, so
    `original_size` of the result is the original size again.
    """
    head_end, tail_start = head, len(content) - tail
    while not is_cut_boundary(content, head_end):
        head_end -= 1
    while not is_cut_boundary(content, tail_start):
        tail_start += 1
    kept = content[:head_end], content[tail_start:]
    removed = seen.original_chars - len(kept[0]) - len(kept[1])
    marker = f"\n[... {removed:,} {_OWN_MARKER}; {_where(seen.call_id)} ...]\n"
    shortened = kept[0] + marker + kept[1]
    return shortened if head_end < tail_start and len(shortened) < len(content) else content


def _stub(content: str, seen: _Seen) -> str:
    # A newline ends a line: "a\nb\n" is two lines, like `wc -l` plus an unterminated last one.
    lines = content.count("\n") + (not content.endswith("\n"))
    was_cut = seen.original_chars > len(content)
    line_text = f"{lines:,}+ lines" if was_cut else f"{lines:,} lines"
    kind = describe_content(content)
    if seen.is_error:
        kind = f"error output ({kind})"
    return (
        f"{STUB_PREFIX}: {seen.tool}, call {seen.call_id}: {kind}, "
        f"{line_text}, {seen.original_chars:,} chars, removed from the working view "
        f"{seen.age} turns later; {_where(seen.call_id)}, or run the tool again.]"
    )


def _where(call_id: str) -> str:
    return f"the full output is kept in the transcript (/history, call id {call_id})"


def describe_content(text: str) -> str:
    """What kind of text a tool result is: JSON, diff, log, source code or text.

    Deterministic heuristics on the text alone (a cut result still starts and ends like the
    original, so the checks look at its shape, not only at whether it parses).
    """
    stripped = text.strip()
    if _is_json(stripped):
        return "JSON"
    lines = [line for line in stripped.splitlines() if line.strip()]
    if any(_DIFF_LINE.match(line) for line in lines):
        return "diff"
    if _share(lines, _TIMESTAMP_OR_LEVEL) >= 0.3:
        return "log"
    if _share(lines, _CODE_LINE) >= 0.2:
        return "source code"
    return "text"


def _is_json(text: str) -> bool:
    if not text or text[0] not in "[{":
        return False
    try:
        json.loads(text)
    except ValueError:
        return (text[0], text[-1]) in (("{", "}"), ("[", "]"))
    return True


def _share(lines: Sequence[str], pattern: re.Pattern[str]) -> float:
    return sum(1 for line in lines if pattern.search(line)) / len(lines) if lines else 0.0


def _tool_names(messages: Sequence[Message]) -> dict[str, str]:
    return {call.id: call.name for m in messages for call in m.tool_calls}


def _assistant_turns_after(messages: Sequence[Message]) -> list[int]:
    """For each message, how many assistant messages come after it."""
    ages: list[int] = []
    later = 0
    for message in reversed(messages):
        ages.append(later)
        later += message.role is Role.ASSISTANT
    return ages[::-1]

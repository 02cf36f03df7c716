"""The checks a summary and the new view pass before a compaction is accepted.

- **The task and the user's rules survive.** What the user said in the summarised span that
  carrying would keep (rules, limits, facts, preferences, in English, Portuguese or Spanish:
  `chatcli.history.carry`, resolved as it resolves them: the latest form only, an update
  kept with what it may update), what an earlier summary pinned or an earlier carried block
  held, and the latest user request when it is summarised (`required`) are looked up in the
  summary and the carried block, case, punctuation and spacing ignored (`missing`). Whatever
  is missing is pinned verbatim after the summary, with every later statement that may
  update it (`pins`): a pinned rule is never shown without its reversal. No model call is
  needed for that.
- **The summary is a handoff summary** (`check_summary`): not nonsense (most of its words
  occur in the conversation or the prompt) and most of the fixed sections as headings. A
  refusal or free text has none, and its words occur in the conversation too, so only the
  structure tells them from a summary.
- **The new view is valid** (`validate`): smaller than before, within the budget when it is
  known, and tool pairing intact.

Each check raises `CompactionError`: the compaction then changes nothing. A summary that is
no summary (nonsense, too few sections, empty) raises `chatcli.errors.CannotSummarise`: the
model could not summarise, and asking it again is likely to fail the same way
(`chatcli.compaction.auto.CompactionBreaker` stops asking). A summary not smaller than what
it replaces is a plain failure: on a longer conversation the same model may do better.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from chatcli.compaction.plan import Plan
from chatcli.compaction.prompt import SUMMARY_SECTIONS, SYSTEM_PROMPT
from chatcli.compaction.report import CompactionReport
from chatcli.compaction.summary import is_summary_message, pinned_items
from chatcli.errors import CannotSummarise, CompactionError
from chatcli.history.carry import (
    CarriedItem,
    carried_items,
    resolved_statements,
    with_their_updates,
)
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.truncate import Number, is_real_user_request
from chatcli.messages import Message

__all__ = ["check_summary", "latest_request", "missing", "pins", "required", "validate"]

# A summary whose words mostly do not occur in the conversation or the prompt is nonsense.
_MIN_KNOWN_WORDS = 0.3
# Sections of SUMMARY_SECTIONS a summary must have as headings. A model may fairly merge or
# drop a section or two that do not apply (no errors, no files in a plain chat); a refusal
# ("Sorry, I cannot summarise this conversation.") or free text has none, and the words of
# either occur in the conversation, so only the structure tells them from a handoff summary.
_MIN_SECTIONS = 5

_WORD = re.compile(r"[^\W\d_]{3,}")
# Chars of a rejected summary quoted in the error, on one line.
_QUOTED_CHARS = 80
_HEADING_MARKS = re.compile(r"^[\s#*_>-]*(?:\d+[.)]\s*)?")


def required(
    messages: tuple[Message, ...],
    kept: tuple[Message, ...],
    latest: Message | None,
    numbering: Number | None = None,
) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...], str]:
    """(what must survive of what the user said in the messages `kept` leaves out, in order,
    with the later ones each must go with (`resolved_statements`); the latest request's text
    if it is summarised, else "")."""
    kept_ids = {id(m) for m in kept}
    left = [m for m in messages if id(m) not in kept_ids]
    earlier = [
        CarriedItem(number=None, kind="rule", text=text)
        for message in left
        if is_summary_message(message)
        for text in pinned_items(message.text)
    ]
    earlier += carried_items(left)[0]
    items, follows = resolved_statements(messages, kept, earlier=earlier, numbering=numbering)
    request = latest.text if latest is not None and any(m is latest for m in left) else ""
    return tuple(item.text for item in items), follows, request


def pins(
    items: tuple[str, ...], follows: tuple[tuple[int, ...], ...], stated: str, request: str
) -> tuple[str, ...]:
    """The `items` that `stated` (the summary, the system messages, the carried block) does
    not state, each with the later ones it must go with, in order; none the latest `request`
    holds (it is pinned whole, last)."""
    wanted = [i for i, item in enumerate(items) if item not in request and missing(stated, (item,))]
    return tuple(items[i] for i in with_their_updates(wanted, follows) if items[i] not in request)


def latest_request(messages: Sequence[Message]) -> Message | None:
    """The user's latest real request (no tool result, no earlier summary), if any."""
    return next(
        (m for m in reversed(messages) if is_real_user_request(m) and not is_summary_message(m)),
        None,
    )


def _normalised(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", text.lower().replace("’", "'"))) + " "


def missing(summary: str, items: Sequence[str]) -> tuple[str, ...]:
    """The `items` that `summary` does not state (case, punctuation and spacing ignored)."""
    haystack = _normalised(summary)
    return tuple(item for item in items if _normalised(item) not in haystack)


def check_summary(summary: str, source: str) -> None:
    """Raise CompactionError unless `summary` reads like a handoff summary of `source`."""
    if _is_nonsense(summary, source):
        raise CannotSummarise(
            "the summary was rejected: it does not read like a summary of this conversation"
        )
    sections = _sections_in(summary)
    if sections < _MIN_SECTIONS:
        raise CannotSummarise(
            f"the summary was rejected: it has {sections} of the {len(SUMMARY_SECTIONS)} sections "
            f"(at least {_MIN_SECTIONS} are needed), so it is no handoff summary; it begins "
            f'"{_one_line(summary, _QUOTED_CHARS)}"'
        )


def _one_line(text: str, chars: int) -> str:
    """The start of `text` as plain words on one line (no escapes, no line breaks)."""
    words = " ".join(text.split())
    return words if len(words) <= chars else words[: chars - 1] + "…"


def _is_nonsense(summary: str, source: str) -> bool:
    """Whether the summary's words mostly do not occur in the conversation or the prompt."""
    words = _WORD.findall(summary.lower())
    if len(words) < 3:
        return True
    known = set(_WORD.findall(source.lower())) | set(_WORD.findall(SYSTEM_PROMPT.lower()))
    return sum(word in known for word in words) < _MIN_KNOWN_WORDS * len(words)


def _sections_in(summary: str) -> int:
    """How many of SUMMARY_SECTIONS the summary has as headings, in any usual Markdown style
    ("## Decisions made", "**Decisions made:** ...", "1. Decisions made", "Decisions made:")."""
    wanted = {_normalised(section) for section in SUMMARY_SECTIONS}
    titles = {
        _normalised(_HEADING_MARKS.sub("", line).partition(":")[0]) for line in summary.splitlines()
    }
    return len(wanted & titles)


def validate(view: tuple[Message, ...], report: CompactionReport, plan: Plan) -> None:
    """Raise CompactionError unless `view` is smaller than before, fits the budget and keeps
    every tool call with its result."""
    if report.tokens_after >= report.tokens_before:
        raise CompactionError(
            f"the summary is not smaller than what it replaces "
            f"({report.tokens_after:,} >= {report.tokens_before:,} tokens)"
        )
    if plan.budget is not None and report.tokens_after > plan.budget:
        raise CompactionError(
            f"the compacted conversation still does not fit: about {report.tokens_after:,} "
            f"tokens > {plan.budget:,}"
        )
    if repair_tool_pairing(view).report.changed:
        raise CompactionError("the compacted conversation would split a tool call from its result")

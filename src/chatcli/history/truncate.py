"""The three context-recovery levels, as pure transforms.

| level | name                 | what it does                                                    |
|-------|----------------------|-----------------------------------------------------------------|
| 1     | aggressive budget    | repair pairing; tool-result budget at 50% of the configured     |
|       |                      | limits; cut every assistant message over 5,000 chars to 5,000   |
| 2     | emergency truncation | system messages + the last `emergency_keep_messages` others     |
| 3     | nuclear truncation   | system messages + the last 4 others + the notice                |
|       |                      | (not repeated when the messages carry it already)               |

The reduced budgets of level 1 are arguments of this one call, never a change to the config.

Levels 2 and 3 put every system message first, in its original order (level 3 follows them
with the notice), then a provider's compaction, which stands for everything before it and is
never cut (`chatcli.history.native`), then the kept tail of the other messages. The tail
obeys these rules:

- It starts with a user message (an API requirement) whenever the input has one: leading
  assistant/tool messages of the last N are dropped.
- The task survives: when the last N hold no *real* user request (one with text that is not a
  max_tokens continuation prompt), the latest real request before them is pinned in front of
  them, and then nothing of the last N is dropped but results cut from their call.
- Tool pairing is repaired before the tail is chosen and again after, so results stay next to
  their calls and a result whose call fell outside the tail is dropped. Repairing first means
  the tail holds at most N messages, plus the pinned request: at most N + 1 in all (the one
  exception is the whole exchange kept when there is no user message, below).
- It is never empty when the input has a non-system message that pairing repair keeps.
  Repair drops only results without a call of their own (orphans, duplicates), which no
  provider accepts: an input made only of those leaves nothing to keep.
- With no user message at all there is nothing to start with: the last N are kept, minus
  leading results whose call fell outside them; if that leaves nothing (the last N are all
  results of one earlier call), the tail is that whole exchange, the assistant message and
  all its results, even though it is longer than N. A call is never split from its result.
- Texts are never cut: a single huge request is kept verbatim even at level 3. (If even that
  does not fit, the recovery loop reports the failure; it never rewrites the task.)

The notice says that the earlier history "has been summarized" (`COMPACTION_NOTICE`, the
spec's text) only when the view it ends up in holds a summary: chatcli's compaction summary
(a user message starting with `SUMMARY_HEADER`) or a provider's compaction. Otherwise it says
that no summary is included (`TRUNCATION_NOTICE`): a model told of a summary that is not there
looks for it, or makes one up.

The notice names the transcript's numbers of the messages it stands for ("The transcript
keeps the earlier messages #1-#40.") when the caller numbers them (`number`, as the recovery
ladder does: `chatcli.history.carry.Numbering`), so that an app's recall tool
(`chatcli.recall_tool`) has something to point at; without numbering it is the notice's
text alone. A view that holds a notice already gets one notice, whose span
covers the old one's and the messages dropped now: it changes only when more are dropped,
and its text depends only on that span (a prompt cache keeps it as long as the cut stands).

Everything is linear in the number of messages and characters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from chatcli.config import RecoveryConfig
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.native import is_anchor
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.result import TransformReport, TransformResult, build_result
from chatcli.history.text import cut_tail
from chatcli.messages import Message, Role, total_chars

__all__ = [
    "AGGRESSIVE_BUDGET_RATIO",
    "COMPACTION_NOTICE",
    "CONTINUATION_PREFIX",
    "LEVEL1_ASSISTANT_MAX_CHARS",
    "LEVEL_NAMES",
    "NUCLEAR_KEEP_MESSAGES",
    "SUMMARY_HEADER",
    "TRUNCATION_NOTICE",
    "Number",
    "apply_recovery_level",
    "compaction_notice",
    "holds_summary",
    "is_compaction_notice",
    "is_real_user_request",
    "kept_tail",
    "latest_real_user_request",
    "level_notice",
    "truncate_assistant_messages",
]

COMPACTION_NOTICE = (
    "[Context was automatically compacted due to size limits.\n"
    "Previous conversation history has been summarized.\n"
    "Continue from where you left off.]"
)
# The notice where the view holds no summary: the same, but for what became of the history.
TRUNCATION_NOTICE = (
    "[Context was automatically compacted due to size limits.\n"
    "Older messages were removed; no summary of them is included.\n"
    "Continue from where you left off.]"
)
# How chatcli's compaction summary begins (`chatcli.compaction.SUMMARY_HEADER` is this one):
# here, below compaction, so that the levels can tell whether a view holds a summary.
SUMMARY_HEADER = "[Earlier conversation compacted by chatcli"
LEVEL1_ASSISTANT_MAX_CHARS = 5000
AGGRESSIVE_BUDGET_RATIO = 0.5
NUCLEAR_KEEP_MESSAGES = 4
LEVEL_NAMES = {1: "aggressive budget", 2: "emergency truncation", 3: "nuclear truncation"}
# The first line of chatcli.continuation.CONTINUATION_MESSAGE. Repeated here, not imported,
# because history transforms sit below continuation in the dependency order.
CONTINUATION_PREFIX = "Your response was cut off at the token limit."

_Predicate = Callable[[Message], bool]
# A message's transcript number (None: not known), as `chatcli.history.carry.Numbering` gives.
Number = Callable[[Message], int | None]
_NOTICE_HEAD = COMPACTION_NOTICE.split("\n", 1)[0]
_NOTICE_SPAN = re.compile(r"The transcript keeps the earlier messages? #(\d+)(?:-#(\d+))?\.\]$")


def compaction_notice(span: tuple[int, int] | None = None, *, summarized: bool = True) -> Message:
    """The level-3 notice (`COMPACTION_NOTICE` when the view holds a summary, `summarized`,
    else `TRUNCATION_NOTICE`); with `span`, the first and last transcript numbers of the
    messages it stands for."""
    text = COMPACTION_NOTICE if summarized else TRUNCATION_NOTICE
    if span is None:
        return Message.system(text)
    first, last = span
    where = f"message #{first}" if first == last else f"messages #{first}-#{last}"
    return Message.system(f"{text[:-1]}\nThe transcript keeps the earlier {where}.]")


def holds_summary(messages: Sequence[Message]) -> bool:
    """Whether `messages` hold a summary of earlier history: chatcli's compaction summary or
    a provider's compaction."""
    return any(
        is_anchor(m) or (m.role is Role.USER and m.text.startswith(SUMMARY_HEADER))
        for m in messages
    )


def is_compaction_notice(message: Message) -> bool:
    """Whether `message` is the level-3 notice (with or without a span)."""
    return message.role is Role.SYSTEM and message.text.startswith(_NOTICE_HEAD)


def _notice_span(message: Message) -> tuple[int, int] | None:
    found = _NOTICE_SPAN.search(message.text)
    if found is None:
        return None
    first = int(found.group(1))
    return first, int(found.group(2) or first)


def level_notice(
    systems: tuple[Message, ...],
    dropped: Sequence[Message],
    number: Number | None,
    *,
    summarized: bool,
) -> tuple[tuple[Message, ...], tuple[Message, ...]]:
    """(`systems` without a notice to be replaced, the notice to add after them: none when
    `systems` holds the one to keep). The notice's span covers an old notice's and the
    numbers of `dropped` (see the module docstring); `summarized`: the view it goes into
    holds a summary (`holds_summary`)."""
    old = next((m for m in systems if is_compaction_notice(m)), None)
    numbers = [n for n in map(number, dropped) if n is not None] if number is not None else []
    span = _notice_span(old) if old is not None else None
    if numbers:
        # From the first: levels are cumulative (level 3 cuts level 2's view, whose drops it
        # does not see) and keep the newest messages, so all before the last dropped are
        # gone but the pinned requests, which the transcript keeps too.
        span = (1, max(numbers) if span is None else max(span[1], *numbers))
    new = compaction_notice(span, summarized=summarized)
    if old is not None and (old == new or not numbers):
        return systems, ()
    return tuple(m for m in systems if m is not old), (new,)


def apply_recovery_level(
    messages: Sequence[Message], level: int, config: RecoveryConfig, number: Number | None = None
) -> TransformResult:
    """Apply recovery `level` (1, 2 or 3) to `messages`; see the module docstring. `number`:
    the transcript's message numbers, which level 3's notice names."""
    if level == 1:
        result = _aggressive_budget(tuple(messages), config)
    elif level == 2:
        result = _truncate(tuple(messages), config.emergency_keep_messages, None, notice=False)
    elif level == 3:
        result = _truncate(tuple(messages), NUCLEAR_KEEP_MESSAGES, number, notice=True)
    else:
        raise ValueError(f"recovery level must be 1, 2 or 3, not {level!r}")
    report = replace(result.report, name=f"level {level}: {LEVEL_NAMES[level]}")
    return TransformResult(messages=result.messages, report=report)


def truncate_assistant_messages(messages: Sequence[Message], max_chars: int) -> TransformResult:
    """Cut the text of every assistant message longer than `max_chars` to `max_chars`.

    The head is kept (`cut_tail`); tool calls and provider_details are kept.
    """
    before = tuple(messages)
    out = list(before)
    cut: list[str] = []
    freed = 0
    for index, message in enumerate(before):
        length = len(message.text) if message.role is Role.ASSISTANT else 0
        if length > max_chars:
            out[index] = message.with_text(cut_tail(message.text, max_chars))
            freed += length - len(out[index].text)
            cut.append(f"assistant message #{index}: {length:,} -> {len(out[index].text):,} chars")
    return build_result("assistant message cut", before, tuple(out), cut=cut, chars_freed=freed)


def is_real_user_request(message: Message) -> bool:
    """Whether `message` is a user request: text that is not a continuation prompt, nor
    chatcli's quote of what the user said earlier (`Message.carried`)."""
    if message.role is not Role.USER or message.carried is not None:
        return False
    text = message.text.lstrip()
    return bool(text) and not text.startswith(CONTINUATION_PREFIX)


def latest_real_user_request(messages: Sequence[Message]) -> Message | None:
    """The last real user request in `messages`, or None."""
    index = _last_index(messages, is_real_user_request, len(messages))
    return None if index is None else messages[index]


def kept_tail(others: Sequence[Message], keep: int) -> tuple[Message, ...]:
    """The last `keep` of `others` (non-system messages), made to start with a user message.

    See the module docstring for the rules (pinning the latest real request).
    """
    pin, start = _tail_bounds(others, keep)
    pinned = () if pin is None else (others[pin],)
    return (*pinned, *others[start:])


def _tail_bounds(others: Sequence[Message], keep: int) -> tuple[int | None, int]:
    """(index of the pinned user message or None, index where the kept slice starts)."""
    start = max(0, len(others) - keep)
    if not any(is_real_user_request(others[i]) for i in range(start, len(others))):
        pin = _last_index(others, is_real_user_request, start)
        if pin is not None:
            return pin, start
    first_user = next((i for i in range(start, len(others)) if _is_user(others[i])), None)
    if first_user is not None:
        return None, first_user
    pin = _last_index(others, _is_user, start)
    if pin is not None:
        return pin, start
    return None, _whole_unit_start(others, start)


def _whole_unit_start(others: Sequence[Message], start: int) -> int:
    """Where a tail with no user message to lead it starts, given the last-N bound `start`.

    Results at `start` whose call fell before it are skipped (they would be orphans); when
    nothing else is left, the tail moves back to the assistant message that made those
    calls, so that the last exchange is kept whole rather than nothing at all. In a repaired
    history results directly follow their call, so that message is the last non-result one.
    """
    first = next((i for i in range(start, len(others)) if others[i].role is not Role.TOOL), None)
    if first is not None:
        return first
    call = _last_index(others, lambda m: m.role is not Role.TOOL, start)
    return start if call is None else call


def _aggressive_budget(messages: tuple[Message, ...], config: RecoveryConfig) -> TransformResult:
    repaired = repair_tool_pairing(messages)
    budgeted = enforce_tool_result_budget(
        repaired.messages,
        per_result_chars=_reduced(config.tool_result_max_chars),
        per_turn_chars=_reduced(config.tool_result_budget_chars),
    )
    shortened = truncate_assistant_messages(budgeted.messages, LEVEL1_ASSISTANT_MAX_CHARS)
    return _chain(repaired, budgeted, shortened)


def _reduced(limit: int) -> int:
    return max(1, int(limit * AGGRESSIVE_BUDGET_RATIO))


def _truncate(
    messages: tuple[Message, ...], keep: int, number: Number | None, *, notice: bool
) -> TransformResult:
    repaired = repair_tool_pairing(messages)
    systems = tuple(m for m in repaired.messages if m.role is Role.SYSTEM)
    anchors = tuple(m for m in repaired.messages if is_anchor(m))
    others = [m for m in repaired.messages if m.role is not Role.SYSTEM and not is_anchor(m)]
    pin, start = _tail_bounds(others, keep)
    kept = (*(() if pin is None else (others[pin],)), *others[start:])
    # Once is enough: a view truncated before (an earlier turn, auto-compaction's fallback)
    # may carry the notice already (its span grows to cover what is dropped now).
    notices: tuple[Message, ...] = ()
    if notice:
        dropped = [m for i, m in enumerate(others[:start]) if i != pin]
        summarized = holds_summary((*anchors, *kept))
        systems, notices = level_notice(systems, dropped, number, summarized=summarized)
    # Counted from the small kept part: a long history is counted once, by the repair.
    fixed = (*systems, *anchors)
    dropped_chars = repaired.report.chars_after - total_chars(fixed) - total_chars(kept)
    chosen = build_result(
        "truncation",
        repaired.messages,
        (*systems, *notices, *anchors, *kept),
        dropped=_dropped_lines(start - (pin is not None), dropped_chars, pin),
        injected=("compaction notice (system message)",) if notices else (),
        chars_freed=dropped_chars - total_chars(notices),
    )
    return _chain(repaired, chosen, repair_tool_pairing(chosen.messages))


def _dropped_lines(count: int, chars: int, pin: int | None) -> tuple[str, ...]:
    if count <= 0:
        return ()
    line = f"{count:,} older non-system messages ({chars:,} chars)"
    if pin is not None:
        line += f"; kept the latest user request from before them (#{pin})"
    return (line,)


def _chain(*results: TransformResult) -> TransformResult:
    report: TransformReport = results[0].report
    for result in results[1:]:
        report = report.then(result.report)
    return TransformResult(messages=results[-1].messages, report=report)


def _is_user(message: Message) -> bool:
    return message.role is Role.USER


def _last_index(messages: Sequence[Message], wanted: _Predicate, stop: int) -> int | None:
    """The index of the last message before `stop` that is `wanted`, or None."""
    return next((i for i in range(stop - 1, -1, -1) if wanted(messages[i])), None)

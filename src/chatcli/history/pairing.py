"""Repair tool call/result pairing, so that every provider accepts the history.

Providers reject a tool result whose call is not in the preceding assistant message and an
assistant tool call that is not answered right after it. Histories break this after
truncation, crashes mid-tool, or hand editing; `repair_tool_pairing` makes them valid again.

Invariants of the result (hypothesis-tested):

- Every tool call is followed, right after its assistant message and in call order, by
  exactly one result for it; there is no other tool message.
- A result answers the latest earlier assistant message that declared its `call_id` and is
  not yet answered (ids may be reused across messages, as some local servers do). A result
  with no such call is an orphan and is dropped; a second result for one call is a duplicate
  and is dropped (the first is kept). A call with no result gets a synthetic error result
  saying the call was interrupted. A call id repeated inside one message is dropped.
- Every other message is kept, unchanged and in its order; system messages included.
- The input is never mutated; the same input gives the same output; repairing twice changes
  nothing more.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import replace

from chatcli.history.result import TransformResult, build_result
from chatcli.history.scan import ScanMemos, run_scan, unchanged
from chatcli.messages import Message, Role, ToolCall

__all__ = ["interrupted_result", "repair_tool_pairing"]

_NAME = "tool pairing repair"


def repair_tool_pairing(
    messages: Sequence[Message], *, memos: ScanMemos | None = None
) -> TransformResult:
    """Drop orphan and duplicate results, answer unanswered calls, make results adjacent.

    A history that is already well paired (the usual case) comes back as it is; whether it is
    is checked by a scan, memoised by transcript prefix in `memos` (its caller's, if any), so
    a request costs what was appended since the last one. Any other history is repaired in
    full.
    """
    return run_scan(memos, _Scan, None, tuple(messages))


class _Scan:
    """Whether a transcript prefix is well paired: each assistant message's calls answered
    right after it, in call order, by one result each, and no other tool message. Mutable,
    private; see `chatcli.history.scan`."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.messages: list[Message] = []
        self.chars = [0]  # chars of the first n messages read, for each n
        self.broken: int | None = None  # the first message that breaks the pairing
        self.pending: deque[str] = deque()  # call ids still to be answered, in order

    def push(self, message: Message) -> None:
        self.messages.append(message)
        self.chars.append(self.chars[-1] + message.char_count)
        if self.broken is None and not self.pairs(message):
            self.broken = len(self.messages) - 1

    def pairs(self, message: Message) -> bool:
        """Read `message` into `pending`: False when it breaks the pairing."""
        result = message.tool_result
        if result is not None:
            return bool(self.pending) and self.pending.popleft() == result.call_id
        ids = [call.id for call in message.tool_calls]
        paired = not self.pending and len(set(ids)) == len(ids)
        self.pending = deque(ids)
        return paired

    def rewind(self, count: int) -> bool:
        del self.messages[count:], self.chars[count + 1 :]
        if self.broken is not None and self.broken < count:
            return True  # broken before: it stays broken, pending no longer matters
        self.broken, self.pending = None, deque()
        start = count
        while start > 0 and self.messages[start - 1].tool_result is not None:
            start -= 1  # back to the message whose calls the latest results answer
        for message in self.messages[max(start - 1, 0) : count]:
            self.pairs(message)
        return True

    def result(self, transcript: tuple[Message, ...]) -> TransformResult:
        if self.broken is None and not self.pending:
            return unchanged(_NAME, transcript, self.chars[-1])
        return _repair(transcript)


def _repair(before: tuple[Message, ...]) -> TransformResult:
    answers, dropped = _match_results(before)
    out: list[Message] = []
    injected: list[str] = []
    for index, message in enumerate(before):
        if message.role is Role.TOOL:
            continue  # emitted right after the assistant message it answers, or dropped
        calls = _unique_calls(message.tool_calls)
        if len(calls) < len(message.tool_calls):
            dropped.append(f"repeated tool call id(s) in assistant message #{index}")
            message = replace(message, tool_calls=calls)
        out.append(message)
        for call in calls:
            answer = answers.get((index, call.id))
            if answer is None:
                injected.append(f"synthetic error result for interrupted call {call.id!r}")
                answer = interrupted_result(call)
            out.append(answer)
    moved = _moved_results(before, out, dropped, injected)
    return build_result(_NAME, before, tuple(out), dropped=dropped, injected=injected, moved=moved)


def _moved_results(
    before: tuple[Message, ...], after: list[Message], dropped: list[str], injected: list[str]
) -> tuple[str, ...]:
    """A line when results were only put back next to their calls (nothing else changed)."""
    if dropped or injected or tuple(after) == before:
        return ()
    return ("tool results moved back next to the calls they answer",)


def interrupted_result(call: ToolCall) -> Message:
    """The synthetic error result standing in for a call whose result is not available."""
    content = (
        f"[Tool call {call.name!r} was interrupted: its result is not available. "
        "Run it again if the result is still needed.]"
    )
    return Message.tool(call.id, content, is_error=True)


def _match_results(
    messages: tuple[Message, ...],
) -> tuple[dict[tuple[int, str], Message], list[str]]:
    """Map (assistant index, call id) to the result answering it; list what is dropped."""
    open_calls: dict[str, int] = {}  # call id -> index of the latest unanswered declaration
    answers: dict[tuple[int, str], Message] = {}
    answered: set[str] = set()
    dropped: list[str] = []
    for index, message in enumerate(messages):
        for call in message.tool_calls:
            open_calls[call.id] = index
        result = message.tool_result
        if result is None:
            continue
        owner = open_calls.pop(result.call_id, None)
        if owner is None:
            kind = "duplicate" if result.call_id in answered else "orphan"
            size = len(result.content)
            dropped.append(f"{kind} tool result for call {result.call_id!r} ({size:,} chars)")
        else:
            answers[(owner, result.call_id)] = message
            answered.add(result.call_id)
    return answers, dropped


def _unique_calls(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    seen: set[str] = set()
    unique = []
    for call in calls:
        if call.id not in seen:
            seen.add(call.id)
            unique.append(call)
    return tuple(unique) if len(unique) < len(calls) else calls

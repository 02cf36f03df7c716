"""max_tokens escalation and continuation, as pure functions.

When the model stops at the output-token limit, the recovery policy raises the limit
(`next_max_tokens`), drops any tool call whose arguments were cut off
(`drop_incomplete_tool_calls`), asks the model to resume (`continuation_request_messages`)
and joins the two halves into one assistant answer (`stitch`). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall

__all__ = [
    "CONTINUATION_MESSAGE",
    "DEFAULT_MAX_TOKENS",
    "MIN_SEAM_OVERLAP",
    "continuation_request_messages",
    "drop_incomplete_tool_calls",
    "mark_cut_tool_call",
    "next_max_tokens",
    "seam_overlap",
    "stitch",
]

# The user message that asks for the rest of a cut answer: resume at the cut, repeat nothing.
CONTINUATION_MESSAGE = (
    "Your response was cut off at the token limit.\n"
    "Resume DIRECTLY from where you stopped — do not repeat any content.\n"
    "Continue the implementation or explanation from the exact point of interruption."
)

# The starting limit when neither the request nor the model states one. 4,096 is the smallest
# output cap among current mainstream chat models (GPT-4 / GPT-3.5 Turbo, Claude 3 Haiku,
# many local servers' defaults), so every model accepts it, and one doubling (8,192) already
# reaches the common next tier.
DEFAULT_MAX_TOKENS = 4096

# Stop reasons that end generation wherever it is, possibly inside a tool call.
_CUT_OFF = frozenset({StopReason.MAX_TOKENS, StopReason.CONTEXT_WINDOW})

# Shortest repeated text at the seam that `stitch` removes anywhere in a line. Shorter
# suffix/prefix matches ("the ", ". ", a space, a newline) happen by chance all the time in a
# genuine continuation; an exact 8-character repeat right at the seam is, in practice, the
# model repeating itself. A shorter repeat is removed only when it is a whole restarted line.
MIN_SEAM_OVERLAP = 8


def next_max_tokens(
    current: int | None,
    *,
    cap: int | None,
    produced: int = 0,
    default: int = DEFAULT_MAX_TOKENS,
) -> int | None:
    """The raised output limit after a stop at max_tokens, or None when it cannot be raised.

    With a limit set, it doubles, clipped to `cap`. With none set, the provider stopped at its
    own implicit limit, which the cut answer's length shows: `produced` output tokens (its
    usage; 0 when unreported). The largest limit that can be asked for is the model's `cap`,
    so that is the answer when known; else `default`, or double `produced` when that is more
    (the provider's limit was higher than the default, and escalation never lowers it). The
    result is always above `current` and `produced`: None when the cap is not.
    """
    if current is not None and current < 1:
        raise ValueError(f"max_tokens must be positive, got {current}")
    if cap is not None and cap < 1:
        raise ValueError(f"the output cap must be positive, got {cap}")
    if produced < 0:
        raise ValueError(f"the output produced cannot be negative, got {produced}")
    if current is None:
        start = cap if cap is not None else max(default, 2 * produced)
        return start if start > produced else None
    raised = current * 2 if cap is None else min(current * 2, cap)
    return raised if raised > current else None


def drop_incomplete_tool_calls(message: Message) -> tuple[Message, tuple[ToolCall, ...]]:
    """`message` without the tool calls whose arguments were cut off, and those calls.

    A cut call is never executable: its arguments are whatever was parsed before the limit.
    """
    dropped = tuple(call for call in message.tool_calls if call.incomplete)
    if not dropped:
        return message, ()
    kept = tuple(call for call in message.tool_calls if not call.incomplete)
    return replace(message, tool_calls=kept), dropped


def mark_cut_tool_call(message: Message, stop_reason: StopReason) -> Message:
    """Presume the last tool call cut off when an answer was cut off: stopped at max_tokens,
    or when the context window filled up (`context_window`).

    The rule: a model emits its tool calls one after another and the output ends inside the
    last one, so when generation was cut off only the last call can be cut; the calls
    before it were closed before the next began. Adapters mark a call incomplete when they can
    tell (its JSON did not parse, a stream ended mid-arguments); when they could not tell (the
    arguments happened to parse), it is still unsafe to run, so it is marked. An answer that
    already has a call marked is left as the adapter described it.
    """
    calls = message.tool_calls
    if stop_reason not in _CUT_OFF or not calls:
        return message
    if any(call.incomplete for call in calls):
        return message
    last = replace(calls[-1], incomplete=True)
    return replace(message, tool_calls=(*calls[:-1], last))


def continuation_request_messages(view: Sequence[Message], partial: Message) -> tuple[Message, ...]:
    """The messages that ask the model to resume `partial`: view, partial text, the request.

    The partial answer is sent as text only. Its cut tool calls are never executable, and even
    complete calls cannot be sent without their results (every API rejects an assistant
    message with unanswered calls); a policy that wants those calls run should return the
    partial answer rather than continue it. With no partial text there is nothing to resume
    from, so the view is returned unchanged: a plain retry at the raised limit.
    """
    if partial.role is not Role.ASSISTANT:
        raise ValueError(f"the partial answer must be an assistant message, got {partial.role}")
    if not partial.text:
        return tuple(view)
    text_only = replace(partial, tool_calls=())
    return (*view, text_only, Message.user(CONTINUATION_MESSAGE))


def stitch(partial: Message, continued: Message) -> Message:
    """One assistant answer: `partial` followed by `continued`, minus what was repeated.

    The text is `partial.text + continued.text[k:]` where `k = seam_overlap(...)`, so it always
    starts with the partial text and ends with the continued text, and is never longer than
    both together. Text parts keep their `provider_details`; the two parts that meet at the
    seam merge into one when neither carries details. Tool calls are the partial's complete
    ones followed by all of the continued's: a cut call in the partial is superseded by the
    continuation (the model re-emits it whole). Message `provider_details` are merged, the
    continued answer's value winning for a key present in both (it is the later state).
    """
    for name, message in (("partial", partial), ("continued", continued)):
        if message.role is not Role.ASSISTANT:
            raise ValueError(f"{name} must be an assistant message, got {message.role}")
    overlap = seam_overlap(partial.text, continued.text)
    parts = _join_parts(partial.parts, _skip_chars(continued.parts, overlap))
    complete_calls = tuple(call for call in partial.tool_calls if not call.incomplete)
    return replace(
        partial,
        parts=parts,
        tool_calls=complete_calls + continued.tool_calls,
        provider_details=_merge_details(partial.provider_details, continued.provider_details),
    )


def seam_overlap(before: str, after: str) -> int:
    """How many leading chars of `after` repeat the end of `before` and should be removed.

    The longest suffix of `before` that is also a prefix of `after` and either has at least
    `MIN_SEAM_OVERLAP` chars, or is the whole last line of `before` (the model restarted the
    line it was cut in) and holds a non-blank char. 0 when there is none.

    Also 0 when the seam is inside a loop: `before` already ended by repeating a unit that
    explains the longest match (`_ends_in_loop`). In looping text ("ha ha ha", a row of
    dashes, the same line again and again) a continuation that goes on with the loop matches
    the end of `before` as well as a repeat would, and can match all of it; the text cannot
    tell the two apart, and removing the match would delete real content, so it is kept (at
    worst one unit too many is shown). Only `before` and the match length decide, so the
    stream's seam (`chatcli.streaming`), which sees `after` a few chars at a time, agrees.
    """
    lengths = _border_lengths(before, after)
    if lengths and _ends_in_loop(before, lengths[0]):
        return 0
    for length in lengths:
        start = len(before) - length
        if length >= MIN_SEAM_OVERLAP:
            return length
        restarts_line = start == 0 or before[start - 1] == "\n"
        if restarts_line and before[start:].strip():
            return length
    return 0


def _border_lengths(before: str, after: str) -> list[int]:
    """Every length k > 0 with before.endswith(after[:k]), longest first. Linear time (KMP)."""
    if not before or not after:
        return []
    failure = _failure_function(after)
    matched = 0
    for char in before:
        while matched and (matched == len(after) or after[matched] != char):
            matched = failure[matched - 1]
        if after[matched] == char:
            matched += 1
    lengths = []
    while matched:
        lengths.append(matched)
        matched = failure[matched - 1]
    return lengths


def _ends_in_loop(before: str, length: int) -> bool:
    """Whether `before` ends in a loop that explains a match of its last `length` chars.

    A loop is a unit of q <= `length` chars repeated back to back: the last max(`length`, 2q)
    chars of `before` have period q. At least two whole units, so that `before` shows the
    repetition by itself (a unit seen once is what a model repeating itself produces); and
    over the whole match, so that the match is the loop going on. Linear time (Z-function of
    the reversed tail, where the loop starts at index 0).
    """
    tail = before[-2 * length :][::-1]
    common = _z_function(tail)
    return any(common[q] >= max(length - q, q) for q in range(1, min(length + 1, len(tail))))


def _z_function(text: str) -> list[int]:
    """z[i] is the length of the longest common prefix of `text` and `text[i:]` (z[0] = 0)."""
    z = [0] * len(text)
    left = right = 0
    for i in range(1, len(text)):
        if i < right:
            z[i] = min(right - i, z[i - left])
        while i + z[i] < len(text) and text[z[i]] == text[i + z[i]]:
            z[i] += 1
        if i + z[i] > right:
            left, right = i, i + z[i]
    return z


def _failure_function(pattern: str) -> list[int]:
    """KMP: failure[i] is the longest proper border of pattern[: i + 1]."""
    failure = [0] * len(pattern)
    border = 0
    for i in range(1, len(pattern)):
        while border and pattern[i] != pattern[border]:
            border = failure[border - 1]
        if pattern[i] == pattern[border]:
            border += 1
        failure[i] = border
    return failure


def _skip_chars(parts: tuple[TextPart, ...], count: int) -> tuple[TextPart, ...]:
    """`parts` without their first `count` chars; emptied parts survive only with details."""
    out: list[TextPart] = []
    for part in parts:
        cut = min(count, len(part.text))
        count -= cut
        if cut < len(part.text) or part.provider_details is not None:
            out.append(replace(part, text=part.text[cut:]) if cut else part)
    return tuple(out)


def _join_parts(head: tuple[TextPart, ...], tail: tuple[TextPart, ...]) -> tuple[TextPart, ...]:
    if head and tail and head[-1].provider_details is None and tail[0].provider_details is None:
        seam = TextPart(text=head[-1].text + tail[0].text)
        return (*head[:-1], seam, *tail[1:])
    return head + tail


def _merge_details(
    first: Mapping[str, Any] | None, second: Mapping[str, Any] | None
) -> Mapping[str, Any] | None:
    if first is None or second is None:
        return first if second is None else second
    return {**first, **second}

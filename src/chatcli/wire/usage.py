"""The usage a proxy client is told for its answer, and what the recovery around it used.

A client reads an answer's usage as the size of its context: Claude Code compacts by it, and
an agent's context meter shows it. A recovery makes several calls for one answer (a rejected
prompt, then a shorter view; a continuation after max_tokens), each with its own prompt, so
their sum counts the prompt once per call. The answer's usage is therefore the last call's
(`Reply.final_usage`): its prompt is the one the answer ended on, its output the rest of the
answer. What the other calls used is the recovery's, told apart: in the response headers of
a whole answer (`recovery_headers`), in an SSE comment before a streamed answer's end (its
headers went out before its calls were made: `RecoveryCalls`), and in `/metrics`. The
library keeps the sum (`Reply.usage`, what the answer cost) for its own users.
"""

from __future__ import annotations

from dataclasses import dataclass

from chatcli.events import Event
from chatcli.messages import Usage
from chatcli.recovery import Reply

__all__ = [
    "RECOVERY_CALLS_HEADER",
    "RECOVERY_USAGE_HEADER",
    "RecoveryCalls",
    "answer_usage",
    "recovery_calls",
    "recovery_headers",
    "recovery_usage",
]

RECOVERY_CALLS_HEADER = "x-chatcli-recovery-calls"
RECOVERY_USAGE_HEADER = "x-chatcli-recovery-usage"


def answer_usage(reply: Reply) -> Usage:
    """The usage a client is told for `reply`: its last call's."""
    return reply.final_usage if reply.final_usage is not None else reply.usage


def recovery_calls(reply: Reply) -> int:
    """The upstream calls made for `reply` besides the one it ended with."""
    return max(0, reply.calls - 1)


def recovery_usage(reply: Reply) -> Usage:
    """What the calls besides the last used (rejected calls report none)."""
    total, final = reply.usage, answer_usage(reply)
    return Usage(
        input_tokens=max(0, total.input_tokens - final.input_tokens),
        output_tokens=max(0, total.output_tokens - final.output_tokens),
        cache_read_tokens=max(0, total.cache_read_tokens - final.cache_read_tokens),
        cache_write_tokens=max(0, total.cache_write_tokens - final.cache_write_tokens),
        reasoning_tokens=max(0, total.reasoning_tokens - final.reasoning_tokens),
    )


def recovery_headers(reply: Reply) -> dict[str, str]:
    """The response headers that tell the recovery's extra calls and their summed usage;
    none when the answer took one call."""
    calls = recovery_calls(reply)
    if not calls:
        return {}
    return {RECOVERY_CALLS_HEADER: str(calls), RECOVERY_USAGE_HEADER: _summed(reply)}


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryCalls(Event):
    """What a streamed answer's recovery used, written before the answer's end (as the
    dialects write every event: an SSE comment, which clients ignore)."""

    reply: Reply

    @staticmethod
    def of(reply: Reply) -> RecoveryCalls | None:
        """The event for `reply`; None when it took one call."""
        return RecoveryCalls(reply=reply) if recovery_calls(reply) else None

    def describe(self) -> str:
        calls = recovery_calls(self.reply)
        return f"recovery: {calls} upstream call(s) besides the last: {_summed(self.reply)}"


def _summed(reply: Reply) -> str:
    usage = recovery_usage(reply)
    return (
        f"input_tokens={usage.input_tokens}, output_tokens={usage.output_tokens}, "
        f"cache_read_tokens={usage.cache_read_tokens}, "
        f"cache_write_tokens={usage.cache_write_tokens}"
    )

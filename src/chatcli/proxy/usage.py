"""The usage a proxy client is told for its answer, and what the recovery around it used.

A client reads an answer's usage as the size of its context: Claude Code compacts by it, and
an agent's context meter shows it. A recovery makes several calls for one answer (a rejected
prompt, then a shorter view; a continuation after max_tokens), each with its own prompt, so
their sum counts the prompt once per call. The answer's usage is therefore the last call's
(`Reply.final_usage`): its prompt is the one the answer ended on, its output the rest of the
answer. What the other calls used is the recovery's, told apart: in response headers
(`recovery_headers`) and in `/metrics`. The library keeps the sum (`Reply.usage`, what the
answer cost) for its own users.
"""

from __future__ import annotations

from chatcli.messages import Usage
from chatcli.recovery import Reply

__all__ = [
    "RECOVERY_CALLS_HEADER",
    "RECOVERY_USAGE_HEADER",
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
    usage = recovery_usage(reply)
    summed = (
        f"input_tokens={usage.input_tokens}, output_tokens={usage.output_tokens}, "
        f"cache_read_tokens={usage.cache_read_tokens}, "
        f"cache_write_tokens={usage.cache_write_tokens}"
    )
    return {RECOVERY_CALLS_HEADER: str(calls), RECOVERY_USAGE_HEADER: summed}

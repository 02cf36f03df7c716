"""The summary message a compaction puts in the working view: written here, and read back.

It is a user message that starts with `SUMMARY_HEADER`, names the transcript's messages it
replaced, and is followed by what the summary did not state: the user's instructions, pinned
verbatim, and the latest request when it was summarised. A later compaction reads the pinned
block back (`pinned_items`), so those instructions survive it too, and the span, so its own
header names the whole span an earlier summary stood for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from chatcli.history.truncate import SUMMARY_HEADER, Number
from chatcli.messages import Message, Role

__all__ = ["SUMMARY_HEADER", "is_summary_message", "pinned_items", "summary_text"]

_PINNED_HEADER = "[Kept verbatim from the user's messages, because the summary did not state them:]"
_LATEST_HEADER = "[The user's latest request, verbatim:]"
# The span an earlier summary's header names ("(#3-#40)").
_SPAN = re.compile(r"\(#(\d+)-#(\d+)\)")


def is_summary_message(message: Message) -> bool:
    """Whether `message` is a summary written by an earlier compaction."""
    return message.role is Role.USER and message.text.startswith(SUMMARY_HEADER)


def summary_text(
    summary: str,
    pinned: Sequence[str],
    request: str,
    middle: tuple[Message, ...],
    numbering: Number | None,
) -> str:
    """The summary message's text: the header naming what `middle` was, the summary, then
    the `pinned` instructions and the latest `request` (each block only when not empty)."""
    span = _span(middle, numbering)
    parts = [
        f"{SUMMARY_HEADER}: the {len(middle):,} messages before this one{span} were replaced "
        "by this summary. The full transcript is kept (/history).]",
        summary,
    ]
    if pinned:
        parts.append(_PINNED_HEADER + "\n" + "\n".join(f"- {item}" for item in pinned))
    if request:
        parts.append(f"{_LATEST_HEADER}\n{request}")
    return "\n\n".join(parts)


def _span(middle: tuple[Message, ...], numbering: Number | None) -> str:
    """ " (#a-#b)": the transcript numbers of the span `middle` stands for (an earlier summary
    in it, the span its header names), "" when none is known."""
    if numbering is None:
        return ""
    numbers: list[int] = []
    for message in middle:
        named = _SPAN.search(message.text[:200]) if is_summary_message(message) else None
        if named is not None:
            numbers += map(int, named.groups())
        elif (number := numbering(message)) is not None:
            numbers.append(number)
    return f" (#{min(numbers)}-#{max(numbers)})" if numbers else ""


def pinned_items(summary_text: str) -> tuple[str, ...]:
    """The instructions an earlier summary pinned, so they survive the next compaction too."""
    _, found, rest = summary_text.partition(_PINNED_HEADER)
    if not found:
        return ()
    block = rest.split("\n\n", 1)[0]
    return tuple(line[2:] for line in block.splitlines() if line.startswith("- "))

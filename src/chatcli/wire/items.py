"""The typed items a streamed answer is written from, and the one feed that makes them.

A dialect's stream writer reads an async iterator of `StreamItem`: text deltas, tool-call
deltas, recovery events and, last, the final `Reply`. `stream_items` makes them from
`Client.astream` (`chatcli.streaming`), which streams the whole send() as one answer: the
first call's text as the upstream sends it, then, after an escalation (max_tokens) or a
full window, the continuation's text with the repeat at the seam already taken out. So a
client sees one message, live, however many calls it took.

What is not forwarded as it comes, and why:

- **Tool calls** are written from the `Reply`, never from their deltas: a call cut off at
  max_tokens is dropped by recovery (and asked again), so a delta may belong to a call the
  answer will not have. They come after the text, as the APIs send them.
- **`Discard`** (text a failed call showed, which the engine dropped before it tried again)
  cannot be taken back: neither wire format has a way to retract a delta. Holding every
  token back until no call can fail any more would mean no live streaming at all, for a
  case that is rare in the proxy (it is built with no retries: only a failure the engine
  recovers after text was sent, such as a prompt the server cut silently, discovered from
  the usage at the end). So the stream ends there with the dialect's error event
  (`Retracted`): the OpenAI and Anthropic SDKs raise it as an API error, agents such as
  Claude Code retry the request, and no client takes the shown text plus a second answer
  as one reply.
- **Reasoning a client must send back** (Anthropic thinking blocks and their signatures)
  streams live like text (`ReasoningDelta`), before the text as the upstream sends it; an
  answer whose reasoning came only whole (a whole upstream answer) gets it before its text
  (`ReasoningItem`).
- **The provider's compaction** (Anthropic's block, OpenAI's item: `CompactionDelta`, whole
  and verbatim) is passed on where the upstream streamed it; one that came only whole begins
  the answer, before its reasoning and text, as the providers put it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from chatcli.events import Event
from chatcli.providers.base import CompactionDelta, ReasoningDelta, TextDelta
from chatcli.providers.base import ToolCallDelta as EngineToolCallDelta
from chatcli.recovery import Reply
from chatcli.streaming import Discard
from chatcli.streaming import StreamItem as EngineItem

__all__ = [
    "CompactionDelta",
    "EventItem",
    "FinalReply",
    "ReasoningDelta",
    "ReasoningItem",
    "Retracted",
    "StreamItem",
    "TextDelta",
    "ToolCallDelta",
    "final_items",
    "stream_items",
]

logger = logging.getLogger("chatcli.wire")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A piece of tool call `index`: its id and name come with the first piece."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningItem:
    """The answer's opaque reasoning (`Message.provider_details`: Anthropic thinking blocks
    with their signatures), which a client must be able to send back; before any text."""

    details: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class EventItem:
    """Something recovery did (an overflow, a level, an escalation), as it happened."""

    event: Event


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalReply:
    """The whole answer: always the last item."""

    reply: Reply


StreamItem = (
    TextDelta
    | ToolCallDelta
    | ReasoningDelta
    | CompactionDelta
    | ReasoningItem
    | EventItem
    | FinalReply
)


class Retracted(Exception):
    """The engine dropped text the client was already sent (a `Discard`): the stream cannot
    go on as one answer (see the module docstring)."""

    def __init__(self, text: str) -> None:
        super().__init__(
            f"the upstream's answer failed after {len(text)} characters of it (and any of "
            "its reasoning) were sent, "
            "and text already streamed cannot be taken back; send the request again"
        )
        self.text = text


async def stream_items(
    engine: AsyncIterator[EngineItem], *, live: bool = True
) -> AsyncIterator[StreamItem]:
    """The items of one answer from `engine` (a `Client.astream`): text as it comes when
    `live`, else all of it at the end; raises `Retracted` for a `Discard` of text sent. The
    engine's stream (and so the upstream's) is closed when the reader stops early."""
    streamed: list[str] = []
    reasoned = compacted = False
    try:
        async for item in engine:
            if isinstance(item, TextDelta):
                if live:
                    streamed.append(item.text)
                    yield item
            elif isinstance(item, ReasoningDelta):
                if live:
                    reasoned = True
                    yield item
            elif isinstance(item, CompactionDelta):
                if live:
                    compacted = True
                    yield item
            elif isinstance(item, Discard):
                if live and (item.text or item.reasoning):
                    raise Retracted(item.text)
            elif isinstance(item, Reply):
                text = "".join(streamed)
                for last in final_items(item, text, reasoned=reasoned, compacted=compacted):
                    yield last
                return
            elif not isinstance(item, EngineToolCallDelta):  # tool calls: from the Reply
                yield EventItem(event=item)
        raise RuntimeError("the answer's stream ended without its reply")
    finally:
        aclose: Any = getattr(engine, "aclose", None)
        if aclose is not None:
            await aclose()


def final_items(
    reply: Reply, streamed: str, *, reasoned: bool = False, compacted: bool = False
) -> Iterator[StreamItem]:
    """What the client has not been sent yet: the compaction (unless `compacted`: streamed),
    the reasoning (unless `reasoned`), the rest of the text, the tool calls, the Reply."""
    part = reply.message.compaction
    if part is not None and not compacted:
        yield CompactionDelta(part=part)
    details = reply.message.provider_details
    if details and not streamed and not reasoned:
        yield ReasoningItem(details=details)
    text = reply.message.text
    if text.startswith(streamed):
        if rest := text[len(streamed) :]:
            yield TextDelta(text=rest)
    else:  # the engine keeps what it streamed equal to the answer: this is a bug
        logger.warning("the streamed text is not a prefix of the final answer")
    for index, call in enumerate(reply.message.tool_calls):
        yield ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments_json)
    yield FinalReply(reply=reply)

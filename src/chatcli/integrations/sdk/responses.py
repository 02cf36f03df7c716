"""The Responses API's stream under `chatcli.wrap`: the caller's own events passed on, what
recovery adds written by the Responses event writer (`chatcli.wire.responses`, which
also reads the arguments and writes the whole `Response`: one converter for both).

See `chatcli.integrations.sdk.chunks` for what is passed on, held back and written.
"""

from __future__ import annotations

from typing import Any

from chatcli.recovery import Reply
from chatcli.wire.dialect import ClientRequest
from chatcli.wire.responses import ResponseEvents, output_items

__all__ = ["ResponsesEvents"]


class ResponsesEvents:
    """Responses stream events: the caller's call's own (SDK objects) passed on, its ending
    held back; the rest written as wire JSON by `writer`."""

    def __init__(self, request: ClientRequest, model: str) -> None:
        self.writer = ResponseEvents(request, model)
        self.passed_any = False
        self.held: list[Any] = []

    def passed(self, event: Any) -> list[Any]:
        kind = getattr(event, "type", "")
        if self.held or kind in ("response.completed", "response.incomplete"):
            self.held.append(event)
            return []
        self.passed_any = True
        writer = self.writer
        writer.started = writer.started or kind == "response.created"
        number = getattr(event, "sequence_number", None)  # llama-server leaves it out
        writer.sequence = max(writer.sequence, int(number or 0) + 1)
        if kind == "response.output_item.added":
            index = getattr(event, "output_index", None)
            writer.next_output = max(writer.next_output, int(index or 0) + 1)
        return [event]

    def text(self, text: str) -> list[Any]:
        return list(self.writer.text(text))

    def ending(self, reply: Reply, *, whole: bool) -> list[Any]:
        if whole:
            return self.held
        if not self.passed_any:  # every item was written here
            return list(self.writer.ending(reply, calls=True))
        return list(self.writer.ending(reply, calls=False, output=output_items(reply.message)))

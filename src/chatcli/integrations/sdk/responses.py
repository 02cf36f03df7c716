"""The Responses API (`responses.create`) as a dialect of the wrapper: its arguments in
neutral form, and a `Reply` (whole or streamed) back in its wire shapes.

The proxy serves no Responses endpoint, so this dialect lives here, next to the proxy's two
(`chatcli.proxy.openai_dialect`, `anthropic_dialect`), in the same shape (`ClientRequest`).

`input` is a string (one user message) or a list of items. Items are grouped in turns, one
neutral message each: a user, system or developer message; an assistant turn (its message,
reasoning and `function_call` items in a row: one assistant message with its tool calls, so
that tool pairs are whole); a `function_call_output` (a tool result). `raw_messages[i]` is the
list of items of turn `i`. `instructions` is counted as a system message (origin None) but
always sent as given (it is a passthrough argument). Other item types (built-in tool calls,
item references, ...) are not read: such a request is sent as it is, without recovery.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from chatcli.messages import Message, Role, StopReason, TextPart
from chatcli.providers.base import ToolSpec
from chatcli.providers.openai import REASONING_KEY, parse_tool_call
from chatcli.proxy.dialect import ClientRequest, Json, RequestError, split_fields, text_of
from chatcli.recovery import Reply

__all__ = ["HANDLED", "ResponsesDialect", "ResponsesEvents", "canonical_input"]

HANDLED = frozenset({"model", "input", "max_output_tokens", "tools", "stream"})
_ASSISTANT_ITEMS = frozenset({"function_call", "reasoning"})


class ResponsesDialect:
    """The Responses API's arguments in, its `Response` JSON out (module docstring)."""

    name = "responses"

    def parse(self, body: Json) -> ClientRequest:
        turns = _turns(canonical_input(body.get("input")))
        instructions = body.get("instructions")
        system = (Message.system(instructions),) if isinstance(instructions, str) else ()
        tools = body.get("tools") or ()
        return ClientRequest(
            dialect=self.name,
            model=body.get("model"),
            messages=system + tuple(_turn(t, i) for i, t in enumerate(turns)),
            origins=(None,) * len(system) + tuple(range(len(turns))),
            raw_messages=tuple(turns),
            max_tokens=body.get("max_output_tokens"),
            tools=tuple(_tool(t) for t in tools if t.get("type") == "function"),
            raw_tools=body.get("tools"),
            stream=bool(body.get("stream")),
            **split_fields(body, HANDLED, {}),
        )

    def reply(self, request: ClientRequest, reply: Reply, *, model: str) -> Json:
        cut = reply.stop_reason in (StopReason.MAX_TOKENS, StopReason.CONTEXT_WINDOW)
        return {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response",
            "created_at": int(time.time()),
            "model": model,
            "status": "incomplete" if cut else "completed",
            "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
            "error": None,
            "output": output_items(reply.message),
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": list(request.raw_tools or ()),
            "usage": _usage(reply),
        }


def canonical_input(value: Any) -> list[Any]:
    """`input` as a list of items (a string is one user message)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise RequestError("input must be a string or a non-empty list of items")
    return value


def output_items(message: Message) -> list[Json]:
    """An assistant message as `output` items: reasoning, the text message, function calls."""
    items = [dict(item) for item in (message.provider_details or {}).get(REASONING_KEY, ())]
    if message.text:
        part = {"type": "output_text", "text": message.text, "annotations": []}
        items.append(_message_item(f"msg_{uuid.uuid4().hex}", [part], "completed"))
    for call in message.tool_calls:
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{uuid.uuid4().hex}",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments_json,
                "status": "completed",
            }
        )
    return items


def _message_item(item_id: str, content: list[Json], status: str) -> Json:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _usage(reply: Reply) -> Json:
    usage = reply.usage
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {
            "cached_tokens": usage.cache_read_tokens,
            "cache_write_tokens": usage.cache_write_tokens,
        },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.output_tokens,
    }


def _kind(item: Any) -> str:
    if not isinstance(item, dict):
        raise RequestError(f"input items must be objects, not {type(item).__name__}")
    kind = item.get("type") or "message"
    if kind == "message" and item.get("role") == "assistant":
        return "assistant"
    if kind in _ASSISTANT_ITEMS:
        return "assistant"
    if kind in ("message", "function_call_output"):
        return kind
    raise RequestError(f"input items of type {kind!r} are not read by chatcli")


def _turns(items: list[Any]) -> list[list[Any]]:
    """The items in turns (module docstring): an assistant turn is its items in a row."""
    turns: list[list[Any]] = []
    for item in items:
        kind = _kind(item)
        if kind == "assistant" and turns and _kind(turns[-1][0]) == "assistant":
            turns[-1].append(item)
        else:
            turns.append([item])
    return turns


def _turn(items: list[Any], index: int) -> Message:
    first = items[0]
    kind = _kind(first)
    if kind == "function_call_output":
        output = first.get("output")
        return Message.tool(str(first.get("call_id") or ""), text_of(output))
    if kind == "message":
        role = first.get("role")
        if role in ("system", "developer"):
            return Message.system(text_of(first.get("content")))
        if role != "user":
            raise RequestError(f"input[{index}]: role {role!r} is not read by chatcli")
        return Message.user(text_of(first.get("content")))
    text = "".join(
        text_of(i.get("content")) for i in items if (i.get("type") or "message") == "message"
    )
    calls = tuple(
        parse_tool_call(
            str(i.get("call_id") or ""), str(i.get("name") or ""), i.get("arguments") or ""
        )
        for i in items
        if i.get("type") == "function_call"
    )
    reasoning = tuple(i for i in items if i.get("type") == "reasoning")
    return Message(
        role=Role.ASSISTANT,
        parts=(TextPart(text=text),) if text else (),
        tool_calls=calls,
        provider_details={REASONING_KEY: reasoning} if reasoning else None,
    )


def _tool(tool: Mapping[str, Any]) -> ToolSpec:
    if not tool.get("name"):
        raise RequestError("each function tool needs a name")
    return ToolSpec(
        name=tool["name"],
        description=tool.get("description") or "",
        parameters=tool.get("parameters") or {},
    )


class ResponsesEvents:
    """Responses stream events (`ResponseStreamEvent` wire JSON); see `chatcli.integrations.
    sdk.chunks` for what is passed on, held back and written."""

    def __init__(self, request: ClientRequest, model: str) -> None:
        self.request, self.model = request, model
        self.started = False
        self.passed_any = False
        self.sequence = 0
        self.next_output = 0
        self.text_item: str | None = None  # the id of the message item being written
        self.written = ""
        self.held: list[Any] = []

    def passed(self, event: Any) -> list[Any]:
        kind = getattr(event, "type", "")
        if self.held or kind in ("response.completed", "response.incomplete"):
            self.held.append(event)
            return []
        self.passed_any = True
        self.started = self.started or kind == "response.created"
        number = getattr(event, "sequence_number", None)  # llama-server leaves it out
        self.sequence = max(self.sequence, int(number or 0) + 1)
        if kind == "response.output_item.added":
            index = getattr(event, "output_index", None)
            self.next_output = max(self.next_output, int(index or 0) + 1)
        return [event]

    def text(self, text: str) -> list[Json]:
        if not text:
            return []
        out = self._start()
        if self.text_item is None:
            self.text_item = f"msg_{uuid.uuid4().hex}"
            item = _message_item(self.text_item, [], "in_progress")
            out.append(
                self._event("response.output_item.added", output_index=self.next_output, item=item)
            )
            part = {"type": "output_text", "text": "", "annotations": []}
            out.append(self._part("response.content_part.added", part=part))
        self.written += text
        out.append(self._part("response.output_text.delta", delta=text, logprobs=[]))
        return out

    def ending(self, reply: Reply, *, whole: bool) -> list[Any]:
        if whole:
            return self.held
        out = self._start()
        if self.text_item is not None:
            part = {"type": "output_text", "text": self.written, "annotations": []}
            out.append(self._part("response.output_text.done", text=self.written, logprobs=[]))
            out.append(self._part("response.content_part.done", part=part))
            item = _message_item(self.text_item, [part], "completed")
            out.append(
                self._event("response.output_item.done", output_index=self.next_output, item=item)
            )
            self.next_output += 1
        if not self.passed_any:
            calls = Message(role=Role.ASSISTANT, tool_calls=reply.message.tool_calls)
            for item in output_items(calls):
                for kind in ("response.output_item.added", "response.output_item.done"):
                    out.append(self._event(kind, output_index=self.next_output, item=item))
                self.next_output += 1
        body = ResponsesDialect().reply(self.request, reply, model=self.model)
        kind = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
        out.append(self._event(kind, response=body))
        return out

    def _start(self) -> list[Json]:
        if self.started:
            return []
        self.started = True
        response = {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response",
            "created_at": int(time.time()),
            "model": self.model,
            "status": "in_progress",
            "output": [],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": list(self.request.raw_tools or ()),
        }
        return [self._event("response.created", response=response)]

    def _part(self, kind: str, **fields: Any) -> Json:
        return self._event(
            kind, item_id=self.text_item, output_index=self.next_output, content_index=0, **fields
        )

    def _event(self, kind: str, **fields: Any) -> Json:
        self.sequence += 1
        return {"type": kind, "sequence_number": self.sequence - 1, **fields}

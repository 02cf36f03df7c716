"""The OpenAI Responses dialect: `POST /v1/responses`, whole and streamed (Codex CLI speaks
only this), and the reading `chatcli.wrap` uses for `responses.create`.

`input` is a string (one user message) or a list of items. Items are grouped in turns, one
neutral message each: a user, system or developer message; an assistant turn (its message,
reasoning and `function_call` items in a row: one assistant message with its tool calls, so
that tool pairs are whole); a `function_call_output` (a tool result). `raw_messages[i]` is the
list of items of turn `i`. `instructions` is a system message (origin None) whose raw value is
`raw_system`, sent as given to an upstream that speaks Responses.

Compaction items and the `compaction_trigger` item are the proxy's to serve
(`chatcli.proxy.compaction`, before this dialect reads the body). Other item types (built-in
tool calls, item references, ...) are refused (`RequestError`;
`chatcli.wrap` then sends such a call as it is, without recovery). What the neutral view
cannot carry but a Responses upstream would take verbatim (custom and client-run built-in
tools, images and files in a message, `previous_response_id`, `conversation`) is listed in
`ClientRequest.unreadable`: the proxy, whose upstream never speaks Responses, refuses it
with a 400 naming it (`chatcli.wire.forwarding.plan`) instead of dropping it. The proxy keeps
no responses, so `store` is not forwarded either (the answer's `x-chatcli-dropped` says so).

Tools: `chatcli.wire.responses_tools` (namespaces flattened, hosted tools left out).

Shapes follow openai-python's types (`Response`, `ResponseStreamEvent`) and the recorded API
stream in tests/data/sse (an `error` event then `response.failed`, for a failure after the
stream began). Errors are the OpenAI envelope of `chatcli.wire.openai_chat`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import replace
from typing import Any

from chatcli.messages import CompactionPart, Message, Role, StopReason, TextPart
from chatcli.providers.base import TextDelta
from chatcli.providers.openai import REASONING_KEY, parse_tool_call
from chatcli.recovery import Reply
from chatcli.wire.dialect import (
    ClientRequest,
    Failure,
    FailureKind,
    Json,
    RequestError,
    checked,
    split_fields,
    sse,
    sse_comment,
    text_of,
)
from chatcli.wire.items import CompactionDelta, EventItem, FinalReply, ReasoningItem, StreamItem
from chatcli.wire.openai_chat import OpenAIDialect
from chatcli.wire.responses_tools import (
    HOSTED_TOOLS,
    Namespaced,
    call_name,
    distinct,
    flat_name,
    functions,
    hosted,
    tool_spec,
)
from chatcli.wire.schemas import ResponsesRequest
from chatcli.wire.usage import answer_usage

__all__ = [
    "HANDLED",
    "HOSTED_TOOLS",
    "SETTINGS",
    "Namespaced",
    "ResponseEvents",
    "ResponsesDialect",
    "canonical_input",
    "compaction_items",
    "flat_name",
    "output_items",
]

HANDLED = frozenset({"model", "input", "instructions", "max_output_tokens", "tools", "stream"})
# Request field -> neutral setting; `reasoning` and `tool_choice` are read into the neutral
# values in `_settings` (their Responses shapes differ from Chat Completions').
SETTINGS: Mapping[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "tool_choice": "tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
    "reasoning": "reasoning_effort",
}
# Fields that only mean something to a server holding earlier responses.
_STATEFUL = ("previous_response_id", "conversation")
_ASSISTANT_ITEMS = frozenset({"function_call", "reasoning"})
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "refusal"})
_OPENAI = OpenAIDialect()


class ResponsesDialect:
    """The Responses API in and out (see the module docstring)."""

    name = "responses"

    def parse(self, body: Json) -> ClientRequest:
        checked(ResponsesRequest, body)
        items = canonical_input(body.get("input"))
        turns = _turns(items)
        instructions = body.get("instructions")
        if instructions is not None and not isinstance(instructions, str):
            raise RequestError("instructions must be a string", param="instructions")
        system = (Message.system(instructions),) if instructions else ()
        tools = body.get("tools") or []
        if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
            raise RequestError("tools must be a list of objects", param="tools")
        declared = tuple(functions(tools))
        fields = split_fields(body, HANDLED, SETTINGS)
        return ClientRequest(
            dialect=self.name,
            model=body.get("model"),
            messages=system + tuple(_turn(t, i) for i, t in enumerate(turns)),
            origins=(None,) * len(system) + tuple(range(len(turns))),
            raw_messages=tuple(turns),
            raw_system=instructions,
            max_tokens=_max_tokens(body),
            tools=distinct(tuple(tool_spec(tool, namespace) for namespace, tool in declared)),
            raw_tools=body.get("tools"),
            stream=bool(body.get("stream")),
            unreadable=tuple(_unreadable(body, items)),
            omitted=tuple(f"tools[{i}] ({t['type']})" for i, t in enumerate(tools) if hosted(t)),
            **{**fields, "settings": _settings(fields["settings"])},
        )

    def reply(self, request: ClientRequest, reply: Reply, *, model: str) -> Json:
        output = [*request.leading, *output_items(reply.message, Namespaced.of(request.raw_tools))]
        return _response_body(request, reply, model=model, output=output)

    async def stream(
        self, request: ClientRequest, items: AsyncIterator[StreamItem], *, model: str
    ) -> AsyncIterator[bytes]:
        """Text as it comes; tool calls (and reasoning) as whole items, from the Reply."""
        events = ResponseEvents(request, model)
        async for item in items:
            for event in _events_of(events, item):
                yield event

    def stream_error(self, failure: Failure) -> bytes:
        """An `error` event (the SDK raises it as an APIError), then `response.failed` (what
        Codex reads). Written without the stream's state, they carry no sequence number."""
        error = self.error(failure)["error"]
        failed = {
            **_head(f"resp_{uuid.uuid4().hex}", int(time.time()), ""),
            "status": "failed",
            "error": {"code": error["code"] or error["type"], "message": error["message"]},
            "output": [],
        }
        return sse({"type": "error", "error": error}, "error") + sse(
            {"type": "response.failed", "response": failed}, "response.failed"
        )

    def error(self, failure: Failure) -> Json:
        """OpenAI's envelope; an overflow names `input`, the field that holds the history."""
        if failure.kind is FailureKind.OVERFLOW and failure.param is None:
            failure = replace(failure, param="input")
        return _OPENAI.error(failure)


def _events_of(events: ResponseEvents, item: StreamItem) -> Iterator[bytes]:
    if isinstance(item, TextDelta):
        written = events.text(item.text)
    elif isinstance(item, ReasoningItem):
        written = events.items(list(item.details.get(REASONING_KEY, ())))
    elif isinstance(item, EventItem):
        yield sse_comment(f"chatcli: {item.event.describe()}")
        return
    elif isinstance(item, CompactionDelta):
        written = events.compaction(item.part)
    elif isinstance(item, FinalReply):
        written = events.ending(item.reply, calls=True)
    else:  # a ToolCallDelta: the calls are written whole from the Reply
        return
    for event in written:
        yield sse(event, event["type"])


def canonical_input(value: Any) -> list[Any]:
    """`input` as a list of items (a string is one user message)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    if not isinstance(value, list) or not value:
        raise RequestError("input must be a string or a non-empty list of items", param="input")
    return value


def _response_body(
    request: ClientRequest, reply: Reply, *, model: str, output: list[Json], rid: str = ""
) -> Json:
    """The `Response` object of a finished answer whose `output` items are given."""
    cut = reply.stop_reason in (StopReason.MAX_TOKENS, StopReason.CONTEXT_WINDOW)
    return {
        **_head(rid or f"resp_{uuid.uuid4().hex}", int(time.time()), model),
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None,
        "error": None,
        "instructions": request.raw_system,
        "output": output,
        "tools": list(request.raw_tools or ()),
        "usage": _usage(reply),
    }


def output_items(message: Message, names: Namespaced | None = None) -> list[Json]:
    """An assistant message as `output` items: OpenAI's compaction item, reasoning, the text
    message, function calls (a flat name among `names` written back as its namespace and
    name)."""
    items = compaction_items(message)
    items += [dict(item) for item in (message.provider_details or {}).get(REASONING_KEY, ())]
    if message.text:
        items.append(_message_item(f"msg_{uuid.uuid4().hex}", [_text_part(message.text)]))
    names = names or Namespaced()
    items.extend(names.call_item(call) for call in message.tool_calls)
    return items


def compaction_items(message: Message) -> list[Json]:
    """The `compaction` item OpenAI began the answer with (verbatim), which the client sends
    back: made when the proxy passes compaction to OpenAI (`chatcli.proxy.compaction_routes`)."""
    return _part_items(message.compaction)


def _part_items(part: CompactionPart | None) -> list[Json]:
    return [dict(part.provider_details)] if part is not None and part.provider == "openai" else []


class ResponseEvents:
    """Responses stream events (`ResponseStreamEvent` wire JSON) of one answer, in order:
    `response.created`, items (OpenAI's compaction item where the upstream put it, reasoning,
    the text message with its deltas, function calls), then `response.completed` or
    `response.incomplete` with the whole `Response`, whose `output` holds the items the stream
    wrote (same ids)."""

    def __init__(self, request: ClientRequest, model: str) -> None:
        self.request, self.model = request, model
        self.id, self.created = f"resp_{uuid.uuid4().hex}", int(time.time())
        self.started = False
        self.sequence = 0
        self.next_output = 0
        self.text_item: str | None = None  # the id of the message item being written
        self.written = ""
        self.output: list[Json] = []  # the items written whole
        self.compacted = False  # the answer's compaction item was written where it came

    def text(self, text: str) -> list[Json]:
        if not text:
            return []
        out = self.start()
        if self.text_item is None:
            self.text_item = f"msg_{uuid.uuid4().hex}"
            item = _message_item(self.text_item, [], "in_progress")
            out.append(
                self.event("response.output_item.added", output_index=self.next_output, item=item)
            )
            out.append(self._part("response.content_part.added", part=_text_part("")))
        self.written += text
        out.append(self._part("response.output_text.delta", delta=text, logprobs=[]))
        return out

    def items(self, items: list[Json]) -> list[Json]:
        """Whole output items (reasoning, function calls), each added then done; a function
        call's arguments in between as one delta, as the API streams them (the SDK's
        `responses.stream()` builds the arguments from the deltas)."""
        out = self.start()
        for item in items:
            index, self.next_output = self.next_output, self.next_output + 1
            if item["type"] != "function_call":
                out.append(self.event("response.output_item.added", output_index=index, item=item))
            else:
                opened = {**item, "arguments": "", "status": "in_progress"}
                arguments = {"item_id": item["id"], "output_index": index}
                out += [
                    self.event("response.output_item.added", output_index=index, item=opened),
                    self.event(
                        "response.function_call_arguments.delta",
                        **arguments,
                        delta=item["arguments"],
                    ),
                    self.event(
                        "response.function_call_arguments.done",
                        **arguments,
                        arguments=item["arguments"],
                    ),
                ]
            out.append(self.event("response.output_item.done", output_index=index, item=item))
            self.output.append(item)
        return out

    def ending(self, reply: Reply, *, calls: bool, output: list[Json] | None = None) -> list[Json]:
        """The end of the answer: the text item closed, the tool calls when `calls` (not yet
        streamed), and the final `Response`, whose `output` is the items written unless
        given (a stream that also passed on events of its own)."""
        out = [*self.start(), *self._close_text()]
        if calls:
            names = Namespaced.of(self.request.raw_tools)
            written = [names.call_item(c) for c in reply.message.tool_calls]
            compaction = [] if self.compacted else compaction_items(reply.message)
            out.extend(self.items([*compaction, *written]))
        output = self.output if output is None else output
        body = _response_body(self.request, reply, model=self.model, output=output, rid=self.id)
        kind = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
        out.append(self.event(kind, response={**body, "created_at": self.created}))
        return out

    def compaction(self, part: CompactionPart) -> list[Json]:
        """OpenAI's compaction item where it came in the answer (after any text written so
        far, which ends its message item), verbatim."""
        self.compacted = True
        return [*self.start(), *self._close_text(), *self.items(_part_items(part))]

    def start(self) -> list[Json]:
        """`response.created` and `response.in_progress` (as the API sends them), then the
        request's leading items (a compaction item the proxy made), once."""
        if self.started:
            return []
        self.started = True
        response = {
            **_head(self.id, self.created, self.model),
            "status": "in_progress",
            "instructions": self.request.raw_system,
            "output": [],
            "tools": list(self.request.raw_tools or ()),
        }
        out = [
            self.event("response.created", response=response),
            self.event("response.in_progress", response=response),
        ]
        return out + self.items(list(self.request.leading))

    def event(self, kind: str, **fields: Any) -> Json:
        self.sequence += 1
        return {"type": kind, "sequence_number": self.sequence - 1, **fields}

    def _close_text(self) -> list[Json]:
        if self.text_item is None:
            return []
        part = _text_part(self.written)
        item = _message_item(self.text_item, [part])
        out = [
            self._part("response.output_text.done", text=self.written, logprobs=[]),
            self._part("response.content_part.done", part=part),
            self.event("response.output_item.done", output_index=self.next_output, item=item),
        ]
        self.output.append(item)
        self.next_output += 1
        self.text_item = None
        return out

    def _part(self, kind: str, **fields: Any) -> Json:
        return self.event(
            kind, item_id=self.text_item, output_index=self.next_output, content_index=0, **fields
        )


def _head(rid: str, created: int, model: str) -> Json:
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "model": model,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
    }


def _text_part(text: str) -> Json:
    return {"type": "output_text", "text": text, "annotations": []}


def _message_item(item_id: str, content: list[Json], status: str = "completed") -> Json:
    return {
        "type": "message",
        "id": item_id,
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _usage(reply: Reply) -> Json:
    usage = answer_usage(reply)
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


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    value = body.get("max_output_tokens")
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(
            f"max_output_tokens must be a positive integer, not {value!r}",
            param="max_output_tokens",
        )
    return value


def _settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The Responses shapes of `reasoning` (`{"effort": ...}`) and of a named `tool_choice`
    (`{"type": "function", "name": ...}`) as the neutral values."""
    out = dict(raw)
    reasoning = out.pop("reasoning_effort", None)
    if isinstance(reasoning, dict) and reasoning.get("effort") is not None:
        out["reasoning_effort"] = reasoning["effort"]
    choice = out.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") == "function":
        out["tool_choice"] = choice.get("name")
    return out


def _unreadable(body: Mapping[str, Any], items: list[Any]) -> Iterator[str]:
    """What the neutral view of `body` lacks (module docstring), each named for a 400."""
    for name in _STATEFUL:
        if body.get(name) is not None:
            yield f"{name} (the proxy keeps no responses: send the whole conversation in input)"
    for i, tool in enumerate(body.get("tools") or ()):
        kind = tool.get("type")
        if kind == "namespace":
            members = tool.get("tools")
            for j, member in enumerate(members if isinstance(members, list) else ()):
                inner = member.get("type") if isinstance(member, dict) else None
                if inner != "function":
                    yield f"tools[{i}].tools[{j}] of type {inner!r} (only function tools)"
        elif kind != "function" and kind not in HOSTED_TOOLS:
            yield f"tools[{i}] of type {kind!r} (only function tools)"
    for i, item in enumerate(items):
        for key in ("content", "output"):  # a message's parts, a tool result's parts
            parts = item.get(key)
            for part in parts if isinstance(parts, list) else ():
                kind = part.get("type") if isinstance(part, dict) else None
                if kind not in _TEXT_PARTS:
                    yield f"input[{i}].{key} part of type {kind!r} (only text)"


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
    raise RequestError(f"input items of type {kind!r} are not read by chatcli", param="input")


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
        parse_tool_call(str(i.get("call_id") or ""), call_name(i), i.get("arguments") or "")
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

"""Chat Completions: neutral messages and tools as `messages` and `tools`, a `ChatCompletion`
(whole, or streamed as chunks) as a Response, and the settings as this wire's fields.

Settings beyond the common ones: stop, seed, reasoning_effort, response_format ("json": a JSON
object; a schema: `json_schema`, named after its title); a tool's name as tool_choice becomes a
function choice. A thinking budget is an error: OpenAI takes reasoning_effort instead. The same
body serves `OpenAICompatible` servers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatcli.messages import Message, Role, StopReason, ToolCall, Usage
from chatcli.providers._common import incomplete_answer, schema_name, unsupported
from chatcli.providers.base import (
    Request,
    Response,
    StreamDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from chatcli.providers.openai.common import (
    Json,
    _common_settings,
    _count,
    _failure,
    _field,
    _text_parts,
    _usage,
    parse_tool_call,
)
from chatcli.request_settings import JSON_MODE, TOOL_CHOICE_MODES

# Chat Completions `finish_reason` values (openai-python types/chat/chat_completion.py).
_CHAT_STOP = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "content_filter": StopReason.REFUSAL,
}


def chat_messages(messages: Sequence[Message]) -> list[Json]:
    """Neutral messages as Chat Completions `messages`."""
    return [_chat_message(m) for m in messages]


def _chat_message(message: Message) -> Json:
    if message.tool_result is not None:
        return {
            "role": "tool",
            "tool_call_id": message.tool_result.call_id,
            "content": message.text,
        }
    if message.tool_calls:
        calls = [_chat_call(c) for c in message.tool_calls]
        return {"role": "assistant", "content": message.text or None, "tool_calls": calls}
    return {"role": message.role.value, "content": message.text}


def _chat_call(call: ToolCall) -> Json:
    function = {"name": call.name, "arguments": call.arguments_json}
    return {"id": call.id, "type": "function", "function": function}


def _chat_tool(tool: ToolSpec) -> Json:
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def _chat_body(request: Request) -> Json:
    body: Json = {"messages": chat_messages(request.messages)}
    if request.tools:
        body["tools"] = [_chat_tool(t) for t in request.tools]
    return body


def _chat_usage(usage: Any) -> Usage:
    """The usage of an answer: the SDK's `CompletionUsage`, or the JSON of a stream's."""
    return _usage(
        _count(usage, "prompt_tokens"),
        _count(usage, "completion_tokens"),
        _field(usage, "prompt_tokens_details"),
        _field(usage, "completion_tokens_details"),
    )


@dataclass(slots=True)
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


def _chat_answer(
    *,
    text: str,
    refusal: str,
    calls: Sequence[_PendingCall],
    finish_reason: str | None,
    usage: Usage,
    model: str | None,
    answer_id: str | None,
) -> Response:
    """The one place a Chat Completions answer (whole or streamed) becomes a Response."""
    stop = _CHAT_STOP.get(finish_reason or "", StopReason.OTHER)
    if refusal:
        stop = StopReason.REFUSAL
    truncated = stop is StopReason.MAX_TOKENS
    tool_calls = tuple(
        parse_tool_call(c.id, c.name, c.arguments, truncated=truncated) for c in calls
    )
    message = Message(
        role=Role.ASSISTANT, parts=_text_parts(text or refusal), tool_calls=tool_calls
    )
    details = {"id": answer_id} if answer_id else None
    return Response(
        message=message, stop_reason=stop, usage=usage, model=model, provider_details=details
    )


def chat_response(raw: Any) -> Response:
    """A Chat Completions `ChatCompletion` as a Response (first choice)."""
    if not raw.choices:
        raise incomplete_answer("the answer has no choices (empty completion)")
    choice = raw.choices[0]
    message = choice.message
    calls = [
        _PendingCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "")
        for c in (message.tool_calls or ())
        if getattr(c, "function", None) is not None
    ]
    return _chat_answer(
        text=message.content or "",
        refusal=getattr(message, "refusal", None) or "",
        calls=calls,
        finish_reason=choice.finish_reason,
        usage=_chat_usage(raw.usage) if raw.usage else Usage(),
        model=raw.model,
        answer_id=raw.id,
    )


@dataclass(slots=True)
class _ChatAccumulator:
    """Collects a stream's chunks: the JSON objects the server sent (the adapter's own
    streams: no typed `ChatCompletionChunk` built per event) or SDK objects of that shape
    (a caller's own SDK stream under `chatcli.wrap`, litellm's); the finish_reason chunk is
    the terminator."""

    events: int = 0
    texts: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    answer_id: str | None = None

    def add(self, chunk: Any) -> list[StreamDelta]:
        choices = _field(chunk, "choices")
        if not isinstance(choices, list):
            raise _failure(f"a stream event that is not a JSON object with choices: {chunk!r:.200}")
        self.took(_field(chunk, "model"), _field(chunk, "id"))
        usage = _field(chunk, "usage")
        if usage is not None:
            self.usage = _chat_usage(usage)
        deltas: list[StreamDelta] = []
        for choice in choices:
            if not _field(choice, "index"):  # the first choice: chatcli asks for one
                deltas.extend(self._add_choice(choice))
        return deltas

    def _add_choice(self, choice: Any) -> list[StreamDelta]:
        delta = _field(choice, "delta")
        content = _field(delta, "content")
        deltas: list[StreamDelta] = [TextDelta(text=content)] if content else []
        for call in _field(delta, "tool_calls") or ():
            deltas.append(self._add_call(call))
        self.took_choice(content, _field(delta, "refusal"), _field(choice, "finish_reason"))
        return deltas

    def _add_call(self, call: Any) -> ToolCallDelta:
        """One tool call's piece: folded into its pending call, and its delta."""
        wire_index = _field(call, "index") or 0
        pending = self.calls.setdefault(wire_index, _PendingCall())
        call_id = _field(call, "id")
        pending.id = call_id or pending.id
        function = _field(call, "function")
        name, arguments = _field(function, "name"), _field(function, "arguments")
        pending.name += name or ""
        pending.arguments += arguments or ""
        # The call's position among the answer's calls: the wire's index, renumbered.
        index = sorted(self.calls).index(wire_index)
        return ToolCallDelta(index=index, id=call_id, name=name, arguments=arguments or "")

    def took(self, model: Any, answer_id: Any) -> None:
        """What every chunk gives: the model and answer id."""
        self.events += 1
        self.model, self.answer_id = model or self.model, answer_id or self.answer_id

    def took_choice(self, content: Any, refusal: Any, finish_reason: Any) -> None:
        """What the first choice of every chunk gives: text (kept only when there is some:
        the parts are joined), refusal, finish reason."""
        if content:
            self.texts.append(content)
        if refusal:
            self.refusal.append(refusal)
        self.finish_reason = finish_reason or self.finish_reason

    def finish(self) -> Response | None:
        if self.finish_reason is None:
            return None
        return _chat_answer(
            text="".join(self.texts),
            refusal="".join(self.refusal),
            calls=[self.calls[i] for i in sorted(self.calls)],
            finish_reason=self.finish_reason,
            usage=self.usage,
            model=self.model,
            answer_id=self.answer_id,
        )


def _chat_settings(request: Request, api: str) -> Json:
    """Chat Completions fields for `request.settings` (OpenAI and OpenAI-compatible servers)."""
    settings = request.settings
    if settings.thinking_budget is not None:
        raise unsupported(api, "thinking_budget", "use reasoning_effort (or Settings.extra)")
    body = _common_settings(request)
    if settings.stop is not None:
        body["stop"] = list(settings.stop)
    if settings.seed is not None:
        body["seed"] = settings.seed
    if settings.reasoning_effort is not None:
        body["reasoning_effort"] = settings.reasoning_effort
    if settings.response_format == JSON_MODE:
        body["response_format"] = {"type": "json_object"}
    elif isinstance(settings.response_format, Mapping):
        schema = dict(settings.response_format)
        json_schema = {"name": schema_name(schema), "schema": schema}
        body["response_format"] = {"type": "json_schema", "json_schema": json_schema}
    if "tool_choice" in body and body["tool_choice"] not in TOOL_CHOICE_MODES:
        body["tool_choice"] = {"type": "function", "function": {"name": body["tool_choice"]}}
    return body

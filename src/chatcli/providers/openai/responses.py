"""The Responses API: neutral messages and tools as `input` items and `tools`, a `Response`
object (whole, or streamed as events) as a chatcli Response, the settings as this wire's
fields, and OpenAI's native compaction.

- Opaque data: reasoning items (with `encrypted_content` when requested through
  `Request.options`, e.g. `{"include": ["reasoning.encrypted_content"], "store": False}`) are
  kept verbatim in `Message.provider_details["openai_reasoning"]` and sent back, in front of the
  message's text and calls; message and function-call item ids ride on the parts and calls.
- Settings beyond the common ones: reasoning_effort as `reasoning.effort`, response_format as
  `text.format` ("json": a JSON object; a schema: `json_schema`, named after its title); a
  tool's name as tool_choice becomes a function choice. There are no stop sequences (an error)
  and no seed (dropped, logged: a best-effort hint); a thinking budget is an error (OpenAI takes
  reasoning_effort instead).
- Native compaction (for the models `supports_native_compaction` names):
  `context_management: [{"type": "compaction", "compact_threshold": N}]` on every request; the
  answer's encrypted `compaction` output item becomes the message's `CompactionPart` (kept
  verbatim) and is sent back first, in front of the message's other items.
  Streamed, the item is a `CompactionDelta` where it came (at its `response.output_item.done`).
  `OpenAI.aresponses_compact` is `POST /responses/compact`, the standalone compaction (the
  proxy passes a client's compact request to it); `OpenAI.compact_on_demand` calls it for a
  conversation, and `compacted_window` reads its output as the window that replaces the
  conversation: every item as OpenAI sent it, in its order (the user messages it retained,
  with their ids, images and files, any other item it kept, then the compaction item), each
  item before the compaction a message that is sent back as that item (`RETAINED_KEY`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from chatcli.errors import ErrorInfo, ErrorKind, ProviderError
from chatcli.messages import CompactionPart, Message, Role, StopReason, ToolCall, Usage
from chatcli.providers._common import drop_setting, schema_name, unsupported
from chatcli.providers.base import (
    Compacted,
    CompactionDelta,
    NativeCompaction,
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
    _text_parts,
    _usage,
    parse_tool_call,
)
from chatcli.request_settings import JSON_MODE, TOOL_CHOICE_MODES

# Responses API `incomplete_details.reason` values (openai-python types/responses/response.py).
_INCOMPLETE_STOP = {
    "max_output_tokens": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}
REASONING_KEY = "openai_reasoning"
# `Message.provider_details` key of an item `/responses/compact` returned before its compaction
# item, sent back as it came.
RETAINED_KEY = "openai_retained_item"
# Model families that take `context_management` compaction on the Responses API. The compaction
# guide (developers.openai.com/api/docs/guides/compaction) lists no models; Codex, its main user,
# enables it for the gpt-5 family and later: others are treated as unsupported (chatcli's own
# compaction then).
COMPACTION_FAMILIES = ("gpt-5", "gpt-6")
_COMPACTION_PROVIDER = "openai"


def supports_native_compaction(model: str) -> bool:
    """Whether `model` is of `COMPACTION_FAMILIES` (on the Responses API)."""
    return model.startswith(COMPACTION_FAMILIES)


def _compaction_fields(native: NativeCompaction) -> Json:
    """`context_management` for `native`: compact past `trigger_tokens` (None: OpenAI's own
    threshold)."""
    entry: Json = {"type": "compaction"}
    if native.trigger_tokens is not None:
        entry["compact_threshold"] = native.trigger_tokens
    return {"context_management": [entry]}


def responses_input(messages: Sequence[Message]) -> list[Json]:
    """Neutral messages as Responses API `input` items."""
    return [item for m in messages for item in _response_items(m)]


def _response_items(message: Message) -> list[Json]:
    retained = (message.provider_details or {}).get(RETAINED_KEY)
    if retained is not None:
        return [dict(retained)]
    if message.tool_result is not None:
        result = message.tool_result
        return [
            {"type": "function_call_output", "call_id": result.call_id, "output": result.content}
        ]
    if message.role is not Role.ASSISTANT:
        return [{"role": message.role.value, "content": message.text}]
    reasoning = (message.provider_details or {}).get(REASONING_KEY, ())
    items = [dict(item) for item in reasoning]
    part = message.compaction
    if part is not None and part.provider == _COMPACTION_PROVIDER:  # another's: unreadable
        items.insert(0, dict(part.provider_details))
    if message.text:
        items.append(_assistant_text_item(message))
    items.extend(_function_call_item(c) for c in message.tool_calls)
    return items


def _assistant_text_item(message: Message) -> Json:
    item_id = (message.parts[0].provider_details or {}).get("id") if message.parts else None
    if item_id is None:
        return {"role": "assistant", "content": message.text}
    # The original output item, id included: a reasoning item must be followed by its own item.
    content = [{"type": "output_text", "text": message.text, "annotations": []}]
    return {
        "type": "message",
        "role": "assistant",
        "id": item_id,
        "status": "completed",
        "content": content,
    }


def _function_call_item(call: ToolCall) -> Json:
    item: Json = {"type": "function_call", "call_id": call.id, "name": call.name}
    item["arguments"] = call.arguments_json
    item_id = (call.provider_details or {}).get("id")
    if item_id is not None:
        item["id"] = item_id
    return item


def _responses_tool(tool: ToolSpec) -> Json:
    # The Responses API makes function tools strict by default, which rejects ordinary schemas.
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }


def _responses_body(request: Request) -> Json:
    body: Json = {"input": responses_input(request.messages)}
    if request.tools:
        body["tools"] = [_responses_tool(t) for t in request.tools]
    return body


def _responses_usage(usage: Any) -> Usage:
    return _usage(
        _count(usage, "input_tokens"),
        _count(usage, "output_tokens"),
        getattr(usage, "input_tokens_details", None),
        getattr(usage, "output_tokens_details", None),
    )


@dataclass(slots=True)
class _Output:
    """The pieces of a Responses API `output` list, in neutral form."""

    texts: list[str] = field(default_factory=list)
    text_id: str | None = None
    refused: bool = False
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[Json] = field(default_factory=list)
    compaction: Json | None = None  # the latest compaction item, verbatim

    def add(self, item: Any, *, truncated: bool) -> None:
        if item.type == "message":
            self._add_message(item)
        elif item.type == "function_call":
            details = {"id": item.id} if getattr(item, "id", None) else None
            raw = item.arguments or ""
            call = parse_tool_call(
                item.call_id, item.name, raw, truncated=truncated, details=details
            )
            self.calls.append(call)
        elif item.type == "reasoning":
            self.reasoning.append(item.model_dump(mode="json", exclude_none=True))
        elif item.type == "compaction":
            self.compaction = sent_item(item)

    def _add_message(self, item: Any) -> None:
        self.text_id = item.id
        for part in item.content:
            if part.type == "refusal":
                self.refused = True
                self.texts.append(str(part.refusal))
            else:
                self.texts.append(str(getattr(part, "text", None) or ""))


def _responses_stop(raw: Any, output: _Output) -> StopReason:
    if raw.status == "incomplete":
        reason = getattr(raw.incomplete_details, "reason", None)
        return _INCOMPLETE_STOP.get(reason or "", StopReason.OTHER)
    if output.refused:
        return StopReason.REFUSAL
    if output.calls:
        return StopReason.TOOL_USE
    return StopReason.END_TURN if raw.status in (None, "completed") else StopReason.OTHER


def responses_response(raw: Any) -> Response:
    """A Responses API `Response` object as a chatcli Response."""
    if raw.status == "failed":
        error = raw.error.model_dump() if raw.error is not None else {"message": "failed"}
        raise _failure({"error": error})
    truncated = raw.status == "incomplete"
    output = _Output()
    for item in raw.output or ():
        output.add(item, truncated=truncated)
    text_details = {"id": output.text_id} if output.text_id else None
    message = Message(
        role=Role.ASSISTANT,
        parts=_text_parts("".join(output.texts), text_details),
        tool_calls=tuple(output.calls),
        provider_details={REASONING_KEY: tuple(output.reasoning)} if output.reasoning else None,
        compaction=_compaction_part(output.compaction, str(raw.model or "")),
    )
    usage = _responses_usage(raw.usage) if raw.usage is not None else Usage()
    return Response(
        message=message,
        stop_reason=_responses_stop(raw, output),
        usage=usage,
        model=raw.model,
        provider_details={"id": raw.id},
    )


def compacted_window(body: Mapping[str, Any], usage: Usage, model: str) -> Compacted:
    """A `/responses/compact` answer (its JSON `body`) as the window it makes (module
    docstring): the items before its latest compaction item, then that item (tagged with
    `model`) keeping them; an answer without the item raises a ProviderError."""
    items: list[Json] = list(body.get("output") or ())
    at = max((i for i, item in enumerate(items) if item.get("type") == "compaction"), default=-1)
    part = _compaction_part(items[at], model) if at >= 0 else None
    if part is None:
        message = "the compacted response holds no compaction item"
        raise ProviderError(ErrorInfo(kind=ErrorKind.OTHER, message=message))
    kept = tuple(_retained(item) for item in items[:at])
    anchor = Message(role=Role.ASSISTANT, compaction=replace(part, keeps=len(kept)))
    return Compacted(window=(*kept, anchor), usage=usage)


_RETAINED_ROLES = {"user": Role.USER, "system": Role.SYSTEM, "developer": Role.SYSTEM}


def _retained(item: Json) -> Message:
    """An item `/responses/compact` kept, as a message of its role and text that is sent back
    as the item itself (`RETAINED_KEY`)."""
    role = _RETAINED_ROLES.get(str(item.get("role")), Role.ASSISTANT)
    parts = _text_parts(_input_text(item))
    return Message(role=role, parts=parts, provider_details={RETAINED_KEY: dict(item)})


def _input_text(item: Json) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else ()
    return "".join(str(part.get("text") or "") for part in parts if isinstance(part, dict))


def sent_item(item: Any) -> Json:
    """An output item (an SDK model) as OpenAI sent it: every field it sent, nulls included."""
    data: Json = item.model_dump(mode="json", exclude_unset=True, by_alias=True)
    return data


def _compaction_part(item: Json | None, model: str) -> CompactionPart | None:
    if item is None or not item.get("encrypted_content"):
        return None
    return CompactionPart(provider=_COMPACTION_PROVIDER, model=model, provider_details=item)


@dataclass(slots=True)
class _ResponsesAccumulator:
    """Collects Responses stream events; `response.completed`/`.incomplete` terminate."""

    events: int = 0
    final: Any = None
    calls: dict[int, int] = field(default_factory=dict)  # output_index -> call position
    model: str = ""  # the answer's, from `response.created`

    def add(self, event: Any) -> list[StreamDelta]:
        self.events += 1
        kind = event.type
        if kind == "response.created":
            self.model = str(getattr(event.response, "model", None) or "")
        if kind == "response.output_text.delta":
            return [TextDelta(text=str(event.delta))]
        if kind == "response.output_item.done" and event.item.type == "compaction":
            part = _compaction_part(sent_item(event.item), self.model)
            return [] if part is None else [CompactionDelta(part=part)]
        if kind == "response.output_item.added" and event.item.type == "function_call":
            index = self.calls.setdefault(event.output_index, len(self.calls))
            item = event.item
            delta = ToolCallDelta(index=index, id=item.call_id, name=item.name)
            return [replace(delta, arguments=item.arguments)] if item.arguments else [delta]
        if kind == "response.function_call_arguments.delta" and event.output_index in self.calls:
            return [ToolCallDelta(index=self.calls[event.output_index], arguments=event.delta)]
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.final = event.response
        elif kind == "error":  # the documented in-stream error event
            error = {"code": event.code, "message": event.message, "param": event.param}
            raise _failure({"error": error})
        return []

    def finish(self) -> Response | None:
        return None if self.final is None else responses_response(self.final)


def _responses_settings(request: Request, api: str) -> Json:
    """Responses API fields for `request.settings`."""
    settings = request.settings
    if settings.stop is not None:
        raise unsupported(api, "stop", "the Responses API has no stop sequences (api='chat' has)")
    if settings.thinking_budget is not None:
        raise unsupported(api, "thinking_budget", "use reasoning_effort (or Settings.extra)")
    if settings.seed is not None:
        drop_setting(api, "seed", "the Responses API takes no seed")
    body = _common_settings(request)
    if settings.reasoning_effort is not None:
        body["reasoning"] = {"effort": settings.reasoning_effort}
    if settings.response_format == JSON_MODE:
        body["text"] = {"format": {"type": "json_object"}}
    elif isinstance(settings.response_format, Mapping):
        schema = dict(settings.response_format)
        body["text"] = {
            "format": {"type": "json_schema", "name": schema_name(schema), "schema": schema}
        }
    if "tool_choice" in body and body["tool_choice"] not in TOOL_CHOICE_MODES:
        body["tool_choice"] = {"type": "function", "name": body["tool_choice"]}
    return body

"""Adapter for Google's Gemini API (generateContent), through the official `google-genai` SDK.

Install with `pip install 'chatcli-recovery[gemini]'`; the SDK is imported when a provider is
built.

Mapping (neutral -> wire):
- system messages, in order, become `systemInstruction`; the others become `contents` with
  roles `user` / `model`; consecutive contents of one role are merged;
- assistant tool calls become `functionCall` parts, tool results `functionResponse` parts in
  a user content, named after their call (found by id in the conversation) with the result
  under `output`, or `error` when it failed, as the API asks;
- thought signatures come back on the part they came with (`provider_details["gemini"]`
  of the TextPart or ToolCall, base64 as on the wire); thought parts ride in the message's
  `provider_details["gemini"]["thoughts"]` and are sent back first.

Settings (`Request.settings`) become `GenerateContentConfig` fields: temperature, top_p, seed;
stop -> `stop_sequences`; response_format -> `response_mime_type` "application/json" (with
`response_json_schema` for a schema); thinking_budget -> `thinking_config.thinking_budget`
(counted inside `max_output_tokens`, as Gemini counts thoughts); reasoning_effort ->
`thinking_config.thinking_level` ("none" is an error: use thinking_budget=0); tool_choice ->
`tool_config.function_calling_config` (AUTO / NONE / ANY, a name -> ANY with
`allowed_function_names`). `parallel_tool_calls` has no Gemini field: dropped, logged.
`settings.extra` is the SDK's `http_options.extra_body`, which it merges into the REST body
(recursively, camelCase or snake_case names).

Ids: Gemini may return a `functionCall` without an id. The adapter then makes one that is
stable, "gemini-" + a hash of (responseId, position in the answer, name, arguments), so the
same answer always gets the same ids, and marks the call `synthetic_id`; a synthetic id is
never sent to Gemini (calls and responses are then matched by name and order, as Gemini
does). Without a responseId, two identical calls at the same position of two answers would
share an id.

Mapping (wire -> neutral): finishReason STOP is END_TURN (TOOL_USE when the answer calls a
function), MAX_TOKENS, safety-like reasons REFUSAL (also a prompt blocked before any answer),
the rest OTHER. Usage: `input_tokens` excludes the cached part of promptTokenCount (reported
as `cache_read_tokens`); output counts thoughts, also reported as `reasoning_tokens`.

Errors are classified once, here; SDK retries are off (the Client retries classified errors).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    aclosing,
    closing,
    contextmanager,
)
from typing import Any

from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, ToolResult, Usage
from chatcli.providers._common import (
    api_key_from_env,
    drop_setting,
    incomplete_answer,
    model_limits,
    raise_classified,
    require_module,
    tool_settings_apply,
    transport_errors,
    unsupported,
)
from chatcli.providers.adapter import Adapter
from chatcli.providers.base import (
    Request,
    Response,
    StreamDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from chatcli.redact import redact_url
from chatcli.request_settings import output_reserve

__all__ = [
    "FINISH_REASONS",
    "Gemini",
    "StreamFold",
    "merge_text_parts",
    "request_contents",
    "response_from_wire",
    "settings_config",
    "usage_from_wire",
]

FINISH_REASONS: Mapping[str, StopReason] = {
    "STOP": StopReason.END_TURN,
    "MAX_TOKENS": StopReason.MAX_TOKENS,
    **{
        reason: StopReason.REFUSAL
        for reason in (
            "SAFETY",
            "RECITATION",
            "BLOCKLIST",
            "PROHIBITED_CONTENT",
            "SPII",
            "IMAGE_SAFETY",
            "IMAGE_PROHIBITED_CONTENT",
            "IMAGE_RECITATION",
        )
    },
}

_KEY_ENV = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
_DUMP_EXCLUDE = {"sdk_http_response"}  # response headers, not part of the answer


class Gemini(Adapter):
    """A Gemini model through the `google-genai` SDK (a `StreamingProvider`).

    `api_key` defaults to `$GEMINI_API_KEY`, then `$GOOGLE_API_KEY` (or `environ`'s); it only
    reaches the SDK client and is never shown or logged. `base_url` points the SDK elsewhere
    (a proxy, a test server). `context_window` / `max_output_tokens` are the model's limits
    when known; `max_output_tokens` is sent when a request sets no `max_tokens`.
    `request.options` are extra `GenerateContentConfig` fields.
    """

    api_name = "Gemini"

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        genai = require_module("google.genai", "gemini")
        key = api_key_from_env(
            api_key, _KEY_ENV, os.environ if environ is None else environ, required=True
        )
        # attempts=1: no SDK retries, including its implicit one after a connection error.
        http_options = {"base_url": base_url, "retry_options": {"attempts": 1}}
        self.model = model
        self.base_url = base_url
        self.context_window, self.max_output_tokens = model_limits(
            model, "google", context_window, max_output_tokens
        )
        # A closure keeps the key out of reprs and vars().
        self.__connect: Callable[[], Any] = lambda: genai.Client(
            api_key=key, http_options=http_options
        )

    def __repr__(self) -> str:
        return f"Gemini(model={self.model!r}, base_url={redact_url(self.base_url)!r})"

    def params(self, request: Request, *, stream: bool = False) -> dict[str, Any]:
        system, contents = request_contents(request.messages)
        config: dict[str, Any] = {**settings_config(request), **request.options}
        if request.max_tokens is not None:
            config["max_output_tokens"] = output_reserve(
                request.max_tokens, self.max_output_tokens, request.settings
            )
        elif self.max_output_tokens:
            config["max_output_tokens"] = self.max_output_tokens
        if system:
            config["system_instruction"] = {"parts": system}
        if request.tools:
            config["tools"] = [{"function_declarations": [_declaration(t) for t in request.tools]}]
        if request.settings.extra:
            config["http_options"] = {"extra_body": dict(request.settings.extra)}
        return {"model": request.model or self.model, "contents": contents, "config": config}

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Gemini's own count of the prompt `messages` make, from `models.count_tokens`: exact,
        but a round trip; see `chatcli.providers.counting` for caching and the fallback.

        The Gemini Developer API counts `contents` only (the SDK refuses a system instruction
        or tools there), so system messages are counted as a first user content: the same
        text, give or take the few tokens of a role marker.
        """
        system, contents = request_contents(messages)
        if system:
            contents = [{"role": "user", "parts": system}, *contents]
        with _translated_errors():
            counted = self._client().models.count_tokens(model=self.model, contents=contents)
        return counted.total_tokens or 0  # proto3 JSON leaves a zero out

    def _new_client(self) -> Any:
        return self.__connect()

    def _new_async_client(self) -> Any:
        return self.__connect().aio

    async def _aclose(self, client: Any) -> None:
        await client.aclose()

    def _errors(self) -> AbstractContextManager[None]:
        return _translated_errors()

    def _send(self, client: Any, params: dict[str, Any]) -> Any:
        return client.models.generate_content(**params)

    async def _asend(self, client: Any, params: dict[str, Any]) -> Any:
        return await client.models.generate_content(**params)

    def _open(self, client: Any, params: dict[str, Any]) -> AbstractContextManager[Any]:
        return closing(client.models.generate_content_stream(**params))

    async def _aopen(self, client: Any, params: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        return aclosing(await client.models.generate_content_stream(**params))

    def _parse(self, raw: Any) -> Response:
        return response_from_wire(_dump(raw))

    def _fold(self) -> StreamFold:
        return StreamFold()


def settings_config(request: Request) -> dict[str, Any]:
    """`GenerateContentConfig` fields for `request.settings`; see the module docstring."""
    settings = request.settings
    if settings.reasoning_effort == "none":
        raise unsupported(
            "Gemini", "reasoning_effort", "use thinking_budget=0 to turn thinking off"
        )
    if settings.parallel_tool_calls is not None:
        drop_setting("Gemini", "parallel_tool_calls", "Gemini decides how many calls to make")
    config: dict[str, Any] = {
        name: getattr(settings, name)
        for name in ("temperature", "top_p", "seed")
        if settings.is_set(name)
    }
    if settings.stop is not None:
        config["stop_sequences"] = list(settings.stop)
    if settings.response_format is not None:
        config["response_mime_type"] = "application/json"
        if isinstance(settings.response_format, Mapping):
            config["response_json_schema"] = dict(settings.response_format)
    thinking: dict[str, Any] = {}
    if settings.thinking_budget is not None:
        thinking["thinking_budget"] = settings.thinking_budget
    if settings.reasoning_effort is not None:
        thinking["thinking_level"] = settings.reasoning_effort.upper()
    if thinking:
        config["thinking_config"] = thinking
    if tool_settings_apply(request) and settings.tool_choice is not None:
        config["tool_config"] = {"function_calling_config": _function_calling(settings.tool_choice)}
    return config


_CALLING_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def _function_calling(choice: str) -> dict[str, Any]:
    mode = _CALLING_MODES.get(choice)
    return {"mode": mode} if mode else {"mode": "ANY", "allowed_function_names": [choice]}


@contextmanager
def _translated_errors() -> Iterator[None]:
    """Turn SDK and transport failures into a classified ProviderError (chained)."""
    errors = require_module("google.genai.errors", "gemini")
    try:
        yield
    except errors.APIError as exc:
        # `code` is the HTTP status, or the code of an error sent inside a stream.
        raise_classified(exc, status=exc.code)
    except transport_errors() as exc:
        raise_classified(exc)


def _dump(obj: Any) -> dict[str, Any]:
    """An SDK response as JSON: snake_case names, thought signatures in base64 as on the wire.

    (pydantic dumps bytes as URL-safe base64; the signatures are put back in the standard
    alphabet so that `provider_details` hold exactly what Gemini sent.)
    """
    data: dict[str, Any] = obj.model_dump(mode="json", exclude_none=True, exclude=_DUMP_EXCLUDE)
    for candidate in data.get("candidates") or ():
        for part in (candidate.get("content") or {}).get("parts") or ():
            if "thought_signature" in part:
                raw = part["thought_signature"]
                decoded = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4))
                part["thought_signature"] = base64.b64encode(decoded).decode()
    return data


# -- neutral -> wire ----------------------------------------------------------------------


def request_contents(
    messages: Sequence[Message],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(systemInstruction parts, contents) as google-genai dicts; see the module docstring."""
    system = [{"text": m.text} for m in messages if m.role is Role.SYSTEM and m.text]
    calls = {c.id: c for m in messages for c in m.tool_calls}
    contents: list[dict[str, Any]] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            continue
        role = "model" if message.role is Role.ASSISTANT else "user"
        parts = _parts(message, calls)
        if not parts:
            continue
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": parts})
    return system, contents


def _parts(message: Message, calls: Mapping[str, ToolCall]) -> list[dict[str, Any]]:
    if message.tool_result is not None:
        return [_function_response(message.tool_result, calls)]
    thoughts = _details(message.provider_details).get("thoughts", ())
    texts = [
        _signed({"text": part.text}, part.provider_details)
        for part in message.parts
        if part.text or _details(part.provider_details)
    ]
    return [
        *(_with_signature_bytes(dict(part)) for part in thoughts),
        *texts,
        *(_function_call(call) for call in message.tool_calls),
    ]


def _function_call(call: ToolCall) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": call.name, "args": dict(call.arguments)}
    if not _details(call.provider_details).get("synthetic_id"):
        wire["id"] = call.id
    return _signed({"function_call": wire}, call.provider_details)


def _function_response(result: ToolResult, calls: Mapping[str, ToolCall]) -> dict[str, Any]:
    call = calls.get(result.call_id)
    if call is None:
        # Gemini needs the function's name, which only the call knows; chatcli repairs
        # pairing before sending, so an orphan here is a caller's bug.
        raise ValueError(f"tool result {result.call_id!r} has no matching tool call to name it")
    wire: dict[str, Any] = {
        "name": call.name,
        "response": {"error" if result.is_error else "output": result.content},
    }
    if not _details(call.provider_details).get("synthetic_id"):
        wire["id"] = result.call_id
    return {"function_response": wire}


def _signed(part: dict[str, Any], details: Mapping[str, Any] | None) -> dict[str, Any]:
    signature = _details(details).get("thought_signature")
    return {**part, "thought_signature": base64.b64decode(signature)} if signature else part


def _with_signature_bytes(part: dict[str, Any]) -> dict[str, Any]:
    # The SDK takes bytes; a base64 str would be sent as the base64 of its base64.
    signature = part.pop("thought_signature", None)
    return {**part, "thought_signature": base64.b64decode(signature)} if signature else part


def _details(details: Mapping[str, Any] | None) -> Mapping[str, Any]:
    found: Mapping[str, Any] = (details or {}).get("gemini") or {}
    return found


def _declaration(tool: ToolSpec) -> dict[str, Any]:
    wire: dict[str, Any] = {"name": tool.name, "description": tool.description}
    if tool.parameters:
        wire["parameters_json_schema"] = dict(tool.parameters)
    return wire


# -- wire -> neutral ----------------------------------------------------------------------


def response_from_wire(answer: Mapping[str, Any]) -> Response:
    """A GenerateContentResponse (google-genai JSON, snake_case) as a Response."""
    candidate = (answer.get("candidates") or [{}])[0]
    parts = merge_text_parts((candidate.get("content") or {}).get("parts") or [])
    finish = candidate.get("finish_reason")
    blocked = (answer.get("prompt_feedback") or {}).get("block_reason")
    calls = _tool_calls(parts, answer.get("response_id"), cut=finish == "MAX_TOKENS")
    thoughts = [p for p in parts if p.get("thought")]
    message = Message(
        role=Role.ASSISTANT,
        parts=tuple(_text_part(p) for p in parts if "text" in p and not p.get("thought")),
        tool_calls=calls,
        provider_details={"gemini": {"thoughts": thoughts}} if thoughts else None,
    )
    return Response(
        message=message,
        stop_reason=_stop_reason(finish, blocked, bool(calls)),
        usage=usage_from_wire(answer.get("usage_metadata") or {}),
        model=answer.get("model_version"),
        provider_details={"gemini": _response_details(answer, finish, blocked)},
    )


def merge_text_parts(parts: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Adjacent text parts of one kind (thought or answer) joined, as a stream splits them.

    The joined part keeps the thought signature that one of them carried; a part after a
    signed one starts a new part, so no signature moves to text it did not follow.
    """
    merged: list[dict[str, Any]] = []
    for part in parts:
        last = merged[-1] if merged else None
        if (
            last is not None
            and "text" in part
            and "text" in last
            and bool(part.get("thought")) == bool(last.get("thought"))
            and "thought_signature" not in last
        ):
            last["text"] += part["text"]
            last.update({k: v for k, v in part.items() if k != "text"})
        else:
            merged.append(dict(part))
    return merged


def _text_part(part: Mapping[str, Any]) -> TextPart:
    signature = part.get("thought_signature")
    details = {"gemini": {"thought_signature": signature}} if signature else None
    return TextPart(text=part["text"], provider_details=details)


def _tool_calls(
    parts: Sequence[Mapping[str, Any]], response_id: str | None, *, cut: bool
) -> tuple[ToolCall, ...]:
    indexed = [(i, p) for i, p in enumerate(parts) if "function_call" in p]
    last = len(parts) - 1
    return tuple(
        _tool_call(part, position, response_id, incomplete=cut and position == last)
        for position, part in indexed
    )


def _tool_call(
    part: Mapping[str, Any], position: int, response_id: str | None, *, incomplete: bool
) -> ToolCall:
    wire = part["function_call"]
    name, args = wire.get("name", ""), wire.get("args") or {}
    details: dict[str, Any] = {}
    if part.get("thought_signature"):
        details["thought_signature"] = part["thought_signature"]
    call_id = wire.get("id")
    if not call_id:
        call_id = _synthetic_id(response_id, position, name, args)
        details["synthetic_id"] = True
    return ToolCall(
        id=call_id,
        name=name,
        arguments=args,
        incomplete=incomplete,
        provider_details={"gemini": details} if details else None,
    )


def _synthetic_id(response_id: str | None, position: int, name: str, args: Any) -> str:
    seed = json.dumps([response_id, position, name, args], sort_keys=True)
    return "gemini-" + hashlib.sha256(seed.encode()).hexdigest()[:16]


def _stop_reason(finish: str | None, blocked: str | None, calls: bool) -> StopReason:
    if finish is None and blocked:
        return StopReason.REFUSAL
    reason = FINISH_REASONS.get(finish or "", StopReason.OTHER)
    return StopReason.TOOL_USE if calls and reason is StopReason.END_TURN else reason


def _response_details(
    answer: Mapping[str, Any], finish: str | None, blocked: str | None
) -> dict[str, Any]:
    details = {"response_id": answer.get("response_id"), "finish_reason": finish}
    return {k: v for k, v in {**details, "block_reason": blocked}.items() if v is not None}


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """usageMetadata: the cached part of the prompt apart; output includes thoughts."""
    cached = usage.get("cached_content_token_count") or 0
    thoughts = usage.get("thoughts_token_count") or 0
    prompt = (usage.get("prompt_token_count") or 0) + (
        usage.get("tool_use_prompt_token_count") or 0
    )
    return Usage(
        input_tokens=prompt - cached,
        output_tokens=(usage.get("candidates_token_count") or 0) + thoughts,
        cache_read_tokens=cached,
        reasoning_tokens=thoughts,
    )


# -- streaming ----------------------------------------------------------------------------


class StreamFold:
    """Folds streamed GenerateContentResponse chunks into one answer.

    Gemini streams have no terminator event: the last chunk carries the finishReason (or,
    for a blocked prompt, promptFeedback.blockReason). `finish` raises a TRANSIENT
    ProviderError when no chunk came, or when none of them finished the answer.
    """

    def __init__(self) -> None:
        self.chunks = 0
        self.calls = 0
        self.parts: list[dict[str, Any]] = []
        self.last: dict[str, Any] = {}
        self.finish_reason: str | None = None

    def feed(self, chunk: Any) -> list[StreamDelta]:
        """The deltas a chunk (an SDK object or its JSON) adds: text, and each function call
        whole (Gemini streams a call in one piece)."""
        chunk = chunk if isinstance(chunk, Mapping) else _dump(chunk)
        self.chunks += 1
        self.last = dict(chunk)
        candidate = (chunk.get("candidates") or [{}])[0]
        self.finish_reason = candidate.get("finish_reason") or self.finish_reason
        new = (candidate.get("content") or {}).get("parts") or []
        self.parts.extend(new)
        return [delta for part in new if (delta := self._delta(part)) is not None]

    def _delta(self, part: Mapping[str, Any]) -> StreamDelta | None:
        if "function_call" in part:
            call = part["function_call"]
            self.calls += 1
            arguments = json.dumps(call.get("args") or {}, ensure_ascii=False)
            return ToolCallDelta(
                index=self.calls - 1, id=call.get("id"), name=call.get("name"), arguments=arguments
            )
        if part.get("text") and not part.get("thought"):
            return TextDelta(text=part["text"])
        return None

    def finish(self) -> Response:
        if not self.chunks:
            raise incomplete_answer("the Gemini stream was empty")
        blocked = (self.last.get("prompt_feedback") or {}).get("block_reason")
        if self.finish_reason is None and not blocked:
            raise incomplete_answer("the Gemini stream ended without a finishReason")
        candidate = {
            "content": {"role": "model", "parts": self.parts},
            "finish_reason": self.finish_reason,
        }
        # usageMetadata, responseId and modelVersion of the last chunk cover the whole answer
        return response_from_wire({**self.last, "candidates": [candidate]})

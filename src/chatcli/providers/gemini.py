"""Adapter for Google's Gemini API (generateContent), through the official `google-genai` SDK.

Install with `pip install 'chatcli[gemini]'`; the SDK is imported when a provider is built.

Mapping (neutral -> wire):
- system messages, in order, become `systemInstruction`; the others become `contents` with
  roles `user` / `model`; consecutive contents of one role are merged;
- assistant tool calls become `functionCall` parts, tool results `functionResponse` parts in
  a user content, named after their call (found by id in the conversation) with the result
  under `output`, or `error` when it failed, as the API asks;
- thought signatures come back on the part they came with (`provider_details["gemini"]`
  of the TextPart or ToolCall, base64 as on the wire); thought parts ride in the message's
  `provider_details["gemini"]["thoughts"]` and are sent back first.

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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, ToolResult, Usage
from chatcli.providers._common import (
    api_key_from_env,
    incomplete_answer,
    model_limits,
    raise_classified,
    require_module,
)
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta, ToolSpec

__all__ = [
    "FINISH_REASONS",
    "Gemini",
    "StreamFold",
    "merge_text_parts",
    "request_contents",
    "response_from_wire",
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


class Gemini:
    """A Gemini model through the `google-genai` SDK (a `StreamingProvider`).

    `api_key` defaults to `$GEMINI_API_KEY`, then `$GOOGLE_API_KEY` (or `environ`'s); it only
    reaches the SDK client and is never shown or logged. `base_url` points the SDK elsewhere
    (a proxy, a test server). `context_window` / `max_output_tokens` are the model's limits
    when known; `max_output_tokens` is sent when a request sets no `max_tokens`.
    `request.options` are extra `GenerateContentConfig` fields (`thinking_config`, ...).
    """

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
        # A fresh SDK client per call, as for Anthropic; the lambda keeps the key out of reprs.
        self._connect: Callable[[], Any] = lambda: genai.Client(
            api_key=key, http_options=http_options
        )

    def __repr__(self) -> str:
        return f"Gemini(model={self.model!r}, base_url={self.base_url!r})"

    def _arguments(self, request: Request) -> dict[str, Any]:
        system, contents = request_contents(request.messages)
        config: dict[str, Any] = dict(request.options)
        max_tokens = request.max_tokens or self.max_output_tokens
        if max_tokens:
            config["max_output_tokens"] = max_tokens
        if request.temperature is not None:
            config["temperature"] = request.temperature
        if system:
            config["system_instruction"] = {"parts": system}
        if request.tools:
            config["tools"] = [{"function_declarations": [_declaration(t) for t in request.tools]}]
        return {"model": request.model or self.model, "contents": contents, "config": config}

    def complete(self, request: Request) -> Response:
        with _translated_errors(), self._connect() as client:
            answer = client.models.generate_content(**self._arguments(request))
        return response_from_wire(_dump(answer))

    async def acomplete(self, request: Request) -> Response:
        with _translated_errors():
            async with self._connect().aio as client:
                answer = await client.models.generate_content(**self._arguments(request))
        return response_from_wire(_dump(answer))

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
        with _translated_errors(), self._connect() as client:
            counted = client.models.count_tokens(model=self.model, contents=contents)
        return counted.total_tokens or 0  # proto3 JSON leaves a zero out

    def stream(self, request: Request) -> Iterator[StreamChunk]:
        fold = StreamFold()
        with _translated_errors(), self._connect() as client:
            for chunk in client.models.generate_content_stream(**self._arguments(request)):
                if text := fold.feed(_dump(chunk)):
                    yield TextDelta(text=text)
        yield fold.finish()

    async def astream(self, request: Request) -> AsyncIterator[StreamChunk]:
        fold = StreamFold()
        with _translated_errors():
            async with self._connect().aio as client:
                chunks = await client.models.generate_content_stream(**self._arguments(request))
                async for chunk in chunks:
                    if text := fold.feed(_dump(chunk)):
                        yield TextDelta(text=text)
        yield fold.finish()


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP libraries' errors (the SDK lets connection errors through unwrapped)."""
    found: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        try:
            found.append(require_module(name, "gemini").HTTPError)
        except ImportError:
            continue
    return tuple(found)


@contextmanager
def _translated_errors() -> Iterator[None]:
    """Turn SDK and transport failures into a classified ProviderError (chained)."""
    errors = require_module("google.genai.errors", "gemini")
    try:
        yield
    except errors.APIError as exc:
        # `code` is the HTTP status, or the code of an error sent inside a stream.
        raise_classified(exc, status=exc.code)
    except _transport_errors() as exc:
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
        self.parts: list[dict[str, Any]] = []
        self.last: dict[str, Any] = {}
        self.finish_reason: str | None = None

    def feed(self, chunk: Mapping[str, Any]) -> str:
        self.chunks += 1
        self.last = dict(chunk)
        candidate = (chunk.get("candidates") or [{}])[0]
        self.finish_reason = candidate.get("finish_reason") or self.finish_reason
        new = (candidate.get("content") or {}).get("parts") or []
        self.parts.extend(new)
        return "".join(p.get("text", "") for p in new if not p.get("thought"))

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

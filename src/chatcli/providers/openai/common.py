"""What both OpenAI wires share: the SDK (imported when first needed), its exceptions
classified once into `ProviderError`, and the conversions that read alike on either wire.

- Usage: OpenAI counts cache reads (and writes) inside `prompt_tokens`/`input_tokens`; chatcli's
  `Usage.input_tokens` is the uncached remainder, so `Usage.prompt_tokens` equals the reported
  prompt size. `output_tokens` includes the reasoning tokens; `reasoning_tokens` is that share.
- Tool calls: arguments travel as a JSON string. A string that does not parse to an object (cut
  off by the token limit, or malformed) gives `ToolCall.incomplete=True`, the raw text kept in
  `provider_details["raw_arguments"]`; such a call is sent back as `{}` and never executed.
- Settings both wires name alike: temperature, top_p, and, with tools only, tool_choice and
  parallel_tool_calls.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

from chatcli.errors import ProviderError, classify_error
from chatcli.messages import TextPart, ToolCall, Usage
from chatcli.providers._common import (
    raise_classified,
    require_module,
    tool_settings_apply,
    transport_errors,
)
from chatcli.providers.base import Request

Json = dict[str, Any]


def _sdk() -> ModuleType:
    return require_module("openai", "openai")


def _failure(body_or_message: object) -> ProviderError:
    """A failure reported inside a 200 answer (stream event, empty answer), classified once."""
    return ProviderError(classify_error(body_or_message))


@contextmanager
def _sdk_errors() -> Iterator[None]:
    """Translate SDK exceptions into ProviderError, classified once (with the HTTP status)."""
    sdk = _sdk()
    try:
        yield
    except sdk.APIStatusError as exc:
        raise_classified(exc, status=exc.status_code)
    except (sdk.APIError, *transport_errors()) as exc:  # connection errors, timeouts, errors
        raise_classified(exc)  # raised inside a stream (wrapped or not, by SDK version)


def _field(obj: Any, name: str) -> Any:
    """A field of an SDK object, or of the JSON it is made from (a raw stream's events are
    the server's JSON: `chatcli.providers.openai.chat`); None when absent."""
    if isinstance(obj, dict):
        return obj.get(name)
    # SDK objects are built without validation, so fields a server omits are simply absent.
    return getattr(obj, name, None)


def _count(obj: Any, name: str) -> int:
    return int(_field(obj, name) or 0)


def _usage(prompt: int, output: int, details: Any, out_details: Any) -> Usage:
    cached = _count(details, "cached_tokens")
    written = _count(details, "cache_write_tokens")
    return Usage(
        input_tokens=max(prompt - cached - written, 0),
        output_tokens=output,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=_count(out_details, "reasoning_tokens"),
    )


def parse_tool_call(
    call_id: str, name: str, raw: str, *, truncated: bool = False, details: Json | None = None
) -> ToolCall:
    """A ToolCall from wire arguments; unparseable (or empty when truncated) => incomplete."""
    try:
        arguments = json.loads(raw) if raw.strip() else ({} if not truncated else None)
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        kept = {**(details or {}), "raw_arguments": raw}
        return ToolCall(id=call_id, name=name, incomplete=True, provider_details=kept)
    return ToolCall(id=call_id, name=name, arguments=arguments, provider_details=details)


def _text_parts(text: str, details: Json | None = None) -> tuple[TextPart, ...]:
    return (TextPart(text=text, provider_details=details),) if text else ()


def _common_settings(request: Request) -> Json:
    """The fields both wires name alike: sampling and the tool settings (with tools only)."""
    settings = request.settings
    body: Json = {}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if tool_settings_apply(request):
        if settings.tool_choice is not None:
            body["tool_choice"] = settings.tool_choice
        if settings.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
    return body

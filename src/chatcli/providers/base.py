"""The provider protocol: what every adapter and every test double implements.

This module knows no wire format; it only names the neutral request and response values.
A provider raises on failure (any exception); `Client` classifies it. Providers may declare
the model's `context_window` and `max_output_tokens` attributes (None when unknown).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from chatcli.messages import Message, StopReason, Usage

__all__ = [
    "Provider",
    "Request",
    "Response",
    "StreamChunk",
    "StreamingProvider",
    "TextDelta",
    "ToolSpec",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSpec:
    """A tool the model may call: name, description and JSON-schema parameters."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Request:
    """One call to a model: the working view to send and the output limit."""

    messages: tuple[Message, ...]
    max_tokens: int | None = None
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    temperature: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """One model answer, normalised."""

    message: Message
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    provider_details: Mapping[str, Any] | None = None


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. `complete` and `acomplete` raise on failure."""

    def complete(self, request: Request) -> Response: ...

    async def acomplete(self, request: Request) -> Response: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of answer text, as it arrives."""

    text: str


# A stream yields TextDelta items and ends with exactly one Response (the whole answer).
StreamChunk = TextDelta | Response


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also stream. A stream that fails, ends without its terminator, or is
    empty raises (never yields a silent empty answer)."""

    def stream(self, request: Request) -> Iterator[StreamChunk]: ...

    def astream(self, request: Request) -> AsyncIterator[StreamChunk]: ...

"""The provider protocol: what every adapter and every test double implements.

This module knows no wire format; it only names the neutral request and response values
(the request's settings are `chatcli.request_settings.Settings`).
A provider raises on failure (any exception); `Client` classifies it. Providers may declare
the model's `context_window` and `max_output_tokens` attributes (None when unknown).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from chatcli.messages import CompactionPart, Message, StopReason, Usage
from chatcli.request_settings import Settings

__all__ = [
    "Compacted",
    "CompactionDelta",
    "NativeCompaction",
    "Provider",
    "ReasoningDelta",
    "Request",
    "Response",
    "StreamChunk",
    "StreamDelta",
    "StreamingProvider",
    "TextDelta",
    "ToolCallDelta",
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
    """One call to a model: the working view to send, the output limit and the settings.

    `options` are SDK keyword arguments an adapter passes through as they are (last, so they
    win); `settings.extra` is the neutral way to add fields to the request body. `headers`
    are HTTP headers the call adds (a proxy passing on a client's `anthropic-beta`); the
    SDK adapters send them as `extra_headers`, which the OpenAI and Anthropic SDKs take.
    `native_compaction`: the compaction on the provider's servers this request asks for, read
    by an adapter that can (`native_compaction_supported()`) unless it was built with its own
    (`Client` sets it from `RecoveryConfig.compaction`); None: none. `cache_prefix`: how many
    leading messages are the prefix a prompt cache holds (a compaction's summary request
    repeats the conversation's previous request, then asks): an adapter that places cache
    breakpoints (Anthropic) puts the last one at their end, where the previous request had
    it; None: at the end of the request.
    """

    messages: tuple[Message, ...]
    max_tokens: int | None = None
    tools: tuple[ToolSpec, ...] = ()
    model: str | None = None
    settings: Settings = field(default_factory=Settings)
    options: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    native_compaction: NativeCompaction | None = None
    cache_prefix: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """One model answer, normalised.

    `compaction_usage`: what a compaction the provider made on its own servers used, when it
    reports it apart from `usage` (Anthropic's `usage.iterations`); None: none reported.
    """

    message: Message
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    provider_details: Mapping[str, Any] | None = None
    compaction_usage: Usage | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeCompaction:
    """What an adapter that can asks its provider to compact on its own servers (the
    adapter's `native_compaction` attribute, which wins, else the request's; None: never).

    `trigger_tokens`: the prompt size that triggers it (None: the provider's default);
    `instructions`: the summary prompt's extra instructions (Anthropic); `pause`: stop the
    answer right after the compaction (Anthropic's `pause_after_compaction`);
    `clear_tool_uses` / `clear_thinking`: Anthropic's context editing of old tool results
    and thinking blocks, sent with it.
    """

    trigger_tokens: int | None = None
    instructions: str | None = None
    pause: bool = False
    clear_tool_uses: bool = False
    clear_thinking: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Compacted:
    """A conversation the provider compacted on demand (an adapter's optional
    `compact_on_demand(request)`; a failed one raises a ProviderError).

    `window` replaces every message of the request but its system ones: the messages the
    provider keeps, then an assistant message holding only its compaction (whose `keeps`
    counts them). `usage`: what the compaction used.
    """

    window: tuple[Message, ...]
    usage: Usage


@runtime_checkable
class Provider(Protocol):
    """A model endpoint. `complete` and `acomplete` raise on failure."""

    def complete(self, request: Request) -> Response: ...

    async def acomplete(self, request: Request) -> Response: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of answer text, as it arrives."""

    text: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A piece of a tool call, as it arrives: `index` is the call's position among the
    answer's calls (0, 1, ...) and ties its pieces together; `id` and `name` come with its
    first piece, `arguments` is the next fragment of its JSON arguments (pieces concatenate)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta:
    """A piece of the answer's reasoning that a client must be able to send back (Anthropic's
    thinking blocks, whose signatures the API checks), as it arrives: `index` is the block's
    position among the answer's reasoning blocks; its first piece has `block` (how it starts:
    its type, and a redacted block whole), then come pieces of `thinking` text and its
    `signature`. The whole blocks ride on the Response's message (`provider_details`)."""

    index: int
    block: Mapping[str, Any] | None = None
    thinking: str = ""
    signature: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionDelta:
    """The provider's compaction of the conversation (Anthropic's `compaction` block, OpenAI's
    `compaction` output item), whole, where it came in the answer's stream: its
    `part.provider_details` is the block or item verbatim (signature and all), so a writer can
    pass it on in the provider's order. The Response's message carries the same part."""

    part: CompactionPart


StreamDelta = TextDelta | ToolCallDelta | ReasoningDelta | CompactionDelta
# A stream yields deltas and ends with exactly one Response (the whole answer, which is what
# counts: the deltas are for showing it as it comes).
StreamChunk = TextDelta | ToolCallDelta | ReasoningDelta | CompactionDelta | Response


@runtime_checkable
class StreamingProvider(Provider, Protocol):
    """A provider that can also stream. A stream that fails, ends without its terminator, or is
    empty raises (never yields a silent empty answer)."""

    def stream(self, request: Request) -> Iterator[StreamChunk]: ...

    def astream(self, request: Request) -> AsyncIterator[StreamChunk]: ...

"""Neutral, frozen value types for conversations: messages, parts, tool calls, usage.

Every other module speaks these types; only the provider adapters translate them to and from a
wire format. Values are immutable: edit them with `dataclasses.replace`. Opaque
`provider_details` mappings ride along on parts, calls and messages so that signatures and
encrypted reasoning survive every transform untouched.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

__all__ = [
    "Carried",
    "CarriedItem",
    "CompactionPart",
    "Message",
    "Role",
    "StopReason",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "Usage",
    "total_chars",
]

Details = Mapping[str, Any]


class Role(StrEnum):
    """Who wrote a message."""

    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class StopReason(StrEnum):
    """Why the model stopped, normalised across providers."""

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    TOOL_USE = "tool_use"
    CONTEXT_WINDOW = "context_window"
    STOP_SEQUENCE = "stop_sequence"
    REFUSAL = "refusal"
    OTHER = "other"
    # The provider compacted the conversation and paused before answering (Anthropic's
    # `pause_after_compaction`, and its compaction on demand): the message holds the
    # compaction alone; the answer comes when the conversation, with it, is sent again.
    COMPACTION = "compaction"


@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """A piece of text content."""

    text: str
    provider_details: Details | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPart:
    """A provider's own compaction of the conversation before it: Anthropic's `compaction`
    block, OpenAI's encrypted `compaction` output item.

    Opaque: `provider_details` is the block or item as the provider sent it, sent back to it
    verbatim. Readable only by the `provider` (the adapter family, "anthropic" or "openai")
    and `model` that made it: `chatcli.history.native` drops it for any other, and replaces
    the span before it with it for its own. `summary` is its readable text when the provider
    shows one (Anthropic does, OpenAI's is encrypted: "").

    `keeps`: how many messages right before its message the provider returned with it, as
    part of the window it made (OpenAI's compaction on demand returns the user messages, then
    the item); they stand or fall with it.
    """

    provider: str
    model: str
    provider_details: Details
    summary: str = ""
    keeps: int = 0

    @property
    def char_count(self) -> int:
        """Characters it contributes to a prompt: its summary, else its opaque payload."""
        if self.summary:
            return len(self.summary)
        return len(str(self.provider_details.get("encrypted_content") or ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class CarriedItem:
    """One sentence of the user's, quoted verbatim from an earlier message: its transcript
    message `number` (None when unknown), its `kind` (one of `chatcli.history.carry.KINDS`),
    its `text`, and the numbers of the messages whose statements it replaces."""

    number: int | None
    kind: str
    text: str
    replaces: tuple[int, ...] = ()

    def line(self) -> str:
        """The item as the carried block shows it: `#N: text` (the text alone without N)."""
        return self.text if self.number is None else f"#{self.number}: {self.text}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Carried:
    """What a message of carried instructions quotes (`chatcli.history.carry`), as data: its
    `items` in order, and how many more were `left_out` to fit. The message's text is these
    rendered once; what reads the block (the next carry, the store, /context) reads this."""

    items: tuple[CarriedItem, ...]
    left_out: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A request by the assistant to run a tool.

    `arguments` is the parsed JSON object. `incomplete` marks a call whose arguments were cut
    off by the output-token limit: such a call must never be executed.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    incomplete: bool = False
    provider_details: Details | None = None
    # `arguments_json`, made at its first use and kept (every request sends and counts every
    # call of the conversation): no part of the value, so equality, hashing and repr ignore
    # it, and `replace` makes a new call that makes its own.
    _arguments_json: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def arguments_json(self) -> str:
        """The arguments as compact JSON (the form sent on the wire and counted for size)."""
        made = self._arguments_json
        if made is None:
            made = json.dumps(self.arguments, ensure_ascii=False, separators=(",", ":"))
            object.__setattr__(self, "_arguments_json", made)  # a frozen value's own cache
        return made


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The output of one tool call, matched to it by `call_id`."""

    call_id: str
    content: str
    is_error: bool = False
    provider_details: Details | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One conversation message.

    A `tool` message carries exactly one `tool_result`; an `assistant` message may carry
    `tool_calls` besides its text parts. `text` is the text content (for a tool message, the
    result's content). An assistant message may begin with a provider's `compaction`. A user
    message chatcli wrote to quote the user's earlier words holds what it quotes in `carried`.
    """

    role: Role
    parts: tuple[TextPart, ...] = ()
    tool_calls: tuple[ToolCall, ...] = ()
    tool_result: ToolResult | None = None
    provider_details: Details | None = None
    compaction: CompactionPart | None = None
    carried: Carried | None = None

    def __post_init__(self) -> None:
        if (self.role is Role.TOOL) != (self.tool_result is not None):
            raise ValueError("a tool message needs exactly one tool_result, others none")
        if (self.tool_calls or self.compaction) and self.role is not Role.ASSISTANT:
            raise ValueError("only assistant messages carry tool_calls or a compaction")
        if self.carried is not None and self.role is not Role.USER:
            raise ValueError("only user messages quote the user's earlier words")

    @classmethod
    def system(cls, text: str) -> Message:
        return cls(role=Role.SYSTEM, parts=_parts(text))

    @classmethod
    def user(cls, text: str) -> Message:
        return cls(role=Role.USER, parts=_parts(text))

    @classmethod
    def assistant(cls, text: str = "", tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        return cls(role=Role.ASSISTANT, parts=_parts(text), tool_calls=tuple(tool_calls))

    @classmethod
    def tool(cls, call_id: str, content: str, is_error: bool = False) -> Message:
        result = ToolResult(call_id=call_id, content=content, is_error=is_error)
        return cls(role=Role.TOOL, tool_result=result)

    @property
    def text(self) -> str:
        if self.tool_result is not None:
            return self.tool_result.content
        parts = self.parts
        if len(parts) == 1:  # most messages: their one part's text, not a copy joined anew
            return parts[0].text
        return "".join(part.text for part in parts)

    @property
    def char_count(self) -> int:
        """Characters this message contributes to a prompt: text plus tool-call names/args."""
        native = self.compaction.char_count if self.compaction is not None else 0
        if not self.tool_calls:  # most messages (every count reads every message)
            return len(self.text) + native
        calls = sum(len(c.name) + len(c.arguments_json) for c in self.tool_calls)
        return len(self.text) + calls + native

    def with_text(self, text: str) -> Message:
        """A copy whose text is `text` (tool result content for a tool message).

        Keeps the first part's `provider_details`; other parts are merged into one.
        """
        if self.tool_result is not None:
            return replace(self, tool_result=replace(self.tool_result, content=text))
        details = self.parts[0].provider_details if self.parts else None
        parts = (TextPart(text=text, provider_details=details),) if text or details else ()
        return replace(self, parts=parts)


def _parts(text: str) -> tuple[TextPart, ...]:
    return (TextPart(text=text),) if text else ()


def total_chars(messages: Sequence[Message]) -> int:
    """Characters a whole conversation contributes to a prompt."""
    return sum(m.char_count for m in messages)


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens used by one or more calls. Adds up with `+`.

    `input_tokens` excludes cache reads/writes when the provider reports them apart
    (Anthropic); `prompt_tokens` is the whole prompt either way.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
        )

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

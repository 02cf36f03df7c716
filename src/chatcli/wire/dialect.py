"""What every client dialect shares: the parsed request, the failure value, and the protocol a
dialect implements. The proxy serves the dialects and `chatcli.wrap` reads with them.

A dialect (`openai_chat`, `anthropic`, `responses` in this package) is the only code that
knows one client wire format. It turns a request body into a `ClientRequest` (neutral
messages plus what rides along) and a `Reply`, a stream of `StreamItem`s or a `Failure` back
into that wire format.

Fields of a request body fall in three groups, one table per dialect:

- handled: chatcli reads them itself (model, messages, the output limit, tools, stream);
- settings: mapped to a neutral setting name (`SETTINGS`), so they reach an upstream of
  another dialect under its own field name (`chatcli.wire.forwarding` writes them);
- passthrough: everything else (metadata, cache settings, unknown future fields) is kept
  verbatim and reaches an upstream of the same dialect unchanged; another dialect cannot
  take it, and the response says which fields were not forwarded (`x-chatcli-dropped`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel

from chatcli.messages import Message
from chatcli.providers.base import ToolSpec
from chatcli.recovery import Reply
from chatcli.wire.items import StreamItem
from chatcli.wire.schemas import InvalidBody, check

__all__ = [
    "ClientRequest",
    "Dialect",
    "Failure",
    "FailureKind",
    "Refused",
    "RequestError",
    "checked",
    "split_fields",
    "sse",
    "sse_comment",
    "text_of",
]

Json = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientRequest:
    """One client request in neutral form, with what is needed to forward it faithfully.

    `origins[i]` is the index in `raw_messages` of the wire message `messages[i]` came from
    (None for a message from the top-level `raw_system`). A wire message may give several
    neutral ones (an Anthropic user turn with three tool results gives three).

    `unreadable` names what the neutral view lacks but an upstream of the same dialect would
    take verbatim (a custom tool, an image): another dialect's upstream cannot be sent it, so
    the proxy refuses the request rather than drop it silently. `omitted` names what another
    dialect's upstream is not sent but can do without (a tool the client's server would run
    itself, such as web search): it is left out and said in the answer's headers. `headers`
    are the client's headers an upstream of its dialect may need
    (`chatcli.wire.forwarding.passed_headers`). `leading`: wire output items the proxy made
    itself that the answer begins with (`chatcli.proxy.compaction`'s compaction item).
    """

    dialect: str
    model: str | None
    messages: tuple[Message, ...]
    origins: tuple[int | None, ...]
    raw_messages: tuple[Any, ...]
    raw_system: Any = None
    max_tokens: int | None = None
    tools: tuple[ToolSpec, ...] = ()
    raw_tools: Any = None
    stream: bool = False
    include_usage: bool = False
    settings: Mapping[str, Any] = field(default_factory=dict)
    setting_fields: Mapping[str, str] = field(default_factory=dict)  # setting -> its field
    passthrough: Mapping[str, Any] = field(default_factory=dict)
    unreadable: tuple[str, ...] = ()
    omitted: tuple[str, ...] = ()
    headers: Mapping[str, str] = field(default_factory=dict)
    leading: tuple[Any, ...] = ()  # output items the answer begins with (a compaction item)


class FailureKind(StrEnum):
    """What went wrong, in the terms both client dialects have an error type for."""

    OVERFLOW = "overflow"  # the conversation cannot be made to fit: never a 5xx
    INVALID = "invalid"
    AUTH = "auth"
    PERMISSION = "permission"
    NOT_FOUND = "not_found"
    TOO_LARGE = "too_large"  # the request body is over the proxy's byte limit
    RATE_LIMIT = "rate_limit"
    UPSTREAM = "upstream"  # the upstream failed (5xx, connection): a 502
    OVERLOADED = "overloaded"


@dataclass(frozen=True, slots=True, kw_only=True)
class Failure:
    """An error to answer in the client's dialect. `message` never holds a secret."""

    kind: FailureKind
    status: int
    message: str
    retry_after: float | None = None
    prompt_tokens: int | None = None
    limit: int | None = None
    param: str | None = None

    def headers(self) -> dict[str, str]:
        if self.retry_after is None:
            return {}
        return {"retry-after": str(max(0, round(self.retry_after)))}


class Refused(Exception):
    """A request the proxy answers with `failure` without sending it on."""

    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


class RequestError(Refused):
    """A client request the proxy cannot take (bad JSON, a missing field): a 400."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(
            Failure(kind=FailureKind.INVALID, status=400, message=message, param=param)
        )


class Dialect(Protocol):
    """One client wire format (see the module docstring)."""

    name: str

    def parse(self, body: Json) -> ClientRequest: ...

    def reply(self, request: ClientRequest, reply: Reply, *, model: str) -> Json: ...

    def stream(
        self, request: ClientRequest, items: AsyncIterator[StreamItem], *, model: str
    ) -> AsyncIterator[bytes]: ...

    def error(self, failure: Failure) -> Json: ...

    def stream_error(self, failure: Failure) -> bytes: ...


def checked(
    schema: type[BaseModel], body: Json, *, passed: int = 0, listed: str = "messages"
) -> None:
    """Refuse `body` unless it is of `schema`, its dialect's wire format
    (`chatcli.wire.schemas`): a malformed body is the client's 400, naming the field.
    `passed`: how many first items of the list `body[listed]` passed this check before, as
    they are (`chatcli.wire.known`): only the others are checked, with the body's other
    fields; a body that fails so is checked whole, for the error to name its place."""
    if passed:
        items = body[listed]
        try:
            check(schema, {**body, listed: items[passed:] or items[-1:]})
            return
        except InvalidBody:
            pass
    try:
        check(schema, body)
    except InvalidBody as exc:
        raise RequestError(str(exc), param=exc.field) from None


def split_fields(
    body: Mapping[str, Any], handled: frozenset[str], settings: Mapping[str, str]
) -> dict[str, Any]:
    """The `ClientRequest` fields `settings`, `setting_fields` and `passthrough` of a request
    body, given a dialect's tables (see the module docstring)."""
    mapped: dict[str, Any] = {}
    fields: dict[str, str] = {}
    passthrough: dict[str, Any] = {}
    for key, value in body.items():
        if key in handled:
            continue
        if key in settings:
            mapped[settings[key]] = value
            fields[settings[key]] = key
        passthrough[key] = value  # a setting is passed through verbatim too (same dialect)
    return {"settings": mapped, "setting_fields": fields, "passthrough": passthrough}


def sse(data: Any, event: str | None = None) -> bytes:
    """One server-sent event; `data` is dumped as compact JSON unless it is a str."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {text}\n\n".encode()


def sse_comment(text: str) -> bytes:
    """An SSE comment line: SDKs skip it; a person reading the stream sees what recovery did."""
    return f": {' '.join(text.splitlines())}\n\n".encode()


def text_of(content: Any) -> str:
    """The text of a wire `content`: a string, or the text blocks of a list of blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            block.get("text", "")
            for block in content
            if isinstance(block, dict)
            and block.get("type") in ("text", "input_text", "output_text")
        )
    raise RequestError(
        f"content must be a string or a list of blocks, not {type(content).__name__}"
    )

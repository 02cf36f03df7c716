"""What every client dialect of the proxy shares: the parsed request, the failure value, and
the protocol a dialect implements.

A dialect (`openai_dialect`, `anthropic_dialect`, `responses_dialect`) is the only code that
knows one client wire format. It turns a request body into a `ClientRequest` (neutral
messages plus what rides along) and a `Reply`, a stream of `StreamItem`s or a `Failure` back
into that wire format.

Fields of a request body fall in three groups, one table per dialect:

- handled: the proxy reads them itself (model, messages, the output limit, tools, stream);
- settings: mapped to a neutral setting name (`SETTINGS`), so they reach an upstream of
  another dialect under its own field name (`chatcli.proxy.upstream` writes them);
- passthrough: everything else (metadata, cache settings, unknown future fields) is kept
  verbatim and reaches an upstream of the same dialect unchanged; another dialect cannot
  take it, and the response says which fields were not forwarded (`x-chatcli-dropped`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from chatcli.messages import Message
from chatcli.providers.base import ToolSpec
from chatcli.proxy.items import StreamItem
from chatcli.recovery import Reply

__all__ = [
    "TEXT_MESSAGES_SIZE",
    "ClientRequest",
    "Dialect",
    "Failure",
    "FailureKind",
    "Refused",
    "RequestError",
    "TextMessages",
    "split_fields",
    "sse",
    "sse_comment",
    "text_of",
]

Json = dict[str, Any]
# Characters of text in each generation of `TextMessages`: ~350 conversations of 100
# messages of ~460 characters (benchmarks/proxy.py's), so that 200 in turn all stay (with 4M,
# 87 did: taken in turn, none was ever found again); ~60 MB at most for both generations.
TEXT_MESSAGES_SIZE = 16_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientRequest:
    """One client request in neutral form, with what is needed to forward it faithfully.

    `origins[i]` is the index in `raw_messages` of the wire message `messages[i]` came from
    (None for a message from the top-level `raw_system`). A wire message may give several
    neutral ones (an Anthropic user turn with three tool results gives three).

    `unreadable` names what the neutral view lacks but an upstream of the same dialect would
    take verbatim (a hosted tool, an image): another dialect's upstream cannot be sent it, so
    the proxy refuses the request rather than drop it silently. `headers` are the client's
    headers an upstream of its dialect may need (`chatcli.proxy.upstream.passed_headers`).
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
    headers: Mapping[str, str] = field(default_factory=dict)


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


class TextMessages:
    """The neutral messages of the wire's commonest shape, a role and a string content and
    nothing else, each made once per process and handed out again for the same wire message.

    A conversation's every request repeats its earlier messages: made anew, each costs a few
    dataclass constructions and checks per message per request, and the library's memoised
    scans (`chatcli.history.memo`) must compare them by value. Handed out again, the same
    objects cost a dict look-up, and a scan's messages match by identity. Messages are frozen
    values, so sharing them across requests changes no result.

    `makers` maps a wire role to the neutral message its text makes (what the dialect's own
    parser makes of that shape: a test holds them equal); another role is not taken. Two
    generations bound the memory: a message found in the old one moves to the young one, and
    a young one holding `size` characters of text becomes the old, dropping the oldest.
    Threads (a test's proxies) may share it: a race loses an entry at worst, made again.
    """

    def __init__(
        self, makers: Mapping[str, Callable[[str], Message]], size: int = TEXT_MESSAGES_SIZE
    ) -> None:
        self.makers, self.size = makers, size
        self.young: dict[tuple[str, str], Message] = {}
        self.old: dict[tuple[str, str], Message] = {}
        self.chars = 0  # the young generation's

    def parsed(
        self, raw: Sequence[Any], parse: Callable[[Any, int], Message]
    ) -> tuple[Message, ...]:
        """The messages of the wire messages `raw`: each of the shape from the table, any
        other made by `parse` (the dialect's parser of one, given its index). No two are the
        same object, so that the forwarder can tell them apart by identity
        (`chatcli.proxy.upstream`): a repeat of one the table handed out is parsed anew."""
        messages = tuple(self.get(m) or parse(m, i) for i, m in enumerate(raw))
        if len(set(map(id, messages))) == len(messages):
            return messages
        seen: set[int] = set()
        out: list[Message] = []
        for index, message in enumerate(messages):
            made = parse(raw[index], index) if id(message) in seen else message
            seen.add(id(made))
            out.append(made)
        return tuple(out)

    def get(self, raw: Any) -> Message | None:
        """The message of `raw` when it has the shape (None when not: the dialect parses it).
        Exact types: a subclass of dict or str (never decoded JSON) is the parser's."""
        if type(raw) is not dict or len(raw) != 2:
            return None
        role, text = raw.get("role"), raw.get("content")
        if type(role) is not str or type(text) is not str:
            return None
        key = (role, text)
        return self.young.get(key) or self.made(key)

    def made(self, key: tuple[str, str]) -> Message | None:
        """The message of `key` (role, text) the young generation lacks, moved or made into
        it; None for a role the table does not take."""
        role, text = key
        maker = self.makers.get(role)
        if maker is None:
            return None
        message = self.old.get(key) or maker(text)
        if self.chars >= self.size:
            self.old, self.young, self.chars = self.young, {}, 0
        self.young[key] = message
        self.chars += len(text)
        return message


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

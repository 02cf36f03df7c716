"""Forwarding: what a client's request adds to each call chatcli makes for it upstream.

`Upstream` is the provider every request goes to, with the wire dialect it speaks (if any).
`plan` decides what a request forwards, and `Forwarder` is the per-request Provider
`Client` talks to. The proxy and the SDK and LiteLLM wrappers share them, so a request
reaches its upstream the same way whichever of them took it. It adds what the client asked
beyond messages, output limit and tools:

- same dialect (an OpenAI client in front of an OpenAI or OpenAI-compatible server, an
  Anthropic client in front of Anthropic): every field chatcli does not handle is sent
  verbatim, and so is every message recovery left whole (its raw JSON: images,
  `cache_control`, thinking signatures, unknown fields); only messages recovery changed are
  written anew. The system prompt and the tool definitions are sent verbatim too.
  The client's feature headers (`PASSED_HEADERS`: `anthropic-beta`, `openai-beta`, ...) go
  with each call, since the body may use what they turn on; its auth headers never do (the
  upstream's own key is used), nor any other header.
- another dialect: the settings of `CROSS_SETTINGS` become `chatcli.Settings`, which the
  upstream's adapter writes in its own field names; the other fields cannot be expressed
  there and are reported as dropped. What the neutral view lacks (`ClientRequest.unreadable`:
  an image in a Responses input, a custom tool) is refused with a 400 naming it, never
  dropped silently; what it can do without (`ClientRequest.omitted`: a tool the client's own
  server would run, such as web search) is left out, logged, and reported as dropped.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from chatcli.messages import Message, Role
from chatcli.providers.anthropic import wire_messages
from chatcli.providers.base import Provider, Request, Response, StreamChunk
from chatcli.providers.openai import OpenAI, chat_messages
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.request_settings import Settings
from chatcli.wire.dialect import ClientRequest, RequestError

__all__ = [
    "CROSS_SETTINGS",
    "PASSED_HEADERS",
    "Forwarder",
    "Forwarding",
    "Upstream",
    "passed_headers",
    "plan",
]

Json = dict[str, Any]

logger = logging.getLogger("chatcli.wire")


def _neutral_tool_choice(value: Any) -> Any:
    """A client's `tool_choice` (OpenAI: a mode or `{"type": "function", ...}`; Anthropic:
    `{"type": "auto" | "none" | "any" | "tool", ...}`) as `Settings.tool_choice`."""
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    if kind == "function":
        return (value.get("function") or {}).get("name")
    if kind == "tool":
        return value.get("name")
    return {"any": "required"}.get(str(kind), kind)


# Upstream dialect -> the neutral settings a client of the other dialect can give it (its
# adapter writes them in its own names); None: the registry's other providers.
CROSS_SETTINGS: Mapping[str | None, frozenset[str]] = {
    "openai": frozenset(
        {
            "temperature",
            "top_p",
            "stop",
            "seed",
            "tool_choice",
            "parallel_tool_calls",
            "response_format",
            "reasoning_effort",
        }
    ),
    "anthropic": frozenset({"temperature", "top_p", "stop", "tool_choice"}),
    None: frozenset({"temperature"}),
}
# Client dialect -> the request headers an upstream of that dialect is sent (lower case): the
# ones that turn on features a body may use. An allow-list, so that no credential
# (`authorization`, `x-api-key`, `api-key`) and no routing header of the client's account
# (`openai-organization`, `openai-project`) can reach the upstream, which gets the proxy's.
PASSED_HEADERS: Mapping[str, frozenset[str]] = {
    "anthropic": frozenset({"anthropic-beta", "anthropic-version"}),
    "openai": frozenset({"openai-beta"}),
}
# Neutral setting -> how a client's value becomes a `Settings` value (the others are the same).
_NEUTRAL: Mapping[str, Callable[[Any], Any]] = {"tool_choice": _neutral_tool_choice}


@dataclass(frozen=True, slots=True, kw_only=True)
class Upstream:
    """The provider every request goes to, and the wire dialect it speaks (None: none a
    client speaks, so only the mapped settings reach it)."""

    provider: Provider
    name: str
    model: str
    dialect: str | None
    max_tokens: int | None = None  # the output limit when the client sets none
    # The same upstream over the Responses API, when it compacts on its own servers (OpenAI
    # with a model that supports it); None: compaction is chatcli's own.
    native: OpenAI | None = None


def passed_headers(request: ClientRequest, headers: Mapping[str, str]) -> ClientRequest:
    """`request` with the client's `headers` its dialect passes on (`PASSED_HEADERS`)."""
    names = PASSED_HEADERS.get(request.dialect, frozenset())
    kept = {k.lower(): v for k, v in headers.items() if k.lower() in names}
    return replace(request, headers=kept) if kept else request


@dataclass(frozen=True, slots=True, kw_only=True)
class Forwarding:
    """What a request adds to each call: its settings (same dialect: every field it does not
    handle, verbatim in `extra`) and headers, and the fields an upstream of another dialect
    cannot take."""

    settings: Settings = field(default_factory=Settings)
    headers: Mapping[str, str] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()
    same_dialect: bool = False


def plan(request: ClientRequest, upstream_dialect: str | None) -> Forwarding:
    """The settings a request forwards to an upstream of `upstream_dialect` (module
    docstring). A setting `Settings` refuses, or a part of the request the upstream cannot
    be sent, is the client's error (a 400 naming it); what it can do without is dropped."""
    if upstream_dialect == request.dialect:
        return Forwarding(
            settings=Settings(extra=request.passthrough),
            headers=request.headers,
            same_dialect=True,
        )
    if request.unreadable:
        raise RequestError(
            f"this upstream cannot be sent {'; '.join(request.unreadable)}: chatcli forwards "
            "no part of a request it cannot convert"
        )
    taken = CROSS_SETTINGS.get(upstream_dialect, frozenset())
    values = {
        setting: _NEUTRAL.get(setting, lambda v: v)(value)
        for setting, value in request.settings.items()
        if setting in taken
    }
    try:
        settings = Settings(**values)
    except ValueError as exc:
        raise RequestError(str(exc)) from None
    kept = {request.setting_fields[s] for s in values}
    dropped = tuple(sorted(k for k in request.passthrough if k not in kept))
    if request.omitted:
        logger.warning("left out what this upstream cannot run: %s", ", ".join(request.omitted))
    return Forwarding(settings=settings, dropped=dropped + request.omitted)


class Forwarder:
    """The Provider for one client request (see the module docstring)."""

    def __init__(self, upstream: Upstream, request: ClientRequest, forwarding: Forwarding) -> None:
        self.inner = upstream.provider
        self.dialect = upstream.dialect
        self.request = request
        self.forwarding = forwarding
        self.context_window = getattr(self.inner, "context_window", None)
        self.max_output_tokens = getattr(self.inner, "max_output_tokens", None)

    # What `raw_messages` reads, made on its first call.

    @cached_property
    def _origins(self) -> dict[int, int | None]:
        request = self.request
        return {id(m): o for m, o in zip(request.messages, request.origins, strict=True)}

    @cached_property
    def _groups(self) -> dict[int, list[Message]]:
        return _groups_of(self.request)

    @cached_property
    def _untouched(self) -> tuple[Message, ...]:
        """The messages `raw_messages` sees when recovery changed nothing (most requests)."""
        request = self.request
        return tuple(
            m for m, o in zip(request.messages, request.origins, strict=True) if o is not None
        )

    @property
    def compaction_provider(self) -> str | None:
        """Whose compactions the client's messages carry back to the upstream: its adapter's,
        when the client speaks the upstream's dialect (an Anthropic client's `compaction`
        blocks, which the Client then keeps in the view as the upstream reads them)."""
        if not self.forwarding.same_dialect:
            return None
        return getattr(self.inner, "compaction_provider", None)

    def complete(self, request: Request) -> Response:
        return self.checked(self.inner.complete(self.shaped(request)), request)

    async def acomplete(self, request: Request) -> Response:
        return self.checked(await self.inner.acomplete(self.shaped(request)), request)

    async def astream(self, request: Request) -> AsyncIterator[StreamChunk]:
        shaped = self.shaped(request)
        astream: Any = getattr(self.inner, "astream", None)
        if astream is None:
            yield self.checked(await self.inner.acomplete(shaped), request)
            return
        async for chunk in astream(shaped):
            yield self.checked(chunk, request) if isinstance(chunk, Response) else chunk

    def shaped(self, request: Request) -> Request:
        """`request` (the view recovery chose) with what the client's request adds.

        Same dialect, the messages travel in the body fields (`settings.extra`, which wins
        over what the adapter writes), so the adapter is given only the few it needs
        (`_written`): the SDKs validate every message of a typed parameter, a cost that grows
        with the conversation; the fields are sent as they are.
        """
        settings = self.forwarding.settings
        messages = request.messages
        if self.forwarding.same_dialect:
            verbatim = self.verbatim(request.messages)
            settings = replace(settings, extra={**settings.extra, **verbatim})
            messages = _written(messages, self.dialect)
        headers = {**request.headers, **self.forwarding.headers}
        return replace(
            request,
            messages=messages,
            settings=request.settings.merge(settings),
            headers=headers,
        )

    def checked(self, response: Response, request: Request) -> Response:
        """The silent-truncation check of `OpenAICompatible` (Ollama cutting a prompt and
        answering 200), made here on the view, since the adapter was given no messages."""
        if isinstance(self.inner, OpenAICompatible) and self.forwarding.same_dialect:
            self.inner.raise_if_truncated(response, request)
        return response

    def verbatim(self, view: Sequence[Message]) -> Json:
        """Body fields that replace what the adapter wrote from the view: the messages (raw
        where recovery left them whole), the system prompt and tools when unchanged."""
        client = self.request
        out: Json = {}
        if client.raw_tools is not None:
            out["tools"] = client.raw_tools
        if self.dialect == "anthropic":
            systems = [m for m in view if m.role is Role.SYSTEM]
            original = [
                m for m, o in zip(client.messages, client.origins, strict=True) if o is None
            ]
            if client.raw_system is not None and _same(systems, original):
                out["system"] = client.raw_system
            turns = [m for m in view if m.role is not Role.SYSTEM]
            out["messages"] = _merged(list(self.raw_messages(turns)))
        else:
            out["messages"] = list(self.raw_messages(view))
        return out

    def raw_messages(self, view: Sequence[Message]) -> Iterator[Json]:
        """The view as wire messages: a client message whose neutral messages are all in the
        view, unchanged and in a row, is its raw JSON; any other is written anew."""
        client = self.request
        if len(view) == len(self._untouched) and all(map(operator.is_, view, self._untouched)):
            yield from client.raw_messages
            return
        groups = self._groups  # made only for a view recovery changed
        i = 0
        while i < len(view):
            origin = self._origins.get(id(view[i]))
            group = groups.get(origin) if origin is not None else None
            if group is not None and _same(view[i : i + len(group)], group):
                yield client.raw_messages[origin]  # type: ignore[index]
                i += len(group)
            else:
                yield from self.written([view[i]])
                i += 1

    def written(self, messages: Sequence[Message]) -> list[Json]:
        if self.dialect == "anthropic":
            return wire_messages(messages)[1]
        return chat_messages(messages)


def _written(view: Sequence[Message], dialect: str | None) -> tuple[Message, ...]:
    """The messages of `view` the adapter still writes when the body fields carry the view
    (same dialect; the fields win over what it writes): Anthropic, the system messages (a
    system prompt recovery changed); OpenAI, the first system and first user message, from
    which the OpenAI adapter names the conversation's `prompt_cache_key` (none: one key for
    every conversation)."""
    if dialect == "anthropic":
        return tuple(m for m in view if m.role is Role.SYSTEM)
    firsts = (next((m for m in view if m.role is role), None) for role in (Role.SYSTEM, Role.USER))
    return tuple(m for m in firsts if m is not None)


def _groups_of(request: ClientRequest) -> dict[int, list[Message]]:
    groups: dict[int, list[Message]] = {}
    for message, origin in zip(request.messages, request.origins, strict=True):
        if origin is not None:
            groups.setdefault(origin, []).append(message)
    return groups


def _same(a: Sequence[Message], b: Sequence[Message]) -> bool:
    return len(a) == len(b) and all(x is y or x == y for x, y in zip(a, b, strict=True))


def _merged(messages: Sequence[Json]) -> list[Json]:
    """Anthropic turns must alternate: adjacent turns of one role become one."""
    out: list[Json] = []
    for message in messages:
        if out and out[-1]["role"] == message["role"]:
            out[-1] = {**out[-1], "content": _blocks(out[-1]) + _blocks(message)}
        else:
            out.append(message)
    return out


def _blocks(message: Json) -> list[Any]:
    content = message.get("content")
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])

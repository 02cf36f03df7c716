"""The carried block travels in the user's channel on every wire format chatcli writes.

A view with the block of carried instructions (`chatcli.history.carry`) is sent through each
adapter's official SDK to the replay server (OpenAI Chat Completions and Responses,
Anthropic Messages, Gemini, an OpenAI-compatible server), written by the embedded llama.cpp
adapter, and forwarded by the proxy's wire layer: in its client's dialect (OpenAI Chat,
Anthropic Messages: the messages written anew beside the client's raw ones) and in another
(a Responses client in front of Gemini: the adapter writes them). In every body put on the
wire, the carried sentences are in a user turn and never in a system or developer message,
Anthropic's `system`, Gemini's `systemInstruction` or the Responses API's `instructions`;
the system prompt stays where it was. The answers replayed are the adapters' recorded
streams (tests/data/sse/, sources in each file).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from chatcli.history.carry import carry_instructions, is_carry_block
from chatcli.messages import Message
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import Request
from chatcli.providers.gemini import Gemini
from chatcli.providers.llama_cpp import chat_messages as llama_messages
from chatcli.providers.openai import OpenAI
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.wire.anthropic import AnthropicDialect
from chatcli.wire.dialect import ClientRequest
from chatcli.wire.forwarding import Forwarder, Upstream, plan
from chatcli.wire.openai_chat import OpenAIDialect
from chatcli.wire.responses import ResponsesDialect
from tests.recorded import sse_events
from tests.replay import ReplayServer, Scripted, adapters_closed

SYSTEM = "You are a careful release assistant."
RULE = "Never push to main."
CODE = "The deploy code is ZX-4471."
TRANSCRIPT = (
    Message.system(SYSTEM),
    Message.user(f"{RULE} {CODE}"),
    Message.assistant("Understood."),
    Message.user("Thanks. Now write the release notes."),
)


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():
        yield


def view() -> tuple[Message, ...]:
    """What a level leaves of `TRANSCRIPT` (the system prompt and the latest request), with
    what it removed carried: the block sits between them."""
    out = carry_instructions(TRANSCRIPT, (TRANSCRIPT[0], TRANSCRIPT[-1])).messages
    assert [is_carry_block(m) for m in out] == [False, True, False]
    return out


def request() -> Request:
    return Request(messages=view(), max_tokens=200)


def texts(value: Any) -> Iterator[str]:
    """Every string inside a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from texts(item)


def said(value: Any) -> str:
    return "\n".join(texts(value))


def assert_user_channel(turns: list[tuple[str, Any]], elsewhere: Any = None) -> None:
    """`turns` are (role, content) of the body's messages; `elsewhere` the body's system
    fields. The carried sentences are in user turns only; the system prompt is not."""
    carrying = [role for role, content in turns if RULE in said(content)]
    assert carrying and set(carrying) == {"user"}, turns
    assert all(CODE not in said(c) for role, c in turns if role != "user")
    assert RULE not in said(elsewhere) and CODE not in said(elsewhere)
    system = [role for role, content in turns if SYSTEM in said(content)]
    assert set(system) <= {"system", "developer"} and RULE not in said(system)


def test_openai_chat_completions(server: ReplayServer) -> None:
    server.add(Scripted(events=sse_events("openai-chat-text.txt")))
    provider = OpenAI("gpt-5", api_key="sk-test", base_url=server.url + "/v1", environ={})
    list(provider.stream(request()))
    body = server.requests[0].json()
    assert_user_channel([(m["role"], m["content"]) for m in body["messages"]])


def test_openai_responses(server: ReplayServer) -> None:
    server.add(Scripted(events=sse_events("openai-responses-text.txt")))
    provider = OpenAI(
        "gpt-5", api="responses", api_key="sk-test", base_url=server.url + "/v1", environ={}
    )
    list(provider.stream(request()))
    body = server.requests[0].json()
    turns = [(item.get("role", ""), item.get("content")) for item in body["input"]]
    assert_user_channel(turns, body.get("instructions"))


def test_anthropic_messages(server: ReplayServer) -> None:
    server.add(Scripted(events=sse_events("anthropic-text.txt")))
    provider = Anthropic("claude-haiku-4-5", api_key="sk-ant-test", base_url=server.url)
    list(provider.stream(request()))
    body = server.requests[0].json()
    assert SYSTEM in said(body["system"])
    # The block and the latest request are one user turn: the roles alternate.
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert_user_channel([(m["role"], m["content"]) for m in body["messages"]], body["system"])


def test_gemini(server: ReplayServer) -> None:
    server.add(Scripted(events=sse_events("gemini-text.txt")))
    provider = Gemini("gemini-2.5-flash", api_key="AIza-test", base_url=server.url)
    list(provider.stream(request()))
    body = server.requests[0].json()
    system = body.get("systemInstruction") or body.get("system_instruction")
    assert SYSTEM in said(system)
    assert [c["role"] for c in body["contents"]] == ["user"]
    assert_user_channel([(c["role"], c["parts"]) for c in body["contents"]], system)


def test_openai_compatible_server(server: ReplayServer) -> None:
    server.add(Scripted(events=sse_events("openai-chat-text.txt")))
    provider = OpenAICompatible(server.url + "/v1", "local-model", environ={})
    list(provider.stream(request()))
    body = server.requests[0].json()
    assert_user_channel([(m["role"], m["content"]) for m in body["messages"]])


def test_embedded_llama_cpp() -> None:
    """What `LlamaCpp` hands llama-cpp-python's chat formatter."""
    assert_user_channel([(m["role"], m["content"]) for m in llama_messages(view())])


def client_turns(*, systems: bool) -> list[dict[str, str]]:
    """`TRANSCRIPT` as a client's messages (without the system message: `systems` False)."""
    return [
        {"role": m.role.value, "content": m.text}
        for m in TRANSCRIPT
        if systems or m.role.value != "system"
    ]


def forwarded(server: ReplayServer, parsed: ClientRequest, upstream: Upstream, events: str) -> Any:
    """The body the proxy's forwarder puts on the wire for the view of `parsed` with the
    block (the client's first and last messages around it), answered with `events`."""
    forwarder = Forwarder(upstream, parsed, plan(parsed, upstream.dialect))
    server.add(Scripted(events=sse_events(events)))
    messages = (parsed.messages[0], view()[1], parsed.messages[-1])
    list(forwarder.inner.stream(forwarder.shaped(Request(messages=messages, max_tokens=200))))
    return server.requests[0].json()


def test_the_proxys_openai_chat_forwarding(server: ReplayServer) -> None:
    """An OpenAI client in front of an OpenAI-compatible upstream: the client's messages go
    raw, the block is written anew, in the user's channel."""
    parsed = OpenAIDialect().parse({"model": "local-model", "messages": client_turns(systems=True)})
    upstream = Upstream(
        provider=OpenAICompatible(server.url + "/v1", "local-model", environ={}),
        name="local",
        model="local-model",
        dialect="openai",
    )
    body = forwarded(server, parsed, upstream, "openai-chat-text.txt")
    assert_user_channel([(m["role"], m["content"]) for m in body["messages"]])


def test_the_proxys_anthropic_forwarding(server: ReplayServer) -> None:
    """An Anthropic client in front of Anthropic: `system` is the client's, verbatim; the
    block joins the next user turn."""
    client = {
        "model": "claude-haiku-4-5",
        "max_tokens": 200,
        "system": SYSTEM,
        "messages": client_turns(systems=False),
    }
    parsed = AnthropicDialect().parse(client)
    upstream = Upstream(
        provider=Anthropic("claude-haiku-4-5", api_key="sk-ant-test", base_url=server.url),
        name="anthropic",
        model="claude-haiku-4-5",
        dialect="anthropic",
    )
    body = forwarded(server, parsed, upstream, "anthropic-text.txt")
    assert body["system"] == SYSTEM
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert_user_channel([(m["role"], m["content"]) for m in body["messages"]], body["system"])
    assert json.dumps(body).count(RULE) == 1  # carried once, not repeated


def test_the_proxys_responses_client_in_front_of_gemini(server: ReplayServer) -> None:
    """A Responses client (Codex's dialect) in front of Gemini: another dialect, so the
    adapter writes the whole view; the block is in a user turn, not `systemInstruction`."""
    client = {"model": "gpt-5", "instructions": SYSTEM, "input": client_turns(systems=False)}
    parsed = ResponsesDialect().parse(client)
    upstream = Upstream(
        provider=Gemini("gemini-2.5-flash", api_key="AIza-test", base_url=server.url),
        name="gemini",
        model="gemini-2.5-flash",
        dialect=None,
    )
    body = forwarded(server, parsed, upstream, "gemini-text.txt")
    system = body.get("systemInstruction") or body.get("system_instruction")
    assert SYSTEM in said(system)
    assert_user_channel([(c["role"], c["parts"]) for c in body["contents"]], system)

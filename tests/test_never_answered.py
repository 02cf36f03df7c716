"""A request no server answered (the connection closed before any byte of an answer) is sent
again at once, once, even with retries off: the race of a kept-alive connection that the
server closes as the client reuses it (llama-server closes one after every streamed answer).
Real SDKs (openai, anthropic) against the replay server, which drops the connection."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from chatcli import Client
from chatcli.errors import ErrorKind, ProviderError
from chatcli.events import Event, Retried
from chatcli.messages import Message
from chatcli.policy.retry import never_answered
from chatcli.providers.adapter import Adapter
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Reply
from tests.recorded import sse_events
from tests.replay import ReplayServer, Scripted

ANSWERS = {
    "openai": ("openai-chat-text.txt", "I'm unable to provide real-time"),
    "anthropic": ("anthropic-text.txt", "Hello!"),
}


def provider(name: str, server: ReplayServer) -> Adapter:
    if name == "openai":
        return OpenAICompatible(server.url + "/v1", "m", truncation_check=None, environ={})
    return Anthropic("claude-haiku-4-5", api_key="k", base_url=server.url)


def answer(name: str) -> Scripted:
    return Scripted(events=list(sse_events(ANSWERS[name][0])))


@pytest.mark.parametrize("name", sorted(ANSWERS))
@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_a_dropped_request_is_sent_again_at_once(
    server: ReplayServer, name: str, mode: str
) -> None:
    server.add(Scripted(drop=True), answer(name))
    seen: list[Event] = []
    messages = [Message.user("Weather?")]

    async def streamed() -> list[object]:
        async with provider(name, server) as upstream:
            client = Client(upstream, hooks=(seen.append,), max_retries=0)
            return [item async for item in client.astream(messages, max_tokens=64)]

    if mode == "stream":
        with provider(name, server) as upstream:
            client = Client(upstream, hooks=(seen.append,), max_retries=0)
            items: list[object] = list(client.stream(messages, max_tokens=64))
    else:
        items = asyncio.run(streamed())
    reply = items[-1]
    assert isinstance(reply, Reply)
    text = reply.message.text
    assert text.startswith(ANSWERS[name][1])
    assert len(server.requests) == 2 and server.requests[0].body == server.requests[1].body
    retried = [e for e in seen if isinstance(e, Retried)]
    assert [(e.kind, e.delay) for e in retried] == [(ErrorKind.TRANSIENT, 0.0)]


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_it_is_sent_again_only_once(server: ReplayServer, name: str) -> None:
    server.add(Scripted(drop=True), Scripted(drop=True), answer(name))
    with provider(name, server) as upstream, pytest.raises(ProviderError) as raised:
        list(Client(upstream, max_retries=0).stream([Message.user("Weather?")], max_tokens=64))
    assert raised.value.info.kind is ErrorKind.TRANSIENT
    assert len(server.requests) == 2


def test_with_retries_on_it_comes_first_and_costs_no_wait(server: ReplayServer) -> None:
    server.add(Scripted(drop=True), Scripted(drop=True), answer("openai"))
    seen: list[Event] = []
    sleeps: list[float] = []
    with provider("openai", server) as upstream:
        client = Client(upstream, hooks=(seen.append,), max_retries=1, sleep=sleeps.append)
        *_, reply = client.stream([Message.user("Weather?")], max_tokens=64)
    assert isinstance(reply, Reply) and reply.message.text
    assert len(server.requests) == 3
    retried = [e for e in seen if isinstance(e, Retried)]
    assert [e.attempt for e in retried] == [1, 2]
    assert retried[0].delay == 0.0 and sleeps == [e.delay for e in retried]


def test_what_counts_as_never_answered() -> None:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    dropped = httpx.RemoteProtocolError("Server disconnected without sending a response.")
    try:
        try:
            raise dropped
        except httpx.RemoteProtocolError as exc:
            raise openai.APIConnectionError(request=request) from exc
    except openai.APIConnectionError as wrapped:
        assert never_answered(wrapped)
    assert never_answered(dropped)
    # A stream cut after its answer began, a timeout, a refused connection: not this race.
    cut = httpx.RemoteProtocolError("peer closed connection without sending complete message")
    assert not never_answered(cut)
    assert not never_answered(httpx.ReadTimeout("timed out"))
    assert not never_answered(httpx.ConnectError("[Errno 111] Connection refused"))
    assert not never_answered(ValueError("Server disconnected without sending a response."))

"""The upstream side of the proxy's stream: an OpenAI-compatible server's Chat Completions
stream read through the SDK's own stream (`chatcli.providers.openai`) gives the recorded
deltas and answer; what the SSE framing allows (comments, multi-line data, events after
`[DONE]`) reads as the API's; a malformed event is a ProviderError. Recorded streams, served
by the replay server."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from chatcli.errors import ProviderError
from chatcli.messages import Message
from chatcli.providers.base import Request, Response, TextDelta
from chatcli.providers.openai_compat import OpenAICompatible
from tests.recorded import sse_events
from tests.replay import ReplayServer, Scripted

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema


def adapter(server: ReplayServer) -> OpenAICompatible:
    return OpenAICompatible(server.url + "/v1", "m", truncation_check=None, environ={})


def request() -> Request:
    return Request(messages=(Message.user("Weather?"),), max_tokens=50)


def recorded_text(name: str) -> str:
    chunks = [json.loads(data) for _, data in sse_events(name) if data != "[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_a_stream_gives_the_recorded_deltas_and_answer(server: ReplayServer) -> None:
    server.add(Scripted(events=[data for _, data in sse_events("openai-chat-text.txt")]))

    async def run() -> list[Any]:
        async with adapter(server) as provider:
            return [chunk async for chunk in provider.astream(request())]

    chunks = asyncio.run(run())
    *deltas, last = chunks
    assert isinstance(last, Response)
    assert all(isinstance(d, TextDelta) for d in deltas) and len(deltas) > 10
    text = recorded_text("openai-chat-text.txt")
    assert "".join(d.text for d in deltas) == last.message.text == text
    assert (last.usage.prompt_tokens, last.usage.output_tokens) == (14, 47)  # as recorded
    assert last.model == "gpt-4o-2024-08-06"


def test_the_sync_stream_gives_the_recorded_tool_calls(server: ReplayServer) -> None:
    server.add(Scripted(events=[data for _, data in sse_events("openai-chat-tool-calls.txt")]))
    with adapter(server) as provider:
        *_, last = provider.stream(request())
    assert isinstance(last, Response) and last.message.tool_calls
    assert not any(call.incomplete for call in last.message.tool_calls)


def test_multi_line_data_comments_and_what_follows_done(server: ReplayServer) -> None:
    events = [data for _, data in sse_events("openai-chat-text.txt")]
    first = json.dumps(json.loads(events[1]), indent=1)  # one event's JSON over many lines
    body = (
        ": a comment\n\n"
        + "".join(f"data: {line}\n" for line in first.splitlines())
        + "\n"
        + "".join(f"data: {data}\n\n" for data in events[2:])
        + 'data: {"choices": [{"index": 0, "delta": {"content": "after [DONE]"}}]}\n\n'
    )
    server.add(Scripted(body=body, headers={"content-type": "text/event-stream"}))
    with adapter(server) as provider:
        *_, last = provider.stream(request())
    assert isinstance(last, Response)
    assert last.message.text == recorded_text("openai-chat-text.txt")


def test_an_event_that_is_not_an_object_is_a_provider_error(server: ReplayServer) -> None:
    server.add(Scripted(events=["[1, 2]"]))
    with adapter(server) as provider, pytest.raises(ProviderError, match="not a JSON object"):
        list(provider.stream(request()))


def test_streams_in_a_row_share_one_connection(server: ReplayServer) -> None:
    # The rest of a stream after `[DONE]` is read, so its connection goes back to the pool.
    events = [data for _, data in sse_events("openai-chat-text.txt")]
    server.add(*(Scripted(events=events) for _ in range(3)))

    async def run() -> None:
        async with adapter(server) as provider:
            for _ in range(3):
                assert [c async for c in provider.astream(request())]

    asyncio.run(run())
    assert len(server.requests) == 3 and server.connections == 1

"""`chatcli.wrap` for real: the official openai and anthropic SDKs, wrapped, driving the real
C++ llama-server (which serves `/v1/chat/completions` and `/v1/messages`) with the tiny random
model and a 1,024-token window. The overflows are llama-server's own errors and the answers
really stop at max_tokens (the model never emits an end token). The bodies the SDKs send are
captured on the wire (the SDK's own HTTP client with a request hook)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import chatcli
from chatcli import (
    Continued,
    Escalated,
    Event,
    LevelApplied,
    OverflowDetected,
    PreflightRecovery,
)
from chatcli.chat.tinymodel import TRAINING_TEXT

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

N_CTX = 1024
MODEL = "chatcli-tiny"


class Wire:
    """The request bodies an SDK client sent, captured by its HTTP client's request hook."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def hook(self, request: Any) -> None:
        self.bodies.append(json.loads(request.content))

    async def ahook(self, request: Any) -> None:
        self.hook(request)


def words(i: int) -> str:
    text = TRAINING_TEXT.split()
    return " ".join(text[(i * 60) % max(1, len(text) - 60) :][:60])


def openai_chat() -> list[dict[str, Any]]:
    """About 3,000 tokens (three windows) of the model's training text, then a tool round
    trip and the latest question."""
    out: list[dict[str, Any]] = [{"role": "system", "content": "You answer briefly."}]
    out += [
        {"role": ("user", "assistant")[i % 2], "content": f"{i}: {words(i)}"} for i in range(30)
    ]
    call = {"id": "call_7", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    out.append({"role": "assistant", "content": None, "tool_calls": [call]})
    out.append({"role": "tool", "tool_call_id": "call_7", "content": "notes.txt"})
    out.append({"role": "user", "content": "What is in notes.txt?"})
    return out


def anthropic_chat() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": ("user", "assistant")[i % 2], "content": f"{i}: {words(i)}"} for i in range(30)
    ]
    use = {"type": "tool_use", "id": "toolu_7", "name": "ls", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_7", "content": "notes.txt"}
    out.append({"role": "assistant", "content": [use]})
    out.append({"role": "user", "content": [result, {"type": "text", "text": "And in it?"}]})
    return out


def openai_pairs_valid(messages: list[dict[str, Any]]) -> bool:
    calls = [c["id"] for m in messages for c in m.get("tool_calls") or ()]
    results = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return sorted(calls) == sorted(results)


def anthropic_pairs_valid(messages: list[dict[str, Any]]) -> bool:
    blocks = [b for m in messages if isinstance(m["content"], list) for b in m["content"]]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    return sorted(uses) == sorted(results)


def kinds(events: list[Event]) -> set[type]:
    return {type(e) for e in events}


@pytest.fixture
def wire() -> Wire:
    return Wire()


@pytest.fixture
def oa(llama_1024: str, wire: Wire) -> Iterator[Any]:
    http = openai.DefaultHttpxClient(event_hooks={"request": [wire.hook]})
    raw = openai.OpenAI(base_url=llama_1024 + "/v1", api_key="k", max_retries=0, http_client=http)
    with raw:
        yield raw


@pytest.fixture
def an(llama_1024: str, wire: Wire) -> Iterator[Any]:
    http = anthropic.DefaultHttpxClient(event_hooks={"request": [wire.hook]})
    raw = anthropic.Anthropic(base_url=llama_1024, api_key="k", max_retries=0, http_client=http)
    with raw:
        yield raw


def test_openai_an_overflowing_conversation_is_answered(oa: openai.OpenAI, wire: Wire) -> None:
    events: list[Event] = []
    client = chatcli.wrap(oa, on_event=events.append)
    messages = openai_chat()
    answer = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=16)
    assert isinstance(answer, openai.types.chat.ChatCompletion)
    assert answer.choices[0].message.content
    assert messages == openai_chat()  # the caller's history is untouched
    assert wire.bodies[0]["messages"] == messages  # sent as given, refused by the server
    assert {OverflowDetected, LevelApplied} <= kinds(events)
    recovered = wire.bodies[1]["messages"]
    assert recovered[-1] == messages[-1] and recovered[0] == messages[0]
    assert all(openai_pairs_valid(body["messages"]) for body in wire.bodies)
    assert client.learned_windows == {MODEL: N_CTX}
    # The window is known now: the next call is fitted before it is sent, no rejected call.
    events.clear()
    sent = len(wire.bodies)
    client.chat.completions.create(model=MODEL, messages=messages, max_tokens=16)
    assert PreflightRecovery in kinds(events)
    assert len(wire.bodies[sent]["messages"]) < len(messages)  # never sent whole again
    assert openai_pairs_valid(wire.bodies[sent]["messages"])


def test_anthropic_an_overflowing_conversation_is_answered(
    an: anthropic.Anthropic, wire: Wire
) -> None:
    events: list[Event] = []
    client = chatcli.wrap(an, on_event=events.append)
    messages = anthropic_chat()
    answer = client.messages.create(
        model=MODEL, system="You answer briefly.", messages=messages, max_tokens=16
    )
    assert isinstance(answer, anthropic.types.Message)
    assert answer.content[0].type == "text" and answer.content[0].text
    assert messages == anthropic_chat()
    assert {OverflowDetected, LevelApplied} <= kinds(events)
    assert len(wire.bodies) >= 2
    assert all(anthropic_pairs_valid(body["messages"]) for body in wire.bodies)
    recovered = wire.bodies[1]
    assert recovered["system"] == "You answer briefly."
    assert recovered["messages"][-1] == messages[-1]  # the latest request, its tool result too
    assert len(recovered["messages"]) < len(messages)


@pytest.mark.parametrize("stream", [False, True])
def test_a_cut_answer_is_continued_into_one_answer(
    oa: openai.OpenAI, wire: Wire, stream: bool
) -> None:
    events: list[Event] = []
    client = chatcli.wrap(oa, on_event=events.append)
    question = [{"role": "user", "content": "Tell me a long story."}]
    answer = client.chat.completions.create(
        model=MODEL, messages=question, max_tokens=4, stream=stream
    )
    if stream:
        chunks = list(answer)
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        finishes = [
            c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
        ]
        roles = [c for c in chunks if c.choices and c.choices[0].delta.role]
        assert len(roles) == 1 and len({c.id for c in chunks}) == 1  # one answer
    else:
        text = answer.choices[0].message.content or ""
        finishes = [answer.choices[0].finish_reason]
        assert answer.usage is not None and answer.usage.completion_tokens > 4
    assert finishes == ["length"]  # escalations used up: the partial answer, flagged as cut
    assert {Escalated, Continued} <= kinds(events)
    assert [body.get("max_tokens") for body in wire.bodies] == [4, 8, 16]
    assert wire.bodies[1]["messages"][-1]["content"] == chatcli.CONTINUATION_MESSAGE
    first = wire.bodies[1]["messages"][-2]["content"]
    assert text.startswith(first) and len(text) > len(first)
    assert question == [{"role": "user", "content": "Tell me a long story."}]


def test_openai_stream_of_an_overflowing_conversation(oa: openai.OpenAI, wire: Wire) -> None:
    client = chatcli.wrap(oa)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=openai_chat(),
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    with stream:
        chunks = list(stream)
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0
    assert all(body["stream"] for body in wire.bodies)
    assert all(openai_pairs_valid(body["messages"]) for body in wire.bodies)


def test_anthropic_stream_of_an_overflowing_conversation(an: anthropic.Anthropic) -> None:
    client = chatcli.wrap(an)
    stream = client.messages.create(
        model=MODEL, messages=anthropic_chat(), max_tokens=16, stream=True
    )
    events = list(stream)
    assert events[0].type == "message_start" and events[-1].type == "message_stop"
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text


async def test_async_clients_recover_and_stream(llama_1024: str, wire: Wire) -> None:
    events: list[Event] = []
    http = openai.DefaultAsyncHttpxClient(event_hooks={"request": [wire.ahook]})
    raw = openai.AsyncOpenAI(
        base_url=llama_1024 + "/v1", api_key="k", max_retries=0, http_client=http
    )
    async with chatcli.wrap(raw, on_event=events.append) as client:
        answer = await client.chat.completions.create(
            model=MODEL, messages=openai_chat(), max_tokens=16
        )
        assert answer.choices[0].message.content
        stream = await client.chat.completions.create(
            model=MODEL, messages=openai_chat(), max_tokens=16, stream=True
        )
        assert "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])
        response = await client.responses.create(
            model=MODEL, input=responses_chat(), max_output_tokens=16
        )
        assert response.output_text
    assert {OverflowDetected, LevelApplied, PreflightRecovery} <= kinds(events)
    chats = [body["messages"] for body in wire.bodies if "messages" in body]
    assert chats and all(openai_pairs_valid(messages) for messages in chats)
    inputs = [body["input"] for body in wire.bodies if "input" in body]
    assert len(inputs) >= 2 and all(responses_pairs_valid(items) for items in inputs)
    araw = anthropic.AsyncAnthropic(base_url=llama_1024, api_key="k", max_retries=0)
    async with chatcli.wrap(araw) as aclient:
        messages = anthropic_chat()
        kept = copy.deepcopy(messages)
        message = await aclient.messages.create(model=MODEL, messages=messages, max_tokens=16)
        assert message.content[0].text
        astream = await aclient.messages.create(
            model=MODEL, messages=messages, max_tokens=16, stream=True
        )
        async with astream:
            kinds_seen = [e.type async for e in astream]
        assert kinds_seen[-1] == "message_stop"
        assert messages == kept


def responses_chat() -> list[dict[str, Any]]:
    """The same three windows as Responses API items (assistant turns typed: llama-server
    refuses an assistant message without `type`)."""
    out: list[dict[str, Any]] = []
    for i in range(30):
        if i % 2 == 0:
            out.append({"role": "user", "content": f"{i}: {words(i)}"})
        else:
            said = [{"type": "output_text", "text": f"{i}: {words(i)}", "annotations": []}]
            out.append({"type": "message", "role": "assistant", "content": said})
    out.append({"type": "function_call", "call_id": "call_7", "name": "ls", "arguments": "{}"})
    out.append({"type": "function_call_output", "call_id": "call_7", "output": "notes.txt"})
    out.append({"role": "user", "content": "What is in notes.txt?"})
    return out


def responses_pairs_valid(items: list[dict[str, Any]]) -> bool:
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    return sorted(calls) == sorted(outputs)


@pytest.mark.parametrize("stream", [False, True])
def test_responses_an_overflowing_conversation_is_answered(
    oa: openai.OpenAI, wire: Wire, stream: bool
) -> None:
    events: list[Event] = []
    client = chatcli.wrap(oa, on_event=events.append)
    items = responses_chat()
    answer = client.responses.create(
        model=MODEL, input=items, instructions="Be brief.", max_output_tokens=16, stream=stream
    )
    if stream:
        streamed = list(answer)
        assert streamed[-1].type == "response.completed"
        text = "".join(e.delta for e in streamed if e.type == "response.output_text.delta")
        assert text and text == streamed[-1].response.output_text
    else:
        assert isinstance(answer, openai.types.responses.Response)
        assert answer.output_text
    assert items == responses_chat()
    assert {OverflowDetected, LevelApplied} <= kinds(events)
    assert all(body["instructions"] == "Be brief." for body in wire.bodies)
    assert all(responses_pairs_valid(body["input"]) for body in wire.bodies)
    assert wire.bodies[-1]["input"][-1] == items[-1]


def test_anthropic_stream_helper_of_an_overflowing_conversation(an: anthropic.Anthropic) -> None:
    events: list[Event] = []
    client = chatcli.wrap(an, on_event=events.append)
    messages = anthropic_chat()
    with client.messages.stream(model=MODEL, messages=messages, max_tokens=16) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].type == "text" and final.content[0].text == text
    assert final.stop_reason == "max_tokens"  # the tiny model never ends: escalations used up
    assert {OverflowDetected, LevelApplied, Continued} <= kinds(events)
    assert messages == anthropic_chat()


def test_anthropic_a_cut_stream_goes_on_in_the_same_text_block(an: anthropic.Anthropic) -> None:
    events: list[Event] = []
    client = chatcli.wrap(an, on_event=events.append)
    question = [{"role": "user", "content": "Tell me a long story."}]
    with client.messages.stream(model=MODEL, messages=question, max_tokens=4) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["text"]  # one block, continued
    assert final.content[0].text == text
    assert {Escalated, Continued} <= kinds(events)
    assert final.usage.output_tokens > 4

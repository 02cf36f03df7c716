"""The Anthropic adapter, with the real `anthropic` SDK talking to a local replay server.

Bodies replayed are real: provider-errors.json, the SSE streams of tests/data/sse/ (each file
cites its source), and the tool-use response of Anthropic's docs below (once with its content
replaced by a summary's text, to answer a summary request).
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import AsyncIterator
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.compaction.prompt import summary_turn
from chatcli.config import CompactionConfig
from chatcli.errors import ErrorKind, ProviderError
from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall
from chatcli.providers.anthropic import Anthropic, wire_messages
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta, ToolSpec
from chatcli.recovery import Client
from chatcli.request_settings import Settings, output_reserve
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, adapters_closed, replay_server

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema
# anthropic 2.17's types have no temperature, top_p or top_k any more; the adapter sends a
# temperature the caller sets (in `extra_body`) all the same.
SAMPLING = "not in the SDK's MessageCreateParams; chatcli's adapter sends it"

KEY = "sk-ant-test-0123456789abcdef"

# Anthropic docs, tool use overview, example response (model claude-3-7-sonnet-20250219).
DOCS_TOOL_USE_RESPONSE = {
    "id": "msg_01Aq9w938a90dw8q",
    "model": "claude-3-7-sonnet-20250219",
    "stop_reason": "tool_use",
    "role": "assistant",
    "content": [
        {
            "type": "text",
            "text": "<thinking>I need to call the get_weather function, and the user wants SF,"
            " which is likely San Francisco, CA.</thinking>",
        },
        {
            "type": "tool_use",
            "id": "toolu_01A09q90qw90lq917835lq9",
            "name": "get_weather",
            "input": {"location": "San Francisco, CA", "unit": "celsius"},
        },
    ],
}

# The docs' error event (tests/data/sse/anthropic-error.txt) and the 529 it stands for.
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():
        yield


@pytest.fixture
def provider(server: ReplayServer) -> Anthropic:
    return Anthropic("claude-haiku-4-5", api_key=KEY, base_url=server.url)


def ask(text: str = "What is the weather like in San Francisco?") -> Request:
    return Request(messages=(Message.user(text),), max_tokens=1024)


def run_stream(provider: Anthropic, request: Request) -> list[StreamChunk]:
    return list(provider.stream(request))


async def run_astream(provider: Anthropic, request: Request) -> list[StreamChunk]:
    stream: AsyncIterator[StreamChunk] = provider.astream(request)
    return [chunk async for chunk in stream]


def final(chunks: list[StreamChunk]) -> Response:
    assert isinstance(chunks[-1], Response)
    assert not any(isinstance(c, Response) for c in chunks[:-1])
    return chunks[-1]


def deltas(chunks: list[StreamChunk]) -> str:
    return "".join(c.text for c in chunks if isinstance(c, TextDelta))


# -- errors: real bodies, real statuses -----------------------------------------------------

_ERROR_RECORDS = [
    r
    for r in provider_errors("anthropic", "aws-bedrock")
    if r["http_status"] is not None and r["http_status"] >= 400
]
_EXPECTED_KIND = {
    "context_overflow": ErrorKind.CONTEXT_OVERFLOW,
    "output_cap_error": ErrorKind.OUTPUT_CAP,
}
_NUMBER_FIELDS = ("prompt_tokens", "limit", "max_tokens", "output_limit", "requested_tokens")


def assert_classified(info: Any, record: dict[str, Any]) -> None:
    assert info.status == record["http_status"]
    if record["kind"] == "not_overflow":
        assert info.kind not in (ErrorKind.CONTEXT_OVERFLOW, ErrorKind.OUTPUT_CAP)
        if record["http_status"] == 429:
            assert info.kind in (ErrorKind.RATE_LIMIT, ErrorKind.QUOTA)
        if record["http_status"] == 413:
            assert info.kind is ErrorKind.PAYLOAD_TOO_LARGE
    else:
        assert info.kind is _EXPECTED_KIND[record["kind"]]
    for name, value in (record["numbers"] or {}).items():
        if name in _NUMBER_FIELDS:
            assert getattr(info, name) == value, name


@pytest.mark.parametrize("record", _ERROR_RECORDS, ids=[r["id"] for r in _ERROR_RECORDS])
def test_real_error_bodies_are_classified(
    server: ReplayServer, provider: Anthropic, record: dict[str, Any]
) -> None:
    server.add(replayed_error(record))
    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())
    assert type(caught.value.__cause__).__module__.startswith("anthropic")
    assert_classified(caught.value.info, record)
    assert len(server.requests) == 1  # the SDK does not retry on its own


@pytest.mark.parametrize("record", _ERROR_RECORDS[:3], ids=[r["id"] for r in _ERROR_RECORDS[:3]])
async def test_real_error_bodies_are_classified_async(
    server: ReplayServer, provider: Anthropic, record: dict[str, Any]
) -> None:
    server.add(replayed_error(record))
    with pytest.raises(ProviderError) as caught:
        await provider.acomplete(ask())
    assert_classified(caught.value.info, record)


def test_overloaded_529_is_transient_and_not_retried_by_the_sdk(
    server: ReplayServer, provider: Anthropic
) -> None:
    server.add(Scripted(status=529, body=OVERLOADED, headers={"retry-after": "7"}))
    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())
    assert caught.value.info.kind is ErrorKind.TRANSIENT
    assert caught.value.info.status == 529
    assert len(server.requests) == 1


def test_model_context_window_exceeded_stop_reason(
    server: ReplayServer, provider: Anthropic
) -> None:
    (record,) = [r for r in provider_errors("anthropic") if r["id"] == "pe-112"]
    server.add(Scripted(body=record["body"].encode(), headers={"content-type": "application/json"}))
    response = provider.complete(ask())
    assert response.stop_reason is StopReason.CONTEXT_WINDOW
    assert response.message.role is Role.ASSISTANT and response.message.text == ""


# -- request mapping: the JSON the SDK sent -------------------------------------------------

WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather in a given location",
    parameters={"type": "object", "properties": {"location": {"type": "string"}}},
)
THINKING = {"type": "thinking", "thinking": "Paris first.", "signature": "EqQBCgIYAhIM1gbc"}
REDACTED = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}


def conversation() -> tuple[Message, ...]:
    calls = (
        ToolCall(id="toolu_1", name="get_weather", arguments={"location": "Paris"}),
        ToolCall(id="toolu_2", name="get_weather", arguments={"location": "Rome"}),
    )
    assistant = Message(
        role=Role.ASSISTANT,
        parts=(TextPart(text="Checking both."),),
        tool_calls=calls,
        provider_details={"anthropic": {"thinking": [THINKING, REDACTED]}},
    )
    return (
        Message.system("You are terse."),
        Message.user("Weather in Paris"),
        Message.user("and Rome?"),
        assistant,
        Message.tool("toolu_1", "18C"),
        Message.tool("toolu_2", "no such city", is_error=True),
        Message.system("Answer in Celsius."),
        Message.user("Thanks."),
    )


@pytest.mark.sdk_schema(allow=("temperature",), why=SAMPLING)
def test_request_json_sent_by_the_sdk(server: ReplayServer, provider: Anthropic) -> None:
    server.add(Scripted(body=DOCS_TOOL_USE_RESPONSE))
    request = Request(
        messages=conversation(),
        max_tokens=300,
        tools=(WEATHER,),
        settings=Settings(temperature=0.2),
    )
    provider.complete(request)
    sent = server.requests[0].json()
    assert sent["system"] == [
        {"type": "text", "text": "You are terse."},
        {"type": "text", "text": "Answer in Celsius.", "cache_control": {"type": "ephemeral"}},
    ]
    assert sent["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather in Paris"},
                {"type": "text", "text": "and Rome?"},
            ],
        },
        {
            "role": "assistant",
            "content": [
                THINKING,
                REDACTED,
                {"type": "text", "text": "Checking both."},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "get_weather",
                    "input": {"location": "Paris"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_2",
                    "name": "get_weather",
                    "input": {"location": "Rome"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18C"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": "no such city",
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks.", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ]
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "Get the current weather in a given location",
            "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
        }
    ]
    assert (sent["max_tokens"], sent["temperature"], sent["model"]) == (
        300,
        0.2,
        "claude-haiku-4-5",
    )


def test_tool_use_response_becomes_a_tool_call(server: ReplayServer, provider: Anthropic) -> None:
    server.add(Scripted(body=DOCS_TOOL_USE_RESPONSE))
    response = provider.complete(ask())
    assert response.stop_reason is StopReason.TOOL_USE
    assert response.message.tool_calls == (
        ToolCall(
            id="toolu_01A09q90qw90lq917835lq9",
            name="get_weather",
            arguments={"location": "San Francisco, CA", "unit": "celsius"},
        ),
    )
    assert response.message.text.startswith("<thinking>I need to call")
    assert response.model == "claude-3-7-sonnet-20250219"


@pytest.mark.sdk_schema(allow=("top_k",), why="the test's own option, sent as given")
@pytest.mark.parametrize(
    ("cap", "settings", "expected"),
    [
        (2048, Settings(), 2048),  # a cap below the default reserve
        (64_000, Settings(), 4096),  # not the whole cap (issue 13): the planner's reserve
        (64_000, Settings(thinking_budget=2000), 6096),  # the budget counts inside max_tokens
        (5000, Settings(thinking_budget=2000), 5000),  # never past the cap
        (None, Settings(), 4096),  # unknown cap: the API still needs one
    ],
)
def test_max_tokens_default_is_the_planners_reserve(
    server: ReplayServer, cap: int | None, settings: Settings, expected: int
) -> None:
    provider = Anthropic("claude-x", api_key=KEY, base_url=server.url, max_output_tokens=cap)
    server.add(Scripted(body=DOCS_TOOL_USE_RESPONSE))
    request = Request(messages=(Message.user("hi"),), settings=settings, options={"top_k": 5})
    provider.complete(request)
    sent = server.requests[0].json()
    assert sent["max_tokens"] == expected
    # The same number the planner reserves (unknown cap: it reserves nothing).
    assert output_reserve(None, cap, settings) == (expected if cap is not None else None)
    assert sent["top_k"] == 5
    assert "system" not in sent and "tools" not in sent


# -- streaming ------------------------------------------------------------------------------


def test_stream_text(server: ReplayServer, provider: Anthropic) -> None:
    server.add(Scripted(events=sse_events("anthropic-text.txt")))
    chunks = run_stream(provider, ask())
    assert [c.text for c in chunks if isinstance(c, TextDelta)] == ["Hello", "!"]
    response = final(chunks)
    assert response.message.text == "Hello!"
    assert response.stop_reason is StopReason.END_TURN
    assert (response.usage.input_tokens, response.usage.output_tokens) == (25, 15)
    assert server.requests[0].json()["stream"] is True


async def test_astream_tool_use(server: ReplayServer, provider: Anthropic) -> None:
    server.add(Scripted(events=sse_events("anthropic-tool-use.txt")))
    chunks = await run_astream(provider, ask())
    response = final(chunks)
    assert deltas(chunks) == "I'll check the current weather in Paris for you."
    assert response.stop_reason is StopReason.TOOL_USE
    assert response.message.tool_calls == (
        ToolCall(
            id="toolu_01NRLabsLyVHZPKxbKvkfSMn", name="get_weather", arguments={"location": "Paris"}
        ),
    )
    assert (response.usage.input_tokens, response.usage.output_tokens) == (377, 65)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_stream_cut_by_max_tokens_inside_a_tool_call(
    server: ReplayServer, provider: Anthropic, mode: str
) -> None:
    server.add(Scripted(events=sse_events("anthropic-max-tokens-tool-use.txt")))
    request = ask()
    chunks = (
        run_stream(provider, request) if mode == "sync" else await run_astream(provider, request)
    )
    response = final(chunks)
    assert response.stop_reason is StopReason.MAX_TOKENS
    (call,) = response.message.tool_calls
    assert (call.id, call.name, call.incomplete, dict(call.arguments)) == (
        "toolu_01EKqbqmZrGRXy18eN7m9kvY",
        "make_file",
        True,
        {},
    )
    assert response.message.text.endswith("Let me do that for you now.")
    assert response.usage.output_tokens == 124


def test_non_stream_max_tokens_marks_the_last_tool_use(
    server: ReplayServer, provider: Anthropic
) -> None:
    cut = {**DOCS_TOOL_USE_RESPONSE, "stop_reason": "max_tokens"}
    server.add(Scripted(body=cut))
    response = provider.complete(ask())
    assert response.stop_reason is StopReason.MAX_TOKENS
    assert [c.incomplete for c in response.message.tool_calls] == [True]


def test_thinking_round_trips_through_provider_details(
    server: ReplayServer, provider: Anthropic
) -> None:
    server.add(Scripted(events=sse_events("anthropic-thinking.txt")))
    server.add(Scripted(body=DOCS_TOOL_USE_RESPONSE))
    response = final(run_stream(provider, ask("What is 27 * 453?")))
    assert response.message.text == "27 * 453 = 12,231"
    assert response.usage.input_tokens == 0  # this documented stream reports no usage
    next_turn = (Message.user("What is 27 * 453?"), response.message, Message.user("Sure?"))
    provider.complete(Request(messages=next_turn, max_tokens=100))
    assistant = server.requests[1].json()["messages"][1]
    thinking, text = assistant["content"]
    assert thinking["type"] == "thinking"
    assert thinking["signature"] == "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."
    assert thinking["thinking"].startswith("Let me solve this step by step:")
    assert thinking["thinking"].endswith("= 12,231")
    assert text == {"type": "text", "text": "27 * 453 = 12,231"}


def _opening_events() -> list[tuple[str | None, str]]:
    return sse_events("anthropic-text.txt")[:4]  # message_start .. the first text delta


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_error_event_in_stream_is_classified(
    server: ReplayServer, provider: Anthropic, mode: str
) -> None:
    server.add(Scripted(events=_opening_events() + sse_events("anthropic-error.txt")))
    with pytest.raises(ProviderError) as caught:
        if mode == "sync":
            run_stream(provider, ask())
        else:
            await run_astream(provider, ask())
    assert caught.value.info.kind is ErrorKind.TRANSIENT
    assert "Overloaded" in str(caught.value)


@pytest.mark.parametrize("close_early", [False, True], ids=["clean-end", "connection-drop"])
def test_stream_without_message_stop_raises(
    server: ReplayServer, provider: Anthropic, close_early: bool
) -> None:
    server.add(Scripted(events=_opening_events(), close_early=close_early))
    received: list[StreamChunk] = []
    with pytest.raises(ProviderError) as caught:
        for chunk in provider.stream(ask()):
            received.append(chunk)
    assert caught.value.info.kind is ErrorKind.TRANSIENT
    assert not any(isinstance(c, Response) for c in received)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_empty_stream_raises(server: ReplayServer, provider: Anthropic, mode: str) -> None:
    server.add(Scripted(events=[]))
    with pytest.raises(ProviderError) as caught:
        if mode == "sync":
            run_stream(provider, ask())
        else:
            await run_astream(provider, ask())
    assert caught.value.info.kind is ErrorKind.TRANSIENT
    assert "empty" in str(caught.value)


# -- keys -----------------------------------------------------------------------------------


def test_key_from_environment_and_never_shown(
    server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = Anthropic("claude-x", base_url=server.url, environ={"ANTHROPIC_API_KEY": KEY})
    server.add(
        Scripted(
            status=401,
            body={
                "type": "error",
                "error": {"type": "authentication_error", "message": "invalid x-api-key"},
            },
        )
    )
    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())
    sent_headers = json.dumps(server.requests[0].headers)
    assert KEY in sent_headers  # the key was used...
    shown = [
        repr(provider),
        str(caught.value),
        repr(caught.value.info),
        caplog.text,
        "".join(traceback.format_exception(caught.value)),
    ]
    assert not any(KEY in text for text in shown)  # ...and is nowhere to be seen


def test_connection_error_is_classified_without_the_key() -> None:
    with replay_server() as dead:
        url = dead.url  # the port is closed once the server stops
    provider = Anthropic("claude-x", api_key=KEY, base_url=url)
    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())
    assert caught.value.info.kind is ErrorKind.TRANSIENT
    assert KEY not in "".join(traceback.format_exception(caught.value))


def test_missing_key_names_the_variable() -> None:
    with pytest.raises(Exception, match="ANTHROPIC_API_KEY"):
        Anthropic("claude-x", environ={})


def test_declares_model_limits() -> None:
    provider = Anthropic("claude-x", api_key=KEY, context_window=200_000, max_output_tokens=64_000)
    assert (provider.context_window, provider.max_output_tokens) == (200_000, 64_000)


# -- wire_messages invariants ---------------------------------------------------------------

_texts = st.text(alphabet="ab ", max_size=3)
_messages = st.lists(
    st.one_of(
        _texts.map(Message.system),
        _texts.map(Message.user),
        st.tuples(_texts, st.booleans()).map(
            lambda t: Message.assistant(t[0], (ToolCall(id=f"c{len(t[0])}", name="f"),) * t[1])
        ),
        st.tuples(_texts, st.booleans()).map(lambda t: Message.tool("c1", t[0], is_error=t[1])),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(_messages)
def test_wire_messages_invariants(messages: list[Message]) -> None:
    before = list(messages)
    system, turns = wire_messages(messages)
    assert messages == before  # input untouched
    assert [b["text"] for b in system] == [
        m.text for m in messages if m.role is Role.SYSTEM and m.text
    ]
    roles = [t["role"] for t in turns]
    assert all(a != b for a, b in pairwise(roles))  # roles alternate
    blocks = [b for t in turns for b in t["content"]]
    assert all(b["type"] != "text" or b["text"] for b in blocks)  # no empty text block
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert len(results) == sum(m.role is Role.TOOL for m in messages)
    for turn in turns:
        kinds = [b["type"] == "tool_result" for b in turn["content"]]
        assert kinds == sorted(kinds, reverse=True)  # tool results lead a user turn
        assert turn["role"] == "user" or not any(kinds)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_complete_with_a_large_max_tokens_is_streamed(
    server: ReplayServer, provider: Anthropic, mode: str
) -> None:
    """The SDK refuses non-streaming calls it expects to take over 10 minutes (max_tokens
    above ~21k); escalation reaches 64k on recent models, so complete() streams those."""
    server.add(Scripted(events=sse_events("anthropic-text.txt")))
    request = Request(messages=(Message.user("hi"),), max_tokens=64_000)
    response = provider.complete(request) if mode == "sync" else await provider.acomplete(request)
    assert response.message.text == "Hello!"
    sent = server.requests[0].json()
    assert sent["stream"] is True and sent["max_tokens"] == 64_000


# -- the compaction call on the warm prefix --------------------------------------------------

WARM_SUMMARY = (
    "## User's goal\nThe weather in Paris and Rome.\n"
    "## Explicit instructions and constraints\nAnswer in Celsius.\n"
    "## Decisions made\nChecking both with get_weather.\n"
    "## Files and resources touched\nNone.\n"
    "## Errors and how they were solved\nRome: no such city.\n"
    "## Done and pending\nParis is 18C; Rome is pending.\n"
    "## Current step\nThe weather in San Francisco."
)


def test_a_compaction_on_the_warm_prefix_repeats_the_last_body(
    server: ReplayServer, provider: Anthropic
) -> None:
    """The summary request's body repeats the last request's byte for byte (as the SDK wrote
    both) up to its end, cache breakpoints included, then the answer and the summary turn."""
    summary = {**DOCS_TOOL_USE_RESPONSE, "stop_reason": "end_turn"}
    summary["content"] = [{"type": "text", "text": WARM_SUMMARY}]
    server.add(Scripted(body=DOCS_TOOL_USE_RESPONSE), Scripted(body=summary))
    earlier = (
        Message.user("Tell me how the weather in Paris changes. " * 40),
        Message.assistant("Paris is mild in spring and rainy in autumn. " * 40),
    )
    messages = (conversation()[0], *earlier, *conversation()[1:])
    client = Client(provider, microcompact=None)
    reply = client.send(messages, tools=(WEATHER,), settings=Settings(tool_choice="auto"))
    result = client.compact((*messages, reply.message))
    before, after = (r.json() for r in server.requests)
    sent = len(before["messages"])
    assert json.dumps(after["messages"][:sent]) == json.dumps(before["messages"])
    opened = json.dumps(before["messages"], separators=(",", ":"))[:-1].encode()  # no "]"
    assert all(opened in r.body for r in server.requests)  # the very bytes, in both bodies
    assert before["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    for field in ("system", "tools", "tool_choice", "model"):
        assert json.dumps(after[field]) == json.dumps(before[field])
    answer, asked = after["messages"][sent:]
    assert answer["content"][-1]["name"] == "get_weather"  # the answer since, a tool call
    assert asked["role"] == "user" and asked["content"][0]["type"] == "tool_result"
    assert asked["content"][-1] == {
        "type": "text",
        "text": summary_turn(None, structured=False).text,
    }
    assert "cache_control" not in json.dumps(after["messages"][sent:])  # nothing new written
    assert after["max_tokens"] == CompactionConfig().summary_tokens  # the summary's
    assert result.report.warm and result.report.summary == WARM_SUMMARY

"""The OpenAI adapter (Chat Completions and Responses API) against the real SDK and replayed bodies.

Every body served here was recorded from the real API (sources in each file header or comment),
or is a record of tests/data/provider-errors.json (or ../shared/data when the copy is absent);
one answers a summary request: a recorded body whose text is replaced by a summary's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.compaction.prompt import summary_turn
from chatcli.config import CompactionConfig
from chatcli.errors import ConfigError, ErrorKind, ProviderError
from chatcli.messages import Message, StopReason, ToolCall
from chatcli.providers.base import Request, Response, TextDelta, ToolCallDelta, ToolSpec
from chatcli.providers.openai import OpenAI, OpenAIBase, parse_tool_call, prompt_cache_key
from chatcli.recovery import Client
from chatcli.request_settings import Settings
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, adapters_closed, replay_server

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

KEY = "sk-test-5f3c9a1e7b2d4c6e8f0a1b3c5d7e9f10"
MODES = ("sync", "async")
# provider-errors.json `numbers` keys that are ErrorInfo fields (others describe look-alikes).
NUMBER_FIELDS = ("prompt_tokens", "limit", "max_tokens", "output_limit", "requested_tokens")
OPENAI_PROVIDERS = ("openai", "azure-openai", "azure-ai-inference", "anthropic-openai-compat")


# --- shared helpers (also used by test_openai_compat_adapter) ------------------------------


def record(record_id: str, provider: str = "openai") -> dict[str, Any]:
    return next(r for r in provider_errors(provider) if r["id"] == record_id)


def error_records(*providers: str) -> list[Any]:
    """Records of `providers` with a real HTTP error status, as pytest params."""
    return [
        pytest.param(r, id=f"{r['id']}-{r['provider']}")
        for r in provider_errors(*providers)
        if (r["http_status"] or 0) >= 400
    ]


def assert_classified(error: ProviderError, record: dict[str, Any]) -> None:
    """Kind as the record says (look-alikes: anything but overflow), with its stated numbers."""
    info = error.info
    assert info.status == record["http_status"]
    if record["kind"] == "not_overflow":
        assert info.kind is not ErrorKind.CONTEXT_OVERFLOW, (record["id"], info)
        return
    expected = {
        "context_overflow": ErrorKind.CONTEXT_OVERFLOW,
        "output_cap_error": ErrorKind.OUTPUT_CAP,
    }
    assert info.kind is expected[record["kind"]], (record["id"], info)
    for key, value in (record["numbers"] or {}).items():
        if key in NUMBER_FIELDS and isinstance(value, int):
            assert getattr(info, key) == value, (record["id"], key)


async def ask(provider: OpenAIBase, request: Request, mode: str) -> Response:
    if mode == "sync":
        return provider.complete(request)
    return await provider.acomplete(request)


async def ask_stream(provider: OpenAIBase, request: Request, mode: str) -> tuple[str, Response]:
    """The streamed text (deltas joined) and the final Response, checking the chunk protocol."""
    if mode == "sync":
        chunks = list(provider.stream(request))
    else:
        chunks = [chunk async for chunk in provider.astream(request)]
    *deltas, final = chunks
    assert all(isinstance(d, TextDelta | ToolCallDelta) for d in deltas)
    assert isinstance(final, Response)
    return "".join(d.text for d in deltas if isinstance(d, TextDelta)), final


def user(text: str = "What's the weather like in SF?") -> Request:
    return Request(messages=(Message.user(text),))


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():
        yield


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _openai(server: ReplayServer, api: str) -> OpenAI:
    return OpenAI("gpt-4o", api=api, api_key=KEY, base_url=server.url + "/v1", environ={})  # type: ignore[arg-type]


@pytest.fixture
async def chat(server: ReplayServer) -> AsyncIterator[OpenAI]:
    provider = _openai(server, "chat")
    yield provider
    provider.close()
    await provider.aclose()


@pytest.fixture
async def responses(server: ReplayServer) -> AsyncIterator[OpenAI]:
    provider = _openai(server, "responses")
    yield provider
    provider.close()
    await provider.aclose()


# --- Chat Completions ----------------------------------------------------------------------

# openai/openai-python tests/lib/chat/test_completions.py::test_parse_nothing (live snapshot).
CHAT_TEXT = {"id": "chatcmpl-ABfvaueLEMLNYbT8YzpJxsmiQ6HSY", "object": "chat.completion", "created": 1727346142, "model": "gpt-4o-2024-08-06", "choices": [{"index": 0, "message": {"role": "assistant", "content": "I'm unable to provide real-time weather updates. To get the current weather in San Francisco, I recommend checking a reliable weather website or app like the Weather Channel or a local news station.", "refusal": None}, "logprobs": None, "finish_reason": "stop"}], "usage": {"prompt_tokens": 14, "completion_tokens": 37, "total_tokens": 51, "completion_tokens_details": {"reasoning_tokens": 0}}, "system_fingerprint": "fp_b40fb1c6fb"}  # noqa: E501  # fmt: skip
# Same file, test_parse_multiple_pydantic_tools (live snapshot): two parallel tool calls.
CHAT_TOOLS = {"id": "chatcmpl-ABfvyvfNWKcl7Ohqos4UFrmMs1v4C", "object": "chat.completion", "created": 1727346166, "model": "gpt-4o-2024-08-06", "choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [{"id": "call_fdNz3vOBKYgOIpMdWotB9MjY", "type": "function", "function": {"name": "GetWeatherArgs", "arguments": "{\"city\": \"Edinburgh\", \"country\": \"GB\", \"units\": \"c\"}"}}, {"id": "call_h1DWI1POMJLb0KwIyQHWXD4p", "type": "function", "function": {"name": "get_stock_price", "arguments": "{\"ticker\": \"AAPL\", \"exchange\": \"NASDAQ\"}"}}], "refusal": None}, "logprobs": None, "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 149, "completion_tokens": 60, "total_tokens": 209, "completion_tokens_details": {"reasoning_tokens": 0}}, "system_fingerprint": "fp_b40fb1c6fb"}  # noqa: E501  # fmt: skip


async def test_chat_text_answer_and_request(chat: OpenAI, server: ReplayServer, mode: str) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    request = Request(
        messages=(Message.system("Be brief."), Message.user("What's the weather like in SF?")),
        max_tokens=100,
        settings=Settings(temperature=0.2),
    )
    response = await ask(chat, request, mode)
    assert response.message.text.startswith("I'm unable to provide real-time weather updates.")
    assert response.stop_reason is StopReason.END_TURN
    assert (response.usage.prompt_tokens, response.usage.output_tokens) == (14, 37)
    assert response.model == "gpt-4o-2024-08-06"
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.json() == {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What's the weather like in SF?"},
        ],
        "max_completion_tokens": 100,
        "temperature": 0.2,
        "prompt_cache_key": prompt_cache_key(request.messages),
    }


async def test_chat_tool_calls_both_ways(chat: OpenAI, server: ReplayServer, mode: str) -> None:
    server.add(Scripted(body=CHAT_TOOLS))
    call = ToolCall(id="call_1", name="get_weather", arguments={"city": "Edinburgh"})
    request = Request(
        messages=(
            Message.user("Weather in Edinburgh?"),
            Message.assistant("Checking.", tool_calls=(call,)),
            Message.tool("call_1", "12 C, rain"),
        ),
        tools=(ToolSpec(name="get_weather", description="Weather", parameters={"type": "object"}),),
    )
    response = await ask(chat, request, mode)
    body = server.requests[0].json()
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Edinburgh"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "12 C, rain"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert response.stop_reason is StopReason.TOOL_USE
    calls = response.message.tool_calls
    assert [(c.id, c.name, dict(c.arguments)) for c in calls] == [
        ("call_fdNz3vOBKYgOIpMdWotB9MjY", "GetWeatherArgs",
         {"city": "Edinburgh", "country": "GB", "units": "c"}),
        ("call_h1DWI1POMJLb0KwIyQHWXD4p", "get_stock_price",
         {"ticker": "AAPL", "exchange": "NASDAQ"}),
    ]  # fmt: skip
    assert not any(c.incomplete for c in calls)


async def test_chat_stream_text(chat: OpenAI, server: ReplayServer, mode: str) -> None:
    server.add(Scripted(events=sse_events("openai-chat-text.txt")))
    text, response = await ask_stream(chat, user(), mode)
    assert text == response.message.text
    assert text.endswith("or a local San Francisco news station.")
    assert response.stop_reason is StopReason.END_TURN
    assert (response.usage.prompt_tokens, response.usage.output_tokens) == (14, 47)
    body = server.requests[0].json()
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_chat_stream_finish_reason_length(
    chat: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(events=sse_events("openai-chat-length.txt")))
    text, response = await ask_stream(chat, Request(messages=user().messages, max_tokens=1), mode)
    assert text == '{"'
    assert response.stop_reason is StopReason.MAX_TOKENS
    assert response.usage.output_tokens == 1
    assert server.requests[0].json()["max_completion_tokens"] == 1


async def test_chat_stream_accumulates_tool_call_deltas(
    chat: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(events=sse_events("openai-chat-tool-calls.txt")))
    text, response = await ask_stream(chat, user(), mode)
    assert text == ""
    assert response.stop_reason is StopReason.TOOL_USE
    calls = response.message.tool_calls
    assert [(c.id, c.name, dict(c.arguments)) for c in calls] == [
        ("call_lQnnsesjFMWMQ5IeWPHzR4th", "GetWeatherArgs",
         {"city": "Edinburgh", "country": "UK", "units": "c"}),
        ("call_2xjOUgaCdiwAcl9ZBL9LyMUU", "get_stock_price",
         {"ticker": "AAPL", "exchange": "NASDAQ"}),
    ]  # fmt: skip


@pytest.mark.parametrize("close_early", [False, True], ids=["body-ends", "connection-drops"])
async def test_chat_stream_without_terminator_raises(
    chat: OpenAI, server: ReplayServer, mode: str, close_early: bool
) -> None:
    # The real stream cut before its finish_reason chunk: the body ends cleanly there, or the
    # connection drops (the SDK raises a connection error, translated as well).
    events = sse_events("openai-chat-text.txt")[:-3]
    server.add(Scripted(events=events, close_early=close_early))
    with pytest.raises(ProviderError, match="onnection" if close_early else "terminator") as e:
        await ask_stream(chat, user(), mode)
    assert e.value.info.kind is ErrorKind.TRANSIENT  # worth a retry, never a silent answer


async def test_chat_in_stream_error_is_classified(
    chat: OpenAI, server: ReplayServer, mode: str
) -> None:
    # The stream is read as the server's JSON (no typed chunk per event); an error event after
    # the answer began is still raised by the SDK's own stream, and classified. The body is
    # pe-041 (a real llama-server overflow), as a data event after the recorded opening.
    body = record("pe-041", "llama.cpp-server")["body"]
    server.add(Scripted(events=[*sse_events("openai-chat-text.txt")[:2], body]))
    with pytest.raises(ProviderError) as caught:
        await ask_stream(chat, user(), mode)
    info = caught.value.info
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert (info.prompt_tokens, info.limit) == (14429, 8192)


async def test_chat_empty_stream_raises(chat: OpenAI, server: ReplayServer, mode: str) -> None:
    server.add(Scripted(events=[]))
    with pytest.raises(ProviderError, match="empty event stream") as e:
        await ask_stream(chat, user(), mode)
    assert e.value.info.kind is ErrorKind.TRANSIENT


def test_cut_off_tool_arguments_are_incomplete_and_kept() -> None:
    # Prefixes of the real streamed arguments of openai-chat-tool-calls.txt.
    cut = parse_tool_call("call_1", "GetWeatherArgs", '{"city": "Edinb', truncated=True)
    assert cut.incomplete and dict(cut.arguments) == {}
    assert cut.provider_details == {"raw_arguments": '{"city": "Edinb'}
    empty = parse_tool_call("call_2", "get_stock_price", "", truncated=True)
    assert empty.incomplete
    assert not parse_tool_call("call_3", "noargs", "", truncated=False).incomplete


@settings(max_examples=60)
@given(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), min_size=1))
def test_any_strict_prefix_of_arguments_is_incomplete(arguments: dict[str, Any]) -> None:
    raw = json.dumps(arguments)
    whole = parse_tool_call("c", "f", raw, truncated=True)
    assert not whole.incomplete and dict(whole.arguments) == arguments
    for end in range(len(raw)):
        call = parse_tool_call("c", "f", raw[:end], truncated=True)
        assert call.incomplete
        assert call.provider_details == {"raw_arguments": raw[:end]}


# --- Responses API -------------------------------------------------------------------------

# openai/openai-python tests/lib/responses/test_responses.py::test_output_text (live snapshot).
RESPONSES_TEXT = {"id": "resp_689a0b2545288193953c892439b42e2800b2e36c65a1fd4b", "object": "response", "created_at": 1754925861, "status": "completed", "background": False, "error": None, "incomplete_details": None, "instructions": None, "max_output_tokens": None, "max_tool_calls": None, "model": "gpt-4o-mini-2024-07-18", "output": [{"id": "msg_689a0b2637b08193ac478e568f49e3f900b2e36c65a1fd4b", "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "I can't provide real-time updates, but you can easily check the current weather in San Francisco using a weather website or app. Typically, San Francisco has cool, foggy summers and mild winters, so it's good to be prepared for variable weather!"}], "role": "assistant"}], "parallel_tool_calls": True, "previous_response_id": None, "prompt_cache_key": None, "reasoning": {"effort": None, "summary": None}, "safety_identifier": None, "service_tier": "default", "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto", "tools": [], "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled", "usage": {"input_tokens": 14, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 50, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 64}, "user": None, "metadata": {}}  # noqa: E501  # fmt: skip
# coder/aibridge fixtures/openai/responses/blocking/cached_input_tokens.txtar (live recording):
# 11,904 of 12,033 input tokens were cache reads.
RESPONSES_CACHED = {"id": "resp_0cd5d6b8310055d600696a1776b42c81a199fbb02248a8bfa0", "object": "response", "created_at": 1768560502, "status": "completed", "background": False, "billing": {"payer": "developer"}, "completed_at": 1768560504, "error": None, "frequency_penalty": 0.0, "incomplete_details": None, "instructions": None, "max_output_tokens": None, "max_tool_calls": None, "model": "gpt-4.1-2025-04-14", "output": [{"id": "msg_0cd5d6b8310055d600696a177708b881a1bb53034def764104", "type": "message", "status": "completed", "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": "- I provide clear, accurate, and concise answers tailored to your requests.\n- I can process and summarize large volumes of information quickly.\n- I adapt my responses based on your needs and instructions for precision and relevance."}], "role": "assistant"}], "parallel_tool_calls": True, "presence_penalty": 0.0, "previous_response_id": None, "prompt_cache_key": "key-123", "prompt_cache_retention": "24h", "reasoning": {"effort": None, "summary": None}, "safety_identifier": None, "service_tier": "default", "store": True, "temperature": 1.0, "text": {"format": {"type": "text"}, "verbosity": "medium"}, "tool_choice": "auto", "tools": [], "top_logprobs": 0, "top_p": 1.0, "truncation": "disabled", "usage": {"input_tokens": 12033, "input_tokens_details": {"cached_tokens": 11904}, "output_tokens": 44, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12077}, "user": None, "metadata": {}}  # noqa: E501  # fmt: skip


async def test_responses_text_answer_and_request(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(body=RESPONSES_TEXT))
    request = Request(
        messages=(Message.system("Be brief."), Message.user("What's the weather like in SF?")),
        max_tokens=300,
    )
    response = await ask(responses, request, mode)
    assert response.message.text.startswith("I can't provide real-time updates")
    assert response.stop_reason is StopReason.END_TURN
    assert (response.usage.prompt_tokens, response.usage.output_tokens) == (14, 50)
    sent = server.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.json() == {
        "model": "gpt-4o",
        "input": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What's the weather like in SF?"},
        ],
        "max_output_tokens": 300,
        "prompt_cache_key": prompt_cache_key(request.messages),
    }


async def test_responses_cached_tokens(responses: OpenAI, server: ReplayServer, mode: str) -> None:
    server.add(Scripted(body=RESPONSES_CACHED))
    usage = (await ask(responses, user(), mode)).usage
    assert (usage.input_tokens, usage.cache_read_tokens) == (12033 - 11904, 11904)
    assert usage.prompt_tokens == 12033
    assert usage.output_tokens == 44


async def test_responses_stream_text(responses: OpenAI, server: ReplayServer, mode: str) -> None:
    server.add(Scripted(events=sse_events("openai-responses-text.txt")))
    text, response = await ask_stream(responses, user(), mode)
    assert (
        text
        == "I'm an artificial intelligence trained to assist with tasks and provide information."
    )
    assert response.message.text == text
    assert response.stop_reason is StopReason.END_TURN
    assert (response.usage.prompt_tokens, response.usage.output_tokens) == (10, 16)
    assert server.requests[0].json()["stream"] is True


async def test_responses_stream_reasoning_tokens(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(events=sse_events("openai-responses-reasoning-tokens.txt")))
    _, response = await ask_stream(responses, user(), mode)
    assert (response.usage.output_tokens, response.usage.reasoning_tokens) == (719, 704)
    assert response.stop_reason is StopReason.TOOL_USE
    (call,) = response.message.tool_calls
    assert (call.id, call.name, dict(call.arguments)) == (
        "call_Kfzsl8lPJayEwvd0rkI7731q",
        "weather",
        {"city": "Detroit"},
    )


async def test_responses_encrypted_reasoning_round_trip(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(
        Scripted(events=sse_events("openai-responses-reasoning-tool.txt")),
        Scripted(body=RESPONSES_TEXT),
    )
    _, first = await ask_stream(responses, user("Weather in New York City, USA?"), mode)
    (reasoning,) = first.message.provider_details["openai_reasoning"]  # type: ignore[index]
    assert reasoning["id"] == "rs_68d83517d32481a3a885d6180985b19505b5406cc515b605"
    assert reasoning["encrypted_content"].startswith("gAAAAABo2DUYx-Tdv1e4")
    (call,) = first.message.tool_calls
    follow_up = Request(
        messages=(
            Message.user("Weather in New York City, USA?"),
            first.message,
            Message.tool(call.id, "Sunny"),
        )
    )
    await ask(responses, follow_up, mode)
    sent = server.requests[1].json()["input"]
    assert sent[1] == reasoning  # verbatim, encrypted content included
    assert sent[2:] == [
        {
            "type": "function_call",
            "call_id": "call_zmgkl7rFpA4eOyUO0SamopGI",
            "name": "get_weather",
            "arguments": '{"location":"New York City, USA"}',
            "id": "fc_68d8351802e881a3aeaf0e594cbdc6d505b5406cc515b605",
        },
        {"type": "function_call_output", "call_id": "call_zmgkl7rFpA4eOyUO0SamopGI",
         "output": "Sunny"},
    ]  # fmt: skip


async def test_responses_tools_are_sent_non_strict(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(body=RESPONSES_TEXT))
    tool = ToolSpec(name="get_weather", description="Weather", parameters={"type": "object"})
    await ask(responses, Request(messages=user().messages, tools=(tool,)), mode)
    assert server.requests[0].json()["tools"] == [
        {"type": "function", "name": "get_weather", "description": "Weather",
         "parameters": {"type": "object"}, "strict": False}
    ]  # fmt: skip


def _as_incomplete(events: list[Any]) -> list[Any]:
    """The recorded text stream ending in `response.incomplete` instead of `.completed`.

    The terminal event keeps the recorded response and takes status/incomplete_details from
    record pe-109 of provider-errors.json (the openai-python type of an output-limit stop).
    """
    pe109 = json.loads(record("pe-109", "openai-responses")["body"])
    _, data = events[-1]
    final = json.loads(data)
    final["type"] = "response.incomplete"
    final["response"].update(pe109)
    return [*events[:-1], ("response.incomplete", json.dumps(final))]


async def test_responses_stream_incomplete_is_max_tokens(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(events=_as_incomplete(sse_events("openai-responses-text.txt"))))
    text, response = await ask_stream(responses, user(), mode)
    assert response.stop_reason is StopReason.MAX_TOKENS
    assert response.message.text == text != ""


async def test_responses_in_stream_error_is_classified(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(events=sse_events("openai-responses-error-quota.txt")))
    with pytest.raises(ProviderError) as caught:
        await ask_stream(responses, user(), mode)
    assert "exceeded your current quota" in str(caught.value)
    assert caught.value.info.kind is ErrorKind.QUOTA


async def test_responses_in_stream_overflow_is_classified(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    # pe-021 was observed wrapped in a client's `{"error": event}`; the event itself is inside.
    event = json.loads(record("pe-021", "openai-responses")["body"])["error"]
    opening = sse_events("openai-responses-error-quota.txt")[:2]  # created, in_progress
    server.add(Scripted(events=[*opening, json.dumps(event)]))
    with pytest.raises(ProviderError) as caught:
        await ask_stream(responses, user(), mode)
    assert caught.value.info.kind is ErrorKind.CONTEXT_OVERFLOW


async def test_responses_stream_without_terminator_raises(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    events = sse_events("openai-responses-text.txt")[:-1]  # everything but response.completed
    server.add(Scripted(events=events))
    with pytest.raises(ProviderError, match="terminator"):
        await ask_stream(responses, user(), mode)


async def test_responses_empty_stream_raises(
    responses: OpenAI, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(events=[]))
    with pytest.raises(ProviderError, match="empty event stream"):
        await ask_stream(responses, user(), mode)


# --- errors --------------------------------------------------------------------------------


@pytest.mark.parametrize("body", error_records(*OPENAI_PROVIDERS))
async def test_real_error_bodies_are_classified(
    chat: OpenAI, server: ReplayServer, mode: str, body: dict[str, Any]
) -> None:
    server.add(replayed_error(body))
    with pytest.raises(ProviderError) as caught:
        await ask(chat, user(), mode)
    assert_classified(caught.value, body)
    assert len(server.requests) == 1  # max_retries=0: chatcli's Client owns retries


async def test_connection_error_is_a_provider_error(mode: str) -> None:
    with replay_server() as gone:
        url = gone.url
    provider = OpenAI("gpt-4o", api_key=KEY, base_url=url + "/v1", environ={}, timeout=5)
    with pytest.raises(ProviderError) as caught:
        await ask(provider, user(), mode)
    provider.close()
    await provider.aclose()
    assert caught.value.info.kind is ErrorKind.TRANSIENT


# --- keys ----------------------------------------------------------------------------------


async def test_key_is_sent_but_never_shown(
    chat: OpenAI, server: ReplayServer, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(replayed_error(record("pe-056")))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ProviderError) as caught:
        await ask(chat, user(), mode)
    assert {k.lower(): v for k, v in server.requests[0].headers.items()}[
        "authorization"
    ] == f"Bearer {KEY}"
    error = caught.value
    shown = [repr(chat), str(chat), str(error), repr(error), repr(error.info),
             str(error.__cause__), repr(error.__cause__), caplog.text]  # fmt: skip
    assert caplog.records  # the SDK did log the request: the check below is not vacuous
    assert not [s for s in shown if KEY in s]


def test_key_comes_from_environ_and_is_required() -> None:
    provider = OpenAI("gpt-4o", environ={"OPENAI_API_KEY": KEY})
    assert KEY not in repr(provider)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as caught:
        OpenAI("gpt-4o", environ={})
    assert KEY not in str(caught.value)


def test_unknown_api_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="api="):
        OpenAI("gpt-4o", api="completions", api_key=KEY)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "schema"),
    [
        ("gpt-5-mini", True),
        ("gpt-4o", True),
        ("gpt-4.1", True),
        ("o3", True),
        ("gpt-4", False),
        ("gpt-4-turbo", False),
        ("gpt-3.5-turbo", False),
    ],
)
def test_structured_outputs_are_declared_where_the_model_takes_a_schema(
    model: str, schema: bool
) -> None:
    assert OpenAI(model, api_key=KEY).structured_output_supported() is schema


def test_declares_model_limits() -> None:
    provider = OpenAI("gpt-4o", api_key=KEY, context_window=128_000, max_output_tokens=16_384)
    assert (provider.context_window, provider.max_output_tokens) == (128_000, 16_384)


# --- the compaction call on the warm prefix ---------------------------------------------------

WARM_SUMMARY = (
    "## User's goal\nThe weather in San Francisco.\n"
    "## Explicit instructions and constraints\nAnswer in one line.\n"
    "## Decisions made\nPoint to a weather website or app.\n"
    "## Files and resources touched\nNone.\n"
    "## Errors and how they were solved\nNo real-time weather updates.\n"
    "## Done and pending\nThe advice is given; the forecast is pending.\n"
    "## Current step\nChecking the Weather Channel."
)


async def test_a_compaction_on_the_warm_prefix_repeats_the_last_body(
    chat: OpenAI, server: ReplayServer, mode: str
) -> None:
    """The summary request's body repeats the last request's messages byte for byte (as the
    SDK wrote both), its tools, settings and cache key, then the answer and the summary
    turn; no schema (OpenAI puts one before the system message: the prefix would change)."""
    summary = json.loads(json.dumps(CHAT_TEXT))
    summary["choices"][0]["message"]["content"] = WARM_SUMMARY
    server.add(Scripted(body=CHAT_TEXT), Scripted(body=summary))
    messages = (
        Message.system("Answer in one line."),
        Message.user("Tell me how the weather in San Francisco changes. " * 40),
        Message.assistant("San Francisco is foggy in summer and mild in winter. " * 40),
        Message.user("What's the weather like in SF?"),
    )
    tool = ToolSpec(name="get_weather", parameters={"type": "object", "properties": {}})
    client = Client(chat, microcompact=None)
    args: dict[str, Any] = {"tools": (tool,), "settings": Settings(temperature=0.2)}
    if mode == "sync":
        reply = client.send(messages, **args)
        result = client.compact((*messages, reply.message))
    else:
        reply = await client.asend(messages, **args)
        result = await client.acompact((*messages, reply.message))
    before, after = (r.json() for r in server.requests)
    sent = len(before["messages"])
    opened = json.dumps(before["messages"], separators=(",", ":"))[:-1].encode()  # no "]"
    assert all(opened in r.body for r in server.requests)  # the very bytes, in both bodies
    for field in ("tools", "temperature", "prompt_cache_key", "model"):
        assert json.dumps(after[field]) == json.dumps(before[field])
    answer, asked = after["messages"][sent:]
    assert answer == {"role": "assistant", "content": reply.message.text}
    assert asked == {"role": "user", "content": summary_turn(None, structured=False).text}
    assert "response_format" not in after and chat.structured_output_supported()
    assert after["max_completion_tokens"] == CompactionConfig().summary_tokens
    assert result.report.warm and result.report.summary == WARM_SUMMARY

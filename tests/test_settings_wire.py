"""Every `Settings` field reaches the wire, through the official SDKs against the replay server.

For each API (OpenAI Chat Completions and Responses, Anthropic, Gemini, an OpenAI-compatible
server) a request with the settings that API takes is sent, and the body the SDK put on the
wire is compared with what the API documents; the settings an API cannot take are a clear
error, or a logged drop. The answers replayed are the adapters' own recorded bodies.
Also here: one SDK client per adapter (many calls, one connection) and the prompt caches
(Anthropic breakpoints with cache usage in the answer, OpenAI's prompt_cache_key).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chatcli.errors import ConfigError
from chatcli.messages import Message
from chatcli.providers.adapter import Adapter
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import Request, Response, ToolCallDelta, ToolSpec
from chatcli.providers.gemini import Gemini
from chatcli.providers.openai import OpenAI, prompt_cache_key
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.request_settings import Settings, UnsupportedSetting
from tests.recorded import sse_events
from tests.replay import ReplayServer, Scripted, adapters_closed
from tests.test_anthropic_adapter import DOCS_TOOL_USE_RESPONSE
from tests.test_openai_adapter import CHAT_TEXT, RESPONSES_TEXT

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather in a city",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
SCHEMA = {
    "title": "Weather report",
    "type": "object",
    "properties": {"city": {"type": "string"}, "celsius": {"type": "number"}},
    "required": ["city", "celsius"],
}
MESSAGES = (Message.system("Be brief."), Message.user("Weather in Paris?"))


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():
        yield


def request(settings: Settings, *, tools: bool = True) -> Request:
    return Request(
        messages=MESSAGES, max_tokens=500, tools=(WEATHER,) if tools else (), settings=settings
    )


def openai(server: ReplayServer, api: str = "chat", **kwargs: Any) -> OpenAI:
    return OpenAI(
        "gpt-5", api=api, api_key="sk-test", base_url=server.url + "/v1", environ={}, **kwargs
    )  # type: ignore[arg-type]


def anthropic(server: ReplayServer, **kwargs: Any) -> Anthropic:
    return Anthropic("claude-haiku-4-5", api_key="sk-ant-test", base_url=server.url, **kwargs)


def gemini(server: ReplayServer) -> Gemini:
    return Gemini("gemini-2.5-flash", api_key="AIza-test", base_url=server.url)


def compat(server: ReplayServer) -> OpenAICompatible:
    return OpenAICompatible(server.url + "/v1", "local-model", environ={})


# -- every setting on the wire --------------------------------------------------------------


def test_openai_chat_completions_takes_every_setting(server: ReplayServer) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    settings = Settings(
        temperature=0.3,
        top_p=0.9,
        stop=("END", "STOP"),
        seed=7,
        tool_choice="get_weather",
        parallel_tool_calls=False,
        response_format=SCHEMA,
        reasoning_effort="low",
        extra={"service_tier": "flex", "temperature": 0.4},  # extra wins
    )
    openai(server).complete(request(settings))
    sent = server.requests[0].json()
    assert {k: v for k, v in sent.items() if k not in ("model", "messages", "tools")} == {
        "max_completion_tokens": 500,
        "temperature": 0.4,
        "top_p": 0.9,
        "stop": ["END", "STOP"],
        "seed": 7,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "parallel_tool_calls": False,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "Weather_report", "schema": SCHEMA},
        },
        "reasoning_effort": "low",
        "service_tier": "flex",
        "prompt_cache_key": prompt_cache_key(MESSAGES),
    }


def test_openai_responses_takes_its_settings(server: ReplayServer) -> None:
    server.add(Scripted(body=RESPONSES_TEXT), Scripted(body=RESPONSES_TEXT))
    settings = Settings(
        temperature=0.3,
        top_p=0.9,
        tool_choice="required",
        parallel_tool_calls=True,
        response_format=SCHEMA,
        reasoning_effort="high",
        extra={"truncation": "auto"},
    )
    provider = openai(server, api="responses")
    provider.complete(request(settings))
    provider.complete(request(Settings(response_format="json", tool_choice="get_weather")))
    sent, second = (r.json() for r in server.requests)
    assert {k: v for k, v in sent.items() if k not in ("model", "input", "tools")} == {
        "max_output_tokens": 500,
        "temperature": 0.3,
        "top_p": 0.9,
        "tool_choice": "required",
        "parallel_tool_calls": True,
        "text": {"format": {"type": "json_schema", "name": "Weather_report", "schema": SCHEMA}},
        "reasoning": {"effort": "high"},
        "truncation": "auto",
        "prompt_cache_key": prompt_cache_key(MESSAGES),
    }
    assert second["text"] == {"format": {"type": "json_object"}}
    assert second["tool_choice"] == {"type": "function", "name": "get_weather"}


@pytest.mark.sdk_schema(
    allow=("temperature", "top_p"),
    why="not in anthropic 2.17's MessageCreateParams; chatcli's adapter sends them",
)
def test_anthropic_takes_every_setting_it_has(server: ReplayServer) -> None:
    server.add(Scripted(body=DOCS_TOOL_USE_RESPONSE))
    settings = Settings(
        temperature=1.0,
        top_p=0.95,
        stop=("END",),
        tool_choice="get_weather",
        parallel_tool_calls=False,
        response_format=SCHEMA,
        reasoning_effort="medium",
        thinking_budget=2048,
        extra={"metadata": {"user_id": "u-1"}},
    )
    anthropic(server, cache_control=None).complete(request(settings))
    sent = server.requests[0].json()
    assert {k: v for k, v in sent.items() if k not in ("model", "messages", "tools", "system")} == {
        "max_tokens": 500 + 2048,  # the thinking budget counts inside max_tokens
        "temperature": 1.0,
        "top_p": 0.95,
        "stop_sequences": ["END"],
        "tool_choice": {"type": "tool", "name": "get_weather", "disable_parallel_tool_use": True},
        "output_config": {"effort": "medium", "format": {"type": "json_schema", "schema": SCHEMA}},
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "metadata": {"user_id": "u-1"},
    }


def test_gemini_takes_every_setting_it_has(server: ReplayServer) -> None:
    server.add(Scripted(events=sse_events("gemini-text.txt")))
    settings = Settings(
        temperature=0.3,
        top_p=0.9,
        stop=("END",),
        seed=7,
        tool_choice="get_weather",
        response_format=SCHEMA,
        thinking_budget=1024,
        extra={"generationConfig": {"topK": 3}},  # merged into the REST body, recursively
    )
    list(gemini(server).stream(request(settings)))
    sent = server.requests[0].json()
    assert sent["generationConfig"] == {
        "maxOutputTokens": 500 + 1024,  # thoughts count inside maxOutputTokens
        "temperature": 0.3,
        "topP": 0.9,
        "stopSequences": ["END"],
        "seed": 7,
        "responseMimeType": "application/json",
        "responseJsonSchema": SCHEMA,
        # The SDK sends this one's fields by their proto names (proto3 JSON takes both).
        "thinkingConfig": {"thinking_budget": 1024},
        "topK": 3,
    }
    assert sent["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}
    }


def test_gemini_reasoning_effort_is_the_thinking_level(server: ReplayServer) -> None:
    server.add(Scripted(events=sse_events("gemini-text.txt")))
    list(gemini(server).stream(request(Settings(reasoning_effort="low", tool_choice="none"))))
    sent = server.requests[0].json()
    assert sent["generationConfig"]["thinkingConfig"] == {"thinking_level": "LOW"}
    assert sent["toolConfig"] == {"functionCallingConfig": {"mode": "NONE"}}


@pytest.mark.sdk_schema(
    allow=("top_k", "repeat_penalty"), why="llama.cpp's own fields: the upstream is not OpenAI"
)
def test_openai_compatible_takes_the_chat_settings_without_a_cache_key(
    server: ReplayServer,
) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    settings = Settings(
        temperature=0.0,
        seed=42,
        stop=("###",),
        response_format="json",
        tool_choice="auto",
        reasoning_effort="minimal",
        extra={"top_k": 20, "repeat_penalty": 1.1},
    )
    compat(server).complete(request(settings))
    sent = server.requests[0].json()
    assert {k: v for k, v in sent.items() if k not in ("model", "messages", "tools")} == {
        "max_tokens": 500,
        "temperature": 0.0,
        "seed": 42,
        "stop": ["###"],
        "response_format": {"type": "json_object"},
        "tool_choice": "auto",
        "reasoning_effort": "minimal",
        "top_k": 20,
        "repeat_penalty": 1.1,
    }


def test_tool_settings_are_sent_only_with_tools(server: ReplayServer) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    settings = Settings(tool_choice="required", parallel_tool_calls=False, temperature=0.1)
    compat(server).complete(request(settings, tools=False))
    sent = server.requests[0].json()
    assert "tool_choice" not in sent and "parallel_tool_calls" not in sent
    assert sent["temperature"] == 0.1


# -- what an API cannot take ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "settings", "match"),
    [
        (lambda s: openai(s), Settings(thinking_budget=1024), "thinking_budget"),
        (lambda s: openai(s, api="responses"), Settings(stop=("x",)), "stop"),
        (lambda s: compat(s), Settings(thinking_budget=1024), "thinking_budget"),
        (lambda s: anthropic(s), Settings(response_format="json"), "response_format"),
        (lambda s: anthropic(s), Settings(reasoning_effort="minimal"), "reasoning_effort"),
        (lambda s: gemini(s), Settings(reasoning_effort="none"), "reasoning_effort"),
    ],
    ids=[
        "openai-budget",
        "responses-stop",
        "compat-budget",
        "anthropic-json",
        "anthropic-minimal",
        "gemini-none",
    ],
)
def test_a_setting_the_api_cannot_take_is_an_error_before_any_call(
    server: ReplayServer, make: Any, settings: Settings, match: str
) -> None:
    provider: Adapter = make(server)
    with pytest.raises(UnsupportedSetting, match=match):
        provider.complete(request(settings))
    assert server.requests == []


@pytest.mark.parametrize(
    ("make", "answer", "settings", "dropped"),
    [
        (lambda s: openai(s, api="responses"), RESPONSES_TEXT, Settings(seed=3), "seed"),
        (lambda s: anthropic(s), DOCS_TOOL_USE_RESPONSE, Settings(seed=3), "seed"),
    ],
    ids=["responses-seed", "anthropic-seed"],
)
def test_a_documented_drop_is_logged(
    server: ReplayServer,
    caplog: pytest.LogCaptureFixture,
    make: Any,
    answer: Any,
    settings: Settings,
    dropped: str,
) -> None:
    server.add(Scripted(body=answer))
    with caplog.at_level(logging.WARNING, logger="chatcli"):
        make(server).complete(request(settings))
    assert dropped not in server.requests[0].json()
    assert any(f"setting {dropped!r} not sent" in r.getMessage() for r in caplog.records)


def test_gemini_drops_parallel_tool_calls_with_a_log(
    server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(Scripted(events=sse_events("gemini-text.txt")))
    with caplog.at_level(logging.WARNING, logger="chatcli"):
        list(gemini(server).stream(request(Settings(parallel_tool_calls=False))))
    assert "parallel_tool_calls" in caplog.text
    assert "toolConfig" not in server.requests[0].json()


def test_tool_choice_must_name_a_tool_of_the_request(server: ReplayServer) -> None:
    with pytest.raises(ConfigError, match="'get_wether' names no tool"):
        compat(server).complete(request(Settings(tool_choice="get_wether")))


# -- one SDK client per adapter: many calls, one connection ---------------------------------

ANSWERS = {
    "openai": lambda: Scripted(body=CHAT_TEXT),
    "responses": lambda: Scripted(body=RESPONSES_TEXT),
    "compat": lambda: Scripted(body=CHAT_TEXT),
    "anthropic": lambda: Scripted(body=DOCS_TOOL_USE_RESPONSE),
    "gemini": lambda: Scripted(events=sse_events("gemini-text.txt")),
}
MAKERS = {
    "openai": lambda s: openai(s),
    "responses": lambda s: openai(s, api="responses"),
    "compat": compat,
    "anthropic": anthropic,
    "gemini": gemini,
}


@pytest.mark.parametrize("name", sorted(MAKERS))
async def test_one_client_many_calls_one_connection(server: ReplayServer, name: str) -> None:
    provider: Adapter = MAKERS[name](server)
    calls = 4
    server.add(*(ANSWERS[name]() for _ in range(2 * calls)))
    use = provider.stream if name == "gemini" else provider.complete  # gemini's are streams
    for _ in range(calls):
        answer = use(request(Settings()))
        _ = answer if isinstance(answer, Response) else list(answer)
    assert (len(server.requests), server.connections) == (calls, 1)
    for _ in range(calls):
        if name == "gemini":
            _ = [chunk async for chunk in provider.astream(request(Settings()))]
        else:
            await provider.acomplete(request(Settings()))
    assert (len(server.requests), server.connections) == (2 * calls, 2)  # one more: async
    await provider.aclose()
    server.add(ANSWERS[name]())
    await (provider.acomplete if name != "gemini" else _acollect(provider))(request(Settings()))
    assert server.connections == 3  # closed: the next call opens a new one


def _acollect(provider: Adapter) -> Any:
    async def collect(request: Request) -> list[Any]:
        return [chunk async for chunk in provider.astream(request)]

    return collect


def test_the_context_manager_closes_the_client(server: ReplayServer) -> None:
    server.add(Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    with compat(server) as provider:
        provider.complete(request(Settings()))
        provider.complete(request(Settings()))
    assert provider._sync_client is None
    assert server.connections == 1


# -- prompt caches ----------------------------------------------------------------------------

# The docs' tool-use answer with a usage block in the API reference's shape (cache write on the
# first request of a conversation, a cache read on the next).
CACHE_WRITE = {
    **DOCS_TOOL_USE_RESPONSE,
    "usage": {
        "input_tokens": 21,
        "cache_creation_input_tokens": 2188,
        "cache_read_input_tokens": 0,
        "output_tokens": 393,
    },
}
CACHE_READ = {
    **DOCS_TOOL_USE_RESPONSE,
    "usage": {
        "input_tokens": 35,
        "cache_creation_input_tokens": 410,
        "cache_read_input_tokens": 2188,
        "output_tokens": 51,
    },
}


def test_anthropic_breakpoints_and_cache_usage(server: ReplayServer) -> None:
    server.add(Scripted(body=CACHE_WRITE), Scripted(body=CACHE_READ))
    provider = anthropic(server)
    first = provider.complete(request(Settings()))
    follow_up = (*MESSAGES, first.message, Message.tool(first.message.tool_calls[0].id, "18C"))
    second = provider.complete(Request(messages=follow_up, tools=(WEATHER,)))
    ephemeral = {"type": "ephemeral"}
    one, two = (r.json() for r in server.requests)
    assert one["system"] == [{"type": "text", "text": "Be brief.", "cache_control": ephemeral}]
    assert one["messages"][-1]["content"][-1]["cache_control"] == ephemeral
    assert two["messages"][-1]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
            "content": "18C",
            "cache_control": ephemeral,
        }
    ]
    # Within the four allowed: exactly one on the system prompt and one on the latest message.
    assert str(two).count("cache_control") == 2
    assert (first.usage.cache_write_tokens, first.usage.cache_read_tokens) == (2188, 0)
    assert (second.usage.cache_write_tokens, second.usage.cache_read_tokens) == (410, 2188)
    assert second.usage.input_tokens == 35


def test_anthropic_cache_control_is_configurable_and_off_able(server: ReplayServer) -> None:
    server.add(Scripted(body=CACHE_WRITE), Scripted(body=CACHE_WRITE))
    anthropic(server, cache_control={"type": "ephemeral", "ttl": "1h"}).complete(
        request(Settings())
    )
    anthropic(server, cache_control=None).complete(request(Settings()))
    hour, off = (r.json() for r in server.requests)
    assert hour["system"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in str(off)


def test_openai_prompt_cache_key_is_stable_per_conversation(server: ReplayServer) -> None:
    server.add(*(Scripted(body=CHAT_TEXT) for _ in range(4)))
    provider = openai(server)
    later = (*MESSAGES, Message.assistant("Sunny."), Message.user("And Rome?"))
    other = (Message.system("Be brief."), Message.user("Weather in Oslo?"))
    for messages in (MESSAGES, later, other):
        provider.complete(Request(messages=messages))
    chosen = Settings(extra={"prompt_cache_key": "tenant-7"})
    provider.complete(Request(messages=MESSAGES, settings=chosen))
    keys = [r.json()["prompt_cache_key"] for r in server.requests]
    assert keys[0] == keys[1] != keys[2]  # the conversation grew: same key; another: not
    assert keys[3] == "tenant-7"


def test_openai_prompt_cache_key_can_be_turned_off(server: ReplayServer) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    openai(server, prompt_cache_key=False).complete(Request(messages=MESSAGES))
    assert "prompt_cache_key" not in server.requests[0].json()


# -- streaming: typed tool-call deltas ------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "stream"),
    [
        ("openai", "openai-chat-tool-calls.txt"),
        ("responses", "openai-responses-reasoning-tool.txt"),
        ("anthropic", "anthropic-tool-use.txt"),
        ("gemini", "gemini-tool-call.txt"),
    ],
)
def test_streams_yield_tool_call_deltas_that_add_up_to_the_calls(
    server: ReplayServer, name: str, stream: str
) -> None:
    server.add(Scripted(events=sse_events(stream)))
    chunks = list(MAKERS[name](server).stream(request(Settings())))
    final = chunks[-1]
    assert isinstance(final, Response) and final.message.tool_calls
    pieces = [c for c in chunks if isinstance(c, ToolCallDelta)]
    for index, call in enumerate(final.message.tool_calls):
        mine = [p for p in pieces if p.index == index]
        assert mine[0].name == call.name
        assert json.loads("".join(p.arguments for p in mine)) == call.arguments
        if "synthetic_id" not in str(call.provider_details):
            assert mine[0].id == call.id

"""The proxy on the wire: the official SDKs against it, in front of a replay server that plays
real recorded upstream bodies and captures what the proxy forwards."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from chatcli.errors import ConfigError
from chatcli.proxy.app import ProxyOptions
from chatcli.proxy.guard import Guard
from tests.proxy_harness import running_proxy, upstream_at
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_anthropic_adapter import DOCS_TOOL_USE_RESPONSE
from tests.test_openai_adapter import CHAT_TEXT, CHAT_TOOLS

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

UPSTREAM_KEY = "sk-upstream-0123456789abcdefSECRET"
ANTHROPIC_ENV = {"ANTHROPIC_API_KEY": UPSTREAM_KEY, "CHATCLI_HOME": "/nonexistent"}
# A window declared for an OpenAI-compatible upstream: the adapter asks the server for none
# (`chatcli.providers.discovery`), so the scripted answers are the chat calls' own.
WINDOW = 32_000


def record(record_id: str) -> dict[str, Any]:
    return next(r for r in provider_errors("openai", "anthropic") if r["id"] == record_id)


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


@pytest.fixture
def openai_proxy(upstream: ReplayServer) -> Iterator[str]:
    env = {"OPENAI_API_KEY": UPSTREAM_KEY, "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai", upstream.url + "/v1", model="gpt-4o", environ=env)
    with running_proxy(up) as url:
        yield url


@pytest.fixture
def anthropic_proxy(upstream: ReplayServer) -> Iterator[str]:
    up = upstream_at("anthropic", upstream.url, model="claude-sonnet-4-5", environ=ANTHROPIC_ENV)
    with running_proxy(up) as url:
        yield url


_opened: list[openai.OpenAI | anthropic.Anthropic] = []


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    while _opened:
        _opened.pop().close()


def oa(url: str, key: str = "client-key") -> openai.OpenAI:
    client = openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)
    _opened.append(client)
    return client


def an(url: str, key: str = "client-key") -> anthropic.Anthropic:
    client = anthropic.Anthropic(base_url=url, api_key=key, max_retries=0)
    _opened.append(client)
    return client


def chat(n: int) -> list[dict[str, Any]]:
    """A system prompt and n alternating user/assistant messages, ending with a user one."""
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 200}
        for i in range(n)
    ]
    return [{"role": "system", "content": "be brief"}, *turns]


# --- faithful passthrough ------------------------------------------------------------------


@pytest.mark.sdk_schema(allow=("a_future_field",), why="an unknown field, passed on")
def test_openai_fields_reach_an_openai_upstream_unchanged(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(body=CHAT_TOOLS))
    messages: list[Any] = [
        {"role": "developer", "content": "Use tools.", "name": "ops"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Weather?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
    ]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "GetWeatherArgs",
                "parameters": {"type": "object"},
                "strict": True,
            },
        }
    ]
    sent: dict[str, Any] = {
        "messages": messages,
        "tools": tools,
        "tool_choice": "auto",
        "temperature": 0.25,
        "metadata": {"team": "a"},
        "logit_bias": {"50256": -100},
        "prompt_cache_key": "k1",
    }
    reply = oa(openai_proxy).chat.completions.create(
        model="gpt-4o", **sent, extra_body={"a_future_field": {"x": [1]}}
    )
    assert [c.function.name for c in reply.choices[0].message.tool_calls or ()] == [
        "GetWeatherArgs",
        "get_stock_price",
    ]
    forwarded = upstream.requests[0].json()
    assert forwarded.pop("model") == "gpt-4o"  # the proxy's upstream model
    assert forwarded == {**sent, "a_future_field": {"x": [1]}}


def test_an_openai_request_without_a_cache_key_gets_its_conversations_key(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    # The adapter names a conversation from its first system and user message; the proxy
    # sends the messages in the body fields, so it must still give the adapter those two.
    from chatcli.messages import Message
    from chatcli.providers.openai import prompt_cache_key

    upstream.add(Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    for question in ("Weather in Paris?", "Weather in SF?"):
        messages = [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": question},
        ]
        oa(openai_proxy).chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    keys = [r.json()["prompt_cache_key"] for r in upstream.requests]
    assert keys == [
        prompt_cache_key((Message.system("Be brief."), Message.user(q)))
        for q in ("Weather in Paris?", "Weather in SF?")
    ]
    assert keys[0] != keys[1]


@pytest.mark.sdk_schema(allow=("top_k", "future"), why="the client's own, passed on")
def test_anthropic_fields_reach_an_anthropic_upstream_unchanged(
    upstream: ReplayServer, anthropic_proxy: str
) -> None:
    upstream.add(Scripted(body=DOCS_TOOL_USE_RESPONSE))
    thinking = {"type": "thinking", "thinking": "Paris first.", "signature": "EqQBCgIYAhIM1gbc"}
    sent: dict[str, Any] = {
        "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": [
                    thinking,
                    {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"c": "P"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "18C"},
                    {"type": "text", "text": "And SF?", "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
        "tools": [{"name": "get_weather", "input_schema": {"type": "object"}}],
        "metadata": {"user_id": "u1"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    message = an(anthropic_proxy).messages.create(
        model="claude-x", max_tokens=2000, **sent, extra_body={"top_k": 5, "future": True}
    )
    assert message.stop_reason == "tool_use"
    assert [b.type for b in message.content] == ["text", "tool_use"]
    forwarded = upstream.requests[0].json()
    assert (forwarded.pop("model"), forwarded.pop("max_tokens")) == ("claude-sonnet-4-5", 2000)
    assert forwarded == {**sent, "top_k": 5, "future": True}


def test_an_anthropic_client_in_front_of_an_openai_server_gets_the_mapped_settings(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(body=CHAT_TEXT))
    response = httpx.post(
        openai_proxy + "/v1/messages",
        json={
            "model": "claude",
            "max_tokens": 50,
            "system": "be brief",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0.2,
            "stop_sequences": ["END"],
            "top_k": 5,
        },
    )
    assert response.status_code == 200
    assert response.headers["x-chatcli-dropped"] == "top_k"  # no such field on this wire
    assert response.json()["content"][0]["text"].startswith("I'm unable")
    forwarded = upstream.requests[0].json()
    assert forwarded["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]
    assert (forwarded["temperature"], forwarded["stop"], forwarded["max_completion_tokens"]) == (
        0.2,
        ["END"],
        50,
    )


# --- recovery --------------------------------------------------------------------------------


def test_an_overflow_is_recovered_and_kept_messages_are_forwarded_verbatim(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(replayed_error(record("pe-056")), Scripted(body=CHAT_TEXT))
    messages = chat(31)
    reply = oa(openai_proxy).chat.completions.create(model="gpt-4o", messages=messages)
    assert reply.choices[0].message.content == CHAT_TEXT["choices"][0]["message"]["content"]
    first, second = (r.json()["messages"] for r in upstream.requests)
    assert first == messages  # the whole conversation was tried first
    assert len(second) < len(messages)
    assert all(m in messages for m in second)  # kept messages: the client's JSON, verbatim
    assert second[0] == messages[0] and second[-1] == messages[-1]
    metrics = httpx.get(openai_proxy + "/metrics").text
    assert 'chatcli_proxy_recoveries_total{level="2"} 1' in metrics


def test_an_unrecoverable_overflow_is_openais_own_400(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    # One per call: the request, levels 1-3, and level 2 again with the count stated.
    upstream.add(*[replayed_error(record("pe-056"))] * 5)
    with pytest.raises(openai.BadRequestError) as caught:
        oa(openai_proxy).chat.completions.create(model="gpt-4o", messages=chat(31))
    assert caught.value.status_code == 400
    assert caught.value.code == "context_length_exceeded"
    assert caught.value.type == "invalid_request_error"
    assert caught.value.param == "messages"


def test_an_unrecoverable_overflow_is_anthropics_prompt_is_too_long(
    upstream: ReplayServer, anthropic_proxy: str
) -> None:
    upstream.add(*[replayed_error(record("pe-062"))] * 4)
    turns = [m for m in chat(31) if m["role"] != "system"]
    with pytest.raises(anthropic.BadRequestError) as caught:
        an(anthropic_proxy).messages.create(model="claude", max_tokens=100, messages=turns)
    assert caught.value.status_code == 400
    body = caught.value.body
    assert isinstance(body, dict)
    assert body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert body["error"]["message"].startswith("prompt is too long")


def test_a_streamed_request_that_cannot_fit_gets_the_error_status_not_a_stream(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    # One per call: the request, levels 1-3, and level 2 again with the count stated.
    upstream.add(*[replayed_error(record("pe-056"))] * 5)
    with pytest.raises(openai.BadRequestError) as caught:
        oa(openai_proxy).chat.completions.create(model="gpt-4o", messages=chat(31), stream=True)
    assert caught.value.code == "context_length_exceeded"


# --- other upstream errors -------------------------------------------------------------------


def test_an_upstream_rate_limit_passes_through_with_retry_after(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    limited = replayed_error(record("pe-030"))
    upstream.add(Scripted(status=429, body=limited.body, headers={"retry-after": "7"}))
    with pytest.raises(openai.RateLimitError) as caught:
        oa(openai_proxy).chat.completions.create(model="gpt-4o", messages=chat(1))
    assert caught.value.response.headers["retry-after"] == "7"
    assert caught.value.code == "rate_limit_exceeded"


def test_an_upstream_auth_error_is_the_clients_401_without_the_key(
    upstream: ReplayServer, anthropic_proxy: str
) -> None:
    echoed = f"invalid x-api-key: {UPSTREAM_KEY}"
    body = {"type": "error", "error": {"type": "authentication_error", "message": echoed}}
    upstream.add(Scripted(status=401, body=body))
    with pytest.raises(anthropic.AuthenticationError) as caught:
        an(anthropic_proxy).messages.create(
            model="c", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert caught.value.status_code == 401
    assert UPSTREAM_KEY not in caught.value.response.text
    assert UPSTREAM_KEY not in httpx.get(anthropic_proxy + "/metrics").text


def test_an_upstream_5xx_is_a_502_in_the_clients_dialect(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(status=500, body={"error": {"message": "boom", "type": "server_error"}}))
    response = httpx.post(
        openai_proxy + "/v1/chat/completions", json={"model": "x", "messages": chat(1)}
    )
    assert response.status_code == 502
    assert response.json()["error"]["type"] == "server_error"


# --- streaming -------------------------------------------------------------------------------


def test_openai_streaming_in_front_of_an_openai_server(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(events=[data for _, data in sse_events("openai-chat-text.txt")]))
    stream = oa(openai_proxy).chat.completions.create(
        model="gpt-4o", messages=chat(1), stream=True, stream_options={"include_usage": True}
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text and text == _sse_text("openai-chat-text.txt")
    assert chunks[-1].usage is not None and chunks[-1].usage.total_tokens > 0
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"


def test_anthropic_streaming_in_front_of_anthropic_keeps_text_and_tool_calls(
    upstream: ReplayServer, anthropic_proxy: str
) -> None:
    upstream.add(Scripted(events=sse_events("anthropic-tool-use.txt")))
    with an(anthropic_proxy).messages.stream(
        model="c", max_tokens=1000, messages=[{"role": "user", "content": "weather in Paris?"}]
    ) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "I'll check the current weather in Paris for you."
    assert final.stop_reason == "tool_use"
    tool = final.content[-1]
    assert tool.type == "tool_use" and tool.name == "get_weather"
    assert tool.input == _tool_input("anthropic-tool-use.txt")


def _sse_text(name: str) -> str:
    out = []
    for _, data in sse_events(name):
        if data != "[DONE]":
            for choice in json.loads(data).get("choices", ()):
                out.append(choice["delta"].get("content") or "")
    return "".join(out)


def _tool_input(name: str) -> Any:
    parts = [
        json.loads(data)["delta"].get("partial_json", "")
        for event, data in sse_events(name)
        if event == "content_block_delta"
    ]
    return json.loads("".join(parts))


# --- security, limits, other routes ----------------------------------------------------------


def test_binding_beyond_loopback_needs_client_keys() -> None:
    with pytest.raises(ConfigError, match="CHATCLI_PROXY_KEYS"):
        Guard((), host="0.0.0.0", max_concurrency=4)
    Guard(("k",), host="0.0.0.0", max_concurrency=4)  # with keys it may
    Guard((), host="127.0.0.1", max_concurrency=4)


def test_client_keys_are_checked_in_both_dialects(upstream: ReplayServer) -> None:
    upstream.add(Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    guard = Guard(("right-key", "other-key"), host="127.0.0.1", max_concurrency=4)
    env = {"CHATCLI_HOME": "/nonexistent"}
    with running_proxy(
        upstream_at("openai-compatible", upstream.url + "/v1", context_window=WINDOW, environ=env),
        guard=guard,
    ) as url:
        with pytest.raises(openai.AuthenticationError):
            oa(url, "wrong").chat.completions.create(model="x", messages=chat(1))
        with pytest.raises(anthropic.AuthenticationError):
            an(url, "wrong").messages.create(model="x", max_tokens=5, messages=chat(1)[1:])
        assert oa(url, "right-key").chat.completions.create(model="x", messages=chat(1)).choices
        assert an(url, "other-key").messages.create(model="x", max_tokens=5, messages=chat(1)[1:])
    assert len(upstream.requests) == 2  # refused requests never reached the upstream


def test_a_body_over_the_limit_is_a_413(upstream: ReplayServer) -> None:
    env = {"CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=WINDOW, environ=env)
    with running_proxy(up, options=ProxyOptions(max_body_bytes=1000)) as url:
        response = httpx.post(url + "/v1/messages", json={"messages": chat(9), "max_tokens": 5})
    assert response.status_code == 413
    assert response.json()["error"]["type"] == "request_too_large"
    assert upstream.requests == []


def test_a_key_over_its_concurrency_limit_is_told_to_retry(upstream: ReplayServer) -> None:
    env = {"CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=WINDOW, environ=env)
    guard = Guard((), host="127.0.0.1", max_concurrency=1)
    with running_proxy(up, guard=guard) as url:
        assert guard.acquire("")  # a request in flight
        response = httpx.post(url + "/v1/chat/completions", json={"messages": chat(1)})
        guard.release("")
    assert response.status_code == 429
    assert response.headers["retry-after"] == "1"
    assert upstream.requests == []


def test_no_cors_unless_asked(upstream: ReplayServer) -> None:
    env = {"CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=WINDOW, environ=env)
    headers = {"origin": "https://example.test", "access-control-request-method": "POST"}
    with running_proxy(up) as url:
        plain = httpx.options(url + "/v1/chat/completions", headers=headers)
    options = ProxyOptions(cors_origins=("https://example.test",))
    with running_proxy(up, options=options) as url:
        allowed = httpx.options(url + "/v1/chat/completions", headers=headers)
    assert "access-control-allow-origin" not in plain.headers
    assert allowed.headers["access-control-allow-origin"] == "https://example.test"


def test_models_health_and_count_tokens(upstream: ReplayServer, openai_proxy: str) -> None:
    models = oa(openai_proxy).models.list()
    assert [m.id for m in models.data] == ["gpt-4o"]
    assert httpx.get(openai_proxy + "/healthz").json()["status"] == "ok"
    counted = an(openai_proxy).messages.count_tokens(
        model="x", messages=[{"role": "user", "content": "hello " * 100}]
    )
    assert 50 < counted.input_tokens < 400
    tool = {"name": "read", "description": "Read a file. " * 50, "input_schema": {}}
    with_tools = an(openai_proxy).messages.count_tokens(
        model="x", messages=[{"role": "user", "content": "hello " * 100}], tools=[tool]
    )
    assert with_tools.input_tokens > counted.input_tokens + 100  # the definitions count
    assert UPSTREAM_KEY not in httpx.get(openai_proxy + "/healthz").text


def test_a_prompt_the_server_cut_silently_is_not_answered_as_if_whole(
    upstream: ReplayServer,
) -> None:
    # The server runs a 4096-token window and reports a prompt that fills it exactly: a server
    # (Ollama) that cut the prompt and answered 200. The proxy must notice (it sends the
    # messages in the body fields, so the check is its own), try to recover, and, with every
    # answer cut the same way, answer the overflow instead of the answer to a cut prompt.
    window = 4096
    cut = {**CHAT_TEXT, "usage": {**CHAT_TEXT["usage"], "prompt_tokens": window}}
    upstream.add(*(Scripted(body=cut) for _ in range(8)))
    env = {"CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=window, environ=env)
    with running_proxy(up) as url, pytest.raises(openai.BadRequestError) as caught:
        oa(url).chat.completions.create(model="x", messages=chat(31))
    assert caught.value.code == "context_length_exceeded"
    assert "silently truncated" in caught.value.message
    # Near the declared window, the proxy asked once whether the server is llama.cpp (to count
    # with its tokenizer); everything else it sent was the chat request.
    asked = [r.path.partition("?")[0] for r in upstream.requests]
    assert asked[0] == "/props" and asked[1:] and set(asked[1:]) == {"/v1/chat/completions"}


def test_a_turn_the_server_dropped_is_caught_with_the_window_unknown(
    upstream: ReplayServer,
) -> None:
    # As the adapter does (tests/test_silent_truncation.py): with no window known, a prompt
    # count that holds what came before the last answer but not the tool result after it is
    # a server that dropped the result (llama-cpp-python's guessed chat format), not an answer.
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read the log and say what it shows."},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "read_log", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "GET /index.html 200 0.003s\n" * 100},
    ]
    dropped = {**CHAT_TEXT, "usage": {**CHAT_TEXT["usage"], "prompt_tokens": 40}}
    upstream.add(*(Scripted(body=dropped) for _ in range(8)))
    env = {"CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai-compatible", upstream.url + "/v1", environ=env)
    with running_proxy(up) as url, pytest.raises(openai.BadRequestError) as caught:
        oa(url).chat.completions.create(model="x", messages=messages, max_tokens=100)
    assert "silently truncated" in caught.value.message
    assert upstream.requests


def test_a_failure_after_the_answer_began_ends_the_stream_with_an_error_event(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    # The recorded answer stops at max_tokens (the upstream's: the client set none, so the
    # proxy escalates), and the continuation call fails with a 500. The client has the
    # partial answer, then the dialect's error.
    upstream.add(
        Scripted(events=[data for _, data in sse_events("openai-chat-length.txt")]),
        Scripted(status=500, body={"error": {"message": "boom", "type": "server_error"}}),
    )
    stream = oa(openai_proxy).chat.completions.create(model="gpt-4o", messages=chat(1), stream=True)
    texts: list[str] = []
    with pytest.raises(openai.APIError, match="boom"):
        for chunk in stream:
            texts.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert "".join(texts) == _sse_text("openai-chat-length.txt")
    assert len(upstream.requests) == 2


@pytest.mark.sdk_schema(
    allow=("temperature",), why="not in anthropic 2.17's types; sent all the same"
)
def test_an_openai_client_in_front_of_anthropic(
    upstream: ReplayServer, anthropic_proxy: str
) -> None:
    upstream.add(Scripted(body=DOCS_TOOL_USE_RESPONSE))
    reply = oa(anthropic_proxy).chat.completions.create(
        model="gpt-4o",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in SF?"},
        ],
        max_tokens=300,
        temperature=0.1,
        stop=["END"],
        tools=[{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
    )
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = (choice.message.tool_calls or [])[0]
    assert (call.id, call.function.name) == ("toolu_01A09q90qw90lq917835lq9", "get_weather")
    assert json.loads(call.function.arguments) == {
        "location": "San Francisco, CA",
        "unit": "celsius",
    }
    forwarded = upstream.requests[0].json()
    # The adapter writes the messages with its prompt-cache breakpoints, as for the chat.
    cached = {"cache_control": {"type": "ephemeral"}}
    assert forwarded["system"] == [{"type": "text", "text": "Be brief.", **cached}]
    assert forwarded["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Weather in SF?", **cached}]}
    ]
    assert (forwarded["max_tokens"], forwarded["temperature"], forwarded["stop_sequences"]) == (
        300,
        0.1,
        ["END"],
    )
    assert forwarded["tools"][0]["name"] == "get_weather"


def test_thinking_blocks_and_signatures_survive_a_streamed_answer(
    upstream: ReplayServer, anthropic_proxy: str
) -> None:
    # A client that asked for thinking must get the signed blocks back, in order, to send
    # them with its next request (the API rejects a tool turn without them).
    upstream.add(Scripted(events=sse_events("anthropic-thinking.txt")))
    with an(anthropic_proxy).messages.stream(
        model="c",
        max_tokens=2000,
        messages=[{"role": "user", "content": "27 * 453?"}],
        extra_body={"thinking": {"type": "enabled", "budget_tokens": 1024}},
    ) as stream:
        final = stream.get_final_message()
    thinking, text = final.content
    assert thinking.type == "thinking" and thinking.signature.startswith("EqQBCgIYAhIM1gbc")
    assert thinking.thinking.endswith("10,800 + 1,350 + 81 = 12,231")
    assert text.type == "text" and text.text == "27 * 453 = 12,231"
    assert upstream.requests[0].json()["thinking"] == {"type": "enabled", "budget_tokens": 1024}

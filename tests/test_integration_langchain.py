"""`ContextRecoveryMiddleware` in detail: the middleware's hook driven with a scripted handler
(what each model request holds, what comes back), and the real `create_agent` + `ChatOpenAI`
against the replay server answering with real recorded provider bodies."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import sys
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_openai import ChatOpenAI

from chatcli.continuation import CONTINUATION_MESSAGE
from chatcli.errors import ConfigError, ContextRecoveryError
from chatcli.events import (
    Continued,
    Escalated,
    Event,
    LevelApplied,
    OverflowDetected,
    PreflightRecovery,
    ToolCallsDropped,
)
from chatcli.integrations.langchain import ContextRecoveryMiddleware
from tests.recorded import provider_errors, replayed_error
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_openai_adapter import CHAT_TEXT, CHAT_TOOLS

MODEL = "local-model"  # a name the catalog does not know: the window is unknown until stated
# A real OpenAI overflow that states the window, and a look-alike: "Request too large ... on
# tokens per min" is a rate limit (429), not an overflow.
OVERFLOW = next(
    r
    for r in provider_errors("openai")
    if r["kind"] == "context_overflow" and "limit" in r.get("numbers", {})
)
RATE_LIMIT = next(r for r in provider_errors("openai") if r["id"] == "pe-030")
# The OpenAI-compatible servers' recorded overflows that come with an HTTP error status.
OPENAI_COMPATIBLE = (
    "openai",
    "azure-openai",
    "vllm",
    "llama.cpp-server",
    "sglang",
    "together",
    "groq",
    "deepseek",
    "openrouter",
    "lm-studio",
    "fastchat",
    "huggingface-tgi",
    "xai",
)
RECORDED_OVERFLOWS = [
    r
    for r in provider_errors(*OPENAI_COMPATIBLE)
    if r["kind"] == "context_overflow" and (r["http_status"] or 200) >= 400
]


def history(turns: int = 30) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    for i in range(turns):
        messages += [HumanMessage(f"Question {i}: " + "x" * 400), AIMessage("y" * 400)]
    return [*messages, HumanMessage("What is the capital of Portugal?")]


def answer(text: str, finish: str = "stop", **fields: Any) -> AIMessage:
    usage = {"input_tokens": 50, "output_tokens": 10, "total_tokens": 60}
    metadata = {"finish_reason": finish, "model_name": MODEL}
    return AIMessage(text, response_metadata=metadata, usage_metadata=usage, **fields)


class Handler:
    """LangChain's handler, scripted: each call takes the next answer or raises the next error,
    and records the request it was given."""

    def __init__(self, *script: AIMessage | Exception) -> None:
        self.script = list(script)
        self.requests: list[ModelRequest[Any]] = []
        self.responses: list[ModelResponse[Any]] = []

    def __call__(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        self.requests.append(request)
        item = self.script.pop(0)
        if isinstance(item, Exception):
            raise item
        self.responses.append(ModelResponse(result=[item]))
        return self.responses[-1]

    async def acall(self, request: ModelRequest[Any]) -> ModelResponse[Any]:
        await asyncio.sleep(0)
        return self(request)


def model_request(
    messages: list[BaseMessage], model: str = MODEL, **fields: Any
) -> ModelRequest[Any]:
    chat = ChatOpenAI(model=model, api_key="sk-test", max_tokens=100, **fields)
    system = SystemMessage("You are terse.")
    return ModelRequest(
        model=chat, messages=messages, system_message=system, state={"messages": messages}
    )


def call(
    middleware: ContextRecoveryMiddleware, request: ModelRequest[Any], handler: Handler, mode: str
) -> ModelResponse[Any]:
    if mode == "sync":
        return middleware.wrap_model_call(request, handler)
    return asyncio.run(middleware.awrap_model_call(request, handler.acall))


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def recording() -> tuple[ContextRecoveryMiddleware, list[Event]]:
    events: list[Event] = []
    return ContextRecoveryMiddleware(on_event=events.append), events


# -- the hook, with a scripted handler ---------------------------------------------------------


def test_a_request_that_fits_goes_out_as_it_came_and_its_response_comes_back(mode: str) -> None:
    middleware, events = recording()
    messages = history(2)
    request = model_request(messages)
    handler = Handler(answer("Lisbon."))

    response = call(middleware, request, handler, mode)

    assert response is handler.responses[0]
    sent = handler.requests[0]
    assert sent.messages == messages
    assert all(a is b for a, b in zip(sent.messages, messages, strict=True))
    assert sent.system_message is request.system_message
    assert sent.model_settings == {}
    assert events == []


def test_an_overflow_is_recovered_on_the_request_and_the_state_is_untouched(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    middleware, events = recording()
    messages = history()
    before = list(messages)
    request = model_request(messages)
    handler = Handler(RuntimeError(OVERFLOW["body"]), answer("Lisbon."))

    with caplog.at_level(logging.INFO, logger="chatcli"):
        response = call(middleware, request, handler, mode)

    assert response.result[0].text == "Lisbon."
    first, retry = handler.requests
    assert first.messages == before
    assert len(retry.messages) < len(before)
    assert retry.messages[-1] is messages[-1]  # the latest request is the caller's object
    assert retry.system_message is request.system_message
    assert messages == before and request.state["messages"] is messages
    assert isinstance(events[0], OverflowDetected)
    assert any(isinstance(e, LevelApplied) for e in events)
    assert response.result[0].response_metadata["chatcli"]["calls"] == 2
    assert "context overflow" in caplog.text


def test_a_cut_answer_is_continued_with_a_raised_limit_and_stitched(mode: str) -> None:
    middleware, events = recording()
    handler = Handler(answer("Lisbon is the capital", "length"), answer(" of Portugal."))

    response = call(middleware, model_request(history(1)), handler, mode)

    stitched = response.result[0]
    assert stitched.text == "Lisbon is the capital of Portugal."
    continuation = handler.requests[1]
    assert continuation.messages[-2].text == "Lisbon is the capital"
    assert isinstance(continuation.messages[-2], AIMessage)
    assert continuation.messages[-1].text == CONTINUATION_MESSAGE
    assert continuation.model_settings == {"max_tokens": 200}
    assert stitched.usage_metadata["output_tokens"] == 20  # both calls
    assert stitched.response_metadata["finish_reason"] == "stop"
    assert stitched.response_metadata["chatcli"]["truncated"] is False
    assert [type(e) for e in events] == [Escalated, Continued]


def test_a_cut_tool_call_is_never_forwarded_and_complete_ones_are_returned_to_run(
    mode: str,
) -> None:
    middleware, events = recording()
    whole = {"name": "get_weather", "args": {"city": "Lisbon"}, "id": "call_1"}
    cut = {"name": "get_weather", "args": '{"city": "Por', "id": "call_2", "error": "cut"}
    raw = [{"id": "call_1", "type": "function"}, {"id": "call_2", "type": "function"}]
    cut_answer = answer(
        "",
        "length",
        tool_calls=[whole],
        invalid_tool_calls=[cut],
        additional_kwargs={"tool_calls": raw},
    )
    handler = Handler(cut_answer)

    response = call(middleware, model_request(history(1)), handler, mode)

    returned = response.result[0]
    assert [c["id"] for c in returned.tool_calls] == ["call_1"]
    assert returned.invalid_tool_calls == []
    assert "tool_calls" not in returned.additional_kwargs
    assert returned.response_metadata["chatcli"]["truncated"] is True
    assert len(handler.requests) == 1  # complete calls go back to the agent to run
    assert [type(e) for e in events] == [ToolCallsDropped]


def test_the_last_call_of_a_cut_answer_is_dropped_even_when_it_parses(mode: str) -> None:
    middleware, _ = recording()
    calls = [
        {"name": "search", "args": {"q": "Lisbon"}, "id": "call_1"},
        {"name": "search", "args": {"q": "Por"}, "id": "call_2"},
    ]
    handler = Handler(answer("", "length", tool_calls=calls))

    response = call(middleware, model_request(history(1)), handler, mode)

    assert [c["id"] for c in response.result[0].tool_calls] == ["call_1"]


def test_an_answer_holding_only_a_cut_call_is_continued(mode: str) -> None:
    middleware, _ = recording()
    cut = {"name": "search", "args": '{"q": "Li', "id": "call_1", "error": "cut"}
    handler = Handler(answer("Let me", "length", invalid_tool_calls=[cut]), answer(" check."))

    response = call(middleware, model_request(history(1)), handler, mode)

    assert response.result[0].text == "Let me check."
    assert response.result[0].invalid_tool_calls == []
    assert isinstance(handler.requests[1].messages[-2], AIMessage)
    assert handler.requests[1].messages[-2].invalid_tool_calls == []


def test_a_langchain_context_overflow_error_is_an_overflow_whatever_its_wording(
    mode: str,
) -> None:
    middleware, events = recording()
    handler = Handler(ContextOverflowError("the request was refused"), answer("Lisbon."))

    response = call(middleware, model_request(history()), handler, mode)

    assert response.result[0].text == "Lisbon."
    assert isinstance(events[0], OverflowDetected)


@pytest.mark.parametrize(
    "error",
    [RuntimeError("the request was refused"), RuntimeError(RATE_LIMIT["body"])],
    ids=["unrecognised", "rate-limit"],
)
def test_errors_that_are_not_overflows_reach_the_caller_as_they_were(
    mode: str, error: Exception
) -> None:
    middleware, _ = recording()
    handler = Handler(error, answer("never"))

    with pytest.raises(RuntimeError) as raised:
        call(middleware, model_request(history(1)), handler, mode)

    assert raised.value is error
    assert raised.value.__cause__ is None
    assert len(handler.requests) == 1  # not retried here: the model and LangChain retry


def test_when_recovery_runs_out_the_error_says_what_was_tried(mode: str) -> None:
    middleware, _ = recording()
    overflow = RuntimeError(OVERFLOW["body"])
    handler = Handler(*[overflow] * 10)

    with pytest.raises(ContextRecoveryError) as raised:
        call(middleware, model_request(history()), handler, mode)

    assert raised.value.attempts
    chain = [raised.value.__cause__]
    assert overflow in chain or overflow is getattr(chain[0], "__cause__", None)


def test_a_known_window_recovers_before_sending(mode: str) -> None:
    events: list[Event] = []
    middleware = ContextRecoveryMiddleware(context_window=2_000, on_event=events.append)
    messages = history()
    handler = Handler(answer("Lisbon."))

    response = call(middleware, model_request(messages), handler, mode)

    assert response.result[0].text == "Lisbon."
    assert len(handler.requests) == 1 and len(handler.requests[0].messages) < len(messages)
    assert isinstance(events[0], PreflightRecovery)


def test_the_catalog_knows_the_window_of_a_known_model(mode: str) -> None:
    events: list[Event] = []
    middleware = ContextRecoveryMiddleware(on_event=events.append)
    messages = history(3)
    # About 8 tokens a repeat: 160k tokens, over gpt-4o's 128k window on its own.
    messages[0] = HumanMessage("The logs: " + "error at line 42 in module parser; " * 20_000)
    handler = Handler(answer("Lisbon."))

    call(middleware, model_request(messages, model="gpt-4o"), handler, mode)

    assert len(handler.requests) == 1  # recovered before sending: no rejected call
    assert isinstance(events[0], PreflightRecovery) and events[0].window <= 128_000


def test_a_window_stated_by_an_overflow_serves_the_next_calls(mode: str) -> None:
    middleware, events = recording()
    first = Handler(RuntimeError(OVERFLOW["body"]), answer("Lisbon."))
    call(middleware, model_request(history()), first, mode)
    stated = events[0].limit if isinstance(events[0], OverflowDetected) else None
    assert stated is not None and middleware.learned_windows == {MODEL: stated}

    events.clear()
    second = Handler(answer("Porto."))
    call(middleware, model_request(history(80)), second, mode)

    assert len(second.requests) == 1  # fitted before sending, no rejected call
    assert isinstance(events[0], PreflightRecovery)


def test_the_output_limit_field_follows_the_model_settings(mode: str) -> None:
    middleware, _ = recording()
    request = model_request(history(1)).override(model_settings={"max_tokens": 40})
    handler = Handler(answer("Lisbon is", "length"), answer("the capital."))

    call(middleware, request, handler, mode)

    assert handler.requests[0].model_settings == {"max_tokens": 40}
    assert handler.requests[1].model_settings == {"max_tokens": 80}


@pytest.mark.parametrize("window", [0, -5, "1024", 1.5, True])
def test_a_bad_window_is_refused_with_its_value(window: Any) -> None:
    with pytest.raises(ConfigError, match=f"context_window={window!r}"):
        ContextRecoveryMiddleware(context_window=window)


# -- create_agent + ChatOpenAI against recorded bodies -------------------------------------------


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


def agent_on(server: ReplayServer, events: list[Event], max_tokens: int = 64) -> Any:
    model = ChatOpenAI(
        model=MODEL,
        base_url=server.url + "/v1",
        api_key="sk-test",
        max_retries=0,
        max_tokens=max_tokens,
    )
    return create_agent(model, middleware=[ContextRecoveryMiddleware(on_event=events.append)])


def _bodies(server: ReplayServer) -> list[dict[str, Any]]:
    return [r.json() for r in server.requests]


@pytest.mark.parametrize("record", RECORDED_OVERFLOWS, ids=lambda r: r["id"])
def test_an_agent_answers_after_a_recorded_overflow(
    replay: ReplayServer, record: dict[str, Any]
) -> None:
    replay.queue.extend([replayed_error(record), Scripted(body=CHAT_TEXT)])
    events: list[Event] = []
    messages = history()
    snapshot = [m.model_copy(deep=True) for m in messages]

    # The output limit the error says was asked for, as the request that got it had asked.
    max_tokens = (record.get("numbers") or {}).get("max_tokens", 64)
    state = agent_on(replay, events, max_tokens).invoke({"messages": messages})

    assert state["messages"][-1].text == CHAT_TEXT["choices"][0]["message"]["content"]
    kept = state["messages"][:-1]
    assert [(type(m), m.content) for m in kept] == [(type(m), m.content) for m in snapshot]
    first, retry = _bodies(replay)
    assert len(first["messages"]) == len(messages)
    # A recovery level shaped the retry, or, when the error shows the prompt fits, the output
    # limit was fitted to the room the error states.
    shaped = retry["messages"] != first["messages"]
    assert shaped or retry["max_completion_tokens"] < first["max_completion_tokens"]
    assert any(isinstance(e, OverflowDetected) for e in events)


def test_an_agents_rate_limit_reaches_it_as_the_sdks_own_error(replay: ReplayServer) -> None:
    replay.queue.append(replayed_error(RATE_LIMIT))

    with pytest.raises(openai.RateLimitError):
        agent_on(replay, []).invoke({"messages": history(1)})

    assert len(replay.requests) == 1


def test_an_agents_cut_tool_call_is_not_run(replay: ReplayServer) -> None:
    cut = json.loads(json.dumps(CHAT_TOOLS))
    choice = cut["choices"][0]
    choice["finish_reason"] = "length"
    call_2 = choice["message"]["tool_calls"][1]["function"]
    call_2["arguments"] = call_2["arguments"][:12]  # '{"ticker": "' : cut off mid-string
    ran: list[str] = []

    def GetWeatherArgs(city: str, country: str, units: str) -> str:
        """The weather in a city."""
        ran.append(city)
        return "sunny"

    def get_stock_price(ticker: str, exchange: str) -> str:
        """A stock's price."""
        ran.append(ticker)
        return "1"

    model = ChatOpenAI(
        model=MODEL, base_url=replay.url + "/v1", api_key="sk-test", max_retries=0, max_tokens=64
    )
    agent = create_agent(
        model,
        tools=[GetWeatherArgs, get_stock_price],
        middleware=[ContextRecoveryMiddleware()],
    )
    replay.queue.extend([Scripted(body=cut), Scripted(body=CHAT_TEXT)])

    state = agent.invoke({"messages": [HumanMessage("Weather in Edinburgh, and AAPL?")]})

    assert ran == ["Edinburgh"]
    tool_call = state["messages"][1]
    assert [c["name"] for c in tool_call.tool_calls] == ["GetWeatherArgs"]
    sent_back = _bodies(replay)[1]["messages"]
    assert [m["role"] for m in sent_back] == ["user", "assistant", "tool"]
    assert [c["id"] for c in sent_back[1]["tool_calls"]] == [sent_back[2]["tool_call_id"]]


def test_without_langchain_the_import_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in [n for n in sys.modules if n.startswith(("chatcli.integrations", "langchain"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "langchain", None)  # import langchain fails

    with pytest.raises(ImportError, match=r"pip install 'chatcli-recovery\[langchain\]'"):
        importlib.import_module("chatcli.integrations.langchain")

"""`ContextRecoveryMiddleware` for real: LangChain's `create_agent` with `ChatOpenAI` pointed at
the C++ llama-server running the tiny random model with a 1,024-token window. Nothing is faked
between LangChain and the server: the overflows are llama-server's own errors, the answers
really stop at max_tokens (the model never ends one). Every body LangChain sends is recorded,
to check the tool pairs the server was given."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from chatcli.events import (
    Continued,
    Event,
    LevelApplied,
    OverflowDetected,
    PreflightRecovery,
)
from chatcli.integrations.langchain import ContextRecoveryMiddleware
from chatcli.providers.counting import LlamaServerTokens, RemoteCounter
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.tokens.exact import CountingEstimator
from tests.test_proxy_llama import MODEL_NAME, N_CTX

# The fixtures of tests/servers.py (tiny_model, llama_1024).
pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

MAX_TOKENS = 16
LOG_LINE = "request served in 12 ms; "


@tool
def read_log(name: str) -> str:
    """Read a log file."""
    return f"{name}: " + LOG_LINE * 400  # 10,000 chars: far over the window on its own


def history(days: int = 3) -> list[BaseMessage]:
    """Earlier turns of the agent: each called `read_log` and got a large result back."""
    turns: list[BaseMessage] = []
    for day in range(1, days + 1):
        call = {"name": "read_log", "args": {"name": f"day{day}.log"}, "id": f"call_{day}"}
        result = read_log.invoke({"name": f"day{day}.log"})
        turns += [HumanMessage(f"What happened on day {day}?"), AIMessage("", tool_calls=[call])]
        turns += [ToolMessage(result, tool_call_id=f"call_{day}"), AIMessage(f"Day {day}: quiet.")]
    return [*turns, HumanMessage("Summarise the week in one sentence.")]


class Wire:
    """What LangChain sends to llama-server and what it answers: every request body and status."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.statuses: list[int] = []
        hooks = {"request": [self.request], "response": [self.response]}
        ahooks = {"request": [self.arequest], "response": [self.aresponse]}
        self.client = httpx.Client(event_hooks=hooks)
        self.aclient = httpx.AsyncClient(event_hooks=ahooks)

    def close(self) -> None:
        self.client.close()
        if not self.aclient.is_closed:  # unused: a run that used it closed it in its loop
            asyncio.run(self.aclient.aclose())

    def request(self, request: httpx.Request) -> None:
        self.bodies.append(json.loads(request.read()))

    def response(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)

    async def arequest(self, request: httpx.Request) -> None:
        self.request(request)

    async def aresponse(self, response: httpx.Response) -> None:
        self.response(response)


@pytest.fixture
def wire() -> Iterator[Wire]:
    recorded = Wire()
    yield recorded
    recorded.close()


def chat_model(base_url: str, wire: Wire) -> ChatOpenAI:
    return ChatOpenAI(
        model=MODEL_NAME,
        base_url=base_url + "/v1",
        api_key="none",
        max_tokens=MAX_TOKENS,
        max_retries=0,
        http_client=wire.client,
        http_async_client=wire.aclient,
    )


def run(agent: Any, messages: list[BaseMessage], mode: str, wire: Wire) -> dict[str, Any]:
    if mode == "sync":
        return dict(agent.invoke({"messages": messages}))

    async def arun() -> dict[str, Any]:
        try:
            return dict(await agent.ainvoke({"messages": messages}))
        finally:
            await wire.aclient.aclose()  # in the loop its connections belong to

    return asyncio.run(arun())


def snapshot(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    return [
        (type(m), m.content, getattr(m, "tool_calls", None), getattr(m, "tool_call_id", None))
        for m in messages
    ]


def assert_wire_pairs(body: dict[str, Any]) -> None:
    """The OpenAI tool pairs of one request body: each assistant message's calls answered right
    after it, in order, one tool message each, and no other tool message."""
    pending: list[str] = []
    for message in body["messages"]:
        if message["role"] == "tool":
            assert pending and pending.pop(0) == message["tool_call_id"], message
            continue
        assert not pending, f"unanswered calls {pending}"
        pending = [call["id"] for call in message.get("tool_calls") or []]
    assert not pending


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_agent_conversation_that_overflows_is_answered(
    llama_1024: str, wire: Wire, mode: str
) -> None:
    events: list[Event] = []
    middleware = ContextRecoveryMiddleware(on_event=events.append)
    agent = create_agent(chat_model(llama_1024, wire), tools=[read_log], middleware=[middleware])
    messages = history()
    before = snapshot(messages)

    state = run(agent, messages, mode, wire)

    answer = state["messages"][-1]
    assert isinstance(answer, AIMessage) and answer.text
    assert snapshot(state["messages"][: len(messages)]) == before  # the state is whole
    assert len(state["messages"]) == len(messages) + 1
    assert wire.statuses[0] == 400  # llama-server refused the whole history
    assert wire.statuses[-1] == 200 and len(wire.bodies[0]["messages"]) == len(messages)
    for body in wire.bodies:
        assert_wire_pairs(body)
    kinds = {type(e) for e in events}
    assert {OverflowDetected, LevelApplied, Continued} <= kinds
    assert middleware.learned_windows == {MODEL_NAME: N_CTX}
    assert answer.response_metadata["chatcli"]["calls"] == len(wire.bodies)


def test_a_declared_window_and_the_servers_count_send_no_request_that_does_not_fit(
    llama_1024: str, wire: Wire
) -> None:
    """With the window declared, pre-flight fits the request before it is sent; measured with
    llama-server's own tokenizer (chatcli's counter for it), no request is refused."""
    events: list[Event] = []
    server = OpenAICompatible(llama_1024 + "/v1", MODEL_NAME, environ={})
    exact = CountingEstimator(counter=RemoteCounter(LlamaServerTokens(server)))
    middleware = ContextRecoveryMiddleware(
        context_window=N_CTX, estimator=exact, on_event=events.append
    )
    agent = create_agent(chat_model(llama_1024, wire), tools=[read_log], middleware=[middleware])

    state = run(agent, history(), "sync", wire)

    assert state["messages"][-1].text
    assert set(wire.statuses) == {200}
    assert isinstance(events[0], PreflightRecovery)
    for body in wire.bodies:
        assert_wire_pairs(body)


def test_next_to_summarization_middleware(llama_1024: str, wire: Wire) -> None:
    """LangChain's summarisation rewrites the state at its threshold (its design: here it
    summarises the small talk at the start, with the model); what it keeps, three large tool
    results, still overflows the window, and chatcli recovers that on the model request."""
    events: list[Event] = []
    model = chat_model(llama_1024, wire)
    summarization = SummarizationMiddleware(
        model=model,
        trigger=("messages", 10),
        keep=("messages", 13),
        summary_prompt="Summarise: {messages}",
    )
    recovery = ContextRecoveryMiddleware(on_event=events.append)
    agent = create_agent(model, tools=[read_log], middleware=[summarization, recovery])
    small_talk: list[BaseMessage] = []
    for i in range(3):
        small_talk += [HumanMessage(f"Hello {i}"), AIMessage(f"Hi {i}")]
    messages = [*small_talk, *history()]

    state = run(agent, messages, "sync", wire)

    summary = state["messages"][0]
    assert isinstance(summary, HumanMessage) and "summary" in summary.text.lower()
    asked = [b["messages"][0]["content"] for b in wire.bodies if len(b["messages"]) == 1]
    assert asked and asked[0].startswith("Summarise:")  # the summary came from the model
    assert snapshot(state["messages"][1:-1]) == snapshot(history())  # kept, and untouched by us
    assert state["messages"][-1].text
    assert any(isinstance(e, OverflowDetected) for e in events)
    for body in wire.bodies:
        assert_wire_pairs(body)

"""`ContextRecovery` in real pydantic-ai agents, with pydantic-ai's own OpenAI and Anthropic
models talking to the replay server (tests/replay.py), which answers with real recorded bodies:
overflows of many providers (provider-errors.json), answers recorded from the live APIs."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from anthropic import AsyncAnthropic
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai import messages as pai
from pydantic_ai.exceptions import ModelContextWindowExceededError, ModelHTTPError
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.providers.openai import OpenAIProvider

from chatcli.config import RecoveryConfig
from chatcli.continuation import CONTINUATION_MESSAGE
from chatcli.errors import ConfigError, ContextRecoveryError
from chatcli.events import (
    CompactionPaused,
    Continued,
    Escalated,
    Event,
    LevelApplied,
    MaxTokensFitted,
    OutputCapLowered,
    OverflowDetected,
    PreflightRecovery,
    RecoveryFailed,
)
from chatcli.integrations.pydantic_ai import ContextRecovery
from tests.recorded import DATA, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted
from tests.test_compaction import _anthropic_message
from tests.test_openai_adapter import CHAT_TEXT

ANSWER: str = CHAT_TEXT["choices"][0]["message"]["content"]  # type: ignore[index]
MODEL = "chatcli-tiny"  # not in chatcli's catalog: the window is declared or learned


def recorded(kind: str) -> list[dict[str, Any]]:
    """The recorded errors of `kind` that came with an HTTP error status, of any provider."""
    records: list[dict[str, Any]] = json.loads((DATA / "provider-errors.json").read_text())
    return [r for r in records if r["kind"] == kind and (r["http_status"] or 200) >= 400]


OVERFLOWS = recorded("context_overflow")
# One overflow per provider (the SDK's request encoding dominates the time a run takes).
EACH_PROVIDER = list({r["provider"]: r for r in reversed(OVERFLOWS)}.values())
NOT_OVERFLOWS = [r for r in recorded("not_overflow") if r["http_status"] == 429]


@pytest.fixture
async def model(server: ReplayServer) -> AsyncIterator[OpenAIChatModel]:
    client = AsyncOpenAI(base_url=f"{server.url}/v1", api_key="sk-test", max_retries=0)
    yield OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
    await client.close()


def long_history(turns: int = 30) -> list[pai.ModelMessage]:
    history: list[pai.ModelMessage] = []
    for i in range(turns):
        prompt = pai.UserPromptPart(content=f"question {i}: " + "tell me more " * 8)
        history += [pai.ModelRequest(parts=[prompt]), pai.ModelResponse(parts=[pai.TextPart("ok")])]
    return history


def sent(server: ReplayServer, index: int) -> dict[str, Any]:
    body: dict[str, Any] = server.requests[index].json()
    return body


def agent_with(model: Any, events: list[Event], **options: Any) -> Agent[None, str]:
    recovery = ContextRecovery(on_event=events.append, **options)
    return Agent(model, instructions="Be brief.", capabilities=[recovery])


@pytest.mark.parametrize("record", EACH_PROVIDER, ids=[r["provider"] for r in EACH_PROVIDER])
async def test_an_overflow_of_any_provider_is_recovered_and_the_history_is_kept(
    server: ReplayServer, model: OpenAIChatModel, record: dict[str, Any]
) -> None:
    server.add(replayed_error(record), Scripted(body=CHAT_TEXT))
    events: list[Event] = []
    history = long_history(12)
    snapshot = copy.deepcopy(history)
    result = await agent_with(model, events).run("And the last question?", message_history=history)
    assert result.output == ANSWER
    assert isinstance(events[0], OverflowDetected)
    assert any(isinstance(e, LevelApplied | MaxTokensFitted) for e in events)
    # The body states the numbers of the request it was recorded for, not of this one: what
    # recovery does with them varies; that it sends something else, keeping the task, does not.
    first, second = sent(server, 0), sent(server, 1)
    assert second != first
    assert {"role": "system", "content": "Be brief."} in second["messages"]
    assert second["messages"][-1] == {"role": "user", "content": "And the last question?"}
    assert history == snapshot  # the history passed in is not rewritten
    assert result.all_messages()[: len(history)] == history  # nor is the run's history
    assert len(result.all_messages()) == len(history) + 2


async def test_an_overflow_pydantic_ai_does_not_recognise_is_recovered_too(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    # llama.cpp's server: pydantic-ai raises a plain rejection, not its overflow error.
    (record,) = [
        r for r in OVERFLOWS if r["provider"] == "llama.cpp-server" and r["http_status"] == 400
    ][:1]
    server.add(replayed_error(record))
    with pytest.raises(ModelHTTPError) as bare:
        await Agent(model).run("hi", message_history=long_history())
    assert not isinstance(bare.value, ModelContextWindowExceededError)
    server.add(replayed_error(record), Scripted(body=CHAT_TEXT))
    events: list[Event] = []
    result = await agent_with(model, events).run("hi", message_history=long_history())
    assert result.output == ANSWER and isinstance(events[0], OverflowDetected)


@pytest.mark.parametrize("record", NOT_OVERFLOWS, ids=[r["id"] for r in NOT_OVERFLOWS])
async def test_other_errors_propagate_untouched(
    server: ReplayServer, model: OpenAIChatModel, record: dict[str, Any]
) -> None:
    server.add(replayed_error(record))
    events: list[Event] = []
    with pytest.raises(ModelHTTPError) as raised:
        await agent_with(model, events).run("hi")
    assert raised.value.status_code == 429
    assert events == [] and len(server.requests) == 1


async def test_a_known_window_is_fitted_before_sending(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    events: list[Event] = []
    agent = agent_with(model, events, context_window=1024)
    result = await agent.run("And the last question?", message_history=long_history())
    assert result.output == ANSWER and len(server.requests) == 1  # no rejected call
    assert isinstance(events[0], PreflightRecovery)
    applied = [e for e in events if isinstance(e, LevelApplied)]
    assert applied and all(e.preflight for e in applied)
    assert len(sent(server, 0)["messages"]) < 1 + 2 * 30 + 1


async def test_the_tools_definitions_count_in_the_window(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    events: list[Event] = []
    agent = agent_with(model, events, context_window=1024)

    @agent.tool_plain(description="Search the build log. " + "Matches are listed in order. " * 150)
    def search_log(pattern: str) -> str:
        return pattern

    # The history alone (~250 tokens) fits; with the tool's ~1,100 tokens it does not.
    await agent.run("Last?", message_history=long_history(6), model_settings={"max_tokens": 16})
    assert isinstance(events[0], PreflightRecovery)
    assert len(sent(server, 0)["messages"]) < 1 + 12 + 1


async def test_a_window_learned_from_an_overflow_fits_the_next_run_before_sending(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    (record,) = [r for r in OVERFLOWS if r["id"] == "pe-080"]  # llama.cpp: 1,140 > 1,024
    events: list[Event] = []
    recovery = ContextRecovery(on_event=events.append)
    agent = Agent(model, capabilities=[recovery])
    server.add(replayed_error(record), Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    await agent.run("first", message_history=long_history())
    assert recovery.learned_windows == {MODEL: 1024}
    events.clear()
    await agent.run("second", message_history=long_history(60))  # a new run, a longer history
    assert len(server.requests) == 3  # the second run sent once: fitted before sending
    assert isinstance(events[0], PreflightRecovery) and events[0].window == 1024


async def test_an_output_limit_above_the_model_cap_is_lowered(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    (record,) = [r for r in recorded("output_cap_error") if r["id"] == "pe-024"]
    server.add(replayed_error(record), Scripted(body=CHAT_TEXT))
    events: list[Event] = []
    agent = agent_with(model, events)
    result = await agent.run("hi", model_settings={"max_tokens": 8192})
    assert result.output == ANSWER and isinstance(events[0], OutputCapLowered)
    assert sent(server, 1)["max_completion_tokens"] == 4096


async def test_an_answer_cut_by_a_full_window_is_recovered_and_continued(
    server: ReplayServer,
) -> None:
    # Anthropic's `model_context_window_exceeded` stop: a 200 answer, cut because the window
    # filled up while answering; pydantic-ai keeps the raw stop reason in provider_details.
    cut = {**_anthropic_message("Lisbon is"), "stop_reason": "model_context_window_exceeded"}
    server.add(Scripted(body=cut), Scripted(body=_anthropic_message(" the capital.")))
    events: list[Event] = []
    async with AsyncAnthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0) as client:
        provider = AnthropicProvider(anthropic_client=client)
        agent = agent_with(AnthropicModel(MODEL, provider=provider), events)
        result = await agent.run("Capital of Portugal?", message_history=long_history())
    assert result.output == "Lisbon is the capital."
    assert isinstance(events[0], OverflowDetected) and any(isinstance(e, Continued) for e in events)
    first, second = sent(server, 0)["messages"], sent(server, 1)["messages"]
    assert len(second) < len(first)
    assert second[-2]["role"] == "assistant" and second[-1]["role"] == "user"


async def test_a_cut_answer_is_continued_and_stitched(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    cut = copy.deepcopy(CHAT_TEXT)
    cut["choices"][0]["message"]["content"] = ANSWER[:40]  # type: ignore[index]
    cut["choices"][0]["finish_reason"] = "length"  # type: ignore[index]
    rest = copy.deepcopy(CHAT_TEXT)
    rest["choices"][0]["message"]["content"] = ANSWER[40:]  # type: ignore[index]
    server.add(Scripted(body=cut), Scripted(body=rest))
    events: list[Event] = []
    agent = agent_with(model, events)
    result = await agent.run("Weather in SF?", model_settings={"max_tokens": 16})
    assert result.output == ANSWER
    assert [type(e) for e in events] == [Escalated, Continued]
    second = sent(server, 1)
    assert second["max_completion_tokens"] == 32 > sent(server, 0)["max_completion_tokens"]
    assert second["messages"][-2:] == [
        {"role": "assistant", "content": ANSWER[:40]},
        {"role": "user", "content": CONTINUATION_MESSAGE},
    ]
    messages = result.all_messages()
    assert len(messages) == 2 and messages[-1].finish_reason == "stop"  # type: ignore[union-attr]
    assert result.usage.output_tokens == 2 * 37  # the cut answer's tokens are counted too


async def test_a_streamed_cut_answer_is_returned_as_it_was_streamed(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    server.add(Scripted(events=[data for _, data in sse_events("openai-chat-length.txt")]))
    events: list[Event] = []
    async with agent_with(model, events).run_stream("hi") as stream:
        text = await stream.get_output()
    assert text == '{"' and len(server.requests) == 1 and events == []


async def test_when_nothing_fits_the_error_says_what_was_tried(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    (record,) = [r for r in OVERFLOWS if r["provider"] == "llama.cpp-server"][:1]
    server.add(*[replayed_error(record)] * 4)
    events: list[Event] = []
    with pytest.raises(ContextRecoveryError) as raised:
        await agent_with(model, events).run("hi", message_history=long_history())
    assert isinstance(raised.value.__cause__.__cause__, ModelHTTPError)  # type: ignore[union-attr]
    assert isinstance(events[-1], RecoveryFailed)
    assert raised.value.attempts and len(server.requests) <= 4


async def test_tool_pairs_stay_valid_in_a_recovered_request(
    server: ReplayServer, model: OpenAIChatModel
) -> None:
    agent = agent_with(model, [], config=RecoveryConfig(emergency_keep_messages=3))

    @agent.tool_plain
    def read_log(lines: int) -> str:
        """Read the last lines of the build log."""
        return "\n".join(f"line {n}: compiling module {n}" for n in range(2000))

    history: list[pai.ModelMessage] = []
    for i in range(4):  # TestModel calls every tool: real calls, real large returns
        run = await agent.run(f"check the log {i}", model=TestModel(), message_history=history)
        history = run.all_messages()
    (record,) = [r for r in OVERFLOWS if r["id"] == "pe-037"]  # vLLM: 6,029 > 4,096 tokens
    server.add(replayed_error(record), Scripted(body=CHAT_TEXT))
    result = await agent.run("Summarise the log.", message_history=history)
    assert result.output == ANSWER and result.all_messages()[: len(history)] == history
    recovered = sent(server, 1)["messages"]
    assert len(json.dumps(recovered)) < len(json.dumps(sent(server, 0)["messages"])) / 2
    calls = [
        c["id"] for m in recovered if m["role"] == "assistant" for c in m.get("tool_calls", ())
    ]
    results = [m["tool_call_id"] for m in recovered if m["role"] == "tool"]
    assert calls == results  # every call answered, every result answers a call, in order
    assert results  # the recovered request still holds tool pairs


async def test_events_are_logged_under_chatcli(
    server: ReplayServer, model: OpenAIChatModel, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(replayed_error(OVERFLOWS[0]), Scripted(body=CHAT_TEXT))
    with caplog.at_level(logging.INFO, logger="chatcli"):
        await agent_with(model, []).run("hi", message_history=long_history())
    assert any(
        isinstance(getattr(r, "chatcli_event", None), OverflowDetected) for r in caplog.records
    )


async def test_anthropic_models_are_recovered_too(server: ReplayServer) -> None:
    (record,) = [r for r in OVERFLOWS if r["provider"] == "anthropic" and r["http_status"] == 413]
    server.add(replayed_error(record), Scripted(body=_anthropic_message("Hello!")))
    events: list[Event] = []
    async with AsyncAnthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0) as client:
        provider = AnthropicProvider(anthropic_client=client)
        agent = agent_with(AnthropicModel(MODEL, provider=provider), events)
        result = await agent.run("Hello, Claude", message_history=long_history())
    assert result.output == "Hello!" and isinstance(events[0], OverflowDetected)
    assert len(sent(server, 1)["messages"]) < len(sent(server, 0)["messages"])


def test_a_bad_window_is_an_error_that_names_it() -> None:
    with pytest.raises(ConfigError, match="context_window=0"):
        ContextRecovery(context_window=0)


async def test_each_run_has_its_own_state_and_shares_the_learned_windows() -> None:
    recovery: ContextRecovery[None] = ContextRecovery()
    first, second = await recovery.for_run(None), await recovery.for_run(None)  # type: ignore[arg-type]
    assert first is not recovery and second is not first
    assert isinstance(first, ContextRecovery) and isinstance(second, ContextRecovery)
    assert first.learned_windows is second.learned_windows is recovery.learned_windows


async def test_an_answer_paused_after_compacting_is_a_compaction_stop(
    server: ReplayServer,
) -> None:
    # Anthropic's `pause_after_compaction` answer (tests/data/native-compaction.json): the
    # block alone, stop_reason "compaction", which pydantic-ai calls "stop" and keeps raw in
    # provider_details; the policy says it paused rather than finishing an empty answer.
    paused = json.loads((Path(__file__).parent / "data" / "native-compaction.json").read_text())
    server.add(Scripted(body={**paused["anthropic_paused"], "model": MODEL}))
    events: list[Event] = []
    async with AsyncAnthropic(base_url=server.url, api_key="sk-ant-test", max_retries=0) as client:
        provider = AnthropicProvider(anthropic_client=client)
        agent = agent_with(AnthropicModel(MODEL, provider=provider), events)
        result = await agent.run("Go on.")
    assert [type(e) for e in events] == [CompactionPaused]
    answer = result.all_messages()[-1]
    assert isinstance(answer, pai.ModelResponse) and answer.finish_reason == "stop"

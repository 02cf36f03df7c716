"""Exact token counting (`chatcli.providers.counting`) through the real SDKs and a replay server.

Anthropic's and Gemini's count-tokens answers are the ones their API references show; the
llama.cpp answers were recorded from the real llama-server (the bodies below are checked
against the live server by tests/test_counting_llama_server.py). Each test asserts the request
body the SDK sent, the count, what is remembered, and that a failure falls back to the
estimate with a log line instead of raising.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from chatcli.client import Client
from chatcli.events import LevelApplied, LevelSkipped
from chatcli.messages import Message, Role, ToolCall
from chatcli.policy.prediction import tool_definitions
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import ToolSpec
from chatcli.providers.counting import (
    LlamaServerTokens,
    PreflightCounts,
    RemoteCounter,
    ServerCounted,
    calibrate_estimator,
    conversation_key,
    counter_for,
)
from chatcli.providers.gemini import Gemini
from chatcli.providers.openai import OpenAI
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator
from chatcli.tokens.exact import token_counter
from tests.fakes import WindowedProvider
from tests.recorded import provider_errors, replayed_error
from tests.replay import ReplayServer, Scripted, adapters_closed, replay_server

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

ANTHROPIC_KEY = "sk-ant-test-0123456789"
GEMINI_KEY = "AIzaSy-test-0123456789abcdef"

# The 200 answer of POST /v1/messages/count_tokens in Anthropic's API reference, for its
# example request (one user message, "Hello, world"):
# https://platform.claude.com/docs/en/api/messages/count_tokens
ANTHROPIC_COUNT = {"input_tokens": 2095}
# The response body of models.countTokens (totalTokens, promptTokensDetails[] of
# ModalityTokenCount) in Google's API reference, with the count its example gives for its
# example prompt ("( e.g., total_tokens: 10 )"): https://ai.google.dev/api/tokens
GEMINI_PROMPT = "The quick brown fox jumps over the lazy dog."
GEMINI_COUNT = {"totalTokens": 10, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 10}]}

# Recorded from llama-server (llama.cpp vendored in llama-cpp-python 0.3.36) serving
# chatcli.chat.tinymodel: the answers for the conversation LLAMA_CHAT, and the 404 it gives for a
# path it does not serve (what a build without /apply-template answers).
LLAMA_CHAT = (Message.system("You are terse."), Message.user("again"))
LLAMA_TEMPLATE = {
    "prompt": "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nagain<|im_end|>\n"
    "<|im_start|>assistant\n"
}
LLAMA_PROMPT_TOKENS = {
    "tokens": [
        *(348, 115, 337, 116, 101, 109, 10, 89, 111, 117, 259, 339, 256, 260, 115, 101, 46),
        *(349, 10, 348, 295, 260, 10, 97, 103, 301, 349, 10, 348, 97, 115, 115, 280, 116),
        *(97, 341, 10),
    ]
}
LLAMA_TEXT_TOKENS = {
    "You are terse.": {"tokens": [89, 111, 117, 259, 339, 256, 260, 115, 101, 46]},
    "again": {"tokens": [97, 103, 301]},
}
LLAMA_NOT_FOUND = {"error": {"message": "File Not Found", "type": "not_found_error", "code": 404}}
# A tool for LLAMA_CHAT: this server's template (ChatML) leaves tools out, so its answers for
# LLAMA_CHAT with it are LLAMA_TEMPLATE and LLAMA_PROMPT_TOKENS (checked live by
# tests/test_counting_llama_server.py).
LLAMA_TOOL = ToolSpec(
    name="read_file",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
LLAMA_TOOL_WIRE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}

CALL = ToolCall(id="toolu_01", name="read_file", arguments={"path": "plan.txt"})
WITH_TOOLS = (
    Message.system("You are a careful assistant."),
    Message.user("What does the plan say?"),
    Message.assistant("Reading it.", tool_calls=(CALL,)),
    Message.tool("toolu_01", "1. count tokens"),
)


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():  # adapters keep their SDK clients (and sockets) until closed
        yield


def anthropic(server: ReplayServer) -> Anthropic:
    return Anthropic("claude-opus-4-6", api_key=ANTHROPIC_KEY, base_url=server.url)


def gemini(server: ReplayServer) -> Gemini:
    return Gemini("gemini-2.0-flash", api_key=GEMINI_KEY, base_url=server.url)


def llama(server: ReplayServer) -> OpenAICompatible:
    return OpenAICompatible(server.url + "/v1", "chatcli-tiny", environ={})


def error_record(provider: str, status: int) -> dict[str, Any]:
    return next(r for r in provider_errors(provider) if r["http_status"] == status)


def fallback_logged(caplog: pytest.LogCaptureFixture) -> bool:
    return any(
        r.name == "chatcli" and r.levelno == logging.WARNING and "using the estimate" in r.message
        for r in caplog.records
    )


# -- Anthropic: messages.count_tokens ---------------------------------------------------------


def test_anthropic_count_sends_the_messages_api_shape_without_max_tokens(
    server: ReplayServer,
) -> None:
    server.add(Scripted(body=ANTHROPIC_COUNT))

    counted = anthropic(server).count_tokens((Message.user("Hello, world"),))

    assert counted == 2095
    [request] = server.requests
    assert (request.method, request.path) == ("POST", "/v1/messages/count_tokens")
    assert request.json() == {
        "model": "claude-opus-4-6",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hello, world"}]}],
    }


def test_anthropic_count_lifts_system_and_maps_tool_blocks_as_a_send_does(
    server: ReplayServer,
) -> None:
    server.add(Scripted(body=ANTHROPIC_COUNT))

    anthropic(server).count_tokens(WITH_TOOLS)

    body = server.requests[0].json()
    assert body["system"] == [{"type": "text", "text": "You are a careful assistant."}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][1]["content"][1] == {
        "type": "tool_use",
        "id": "toolu_01",
        "name": "read_file",
        "input": {"path": "plan.txt"},
    }
    assert body["messages"][2]["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "1. count tokens"}
    ]
    assert "max_tokens" not in body


def test_remote_counter_remembers_a_conversation_and_asks_for_a_new_one(
    server: ReplayServer,
) -> None:
    server.add(Scripted(body=ANTHROPIC_COUNT), Scripted(body={"input_tokens": 2101}))
    counter = RemoteCounter(anthropic(server))
    longer = (*WITH_TOOLS, Message.user("Thanks."))

    assert counter.count(WITH_TOOLS) == 2095
    assert counter.count(WITH_TOOLS) == 2095
    assert len(server.requests) == 1
    assert counter.count(longer) == 2101
    assert len(server.requests) == 2


def test_anthropic_rate_limited_count_falls_back_to_the_estimate_and_says_so(
    server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(replayed_error(error_record("anthropic", 429)), Scripted(body=ANTHROPIC_COUNT))
    counter = RemoteCounter(anthropic(server))

    with caplog.at_level(logging.WARNING, logger="chatcli"):
        counted = counter.count(WITH_TOOLS)

    assert counted == TokenEstimator().count(WITH_TOOLS)
    assert fallback_logged(caplog)
    assert ANTHROPIC_KEY not in caplog.text
    # A failure is not remembered: the next count asks again.
    assert counter.count(WITH_TOOLS) == 2095


def test_unreachable_server_falls_back_to_the_estimate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with replay_server() as gone:
        provider = anthropic(gone)
    fallback = TokenEstimator(chars_per_token=2.0)
    counter = RemoteCounter(provider, fallback=fallback)

    with caplog.at_level(logging.WARNING, logger="chatcli"):
        counted = counter.count(WITH_TOOLS)

    assert counted == fallback.count(WITH_TOOLS)
    assert fallback_logged(caplog)


# -- Gemini: models.count_tokens --------------------------------------------------------------


def test_gemini_count_sends_contents_to_count_tokens(server: ReplayServer) -> None:
    server.add(Scripted(body=GEMINI_COUNT))

    counted = gemini(server).count_tokens((Message.user(GEMINI_PROMPT),))

    assert counted == 10
    [request] = server.requests
    # The API version in the path is the SDK's choice (/v1beta in the API reference).
    assert request.method == "POST"
    assert request.path.endswith("/models/gemini-2.0-flash:countTokens")
    assert request.headers["x-goog-api-key"] == GEMINI_KEY
    assert request.json() == {"contents": [{"role": "user", "parts": [{"text": GEMINI_PROMPT}]}]}


def test_gemini_count_sends_system_text_as_a_first_user_content(server: ReplayServer) -> None:
    server.add(Scripted(body=GEMINI_COUNT))

    gemini(server).count_tokens(WITH_TOOLS)

    contents = server.requests[0].json()["contents"]
    assert contents[0] == {"role": "user", "parts": [{"text": "You are a careful assistant."}]}
    assert [c["role"] for c in contents] == ["user", "user", "model", "user"]
    call = {"id": "toolu_01", "name": "read_file", "args": {"path": "plan.txt"}}
    assert contents[2]["parts"][1] == {"functionCall": call}
    assert contents[3]["parts"][0]["functionResponse"]["response"] == {"output": "1. count tokens"}


def test_gemini_failed_count_falls_back_to_the_estimate(
    server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(replayed_error(error_record("google-gemini", 429)))

    with caplog.at_level(logging.WARNING, logger="chatcli"):
        counted = RemoteCounter(gemini(server)).count(WITH_TOOLS)

    assert counted == TokenEstimator().count(WITH_TOOLS)
    assert fallback_logged(caplog)
    assert GEMINI_KEY not in caplog.text


# -- llama.cpp: /apply-template + /tokenize ---------------------------------------------------


def test_llama_count_tokenizes_the_servers_own_template_rendering(server: ReplayServer) -> None:
    server.add(Scripted(body=LLAMA_TEMPLATE), Scripted(body=LLAMA_PROMPT_TOKENS))

    counted = LlamaServerTokens(llama(server)).count_tokens(LLAMA_CHAT)

    assert counted == len(LLAMA_PROMPT_TOKENS["tokens"]) == 37
    template, tokenize = server.requests
    assert (template.path, tokenize.path) == ("/apply-template", "/tokenize")
    assert template.json() == {
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "again"},
        ]
    }
    assert tokenize.json() == {"content": LLAMA_TEMPLATE["prompt"], "add_special": True}


def test_llama_count_of_a_request_with_tools_is_the_templates(server: ReplayServer) -> None:
    # The tools go to /apply-template as a request sends them: the count is what the
    # server's template makes of them (this one, ChatML, leaves them out: the answer is the
    # same prompt, checked live by tests/test_counting_llama_server.py).
    server.add(Scripted(body=LLAMA_TEMPLATE), Scripted(body=LLAMA_PROMPT_TOKENS))

    counted = LlamaServerTokens(llama(server)).count_tokens(LLAMA_CHAT, (LLAMA_TOOL,))

    assert counted == 37
    assert server.requests[0].json()["tools"] == [LLAMA_TOOL_WIRE]


def test_llama_without_apply_template_counts_texts_plus_overhead_once_per_text(
    server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(
        Scripted(status=404, body=LLAMA_NOT_FOUND),
        *(Scripted(body=answer) for answer in LLAMA_TEXT_TOKENS.values()),
    )
    source = LlamaServerTokens(llama(server), per_message=4)

    with caplog.at_level(logging.INFO, logger="chatcli"):
        first = source.count_tokens(LLAMA_CHAT)
    # "again" again: its count is remembered, and /apply-template is not asked twice.
    second = source.count_tokens((*LLAMA_CHAT, Message.assistant("again")))

    assert first == 10 + 3 + 2 * 4
    assert second == first + 3 + 4
    assert not source.templated
    assert "has no /apply-template" in caplog.text
    paths = [r.path for r in server.requests]
    assert paths == ["/apply-template", "/tokenize", "/tokenize"]
    texts = [r.json() for r in server.requests[1:]]
    assert texts == [{"content": text, "add_special": False} for text in LLAMA_TEXT_TOKENS]


def test_llama_server_without_any_counting_endpoint_falls_back(
    server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.add(*(Scripted(status=404, body=LLAMA_NOT_FOUND) for _ in range(2)))

    with caplog.at_level(logging.WARNING, logger="chatcli"):
        counted = RemoteCounter(LlamaServerTokens(llama(server))).count(LLAMA_CHAT)

    assert counted == TokenEstimator().count(LLAMA_CHAT)
    assert fallback_logged(caplog)


# -- wiring: counter_for, calibrate_estimator ---------------------------------------------------


def test_counter_for_picks_the_exact_counter_each_provider_has(server: ReplayServer) -> None:
    fallback = TokenEstimator(chars_per_token=3.0)
    local = OpenAICompatible(server.url + "/v1", "llama-3.1-8b", environ={})
    openai = OpenAI("gpt-4o", api_key="sk-test", environ={})

    assert isinstance(counter_for(anthropic(server)), RemoteCounter)
    assert isinstance(counter_for(gemini(server)), RemoteCounter)
    assert isinstance(counter_for(LlamaServerTokens(local)), RemoteCounter)
    assert type(counter_for(openai)) is type(token_counter("gpt-4o"))
    assert counter_for(openai).count(WITH_TOOLS) == token_counter("gpt-4o").count(WITH_TOOLS)
    # An OpenAI-compatible server is not assumed to be llama.cpp.
    assert counter_for(local, fallback=fallback) is fallback
    assert not server.requests


def test_calibrated_estimator_reproduces_the_exact_count(server: ReplayServer) -> None:
    history = (
        Message.system("Be brief."),
        *(Message.user(f"note {i}: " + "x" * 900) for i in range(8)),
    )
    server.add(Scripted(body=ANTHROPIC_COUNT))

    estimator = calibrate_estimator(counter_for(anthropic(server)), history)

    assert estimator != TokenEstimator()
    assert abs(estimator.count(history) - 2095) <= 1
    assert estimator.per_message == TokenEstimator().per_message


def test_calibration_keeps_the_estimator_when_the_count_fails(
    server: ReplayServer, caplog: pytest.LogCaptureFixture
) -> None:
    base = TokenEstimator(chars_per_token=3.3)
    server.add(replayed_error(error_record("anthropic", 429)))

    with caplog.at_level(logging.WARNING, logger="chatcli"):
        estimator = calibrate_estimator(
            RemoteCounter(anthropic(server)), WITH_TOOLS, estimator=base
        )

    assert estimator is base
    assert fallback_logged(caplog)


class Failing:
    """A counter that raises, as a hand-written one might."""

    def count(self, messages: Sequence[Message]) -> int:
        raise OSError("tokenizer file missing")


def test_calibration_survives_any_counter_failing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="chatcli"):
        estimator = calibrate_estimator(Failing(), WITH_TOOLS)

    assert estimator == TokenEstimator()
    assert fallback_logged(caplog)
    assert "tokenizer file missing" in caplog.text


def test_calibrating_on_an_estimate_changes_nothing() -> None:
    base = TokenEstimator(chars_per_token=2.5)

    assert calibrate_estimator(TokenEstimator(), WITH_TOOLS, estimator=base) is base


def test_calibration_on_tiktoken_matches_tiktokens_count() -> None:
    counter = token_counter("gpt-4o")
    if isinstance(counter, TokenEstimator):
        pytest.skip("tiktoken or bpe-openai is not installed")
    history = (*WITH_TOOLS, Message.assistant("The plan has one step: count tokens. " * 40))

    estimator = calibrate_estimator(counter, history)

    assert abs(estimator.count(history) - counter.count(history)) <= 1


# -- the cache ------------------------------------------------------------------------------


class Tally:
    """A count source that counts characters and records each conversation it was asked."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def count_tokens(self, messages: Sequence[Message]) -> int:
        self.asked.append(len(messages))
        return sum(len(m.text) for m in messages)


def test_the_least_recently_used_count_is_forgotten_first() -> None:
    tally = Tally()
    counter = RemoteCounter(tally, cache_size=2)
    one, two, three = (Message.user("a"),), (Message.user("bb"),) * 2, (Message.user("c"),) * 3

    for conversation in (one, two, one, three, one, two):
        counter.count(conversation)

    # `one` was used again before `three` came, so `two` was the one forgotten.
    assert tally.asked == [1, 2, 3, 2]


def test_an_empty_conversation_is_zero_tokens_without_asking() -> None:
    tally = Tally()

    assert RemoteCounter(tally).count(()) == 0
    assert tally.asked == []


def test_cache_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="cache_size"):
        RemoteCounter(Tally(), cache_size=0)


def test_conversation_key_sees_provider_data_and_order() -> None:
    signed = Message(role=WITH_TOOLS[1].role, parts=WITH_TOOLS[1].parts, provider_details={"x": 1})

    assert conversation_key(WITH_TOOLS) == conversation_key(tuple(WITH_TOOLS))
    assert conversation_key(WITH_TOOLS) != conversation_key(WITH_TOOLS[::-1])
    replaced = (WITH_TOOLS[0], signed, *WITH_TOOLS[2:])
    assert conversation_key(WITH_TOOLS) != conversation_key(replaced)


# -- PreflightCounts: many requests to one provider (the proxy's upstream) ------------------------


def test_preflight_counts_only_the_requests_near_the_window() -> None:
    counts = PreflightCounts(OpenAI("gpt-4o", api_key="sk-test", environ={}))
    small = (Message.system("Be brief."), Message.user("hi"))
    big = (
        Message.system("Be brief."),
        *(Message.user("note: " + "word " * 200) for _ in range(10)),
    )
    estimate = MarginEstimator().count(big)
    assert counts.worth_counting(big, window=estimate * 2)
    assert not counts.worth_counting(big, window=estimate * 5)  # far below: not counted
    assert not counts.worth_counting(small, window=None)  # no window, no decision
    assert not PreflightCounts(object()).worth_counting(big, window=estimate)  # no counter


def test_preflight_calibrates_the_estimate_on_the_exact_count() -> None:
    counts = PreflightCounts(OpenAI("gpt-4o", api_key="sk-test", environ={}))
    prompt = (*tool_definitions((LLAMA_TOOL,)), *WITH_TOOLS)  # as the policy counts it
    exact = token_counter("gpt-4o").count(prompt)
    estimator = counts.estimator(WITH_TOOLS, (LLAMA_TOOL,))
    assert isinstance(estimator, MarginEstimator) and estimator.trusted
    assert estimator.count(prompt) == exact
    # A view of fewer messages is predicted from the calibrated scale, not counted again.
    assert estimator.count(prompt[:3]) < exact


def test_preflight_asks_a_declared_windows_server_which_it_is_once(
    server: ReplayServer,
) -> None:
    # An OpenAI-compatible server whose window was declared: not asked when the proxy
    # starts; /props is asked when a request first comes near the window (LM Studio's
    # answer: not llama.cpp), then never again, and the estimate is used.
    server.add(Scripted(body={"error": "Unexpected endpoint or method. (GET /props)"}))
    provider = OpenAICompatible(server.url + "/v1", "m", environ={}, context_window=20)
    counts = PreflightCounts(provider)
    assert counts.unknown and not server.requests
    assert counts.worth_counting(LLAMA_CHAT, window=20)
    assert counts.estimator(LLAMA_CHAT) == MarginEstimator()
    assert not counts.unknown and counts.counter is None
    assert not counts.worth_counting(LLAMA_CHAT, window=20)
    assert [r.path.partition("?")[0] for r in server.requests] == ["/props"]


# -- A level checked against the upstream's own count -------------------------------------------


class _TwoTokenizers(WindowedProvider):
    """A server whose tokenizer reads the system prompt at 4 chars a token and the user's
    pasted text at 1.5: one scale calibrated on a request the paste fills misjudges a view
    without most of it."""

    def count(self, messages: Sequence[Message]) -> int:
        return sum(
            math.ceil(len(m.text) / (4.0 if m.role is Role.SYSTEM else 1.5)) + self.per_message
            for m in messages
        )


def _pasted_conversation() -> list[Message]:
    system = Message.system(
        " ".join(f"Rule {i}: answer briefly and cite sources." for i in range(240))
    )
    paste = "\n".join(f"{i}: error at module line {i * 7} in handler" for i in range(300))
    return [system, Message.user(paste + "\n\nWhat failed first?")]


@pytest.mark.parametrize("exact", [True, False])
def test_a_level_the_calibration_would_skip_is_checked_against_the_servers_count(
    exact: bool,
) -> None:
    # The upstream's count of the whole request calibrates the estimate (as the proxy's
    # pre-flight does): one scale, learned where the paste dominates, overrates the system
    # prompt. A level that calibration says misses the window is counted by the upstream
    # before it is skipped (`ServerCounted.exact`): level 2 is then sent and answered; without
    # the count it is skipped, and only the last level's near-miss chance is left.
    provider = _TwoTokenizers(window=4000, chars_per_token=4.0, answer=lambda _: "The first.")
    history = _pasted_conversation()
    prompt = provider.count(history)
    assert prompt > 2 * provider.window  # the paste is what overflows
    source = (lambda ms: provider.count(ms)) if exact else (lambda ms: None)
    client = Client(provider, estimator=ServerCounted(source=source).calibrated(history, prompt))
    reply = client.send(history, max_tokens=200)
    assert len(provider.requests) == 1  # no rejected call either way
    assert provider.count(provider.requests[0].messages) + 200 <= provider.window
    applied = [e.level for e in reply.events if isinstance(e, LevelApplied)]
    skipped = [e.level for e in reply.events if isinstance(e, LevelSkipped) and not e.unchanged]
    assert (applied, skipped) == (([2], []) if exact else ([3], [2]))

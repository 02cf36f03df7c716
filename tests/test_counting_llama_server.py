"""Exact token counts from the real C++ llama-server (tests/servers.py: the tiny model, whose
tokenizer is byte-level BPE with a ChatML template, `-c 512 -np 1`).

What is asserted is what pre-flight relies on: `LlamaServerTokens` counts exactly the prompt
tokens the server itself counts for the same messages, as it reports them in a completion's
usage and in its overflow error; and a `Client` given an estimator calibrated on one such
count recovers an over-long session before sending it, where the plain estimate first spends
a failed call.
"""

from __future__ import annotations

import httpx
import pytest

from chatcli.config import RecoveryConfig
from chatcli.errors import ErrorKind, ProviderError
from chatcli.events import Event, OverflowDetected, PreflightRecovery
from chatcli.messages import Message, ToolCall
from chatcli.providers.base import Request, Response
from chatcli.providers.counting import LlamaServerTokens, RemoteCounter, calibrate_estimator
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Client
from chatcli.tokens.estimate import TokenEstimator
from tests.test_counting import (
    LLAMA_CHAT,
    LLAMA_NOT_FOUND,
    LLAMA_PROMPT_TOKENS,
    LLAMA_TEMPLATE,
    LLAMA_TEXT_TOKENS,
    LLAMA_TOOL,
)

# The fixtures. Not imported by name: a plugin must not be imported before pytest loads it.
pytest_plugins = ("tests.servers",)

MODEL = "chatcli-tiny"
CALL = ToolCall(id="call_1", name="read_file", arguments={"path": "notes/plan.txt"})
CONVERSATIONS = {
    "one user message": (Message.user("Say something about the context window."),),
    "system and turns": (
        Message.system("You are terse."),
        Message.user("Summarise the plan in one line."),
        Message.assistant("Ship the counter first, then the docs."),
        Message.user("And after that?"),
    ),
    "tool call and result": (
        Message.user("What does the plan say?"),
        Message.assistant("", tool_calls=(CALL,)),
        Message.tool("call_1", "1. count tokens exactly\n2. never break a send"),
    ),
    "non-ASCII text": (Message.user("naïve café, 東京 and ☃: bytes, not characters"),),
}
# A session of short turns, about 1,190 prompt tokens: well over the 512 window, though the
# default estimate (4 chars per token; this tokenizer packs about 1.5) thinks it nearly fits.
SESSION = (
    *(
        message
        for i in range(14)
        for message in (
            Message.user(f"Question {i}: what changed in the plan since the last review?"),
            Message.assistant(f"Answer {i}: the counter landed and the docs are next."),
        )
    ),
    Message.user("Summarise where we are."),
)
# About 1,150 prompt tokens with the tiny model's tokenizer: over twice the 512 window.
OVERFLOWING = (Message.user("The context window fills up. " * 60),)


@pytest.fixture
def provider(llama_server: str) -> OpenAICompatible:
    return OpenAICompatible(llama_server + "/v1", MODEL, environ={})


def reported_prompt_tokens(provider: OpenAICompatible, messages: tuple[Message, ...]) -> int:
    """The prompt size the server reports for a real one-token completion of `messages`."""
    response = provider.complete(Request(messages=messages, max_tokens=1))
    return response.usage.prompt_tokens


@pytest.mark.llama_server
@pytest.mark.parametrize("name", CONVERSATIONS)
def test_count_equals_the_prompt_tokens_of_a_real_completion(
    provider: OpenAICompatible, name: str
) -> None:
    messages = CONVERSATIONS[name]
    source = LlamaServerTokens(provider)

    counted = source.count_tokens(messages)

    assert source.templated  # this server has /apply-template: the exact path was taken
    assert counted == reported_prompt_tokens(provider, messages)


@pytest.mark.llama_server
def test_count_with_tools_equals_the_prompt_tokens_of_a_real_completion_with_them(
    provider: OpenAICompatible,
) -> None:
    # The tools are rendered by the server's template as a request's are (this ChatML one
    # leaves them out), not counted as a message of their JSON.
    messages = CONVERSATIONS["tool call and result"]
    request = Request(messages=messages, tools=(LLAMA_TOOL,), max_tokens=1)
    reported = provider.complete(request).usage.prompt_tokens

    assert LlamaServerTokens(provider).count_tokens(messages, (LLAMA_TOOL,)) == reported
    assert LlamaServerTokens(provider).count_tokens(LLAMA_CHAT, (LLAMA_TOOL,)) == 37


@pytest.mark.llama_server
def test_count_of_an_overflowing_prompt_equals_the_size_in_the_overflow_error(
    provider: OpenAICompatible, n_ctx: int
) -> None:
    counted = RemoteCounter(LlamaServerTokens(provider)).count(OVERFLOWING)

    with pytest.raises(ProviderError) as raised:
        provider.complete(Request(messages=OVERFLOWING, max_tokens=16))

    info = raised.value.info
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert counted > n_ctx  # pre-flight would have known, without the failed call
    assert counted == info.prompt_tokens


@pytest.mark.llama_server
def test_an_estimator_calibrated_on_one_count_predicts_the_server(
    provider: OpenAICompatible,
) -> None:
    messages = CONVERSATIONS["system and turns"]
    longer = (*messages, Message.assistant("Then the tests. " * 10), Message.user("Fine."))
    exact = RemoteCounter(LlamaServerTokens(provider))

    calibrated = calibrate_estimator(exact, messages)

    assert calibrated != TokenEstimator()
    assert abs(calibrated.count(messages) - reported_prompt_tokens(provider, messages)) <= 1
    # The ratio learned on one conversation carries to a longer one of the same kind much
    # better than the default ratio does.
    actual = reported_prompt_tokens(provider, longer)
    assert abs(calibrated.count(longer) - actual) < abs(TokenEstimator().count(longer) - actual)


@pytest.mark.llama_server
def test_the_recorded_answers_replayed_in_test_counting_are_still_the_servers(
    provider: OpenAICompatible, llama_server: str
) -> None:
    wire = provider.params(Request(messages=LLAMA_CHAT))["messages"]
    assert provider.post_json("/apply-template", {"messages": wire}) == LLAMA_TEMPLATE
    prompt = {"content": LLAMA_TEMPLATE["prompt"], "add_special": True}
    assert provider.post_json("/tokenize", prompt) == LLAMA_PROMPT_TOKENS
    for text, tokens in LLAMA_TEXT_TOKENS.items():
        assert provider.post_json("/tokenize", {"content": text, "add_special": False}) == tokens
    missing = httpx.post(llama_server + "/no-such-endpoint", json={}, timeout=10.0)
    assert (missing.status_code, missing.json()) == (404, LLAMA_NOT_FOUND)
    with pytest.raises(ProviderError) as raised:
        provider.post_json("/no-such-endpoint", {})
    assert raised.value.info.status == 404  # what LlamaServerTokens takes as "no template"


class Calls:
    """The provider, with its calls counted."""

    def __init__(self, provider: OpenAICompatible) -> None:
        self.provider, self.calls = provider, 0

    def complete(self, request: Request) -> Response:
        self.calls += 1
        return self.provider.complete(request)

    async def acomplete(self, request: Request) -> Response:
        self.calls += 1
        return await self.provider.acomplete(request)


def send_session(
    provider: OpenAICompatible, estimator: TokenEstimator | None, window: int
) -> tuple[int, list[Event]]:
    """Send SESSION through a Client (no escalations: the tiny model always stops at
    max_tokens); the provider calls it took and the events it emitted."""
    counted, events = Calls(provider), list[Event]()
    config = RecoveryConfig(max_token_escalations=0)
    client = Client(
        counted, config, estimator=estimator, hooks=[events.append], context_window=window
    )
    client.send(SESSION, max_tokens=16)
    return counted.calls, events


@pytest.mark.llama_server
def test_calibrated_estimator_recovers_before_sending_instead_of_after_a_failed_call(
    provider: OpenAICompatible, n_ctx: int
) -> None:
    exact = RemoteCounter(LlamaServerTokens(provider))
    assert exact.count(SESSION) > n_ctx

    plain_calls, plain_events = send_session(provider, None, n_ctx)
    calibrated_calls, calibrated_events = send_session(
        provider, calibrate_estimator(exact, SESSION), n_ctx
    )

    # The plain estimate sends the session, fails, then recovers: a wasted call.
    assert isinstance(plain_events[0], OverflowDetected)
    assert plain_calls == 2
    # Calibrated on one exact count, pre-flight recovers first and the one call succeeds.
    assert isinstance(calibrated_events[0], PreflightRecovery)
    assert not any(isinstance(e, OverflowDetected) for e in calibrated_events)
    assert calibrated_calls == 1

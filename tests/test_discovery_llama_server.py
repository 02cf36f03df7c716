"""Estimates that land, against the real engines (tests/servers.py: the tiny model, `-c 512
-np 1` for llama-server, `n_ctx` 256 for the embedded engine).

- The window is learned from the real llama-server's `/props` before any request, and a chat
  made by the registry knows it up front; with a window the user declared, `/props` tells
  that the server's own tokenizer can count.
- With it and the default estimator (the server's own tokenizer), an over-long session is
  recovered before sending: one call, where an unknown window costs a rejected call first.
- The embedded engine counts a prompt exactly as its completion reports it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chatcli.config import RecoveryConfig
from chatcli.events import Event, OverflowDetected, PreflightRecovery
from chatcli.messages import Message
from chatcli.providers.base import Request
from chatcli.providers.counting import (
    LlamaServerTokens,
    RemoteCounter,
    default_estimator,
    local_exact_counter,
)
from chatcli.providers.discovery import (
    ServerWindow,
    discover_window,
)
from chatcli.providers.llama_cpp import LlamaCpp
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.providers.registry import create_provider
from chatcli.recovery import Client
from chatcli.tokens.estimate import MarginEstimator
from chatcli.tokens.exact import CountingEstimator
from tests.test_counting_llama_server import MODEL, Calls, send_session

pytest_plugins = ("tests.servers",)


@pytest.mark.llama_server
def test_the_window_is_read_from_the_real_servers_props(llama_server: str, n_ctx: int) -> None:
    found = discover_window(llama_server + "/v1", MODEL)
    assert found == ServerWindow(tokens=n_ctx, server="llama.cpp", source="GET /props n_ctx")


@pytest.mark.llama_server
def test_a_provider_from_the_registry_recovers_before_sending(
    llama_server: str, n_ctx: int
) -> None:
    learned = create_provider(
        "openai-compatible", model=MODEL, base_url=llama_server + "/v1", environ={}
    )
    assert isinstance(learned, OpenAICompatible)
    assert learned.context_window == n_ctx
    assert learned.structured_output_supported()  # llama.cpp enforces a json_schema
    declared = OpenAICompatible("http://127.0.0.1:9/v1", MODEL, context_window=n_ctx)
    assert not declared.structured_output_supported()  # a server never identified: no
    estimator = default_estimator(learned)
    assert isinstance(estimator, CountingEstimator)
    assert isinstance(estimator.counter, RemoteCounter)
    assert isinstance(estimator.counter.source, LlamaServerTokens)

    assert learned.context_window is not None
    calls, events = send_session(learned, estimator, learned.context_window)

    assert isinstance(events[0], PreflightRecovery)
    assert not any(isinstance(e, OverflowDetected) for e in events)
    assert calls == 1


@pytest.mark.llama_server
def test_with_a_declared_window_the_server_is_asked_which_it_is(
    llama_server: str, n_ctx: int
) -> None:
    # The user declared the window: nothing is asked when the provider is made; asked, /props
    # tells that the server is llama.cpp, and its tokenizer counts (the proxy asks when a
    # request first comes near the window); the declared window is the one used.
    declared = OpenAICompatible(llama_server + "/v1", MODEL, environ={}, context_window=n_ctx - 8)
    assert isinstance(default_estimator(declared), MarginEstimator)
    found = declared.identify_server()
    assert found is not None and found.server == "llama.cpp"
    assert declared.context_window == n_ctx - 8
    estimator = default_estimator(declared)
    assert isinstance(estimator, CountingEstimator)
    assert isinstance(estimator.counter, RemoteCounter)
    assert isinstance(estimator.counter.source, LlamaServerTokens)

    calls, events = send_session(declared, estimator, n_ctx - 8)

    assert isinstance(events[0], PreflightRecovery)
    assert not any(isinstance(e, OverflowDetected) for e in events)
    assert calls == 1


@pytest.mark.llama_server
def test_without_the_window_the_first_call_is_rejected(llama_server: str) -> None:
    # What a chat against llama-server did before: the window unknown, the session is sent,
    # rejected, and recovered from the error's numbers.
    unknown = OpenAICompatible(llama_server + "/v1", MODEL, environ={})
    assert unknown.context_window is None

    calls, events = send_session(unknown, None, None)

    assert isinstance(events[0], OverflowDetected)
    assert calls == 2


@pytest.fixture(scope="module")
def engine(tiny_model: Path) -> Iterator[LlamaCpp]:
    pytest.importorskip(
        "xllamacpp", reason="xllamacpp is not installed: pip install 'chatcli-recovery[local]'"
    )
    provider = LlamaCpp(tiny_model, n_ctx=256, seed=1, n_threads=1)
    yield provider
    provider.close()


@pytest.mark.llama_server
def test_the_embedded_engine_counts_what_its_completion_reports(engine: LlamaCpp) -> None:
    messages = (
        Message.system("You are terse."),
        Message.user("Say something about the window."),
        Message.assistant("It is small."),
        Message.user("How small?"),
    )
    reported = engine.complete(Request(messages=messages, max_tokens=1)).usage.prompt_tokens

    assert engine.count_tokens(messages) == reported
    estimator = default_estimator(engine)
    assert isinstance(estimator, CountingEstimator)
    assert local_exact_counter(engine) is not None
    assert estimator.count(messages) == reported


def near_the_window(counter: RemoteCounter, n_ctx: int, reserve: int) -> tuple[Message, ...]:
    """A session the server rejects by a few tokens: its exact count is over `n_ctx`, but by
    less than the 10% (output reserve included) an untrusted prediction is let through with.
    Grown a word at a time, so the count crosses the window by a few tokens only."""
    turns = tuple(
        message
        for i in range(4)
        for message in (
            Message.user(f"Question {i}: what changed in the plan since the last review?"),
            Message.assistant(f"Answer {i}: the counter landed and the docs are next."),
        )
    )
    for words in range(1000):  # bounded: a word is a few tokens, the window 512
        session = (*turns, Message.user("Summarise where we are" + " now" * words))
        if counter.count(session) > n_ctx:
            break
    assert n_ctx < counter.count(session) and counter.count(session) + reserve <= n_ctx * 1.1
    return session


@pytest.mark.llama_server
def test_an_exact_count_a_few_percent_over_the_window_costs_no_call(
    llama_server: str, n_ctx: int
) -> None:
    provider = create_provider(
        "openai-compatible", model=MODEL, base_url=llama_server + "/v1", environ={}
    )
    assert isinstance(provider, OpenAICompatible)
    estimator = default_estimator(provider)
    assert isinstance(estimator, CountingEstimator)
    assert isinstance(estimator.counter, RemoteCounter)
    session = near_the_window(estimator.counter, n_ctx, reserve=16)
    counted, events = Calls(provider), list[Event]()
    client = Client(
        counted,
        RecoveryConfig(max_token_escalations=0),
        estimator=estimator,
        hooks=[events.append],
        context_window=provider.context_window,
    )
    client.send(session, max_tokens=16)
    assert not any(isinstance(e, OverflowDetected) for e in events)
    assert counted.calls == 1

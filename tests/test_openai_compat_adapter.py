"""OpenAICompatible against the real SDK and replayed bodies of OpenAI-compatible servers.

Error bodies are the records of provider-errors.json (vLLM, llama.cpp, Ollama, TGI, proxies...);
answers and streams are the recorded OpenAI ones (same wire format), see test_openai_adapter.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.config import RecoveryConfig
from chatcli.errors import ConfigError, ErrorKind, ProviderError
from chatcli.history.retain import Retention, retain
from chatcli.messages import Message, Role, StopReason, Usage
from chatcli.providers.base import Request
from chatcli.providers.openai_compat import OpenAICompatible, TruncationCheck
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator
from tests.recorded import replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, adapters_closed
from tests.strategies import conversations
from tests.test_openai_adapter import (
    CHAT_TEXT,
    KEY,
    MODES,
    ask,
    ask_stream,
    assert_classified,
    error_records,
    record,
    user,
)

DATA = Path(__file__).parent / "data"

COMPAT_PROVIDERS = (
    "vllm", "llama.cpp-server", "ollama", "lm-studio", "groq", "deepseek", "fastchat",
    "cerebras", "mlx-serve", "github-copilot", "huggingface-tgi", "unknown-openai-compatible",
    "openrouter", "sglang", "nginx-proxy", "openresty-proxy", "g4f",
)  # fmt: skip


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():
        yield


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


Make = Callable[..., OpenAICompatible]


@pytest.fixture
async def make(server: ReplayServer) -> AsyncIterator[Make]:
    """Builds providers for the replay server and closes their SDK clients afterwards."""
    made: list[OpenAICompatible] = []

    def build(**kwargs: Any) -> OpenAICompatible:
        provider = OpenAICompatible(server.url + "/v1", "local-model", **{"environ": {}, **kwargs})
        made.append(provider)
        return provider

    yield build
    for provider in made:
        provider.close()
        await provider.aclose()


@pytest.fixture
def compat(make: Make) -> OpenAICompatible:
    return make()


def _headers(server: ReplayServer) -> dict[str, str]:
    return {k.lower(): v for k, v in server.requests[-1].headers.items()}


def answer_with_prompt_tokens(prompt_tokens: int) -> dict[str, Any]:
    """The recorded chat answer, with the prompt size a server reported instead of 14."""
    body = copy.deepcopy(CHAT_TEXT)
    body["usage"]["prompt_tokens"] = prompt_tokens
    return body


async def test_sends_max_tokens_not_max_completion_tokens(
    compat: OpenAICompatible, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    response = await ask(compat, Request(messages=user().messages, max_tokens=64), mode)
    body = server.requests[0].json()
    assert body["max_tokens"] == 64
    assert "max_completion_tokens" not in body
    assert body["model"] == "local-model"
    assert response.stop_reason is StopReason.END_TURN


async def test_a_recovered_view_goes_out_with_alternating_roles(
    compat: OpenAICompatible, server: ReplayServer, mode: str
) -> None:
    # Level 2 by tokens pins the session's first request in front of the newest turns, which
    # start with a user message: two user messages in a row, which a chat template that
    # wants the roles to alternate rejects. They go out as one user turn.
    history = [Message.system("Be brief."), Message.user("Goal: review my CSV tool.")]
    history.append(Message.assistant("Sure."))
    for i in range(8):
        history += [
            Message.user(f"question {i}: " + "details " * 60),
            Message.assistant("ok " * 80),
        ]
    history.append(Message.user("What is a tuple?"))
    room = Retention(room=800, count=TokenEstimator().count)
    view = retain(history, 2, RecoveryConfig(), room).messages
    roles = [m.role for m in view]
    assert any(a is b is Role.USER for a, b in itertools.pairwise(roles))
    server.add(Scripted(body=CHAT_TEXT))
    await ask(compat, Request(messages=view, max_tokens=64), mode)
    sent = server.requests[0].json()["messages"]
    sent_roles = [m["role"] for m in sent]
    assert not any(a == b == "user" for a, b in itertools.pairwise(sent_roles))
    assert sent[1]["content"].startswith("Goal: review my CSV tool.\n\nquestion ")
    assert "".join(m["content"] for m in sent).count("What is a tuple?") == 1


async def test_never_forwards_openai_key(
    make: Make, server: ReplayServer, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server.add(Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    for provider in (make(environ=None), make(environ={"OPENAI_API_KEY": KEY})):
        await ask(provider, user(), mode)
        assert KEY not in _headers(server)["authorization"]


async def test_key_from_named_variable(make: Make, server: ReplayServer, mode: str) -> None:
    server.add(Scripted(body=CHAT_TEXT))
    provider = make(api_key_env="GROQ_API_KEY", environ={"GROQ_API_KEY": KEY})
    await ask(provider, user(), mode)
    assert _headers(server)["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(provider)


def test_missing_named_key_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="GROQ_API_KEY"):
        OpenAICompatible("http://127.0.0.1:9/v1", "m", api_key_env="GROQ_API_KEY", environ={})


@pytest.mark.parametrize("body", error_records(*COMPAT_PROVIDERS))
async def test_real_server_error_bodies_are_classified(
    compat: OpenAICompatible, server: ReplayServer, mode: str, body: dict[str, Any]
) -> None:
    server.add(replayed_error(body))
    with pytest.raises(ProviderError) as caught:
        await ask(compat, user(), mode)
    assert_classified(caught.value, body)


# --- silent truncation ---------------------------------------------------------------------

# pe-078: Ollama logged `truncating input prompt limit=2048 prompt=74706 ... new=2048` and
# answered 200; its usage then reports the truncated prompt, 2048 tokens.
PE078 = record("pe-078", "ollama")["numbers"]


def long_request(tokens: int) -> Request:
    """A prompt the default estimator puts at about `tokens` tokens (4 chars per token)."""
    return Request(messages=(Message.user("lorem ipsum " * (tokens // 3)),))


async def test_silent_truncation_is_an_overflow(
    make: Make, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(body=answer_with_prompt_tokens(PE078["limit"])))
    provider = make(context_window=PE078["limit"])
    with pytest.raises(ProviderError, match="detected from usage") as caught:
        await ask(provider, long_request(PE078["prompt_tokens"]), mode)
    info = caught.value.info
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert info.limit == PE078["limit"]
    assert info.prompt_tokens is not None and info.prompt_tokens > 70_000


async def test_silent_truncation_in_a_stream(make: Make, server: ReplayServer, mode: str) -> None:
    # The recorded stream reports 14 prompt tokens; the request is far larger than the window.
    server.add(Scripted(events=sse_events("openai-chat-text.txt")))
    with pytest.raises(ProviderError, match="detected from usage"):
        await ask_stream(make(context_window=4_096), long_request(5_000), mode)


async def test_truncation_check_can_be_turned_off(
    make: Make, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(body=answer_with_prompt_tokens(PE078["limit"])))
    provider = make(context_window=PE078["limit"], truncation_check=None)
    response = await ask(provider, long_request(PE078["prompt_tokens"]), mode)
    assert response.usage.prompt_tokens == PE078["limit"]


def test_truncation_check_settings_reach_the_rule() -> None:
    # 400 of ~1,000 tokens arrived, for a 512-token window: cut at ratio 0.5, not at 0.3.
    usage = Usage(input_tokens=400)
    assert TruncationCheck().truncation(usage, 1_000, 512) is not None
    assert TruncationCheck(min_ratio=0.3).truncation(usage, 1_000, 512) is None
    assert TruncationCheck(min_estimate=2_000).truncation(usage, 1_000, 512) is None


# --- stop reasons and quirks ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("max_tokens", "expected"),
    [(None, StopReason.CONTEXT_WINDOW), (1, StopReason.MAX_TOKENS)],
    ids=["window-filled", "output-limit-reached"],
)
async def test_length_stop_when_the_window_filled_up(
    make: Make, server: ReplayServer, mode: str, max_tokens: int | None, expected: StopReason
) -> None:
    # The recorded stream ends with finish_reason "length" after 17 prompt + 1 output tokens.
    server.add(Scripted(events=sse_events("openai-chat-length.txt")))
    provider = make(context_window=18)
    request = Request(messages=user().messages, max_tokens=max_tokens)
    _, response = await ask_stream(provider, request, mode)
    assert response.stop_reason is expected


def _llama_cpp_python_overflow() -> Scripted:
    """llama-cpp-python's real answer to an over-long unstreamed prompt (recorded)."""
    recorded = json.loads((DATA / "llama-cpp-python-overflow.json").read_text())
    return Scripted(status=recorded["http_status"], body=json.loads(recorded["body"]))


async def test_an_empty_stream_is_asked_again_without_streaming_to_get_the_real_error(
    make: Make, server: ReplayServer, mode: str
) -> None:
    # llama-cpp-python answers an over-long streamed prompt with 200 and no events at all;
    # the same request unstreamed gets its real overflow error, numbers included.
    server.add(Scripted(events=[]), _llama_cpp_python_overflow())
    with pytest.raises(ProviderError) as caught:
        await ask_stream(make(), long_request(1_000), mode)
    info = caught.value.info
    assert (info.kind, info.prompt_tokens, info.limit) == (ErrorKind.CONTEXT_OVERFLOW, 1164, 512)
    first, second = (r.json() for r in server.requests)
    assert first["stream"] is True and "stream" not in second
    assert first["messages"] == second["messages"]


async def test_an_empty_stream_then_an_answer_streams_that_answer(
    make: Make, server: ReplayServer, mode: str
) -> None:
    server.add(Scripted(events=[]), Scripted(body=CHAT_TEXT))
    text, response = await ask_stream(make(), user(), mode)
    assert text == response.message.text != ""
    assert len(server.requests) == 2


async def test_a_key_echoed_back_by_the_server_never_reaches_the_error(
    make: Make, server: ReplayServer, mode: str
) -> None:
    # Some servers and proxies echo the credential they refused (seen with local gateways).
    key = "sk-local-0123456789abcdef"
    body = {"error": {"message": f"Invalid key: Bearer {key}", "type": "invalid_request_error"}}
    server.add(Scripted(status=401, body=body))
    with pytest.raises(ProviderError) as caught:
        await ask(make(api_key=key), user(), mode)
    assert key not in str(caught.value) and key not in repr(caught.value.info)
    assert caught.value.info.kind is ErrorKind.AUTH


@settings(max_examples=200, deadline=None)
@given(
    messages=conversations(),
    estimator=st.sampled_from(
        [TokenEstimator(), TokenEstimator(chars_per_token=3.3, per_message=7), MarginEstimator()]
    ),
)
def test_the_checks_estimates_in_one_pass_are_the_estimators_counts(
    messages: list[Message], estimator: TokenEstimator
) -> None:
    # The whole prompt, before the last assistant message and after it: what three counts of
    # the estimator give, for any conversation (tool calls, several parts), any estimator.
    last = max((i for i, m in enumerate(messages) if m.role is Role.ASSISTANT), default=-1)
    before = estimator.count(messages[: last + 1]) if last >= 0 else 0
    expected = (estimator.count(messages), before, estimator.count(messages[last + 1 :]))
    check = TruncationCheck(estimator=estimator)
    assert check.estimates(messages) == expected
    assert check.turn_estimates(messages) == expected[1:]

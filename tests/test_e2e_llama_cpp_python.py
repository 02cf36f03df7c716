"""End to end: `Client(OpenAICompatible(...))` against llama-cpp-python's own server.

The server (tests/servers.py) runs the tiny random model with `--n_ctx 512`, started as a user
would start it, so it has all of its real quirks, each of which is exercised here:

- its overflow is OpenAI-shaped (`code: context_length_exceeded`, "... 1164 in the messages,
  16 in the completion"); it checks prompt + max_tokens against the window;
- an over-long prompt with `stream: true` gets 200 and an empty event stream, no error;
- it ignores `max_completion_tokens` (OpenAICompatible sends `max_tokens`);
- it rejects `content: null` next to tool calls (422), and the chat format it guesses for
  a ChatML model (llama-cpp-python's `format_chatml`) drops every tool message and every system
  message after the first. So the long conversation here is plain chat; what a tool
  conversation gets is tested on its own. Started with `--chat_format chat_template.default`
  (the model's own template) the server keeps them.

The expected recovery of each turn is the server's own judgement: the prompt size it reports
for each level's view (the usage of an answer, or the numbers its overflow states).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from chatcli.chat.tap import StreamingTap
from chatcli.chat.tinymodel import TRAINING_TEXT
from chatcli.config import RecoveryConfig
from chatcli.errors import SILENT_TRUNCATION, ContextRecoveryError, ErrorKind, ProviderError
from chatcli.events import LevelApplied, LevelSkipped, OverflowDetected, PreflightRecovery
from chatcli.messages import Message, StopReason, ToolCall
from chatcli.providers.base import Request, Response
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Client, Reply
from chatcli.tokens.estimate import TokenEstimator
from tests.test_e2e_llama_server import (
    BOUNDARY_MARGIN,
    MAX_TOKENS,
    SYSTEM,
    Count,
    Fits,
    Recording,
    assert_turn,
    connect,
    kinds,
    level_views,
    paragraph,
    rejected_overflows,
    served_model,
)

# The fixtures. Not imported by name: a plugin must not be imported before pytest loads it.
pytest_plugins = ("tests.servers",)

# Plain chat: level 1 (tool results, long answers) has nothing to cut, so it is always
# skipped once the server's numbers are known; level 2 keeps the last exchange and the request.
# The levels keep the seed's counts: the expected views are built by the seed's functions.
CONFIG = RecoveryConfig(retention="seed", max_token_escalations=0, emergency_keep_messages=3)
TURNS = 12
LATEST = "Latest request: say what a careful client does when the prompt no longer fits."


@pytest.fixture
def adapter(llama_cpp_python_server: str) -> Iterator[OpenAICompatible]:
    provider = connect(llama_cpp_python_server)
    yield provider
    provider.close()


@pytest.fixture
def count(llama_cpp_python_server: str) -> Iterator[Count]:
    """The prompt tokens the server counts for some messages: the usage of its answer, or
    the prompt size its overflow error states (it has no /tokenize)."""
    probe = connect(llama_cpp_python_server)

    def server_count(messages: Sequence[Message]) -> int:
        try:
            answer = probe.complete(Request(messages=tuple(messages), max_tokens=MAX_TOKENS))
        except ProviderError as exc:
            assert exc.info.kind is ErrorKind.CONTEXT_OVERFLOW and exc.info.prompt_tokens
            return exc.info.prompt_tokens
        return answer.usage.prompt_tokens

    yield server_count
    probe.close()


@pytest.fixture
def fits(count: Count, n_ctx: int) -> Fits:
    """Whether a view fits with room for the answer, by the server's count (its rule and
    the policy's: prompt + max_tokens <= window)."""

    def fits_window(view: Sequence[Message]) -> bool:
        needed = count(view) + MAX_TOKENS
        assert abs(needed - n_ctx) > BOUNDARY_MARGIN, f"{needed} tokens: too close to call"
        return needed <= n_ctx

    return fits_window


def paste(turn: int) -> Message:
    """A user request with a pasted text: a big one (400 chars) every four turns."""
    size = 400 if turn % 4 == 2 else 160
    return Message.user(f"Request {turn}: summarise this. " + paragraph(size, start=53 * turn))


def chat(pastes: int) -> list[Message]:
    """A chat history with scripted answers, then LATEST (the request being sent)."""
    history = [SYSTEM]
    for turn in range(1, pastes + 1):
        history += [paste(turn), Message.assistant(f"Summary {turn}: the context fills up.")]
    return [*history, Message.user(LATEST)]


# --- overflow recovery, turn after turn -------------------------------------------------


@pytest.mark.llama_cpp_python
def test_a_long_conversation_overflows_again_and_again_and_always_recovers(
    adapter: OpenAICompatible, count: Count, fits: Fits, n_ctx: int
) -> None:
    provider = Recording(adapter)
    learned: dict[str, int] = {}
    transcript = [SYSTEM]
    levels, preflights = [], []
    for turn in range(1, TURNS + 1):
        transcript.append(paste(turn))
        first_call = len(provider.requests)
        # A Client per turn, as an app that keeps only the transcript and the window learned:
        # each turn recovers the whole transcript (a kept Client keeps its first cut instead:
        # sticky views, `test_a_kept_client_sends_its_cut_until_the_window_forces_a_new_one`).
        client = Client(provider, CONFIG, learned_windows=learned)
        reply = client.send(transcript, max_tokens=MAX_TOKENS)
        learned.update(client.learned_windows)
        sent = provider.requests[first_call:]
        levels.append(assert_turn(reply, sent, transcript, fits, CONFIG))
        preflights.append(any(isinstance(e, PreflightRecovery) for e in reply.events))
        assert_openai_shaped_overflow(reply, sent, count, n_ctx)
        last = provider.outcomes[-1]
        assert isinstance(last, Response) and last.usage.output_tokens == MAX_TOKENS
        assert reply.message == last.message and reply.message.text
        transcript.append(reply.message)
    # Overflowing from the fourth turn on; level 1 has nothing to cut in plain chat.
    assert levels == [0, 0, 0] + [2] * (TURNS - 3)
    # The first overflow (turn 4) stated the window: pre-flight can act from turn 5 on, once
    # the uncalibrated estimate is clearly over it, and then on every later (longer) turn.
    assert not any(preflights[:4]) and any(preflights) and preflights == sorted(preflights)
    assert 1 <= rejected_overflows(provider, TURNS) < TURNS - 3  # fewer than one a recovery


def assert_openai_shaped_overflow(
    reply: Reply, sent: Sequence[Request], count: Count, n_ctx: int
) -> None:
    overflows = [e for e in reply.events if isinstance(e, OverflowDetected)]
    for overflow, request in zip(overflows, sent, strict=False):  # the last call succeeded
        assert overflow.info.code == "context_length_exceeded"
        assert (overflow.limit, overflow.max_tokens) == (n_ctx, MAX_TOKENS)
        assert overflow.prompt_tokens == count(request.messages)


# --- streaming: 200 and an empty event stream -------------------------------------------


def streaming_client(
    adapter: OpenAICompatible, sleeps: list[float]
) -> tuple[Client, Recording, list[str]]:
    """The Client as the chat session streams through it (`StreamingTap`); its retry waits
    are recorded in `sleeps` instead of slept."""
    tap = StreamingTap(adapter)
    deltas: list[str] = []
    tap.on_delta = deltas.append
    provider = Recording(tap)
    return Client(provider, CONFIG, sleep=sleeps.append), provider, deltas


@pytest.mark.llama_cpp_python
def test_an_overflow_answered_with_an_empty_stream_is_detected_and_recovered(
    llama_cpp_python_server: str, fits: Fits, n_ctx: int
) -> None:
    """The server answers the over-long streamed prompt with 200 and no event at all. The
    adapter asks again without streaming and gets the server's real overflow error, with its
    numbers; the Client recovers and the recovered answer streams.

    Another quirk follows: after that empty stream the server drops the keep-alive
    connection, and whether the next request races into the dead connection is a matter of
    timing. The adapter's unstreamed re-ask opens a new connection when that happens, so the
    Client never sees it.
    """
    adapter = connect(llama_cpp_python_server, context_window=n_ctx)
    conversation = chat(pastes=6)
    views = level_views(conversation, CONFIG)
    estimate = TokenEstimator().count(views[0])
    # Over the window, but not by the pre-flight margin: the request is really sent.
    assert n_ctx < estimate and estimate + MAX_TOKENS <= 1.1 * n_ctx
    sleeps: list[float] = []
    client, provider, deltas = streaming_client(adapter, sleeps)
    try:
        reply = client.send(conversation, max_tokens=MAX_TOKENS)
    finally:
        adapter.close()

    assert sleeps == []  # no retry reached the Client
    failure = provider.outcomes[0]
    assert isinstance(failure, ProviderError)
    assert failure.info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert (failure.info.limit, failure.info.max_tokens) == (n_ctx, MAX_TOKENS)  # the real error
    assert failure.info.prompt_tokens is not None and failure.info.prompt_tokens > n_ctx
    assert not fits(views[0])  # the server really could not take it
    recovery = reply.events
    assert kinds(recovery) == [OverflowDetected, LevelSkipped, LevelApplied]
    assert isinstance(recovery[0], OverflowDetected) and recovery[0].info is failure.info
    assert reply.calls == len(provider.requests) == 2
    assert provider.requests[-1].messages == views[2] == reply.view
    assert fits(views[2]) and Message.user(LATEST) in reply.view
    assert "".join(deltas) == reply.message.text != ""


@pytest.mark.llama_cpp_python
def test_an_empty_stream_for_a_prompt_estimated_under_the_window_is_recovered_too(
    llama_cpp_python_server: str, fits: Fits, n_ctx: int
) -> None:
    adapter = connect(llama_cpp_python_server, context_window=n_ctx)
    conversation = chat(pastes=5)
    views = level_views(conversation, CONFIG)
    assert TokenEstimator().count(views[0]) < n_ctx and not fits(views[0])
    client, _, _ = streaming_client(adapter, [])
    try:
        reply = client.send(conversation, max_tokens=MAX_TOKENS)
    finally:
        adapter.close()
    assert kinds(reply.events)[0] is OverflowDetected
    assert Message.user(LATEST) in reply.view


# --- a near miss ---------------------------------------------------------------------------


def near_miss() -> list[Message]:
    """Three requests; only the last two fit, and level 3 keeps just those (+ its notice)."""
    return [
        SYSTEM,
        Message.user("Summarise this: " + paragraph(300, start=11)),
        Message.assistant("Summary: the context fills up."),
        Message.user("And this: " + paragraph(400, start=211)),
        Message.assistant("Summary: the client trims."),
        Message.user(LATEST + " " + paragraph(300, start=97)),
    ]


@pytest.mark.llama_cpp_python
def test_a_last_level_predicted_just_over_the_window_is_still_tried(
    adapter: OpenAICompatible, fits: Fits
) -> None:
    config = RecoveryConfig(retention="seed", max_token_escalations=0)
    conversation = near_miss()
    views = level_views(conversation, config)
    assert not fits(views[2]) and fits(views[3])
    provider = Recording(adapter)
    reply = Client(provider, config).send(conversation, max_tokens=MAX_TOKENS)
    assert reply.calls == 2 and reply.view == views[3]


# --- max_tokens, escalation ---------------------------------------------------------------


@pytest.mark.llama_cpp_python
def test_max_tokens_is_sent_as_max_tokens_and_the_server_keeps_to_it(
    adapter: OpenAICompatible,
) -> None:
    """The server ignores `max_completion_tokens` (answers run to the end of the window);
    `max_tokens` is honoured, through two escalations and continuations (5 -> 10 -> 20)."""
    request = Request(messages=(SYSTEM, Message.user("Explain.")), max_tokens=5)
    params = adapter.params(request)
    assert params["max_tokens"] == 5 and "max_completion_tokens" not in params
    provider = Recording(adapter)
    reply = Client(provider).send(request.messages, max_tokens=5)
    assert reply.calls == len(provider.requests) == 3
    assert [r.max_tokens for r in provider.requests] == [5, 10, 20]
    assert [a.usage.output_tokens for a in provider.responses] == [5, 10, 20]
    assert all(a.stop_reason is StopReason.MAX_TOKENS for a in provider.responses)
    assert reply.truncated and reply.usage.output_tokens == 35


# --- tool messages ------------------------------------------------------------------------


def tool_exchange(result: str) -> tuple[Message, ...]:
    call = ToolCall(id="call_1", name="read_log", arguments={"turn": 1})
    request = Message.user("Read the log and say what it shows.")
    return (SYSTEM, request, Message.assistant(tool_calls=(call,)), Message.tool(call.id, result))


@pytest.mark.llama_cpp_python
def test_a_tool_call_is_accepted_but_the_guessed_chat_format_drops_its_result(
    adapter: OpenAICompatible,
) -> None:
    """An assistant message with only tool calls goes out with `content: ""` (the server
    answers `null` with a 422). The server then leaves the tool result out of the prompt:
    the prompt it reports is the same with or without it."""
    exchange = tool_exchange(TRAINING_TEXT[:300])
    params = adapter.params(Request(messages=exchange))
    assert params["messages"][2]["content"] == ""
    with_result = adapter.complete(Request(messages=exchange, max_tokens=MAX_TOKENS))
    without = adapter.complete(Request(messages=exchange[:-1], max_tokens=MAX_TOKENS))
    assert with_result.stop_reason is StopReason.MAX_TOKENS
    assert with_result.usage.prompt_tokens == without.usage.prompt_tokens


@pytest.mark.llama_cpp_python
def test_a_big_tool_result_the_server_drops_is_reported_when_the_window_is_known(
    llama_cpp_python_server: str, n_ctx: int
) -> None:
    """The adapter sees the server read far fewer tokens than were sent (the dropped result)
    to a window they could not fit, and raises instead of passing on an answer written
    without it. The ratio is judged only against a known window (a low count alone is
    Ollama's cached prefix: see `chatcli.errors.silent_truncation`)."""
    exchange = tool_exchange(paragraph(2_400, start=0))
    estimate = TokenEstimator().count(exchange)
    assert estimate > n_ctx  # what the silent-truncation check judges
    adapter = connect(llama_cpp_python_server, context_window=n_ctx)
    try:
        with pytest.raises(ProviderError) as raised:
            adapter.complete(Request(messages=exchange, max_tokens=MAX_TOKENS))
        unchecked = OpenAICompatible(  # the same answer, not judged
            llama_cpp_python_server + "/v1",
            served_model(llama_cpp_python_server),
            environ={},
            truncation_check=None,
        )
        answer = unchecked.complete(Request(messages=exchange, max_tokens=MAX_TOKENS))
        unchecked.close()
    finally:
        adapter.close()
    info = raised.value.info
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW and info.reason == SILENT_TRUNCATION
    assert (info.prompt_tokens, info.limit) == (estimate, n_ctx)
    assert "silently truncated" in info.message
    assert answer.usage.prompt_tokens < estimate / 2  # the server really dropped the result


@pytest.mark.llama_cpp_python
def test_a_big_tool_result_the_server_drops_is_reported_not_silently_answered(
    adapter: OpenAICompatible,
) -> None:
    """No level can change the server's format (it drops every tool result), and with its
    numbers the Client knows that after one call."""
    exchange = tool_exchange(paragraph(2_400, start=0))
    assert TokenEstimator().count(exchange) >= 512  # what the silent-truncation check judges
    provider = Recording(adapter)
    with pytest.raises(ContextRecoveryError) as raised:
        Client(provider).send(exchange, max_tokens=MAX_TOKENS)
    assert len(provider.requests) == 1
    assert "silently truncated" in raised.value.info.message

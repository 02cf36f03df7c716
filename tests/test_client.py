"""`Client` over test providers, sync and async: each behaviour with exact calls and events.

Provider failures are the real SDK exceptions (openai / anthropic) built around real corpus
bodies (tests/fakes.py), so these tests also check that `Client` classifies them once and
acts on the numbers they state.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Literal

import anthropic
import openai
import pytest

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.continuation import CONTINUATION_MESSAGE
from chatcli.errors import ContextRecoveryError, ErrorKind, ProviderError
from chatcli.events import (
    Continued,
    Escalated,
    Event,
    LevelApplied,
    LevelSkipped,
    MaxTokensFitted,
    OutputCapLowered,
    OverflowDetected,
    RecoveryFailed,
    Retried,
    SilentTruncationDetected,
    ToolCallsDropped,
)
from chatcli.history.microcompact import STUB_PREFIX
from chatcli.history.truncate import TRUNCATION_NOTICE
from chatcli.messages import Message, StopReason, ToolCall, Usage, total_chars
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Client, Reply
from chatcli.tokens.estimate import TokenEstimator
from tests.fakes import (
    Overflow,
    ScriptedProvider,
    WindowedProvider,
    corpus,
    corpus_error,
    response,
)
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_openai_compat_adapter import PE078, answer_with_prompt_tokens

Mode = Literal["sync", "async"]


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> Mode:
    mode: Mode = request.param
    return mode


async def send(client: Client, mode: Mode, messages: Sequence[Message], **kw: Any) -> Reply:
    if mode == "sync":
        return client.send(messages, **kw)
    return await client.asend(messages, **kw)


def agent_turns(turns: int, result_chars: int) -> list[Message]:
    messages = [Message.system("You are a coding agent. Use the tools.")]
    for i in range(turns):
        call = ToolCall(id=f"call_{i}", name="read_file", arguments={"path": f"src/m{i}.py"})
        messages += [
            Message.user(f"step {i}: look at m{i}.py"),
            Message.assistant(f"Opening m{i}.py.", tool_calls=(call,)),
            Message.tool(call.id, (f"def f{i}(x):\n    return x + {i}\n" * 2000)[:result_chars]),
            Message.assistant(f"m{i}.py is fine."),
        ]
    return messages


def kinds(events: Sequence[Event]) -> list[type[Event]]:
    return [type(event) for event in events]


class Sleeps:
    """Records the waits a client asks for, sync and async, without waiting."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)

    async def asleep(self, seconds: float) -> None:
        self.seconds.append(seconds)


def client_for(provider: Any, sleeps: Sleeps | None = None, **kw: Any) -> Client:
    sleeps = sleeps or Sleeps()
    return Client(provider, sleep=sleeps, asleep=sleeps.asleep, **kw)


# --- limits -----------------------------------------------------------------------------


def test_limits_default_to_what_the_provider_declares() -> None:
    provider = WindowedProvider(window=8192, output_cap=4096)
    client = Client(provider)
    assert (client.policy.context_window, client.policy.max_output_tokens) == (8192, 4096)
    client = Client(provider, context_window=1000, max_output_tokens=500)
    assert (client.policy.context_window, client.policy.max_output_tokens) == (1000, 500)
    assert Client(ScriptedProvider(script=[])).policy.context_window is None


# --- microcompaction -----------------------------------------------------------------------


def sent_tool_results(provider: ScriptedProvider) -> list[str]:
    return [m.text for m in provider.requests[0].messages if m.tool_result is not None]


async def test_below_the_trigger_the_default_sends_old_results_whole(mode: Mode) -> None:
    provider = ScriptedProvider(script=[response("ok")])
    messages = agent_turns(6, 5_000)  # ~8,000 tokens: far below 100,000
    reply = await send(client_for(provider), mode, messages)
    assert provider.requests[0].messages == tuple(messages) == reply.view


async def test_old_large_tool_results_are_microcompacted_by_age_with_trigger_0(mode: Mode) -> None:
    # Six rounds of 5,000-char results; result i is followed by 11 - 2i assistant turns.
    provider = ScriptedProvider(script=[response("ok")])
    messages = agent_turns(6, 5_000)
    snapshot = list(messages)
    aging = MicrocompactConfig(trigger_tokens=0)
    reply = await send(client_for(provider, microcompact=aging), mode, messages)
    assert messages == snapshot
    original = [m.text for m in messages if m.tool_result is not None]
    numbers = [n for n, m in enumerate(messages, 1) if m.tool_result is not None]
    sent = sent_tool_results(provider)
    for i, text in enumerate(sent[:4]):  # 11, 9, 7, 5 turns old: a one-line stub
        assert text.startswith(STUB_PREFIX) and "\n" not in text
        lines = original[i].count("\n") + 1
        assert f"call call_{i}: source code, {lines} lines, 5,000 chars" in text
        assert f"(/history #{numbers[i]}, call id call_{i})" in text  # its transcript number
    # 3 turns old: cut to its first 2,000 and last 500 chars; 1 turn old: whole.
    assert sent[4].startswith(original[4][:2_000]) and sent[4].endswith(original[4][-500:])
    assert "[... 2,500 chars cut by microcompaction" in sent[4]
    assert f"(/history #{numbers[4]}, call id call_4)" in sent[4]
    assert sent[5] == original[5]
    assert reply.view == provider.requests[0].messages


async def test_microcompaction_none_sends_old_results_whole(mode: Mode) -> None:
    provider = ScriptedProvider(script=[response("ok")])
    messages = agent_turns(6, 5_000)
    reply = await send(client_for(provider, microcompact=None), mode, messages)
    assert provider.requests[0].messages == tuple(messages) == reply.view


async def test_microcompaction_settings_are_used(mode: Mode) -> None:
    environ = {
        "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS": "1",
        "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS": "3",
        "CHATCLI_MICROCOMPACT_TAIL_CHARS": "0",
        "CHATCLI_MICROCOMPACT_TRIGGER_TOKENS": "0",
    }
    provider = ScriptedProvider(script=[response("ok")])
    client = client_for(provider, microcompact=MicrocompactConfig.from_env(environ))
    await send(client, mode, agent_turns(6, 5_000))
    sent = sent_tool_results(provider)
    assert all(text.startswith(STUB_PREFIX) for text in sent[:5])  # 3+ turns old
    assert sent[5].endswith("call_5) ...]\n")  # 1 turn old: its head only, no tail


# --- overflow -----------------------------------------------------------------------------


async def test_overflow_with_numbers_is_calibrated_and_skips_a_level(mode: Mode) -> None:
    # vLLM states prompt and limit; the window is not declared, so the first call is made.
    # Microcompaction off: the transcript is sent as it is, and overflows as sized.
    provider = WindowedProvider(window=8000, declares_limits=False)
    messages = agent_turns(10, 3000)
    reply = await send(client_for(provider, microcompact=None), mode, messages)
    assert reply.calls == 2 == len(provider.requests)
    # The dropped "step i: look at mi.py" requests were the task of their turn (one-off
    # requests, `none` by the data conventions of tests/data/instructions): nothing carried.
    assert kinds(reply.events) == [OverflowDetected, LevelSkipped, LevelApplied]
    detected = reply.events[0]
    assert isinstance(detected, OverflowDetected)
    assert detected.prompt_tokens == provider.count(provider.requests[0].messages)
    assert detected.limit == 8000
    assert provider.requests[1].messages == reply.view
    assert provider.count(reply.view) <= 8000
    assert reply.message.text == "Answer to: step 9: look at m9.py"


async def test_anthropic_overflow_states_input_plus_max_tokens(mode: Mode) -> None:
    # pe-004 verbatim: "input length and `max_tokens` exceed context limit: 199759 + 8192 >
    # 200000". The conversation is sized so the provider really counts 199,759 tokens (as
    # sent: microcompaction off).
    overflow = Overflow(record="pe-004", envelope=None, sdk="anthropic", counts_output=True)
    provider = WindowedProvider(window=200_000, overflow=overflow)
    messages = agent_turns(40, 16_000)
    messages.append(Message.user(pad_to(provider, messages, 199_759)))
    # A flat 4 chars per token predicts ~165k for this provider's 3.3, so the request is sent
    # and the provider's statement is what is tested (the default shape estimate predicts it
    # over the window and recovers before the call).
    client = client_for(provider, microcompact=None, estimator=TokenEstimator())
    reply = await send(client, mode, messages, max_tokens=8192)
    assert reply.calls == 2
    assert kinds(reply.events) == [OverflowDetected, LevelApplied]  # 241 tokens: too little
    assert reply.events[0] == OverflowDetected(
        info=reply.events[0].info,  # type: ignore[attr-defined]
        prompt_tokens=199_759,
        limit=200_000,
        max_tokens=8192,
    )
    assert reply.events[1].level == 1  # type: ignore[attr-defined]
    assert [r.max_tokens for r in provider.requests] == [8192, 8192]
    assert provider.count(provider.requests[1].messages) + 8192 <= 200_000


@pytest.mark.parametrize(
    ("record", "prompt", "window", "asked", "room"),
    [
        ("pe-029", 24_235, 64_001, 64_000, 39_766),  # vLLM, newer wording
        ("pe-035", 2_778, 4_096, 8_000, 1_318),  # vLLM, in its JSON envelope
        ("pe-006", 184_915, 204_648, 20_000, 19_733),  # Anthropic, "input + max_tokens"
        ("pe-049", 583, 2_048, 3_000, 1_465),  # FastChat, "you requested N tokens (...)"
    ],
)
async def test_an_output_too_large_for_the_room_left_is_fitted_to_it(
    mode: Mode, record: str, prompt: int, window: int, asked: int, room: int
) -> None:
    # The real bodies, verbatim: the conversation is sized so the provider counts `prompt`.
    sdk = "anthropic" if corpus()[record]["provider"] == "anthropic" else "openai"
    envelope = "pe-035" if record == "pe-029" else None  # pe-029 is vLLM's text: its envelope
    overflow = Overflow(record=record, envelope=envelope, sdk=sdk, counts_output=True)
    provider = WindowedProvider(
        window=window, overflow=overflow, declares_limits=False, answer=lambda _: "Done."
    )
    messages = agent_turns(2, 100)
    messages.append(Message.user(pad_to(provider, messages, prompt)))
    reply = await send(client_for(provider), mode, messages, max_tokens=asked)
    assert [r.max_tokens for r in provider.requests] == [asked, room]
    assert provider.requests[0].messages == provider.requests[1].messages == reply.view
    assert kinds(reply.events) == [OverflowDetected, MaxTokensFitted]
    assert reply.events[1] == MaxTokensFitted(
        old=asked, new=room, prompt_tokens=prompt, limit=window
    )
    assert (reply.calls, reply.truncated, reply.message.text) == (2, False, "Done.")


def pad_to(provider: WindowedProvider, messages: list[Message], tokens: int) -> str:
    """Text for one more user message that makes the provider count exactly `tokens`."""
    low, high = 0, 4 * tokens
    while low < high:  # the shortest text that reaches it
        mid = (low + high) // 2
        if provider.count([*messages, Message.user("x" * mid)]) < tokens:
            low = mid + 1
        else:
            high = mid
    assert provider.count([*messages, Message.user("x" * low)]) == tokens
    return "x" * low


async def test_overflow_without_numbers_climbs_the_ladder_then_raises(mode: Mode) -> None:
    # pe-062: Anthropic's 413 "Request size exceeds model context window", no numbers.
    overflow = Overflow(record="pe-062", envelope=None, sdk="anthropic")
    provider = WindowedProvider(window=50, overflow=overflow, declares_limits=False)
    events: list[Event] = []
    client = client_for(provider, hooks=[events.append])
    with pytest.raises(ContextRecoveryError) as raised:
        await send(client, mode, agent_turns(5, 16_000))  # level 1 halves the results
    assert len(provider.requests) == 4
    assert isinstance(raised.value.__cause__, anthropic.APIStatusError)
    assert raised.value.__cause__.status_code == 413
    assert raised.value.info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert [a.split(" (")[0] for a in raised.value.attempts] == ["level 1", "level 2", "level 3"]
    # The dropped requests were one-off ("step i: look at mi.py"): nothing is carried.
    assert kinds(events) == [OverflowDetected, LevelApplied] * 3 + [
        OverflowDetected,
        RecoveryFailed,
    ]


def short_chat() -> list[Message]:
    """Plain chat, three messages: level 1 has nothing to cut (no tool results, no long
    answers) and level 2 keeps all of it (10 messages); only level 3 adds its notice."""
    return [
        Message.user("q" * 50),
        Message.assistant("a" * 50),
        Message.user("write a long essay"),
    ]


async def test_a_level_that_changes_nothing_is_skipped_without_a_call(mode: Mode) -> None:
    # pe-062 states no numbers and no window is declared: nothing is predicted, but a view
    # identical to the one just rejected is known to be rejected again.
    too_long = corpus_error("pe-062", sdk="anthropic")
    provider = ScriptedProvider(script=[too_long, response("ok")])
    reply = await send(client_for(provider), mode, short_chat())
    first, second = (r.messages for r in provider.requests)
    assert reply.calls == 2 and first != second == reply.view
    assert Message.system(TRUNCATION_NOTICE) in second
    assert kinds(reply.events) == [OverflowDetected, LevelSkipped, LevelSkipped, LevelApplied]
    assert [e.describe() for e in reply.events[1:3]] == [
        "level 1 (aggressive budget) skipped: it changes nothing in the view",
        "level 2 (emergency truncation) skipped: it changes nothing in the view",
    ]


async def test_when_no_level_changes_anything_it_raises_without_another_call(mode: Mode) -> None:
    too_long = corpus_error("pe-062", sdk="anthropic")
    provider = ScriptedProvider(script=[too_long])
    client = client_for(provider, config=RecoveryConfig(max_recovery_attempts=2))
    with pytest.raises(ContextRecoveryError) as raised:
        await send(client, mode, short_chat())
    assert len(provider.requests) == 1
    assert raised.value.__cause__ is too_long
    assert [a.split(" skipped: ")[1] for a in raised.value.attempts] == [
        "it changes nothing in the view"
    ] * 2


async def test_the_context_window_stop_reason_triggers_recovery(mode: Mode) -> None:
    stopped = response("", stop=StopReason.CONTEXT_WINDOW, usage=Usage(9000, 100))
    provider = ScriptedProvider(script=[stopped, response("fine", usage=Usage(3000, 5))])
    messages = agent_turns(12, 16_000)  # level 1 halves the 16,000-char results
    reply = await send(client_for(provider, predictive=False), mode, messages)
    assert reply.calls == 2
    assert kinds(reply.events) == [OverflowDetected, LevelApplied]
    assert reply.usage == Usage(12_000, 105)
    first, second = (total_chars(r.messages) for r in provider.requests)
    assert second < first  # level 1 cut the assistant messages and tool results


async def test_an_answer_cut_by_the_full_window_is_kept_and_continued(mode: Mode) -> None:
    stopped = response("Part one, ", stop=StopReason.CONTEXT_WINDOW, usage=Usage(9000, 100))
    provider = ScriptedProvider(script=[stopped, response("part two.", usage=Usage(3000, 5))])
    messages = agent_turns(12, 16_000)
    reply = await send(client_for(provider, predictive=False), mode, messages)
    assert (reply.message.text, reply.truncated, reply.calls) == ("Part one, part two.", False, 2)
    assert provider.requests[1].messages[-2:] == (
        Message.assistant("Part one, "),
        Message.user(CONTINUATION_MESSAGE),
    )
    assert kinds(reply.events) == [OverflowDetected, LevelApplied, Continued]


@pytest.fixture
def replay() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


def chat(exchanges: int, chars: int) -> list[Message]:
    messages = []
    for i in range(exchanges):
        messages += [Message.user(f"Paste {i}: " + "lorem ipsum " * (chars // 12))]
        messages += [Message.assistant(f"Noted paste {i}.")]
    return [*messages, Message.user("Now compare the last two pastes.")]


async def test_a_silently_truncated_prompt_is_reported_then_recovered(
    mode: Mode, replay: ReplayServer
) -> None:
    # pe-078: Ollama cut the prompt to its 2,048-token num_ctx and answered 200; the usage
    # of its answer (here the recorded chat answer) gives it away, and OpenAICompatible
    # raises an overflow. The window is declared (judging a cut needs it), and the prompt is
    # one that chatcli's estimate (which errs low) lets past the pre-flight check. The second
    # answer reports the whole recovered prompt.
    replay.add(
        Scripted(body=answer_with_prompt_tokens(PE078["limit"])),
        Scripted(body=answer_with_prompt_tokens(1_000)),
    )
    adapter = OpenAICompatible(
        replay.url + "/v1", "local-model", environ={}, context_window=PE078["limit"]
    )
    try:
        reply = await send(client_for(adapter), mode, chat(3, 2_400), max_tokens=100)
    finally:
        adapter.close()
        await adapter.aclose()
    assert reply.calls == len(replay.requests) == 2
    assert kinds(reply.events)[:2] == [SilentTruncationDetected, OverflowDetected]
    assert kinds(reply.events)[-1] is LevelApplied
    silent = reply.events[0]
    assert isinstance(silent, SilentTruncationDetected)
    assert silent.describe().startswith("the provider silently truncated the prompt (")
    assert "the reported prompt (2048 tokens) fills the 2048-token context" in silent.describe()
    assert reply.view[-1] == Message.user("Now compare the last two pastes.")


# --- output cap, retries, other errors ----------------------------------------------------


async def test_output_cap_error_lowers_max_tokens(mode: Mode) -> None:
    # pe-024: "max_tokens is too large: 8192. This model supports at most 4096 ..."
    provider = WindowedProvider(window=100_000, output_cap=4096, declares_limits=False)
    messages = agent_turns(2, 100)
    reply = await send(client_for(provider), mode, messages, max_tokens=8192)
    assert [r.max_tokens for r in provider.requests] == [8192, 4096]
    assert provider.requests[0].messages == provider.requests[1].messages
    assert reply.events == (OutputCapLowered(old=8192, new=4096),)


async def test_a_declared_output_cap_is_applied_before_sending(mode: Mode) -> None:
    provider = WindowedProvider(window=100_000, output_cap=4096)
    reply = await send(client_for(provider), mode, agent_turns(2, 100), max_tokens=8192)
    assert [r.max_tokens for r in provider.requests] == [4096]
    assert reply.events == (OutputCapLowered(old=8192, new=4096),)


async def test_rate_limit_honours_retry_after(mode: Mode) -> None:
    # pe-090: Anthropic's 429 rate_limit_error, with the retry-after header it documents.
    limited = corpus_error("pe-090", sdk="anthropic", headers={"retry-after": "3"})
    provider = ScriptedProvider(script=[limited, response("ok")])
    sleeps = Sleeps()
    reply = await send(client_for(provider, sleeps), mode, agent_turns(1, 10))
    assert sleeps.seconds == [3.0]
    assert reply.calls == 2
    assert reply.events == (Retried(kind=ErrorKind.RATE_LIMIT, attempt=1, delay=3.0),)


async def test_a_tokens_per_minute_limit_is_not_an_overflow(mode: Mode) -> None:
    # pe-030 says "Request too large ... tokens must be reduced" but is a 429 TPM limit:
    # retried with backoff, never truncated, then raised as the provider's error.
    tpm = [corpus_error("pe-030", sdk="openai") for _ in range(3)]
    provider = ScriptedProvider(script=list(tpm))
    sleeps = Sleeps()
    with pytest.raises(ProviderError) as raised:
        await send(client_for(provider, sleeps, max_retries=2), mode, agent_turns(3, 10))
    assert raised.value.__cause__ is tpm[2]
    assert isinstance(raised.value.__cause__, openai.RateLimitError)
    assert sleeps.seconds == [1.0, 2.0]
    assert all(r.messages == provider.requests[0].messages for r in provider.requests)


async def test_a_quota_error_is_raised_at_once(mode: Mode) -> None:
    quota = corpus_error("pe-083", sdk="openai")
    provider = ScriptedProvider(script=[quota])
    with pytest.raises(ProviderError) as raised:
        await send(client_for(provider), mode, agent_turns(1, 10))
    assert raised.value.__cause__ is quota
    assert raised.value.info.kind is ErrorKind.QUOTA
    assert len(provider.requests) == 1


# --- max_tokens ---------------------------------------------------------------------------


def long_answer(chars: int) -> str:
    return "".join(f"Step {i}: adjust the handler and re-run the tests.\n" for i in range(chars))[
        :chars
    ]


async def test_a_cut_answer_is_escalated_and_stitched_without_the_repeat(mode: Mode) -> None:
    full = long_answer(10_000)
    provider = WindowedProvider(window=100_000, answer=lambda _: full, repeat=40)
    reply = await send(client_for(provider), mode, agent_turns(1, 10), max_tokens=1000)
    assert reply.message.text == full  # 4,000 chars, then the rest with 40 repeated removed
    assert (reply.calls, reply.truncated, reply.stop_reason) == (2, False, StopReason.END_TURN)
    assert [r.max_tokens for r in provider.requests] == [1000, 2000]
    assert provider.requests[1].messages[-1].text == CONTINUATION_MESSAGE
    assert reply.events == (
        Escalated(attempt=1, old=1000, new=2000),
        Continued(attempt=1, max_tokens=2000),
    )
    assert reply.usage.output_tokens == 1000 + 1510


async def test_escalations_run_out_and_the_answer_is_flagged_truncated(mode: Mode) -> None:
    full = long_answer(100_000)
    provider = WindowedProvider(window=100_000, answer=lambda _: full)
    reply = await send(client_for(provider), mode, agent_turns(1, 10), max_tokens=1000)
    assert [r.max_tokens for r in provider.requests] == [1000, 2000, 4000]
    assert reply.message.text == full[: 4 * (1000 + 2000 + 4000)]
    assert (reply.calls, reply.truncated) == (3, True)


async def test_a_cut_tool_call_that_parses_is_never_returned_executable(mode: Mode) -> None:
    # Stopped at max_tokens inside `write_file`; its arguments happen to be valid JSON.
    read = ToolCall(id="c1", name="read_file", arguments={"path": "app.py"})
    cut = ToolCall(id="c2", name="write_file", arguments={"path": "app.py"})
    answer = Message.assistant("Reading, then writing.", tool_calls=(read, cut))
    provider = ScriptedProvider(script=[response(message=answer, stop=StopReason.MAX_TOKENS)])
    reply = await send(client_for(provider), mode, agent_turns(1, 10), max_tokens=50)
    assert reply.message.tool_calls == (read,)
    assert (reply.truncated, reply.calls) == (True, 1)
    assert reply.events == (ToolCallsDropped(names=("write_file",)),)


# --- observability and purity -------------------------------------------------------------


async def test_hooks_and_logging_see_every_event_in_order(
    mode: Mode, caplog: pytest.LogCaptureFixture
) -> None:
    stopped = response("", stop=StopReason.CONTEXT_WINDOW)
    provider = ScriptedProvider(script=[stopped, response("fine")])
    seen: list[Event] = []
    client = client_for(provider, hooks=[seen.append], predictive=False)
    with caplog.at_level(logging.INFO, logger="chatcli"):
        reply = await send(client, mode, agent_turns(12, 3000))
    assert tuple(seen) == reply.events
    records = [r for r in caplog.records if r.name == "chatcli"]
    assert [r.getMessage() for r in records] == [e.describe() for e in reply.events]
    assert [r.chatcli_event for r in records] == list(reply.events)  # type: ignore[attr-defined]


def test_an_application_that_never_configured_logging_prints_nothing() -> None:
    # A fresh interpreter: no pytest handlers on the root logger, so without chatcli's
    # NullHandler a RecoveryFailed warning would reach logging's last-resort handler.
    script = """
from chatcli.errors import ContextRecoveryError
from chatcli.messages import Message
from chatcli.recovery import Client
class TooLong:
    def complete(self, request):
        raise RuntimeError("prompt is too long: 9000 tokens > 2048 maximum")
try:
    Client(TooLong()).send([Message.user("hi")])
except ContextRecoveryError:
    print("raised")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert (done.stdout, done.stderr) == ("raised\n", "")


async def test_the_callers_messages_are_never_changed(mode: Mode) -> None:
    messages = agent_turns(12, 30_000)  # over the per-result budget: the view is cut
    snapshot = list(messages)
    provider = WindowedProvider(window=5000)
    reply = await send(client_for(provider), mode, messages)
    assert messages == snapshot
    assert reply.view != tuple(messages)


async def test_custom_config_and_estimator_are_used(mode: Mode) -> None:
    provider = WindowedProvider(window=8000, declares_limits=False)
    config = RecoveryConfig(max_recovery_attempts=1)
    estimator = TokenEstimator(chars_per_token=3.3)
    client = client_for(provider, config=config, estimator=estimator, microcompact=None)
    with pytest.raises(ContextRecoveryError) as raised:
        await send(client, mode, agent_turns(40, 3000))
    assert len(raised.value.attempts) == 1

"""End to end: `Client(OpenAICompatible(...))` against the real C++ llama-server.

The server (tests/servers.py) runs the tiny random model with `-c 512 -np 1`. Nothing is
faked between chatcli and it: the overflows are its real `exceed_context_size_error` bodies
(with `n_prompt_tokens` and `n_ctx`), every answer really stops at `max_tokens` (the model
never emits an end token) and the streams are its real event streams.

`Recording` wraps the adapter to count the provider calls and keep every request and outcome.
The expected recovery of each turn comes from the server's own tokenizer, not from chatcli's
estimate: the levels a turn must skip are the ones whose view the server counts as too long,
and the level it must send is the first one the server counts as fitting (`level_views`
builds the views the way the policy does: microcompaction, budget, pairing, then each level on
the previous). Microcompaction is `Client`'s default, so the expected views go through the
policy's own `apply_microcompaction` rather than assuming when it acts. Once an overflow has
stated the window, `Client` remembers it, so later turns may recover before sending
(pre-flight): a lower level may then be sent and rejected before the expected one.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence

import httpx
import pytest

from chatcli.chat.tap import StreamingTap
from chatcli.chat.tinymodel import TRAINING_TEXT
from chatcli.config import RecoveryConfig
from chatcli.continuation import CONTINUATION_MESSAGE, stitch
from chatcli.errors import ErrorKind, ProviderError
from chatcli.events import (
    Continued,
    Escalated,
    Event,
    LevelApplied,
    LevelSkipped,
    OverflowDetected,
    PreflightRecovery,
)
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.carry import Numbering
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import Message, Role, StopReason, ToolCall
from chatcli.providers.base import Provider, Request, Response, TextDelta
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Client, RecoveryPolicy, Reply
from tests.test_client_e2e import assert_paired

# The fixtures. Not imported by name: a plugin must not be imported before pytest loads it.
pytest_plugins = ("tests.servers",)

MAX_TOKENS = 8
# The defaults are sized for windows of 100k+ tokens (a 20,000-char result alone is ten of
# these windows); these keep the same shape at 512 tokens: a big result is clipped to 900
# chars in every view and to 450 at level 1, and level 2 keeps the last two turns. Escalation
# is off here so that each turn's calls are the recovery's alone (it has its own test below).
# The levels keep the seed's counts ("seed" retention): the expected views are built by the
# seed's functions, whatever the window learned (retention by tokens has its own real-server
# test, tests/test_retention_llama_server.py).
CONFIG = RecoveryConfig(
    retention="seed",
    max_token_escalations=0,
    tool_result_max_chars=900,
    tool_result_budget_chars=1_800,
    emergency_keep_messages=8,
)
# Short: level 3's notice names the span it stands for, and with a longer system prompt one
# level-3 view came within `BOUNDARY_MARGIN` of the window.
SYSTEM = Message.system("You are a careful client.")
TURNS = 11
# The calibrated estimate is within a few percent of the server's count, so a view within
# this many tokens of the window could go either way; the conversation is built to have none
# (checked on every view the expectation depends on).
BOUNDARY_MARGIN = 32

Fits = Callable[[Sequence[Message]], bool]
Count = Callable[[Sequence[Message]], int]


class Recording:
    """A Provider around the real adapter that keeps every request and what came back."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.requests: list[Request] = []
        self.outcomes: list[Response | Exception] = []

    @property
    def context_window(self) -> int | None:
        value = getattr(self.inner, "context_window", None)
        return value if isinstance(value, int) else None

    def complete(self, request: Request) -> Response:
        self.requests.append(request)
        try:
            response = self.inner.complete(request)
        except Exception as exc:
            self.outcomes.append(exc)
            raise
        self.outcomes.append(response)
        return response

    async def acomplete(self, request: Request) -> Response:
        self.requests.append(request)
        try:
            response = await self.inner.acomplete(request)
        except Exception as exc:
            self.outcomes.append(exc)
            raise
        self.outcomes.append(response)
        return response

    @property
    def responses(self) -> list[Response]:
        return [o for o in self.outcomes if isinstance(o, Response)]


def served_model(base_url: str) -> str:
    """The name the server gives its model (the tiny model's alias)."""
    name: str = httpx.get(base_url + "/v1/models").json()["data"][0]["id"]
    return name


def connect(base_url: str, *, context_window: int | None = None) -> OpenAICompatible:
    """The adapter for a running llama.cpp server (it needs no key)."""
    model = served_model(base_url)
    return OpenAICompatible(base_url + "/v1", model, environ={}, context_window=context_window)


@pytest.fixture
def adapter(llama_server: str) -> Iterator[OpenAICompatible]:
    provider = connect(llama_server)
    yield provider
    provider.close()


# --- the conversation -----------------------------------------------------------------------


def paragraph(chars: int, start: int) -> str:
    """`chars` chars of the tokenizer's own training text, from `start` (wrapping around):
    text it packs evenly (~2.2 chars per token), so estimates of every view agree."""
    text = TRAINING_TEXT + " "
    repeated = text * (chars // len(text) + 2)
    offset = start % len(text)
    return repeated[offset : offset + chars]


def tool_round(turn: int, big: int = 1_500) -> list[Message]:
    """The user's request, the tool call the agent made for it, and its scripted result:
    two big results (`big` chars, clipped by the budget) in every four turns."""
    call = ToolCall(id=f"call_{turn}", name="read_log", arguments={"turn": turn})
    size = big if turn % 4 in (2, 3) else 120
    return [
        Message.user(f"Request {turn}: read the log of step {turn} and say what it shows."),
        Message.assistant(tool_calls=(call,)),
        Message.tool(call.id, paragraph(size, start=37 * turn)),
    ]


def level_views(
    transcript: Sequence[Message], config: RecoveryConfig, policy: RecoveryPolicy | None = None
) -> list[tuple[Message, ...]]:
    """The working view at levels 0-3 as the policy builds them (levels are cumulative),
    starting from the policy's microcompaction (`Client`'s default policy unless given)."""
    policy = policy if policy is not None else RecoveryPolicy(config=config)
    budgeted = enforce_tool_result_budget(
        policy.apply_microcompaction(transcript),
        per_result_chars=config.tool_result_max_chars,
        per_turn_chars=config.tool_result_budget_chars,
    )
    views = [repair_tool_pairing(budgeted.messages).messages]
    number = Numbering(transcript)  # the notice names what it stands for, as the ladder's
    for level in (1, 2, 3):
        views.append(apply_recovery_level(views[-1], level, config, number).messages)
    return views


@pytest.fixture
def count(llama_server: str, adapter: OpenAICompatible) -> Iterator[Count]:
    """The prompt tokens of some messages as llama-server counts them: its chat template
    applied to the exact wire messages the adapter sends, then its tokenizer."""
    with httpx.Client(base_url=llama_server) as http:

        def server_count(messages: Sequence[Message]) -> int:
            wire = adapter.params(Request(messages=tuple(messages)))["messages"]
            prompt = http.post("/apply-template", json={"messages": wire}).json()["prompt"]
            return len(http.post("/tokenize", json={"content": prompt}).json()["tokens"])

        yield server_count


@pytest.fixture
def fits(count: Count, n_ctx: int) -> Fits:
    """Whether a view fits with room for the answer, by the server's count (the policy's
    rule: prompt + max_tokens <= window)."""

    def fits_window(view: Sequence[Message]) -> bool:
        needed = count(view) + MAX_TOKENS
        assert abs(needed - n_ctx) > BOUNDARY_MARGIN, f"{needed} tokens: too close to call"
        return needed <= n_ctx

    return fits_window


def kinds(events: Sequence[Event]) -> list[type[Event]]:
    return [type(event) for event in events]


def latest_request(messages: Sequence[Message]) -> Message:
    return next(m for m in reversed(messages) if m.role is Role.USER)


def assert_turn(
    reply: Reply,
    sent: Sequence[Request],
    transcript: Sequence[Message],
    fits: Fits,
    config: RecoveryConfig = CONFIG,
) -> int:
    """One send() recovered exactly as it should have; returns the level it sent (0: none).

    The level sent must be the first whose view `fits` (the server's judgement), and each
    level below it is either skipped without a call or sent and rejected by a real overflow.
    Before the window is known, the full view is sent and overflows; once an overflow has
    stated it (`Client` remembers it for the next sends), pre-flight may recover before
    sending, from chatcli's uncalibrated estimate: one short guess can still overflow, and
    from then on the prediction is calibrated. So a level > 0 costs one or two calls.
    """
    views = level_views(transcript, config)
    level = next(n for n, view in enumerate(views) if fits(view))
    assert reply.calls == len(sent) and 1 <= len(sent) <= (1 if level == 0 else 2)
    assert sent[-1].messages == reply.view == views[level]
    assert all(request.messages in views[:level] for request in sent[:-1])
    overflows = [e for e in reply.events if isinstance(e, OverflowDetected)]
    assert len(overflows) == len(sent) - 1
    applied = [e.level for e in reply.events if isinstance(e, LevelApplied)]
    skipped = [e.level for e in reply.events if isinstance(e, LevelSkipped)]
    assert sorted(applied + skipped) == list(range(1, level + 1))
    assert applied[-1:] == ([level] if level else [])
    if level and not isinstance(reply.events[0], PreflightRecovery):
        # No pre-flight: the one overflow of the full view, then the levels skipped by the
        # calibrated prediction, then the level sent.
        expected = [OverflowDetected, *[LevelSkipped] * (level - 1), LevelApplied]
        assert kinds(reply.events) == expected
        assert sent[0].messages == views[0]
    latest = latest_request(transcript)
    for request in sent:
        assert latest in request.messages
        assert_paired(request.messages)
    return level


# --- overflow recovery, turn after turn -------------------------------------------------


@pytest.mark.llama_server
def test_a_long_tool_conversation_overflows_again_and_again_and_always_recovers(
    adapter: OpenAICompatible, count: Count, fits: Fits, n_ctx: int
) -> None:
    provider = Recording(adapter)
    learned: dict[str, int] = {}
    transcript = [SYSTEM]
    levels, preflights = [], []
    for turn in range(1, TURNS + 1):
        transcript += tool_round(turn)
        first_call = len(provider.requests)
        # A Client per turn, as an app that keeps only the transcript and the window learned:
        # each turn recovers the whole transcript (a kept Client keeps its first cut instead:
        # sticky views, `test_a_kept_client_sends_its_cut_until_the_window_forces_a_new_one`).
        client = Client(provider, CONFIG, learned_windows=learned)
        reply = client.send(transcript, max_tokens=MAX_TOKENS)
        learned.update(client.learned_windows)
        sent = provider.requests[first_call:]
        levels.append(assert_turn(reply, sent, transcript, fits))
        preflights.append(any(isinstance(e, PreflightRecovery) for e in reply.events))
        assert_overflow_numbers(reply, sent, count, n_ctx)
        # The model's real answer, cut at max_tokens (escalation is off), carries the turn on.
        last = provider.outcomes[-1]
        assert isinstance(last, Response) and last.usage.output_tokens == MAX_TOKENS
        assert reply.message == last.message and reply.message.text
        assert reply.truncated and reply.stop_reason is StopReason.MAX_TOKENS
        transcript.append(reply.message)
    assert levels.count(0) == 1  # every turn after the first needed recovery, and got it
    assert {1, 2, 3} <= set(levels)  # some needed each level
    # The first overflow stated the window; from the next turn on, pre-flight recovers before
    # sending, so a turn costs a rejected call only when the uncalibrated guess fell short.
    assert preflights == [False, False] + [True] * (TURNS - 2)
    assert 1 <= rejected_overflows(provider, TURNS) < TURNS - 1


def rejected_overflows(provider: Recording, turns: int) -> int:
    """The calls an overflow rejected: every call but the one answered in each turn."""
    rejected = [o for o in provider.outcomes if isinstance(o, ProviderError)]
    assert all(e.info.kind is ErrorKind.CONTEXT_OVERFLOW for e in rejected)
    assert len(provider.requests) == turns + len(rejected)
    return len(rejected)


def assert_overflow_numbers(
    reply: Reply, sent: Sequence[Request], count: Count, n_ctx: int
) -> None:
    """Each overflow carried the server's own numbers: its count of what was sent, its n_ctx."""
    overflows = [e for e in reply.events if isinstance(e, OverflowDetected)]
    for overflow, request in zip(overflows, sent, strict=False):  # the last call succeeded
        assert overflow.info.code == "exceed_context_size_error"
        assert overflow.limit == n_ctx
        assert overflow.prompt_tokens == count(request.messages)


@pytest.mark.llama_server
async def test_the_async_client_recovers_the_same_way(
    adapter: OpenAICompatible, fits: Fits
) -> None:
    transcript = [SYSTEM, *(m for turn in range(1, 5) for m in tool_round(turn))]
    provider = Recording(adapter)
    try:
        reply = await Client(provider, CONFIG).asend(transcript, max_tokens=MAX_TOKENS)
    finally:
        await adapter.aclose()
    assert assert_turn(reply, provider.requests, transcript, fits) > 0


@pytest.mark.llama_server
def test_the_default_pipeline_microcompacts_large_old_results_on_the_real_server(
    llama_server: str, n_ctx: int
) -> None:
    """Results of 4,000 chars (over microcompaction's size floor), some turns old, with the
    window declared (microcompaction may act by pressure: half the room): `Client`'s default
    microcompaction shrinks them before the budget and the levels, and every request that
    reaches the server is one of the views the policy's own functions build."""
    transcript = [SYSTEM, *(m for turn in range(1, 8) for m in tool_round(turn, big=4_000))]
    policy = RecoveryPolicy(config=CONFIG, context_window=n_ctx, max_output_tokens=MAX_TOKENS)
    # The point of this test: it fails loudly if microcompaction stops acting here.
    microcompacted = policy.apply_microcompaction(transcript)
    assert microcompacted != tuple(transcript), "microcompaction did not act on this conversation"
    views = level_views(transcript, CONFIG, policy)
    adapter = connect(llama_server, context_window=n_ctx)
    provider = Recording(adapter)
    try:
        reply = Client(provider, CONFIG, max_output_tokens=MAX_TOKENS).send(
            transcript, max_tokens=MAX_TOKENS
        )
    finally:
        adapter.close()
    assert all(request.messages in views for request in provider.requests)
    assert provider.requests[-1].messages == reply.view
    assert latest_request(transcript) in reply.view
    assert_paired(reply.view)
    assert reply.usage.output_tokens == MAX_TOKENS  # a real answer to the recovered view
    # Without microcompaction the first view would differ: the expectation is not vacuous.
    unshrunk = level_views(transcript, CONFIG, RecoveryPolicy(config=CONFIG, microcompact=None))
    assert provider.requests[0].messages not in unshrunk[:2]


# --- pre-flight -----------------------------------------------------------------------------


@pytest.mark.llama_server
def test_a_declared_window_recovers_before_the_first_send(
    llama_server: str, fits: Fits, n_ctx: int
) -> None:
    """With `context_window=512` declared, a conversation known not to fit is recovered
    before anything is sent, from chatcli's own (uncalibrated) estimate: one call, no
    overflow round trip, and the level chosen is the first that the server counts as fitting."""
    adapter = connect(llama_server, context_window=n_ctx)
    transcript = [SYSTEM, *(m for turn in range(1, 9) for m in tool_round(turn))]
    provider = Recording(adapter)
    try:
        reply = Client(provider, CONFIG).send(transcript, max_tokens=MAX_TOKENS)
    finally:
        adapter.close()
    assert reply.calls == len(provider.requests) == 1
    assert kinds(reply.events) == [PreflightRecovery, LevelSkipped, LevelApplied]
    views = level_views(transcript, CONFIG)
    assert [fits(view) for view in views[:3]] == [False, False, True]
    assert provider.requests[0].messages == views[2] == reply.view
    assert latest_request(transcript) in reply.view
    assert_paired(reply.view)
    assert reply.stop_reason is StopReason.MAX_TOKENS  # a real answer, not a window stop
    assert reply.usage.output_tokens == MAX_TOKENS


# --- escalation and continuation --------------------------------------------------------


@pytest.mark.llama_server
def test_answers_cut_at_max_tokens_are_escalated_continued_and_stitched(
    adapter: OpenAICompatible,
) -> None:
    """The tiny model never stops by itself, so every answer is a real `finish_reason: length`:
    two escalations (8 -> 16 -> 32), each with a continuation, then the partial, truncated."""
    provider = Recording(adapter)
    conversation = [SYSTEM, Message.user("Explain what a careful client does.")]
    reply = Client(provider).send(conversation, max_tokens=8)

    assert reply.calls == len(provider.requests) == 3
    assert [r.max_tokens for r in provider.requests] == [8, 16, 32]
    answers = provider.responses
    # What the server received: it generated exactly the max_tokens of each request.
    assert [a.usage.output_tokens for a in answers] == [8, 16, 32]
    assert all(a.stop_reason is StopReason.MAX_TOKENS for a in answers)
    assert kinds(reply.events) == [Escalated, Continued, Escalated, Continued]
    escalations = [(e.attempt, e.old, e.new) for e in reply.events if isinstance(e, Escalated)]
    assert escalations == [(1, 8, 16), (2, 16, 32)]

    stitched = functools.reduce(stitch, [a.message for a in answers])
    assert reply.message.text == stitched.text
    assert reply.message.text.startswith(answers[0].message.text)
    assert reply.message.text.endswith(answers[-1].message.text)
    for number, request in enumerate(provider.requests[1:], start=1):
        partial = functools.reduce(stitch, [a.message for a in answers[:number]])
        assert request.messages == (*conversation, partial, Message.user(CONTINUATION_MESSAGE))
    assert reply.truncated and reply.stop_reason is StopReason.MAX_TOKENS
    assert reply.view == tuple(conversation)
    assert reply.usage.output_tokens == 8 + 16 + 32


# --- streaming ------------------------------------------------------------------------------


@pytest.mark.llama_server
def test_the_adapter_streams_text_deltas_then_the_response(adapter: OpenAICompatible) -> None:
    request = Request(messages=(SYSTEM, Message.user("Say something.")), max_tokens=12)
    chunks = list(adapter.stream(request))
    *deltas, final = chunks
    assert len(deltas) > 1 and all(isinstance(d, TextDelta) for d in deltas)
    assert isinstance(final, Response)
    assert "".join(d.text for d in deltas if isinstance(d, TextDelta)) == final.message.text
    assert final.stop_reason is StopReason.MAX_TOKENS
    assert final.usage.output_tokens == 12 and final.usage.prompt_tokens > 0


@pytest.mark.llama_server
def test_a_streamed_conversation_that_overflows_is_recovered_and_streamed(
    adapter: OpenAICompatible, fits: Fits, n_ctx: int
) -> None:
    """Streaming as the chat session does it (`StreamingTap`): llama-server refuses an
    over-long streamed prompt with its JSON 400 before any event; the adapter raises it
    classified, the Client recovers, and the answer to the recovered view is streamed."""
    tap = StreamingTap(adapter)
    deltas: list[str] = []
    tap.on_delta = deltas.append
    provider = Recording(tap)
    transcript = [SYSTEM, *(m for turn in range(1, 5) for m in tool_round(turn))]
    reply = Client(provider, CONFIG).send(transcript, max_tokens=MAX_TOKENS)
    assert assert_turn(reply, provider.requests, transcript, fits) > 0
    failure = provider.outcomes[0]
    assert isinstance(failure, ProviderError)
    assert failure.info.kind is ErrorKind.CONTEXT_OVERFLOW and failure.info.limit == n_ctx
    assert "".join(deltas) == reply.message.text != ""


@pytest.mark.llama_server
def test_a_kept_client_sends_its_cut_until_the_window_forces_a_new_one(
    adapter: OpenAICompatible, fits: Fits
) -> None:
    # The same conversation through one Client: after a level cut the view, the next requests
    # start with that cut, byte for byte, and the real server takes them, until the window
    # forces a new cut (a prompt cache, llama.cpp's KV cache included, reuses the prefix).
    provider = Recording(adapter)
    client = Client(provider, CONFIG)
    transcript = [SYSTEM]
    cut: tuple[Message, ...] | None = None
    kept = 0
    for turn in range(1, TURNS + 1):
        transcript += tool_round(turn)
        reply = client.send(transcript, max_tokens=MAX_TOKENS)
        if any(isinstance(event, LevelApplied) for event in reply.events):
            cut = reply.view
        elif cut is not None:
            assert provider.requests[-1].messages[: len(cut)] == cut
            kept += 1
        assert fits(provider.requests[-1].messages)
        transcript.append(reply.message)
    assert cut is not None and kept >= 2

"""Client settings (per client and per call) and Client.stream / astream: deltas, events and the
Reply in order, continuations as one answer, failures and cancelling."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from chatcli import Client, Message, Settings
from chatcli.errors import ErrorInfo, ErrorKind, ProviderError
from chatcli.events import Continued, Escalated, Event, LevelApplied, OverflowDetected, Retried
from chatcli.messages import StopReason, Usage
from chatcli.providers.base import ReasoningDelta, Request, Response, TextDelta, ToolCallDelta
from chatcli.recovery import Reply
from chatcli.streaming import Discard, StreamRun
from tests.fakes import ScriptedProvider, WindowedProvider, response


@dataclass(kw_only=True)
class Streaming:
    """A streaming provider over `inner`: its answer in `size`-char deltas. An error of `inner`
    is raised before the first delta (as real servers reject a prompt); `fail_after` raises a
    transient error after that many deltas of the next call (once). Counts closed streams."""

    inner: Any
    size: int = 7
    fail_after: int | None = None
    closed: int = 0
    requests: list[Request] = field(default_factory=list)

    @property
    def context_window(self) -> int | None:
        return getattr(self.inner, "context_window", None)

    @property
    def max_output_tokens(self) -> int | None:
        return getattr(self.inner, "max_output_tokens", None)

    def complete(self, request: Request) -> Response:
        return self.inner.complete(request)  # type: ignore[no-any-return]

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)

    def stream(self, request: Request) -> Iterator[TextDelta | Response]:
        self.requests.append(request)
        try:
            answer = self.inner.complete(request)
            yield from self._deltas(answer.message.text)
            yield answer
        finally:
            self.closed += 1

    async def astream(self, request: Request) -> AsyncIterator[TextDelta | Response]:
        for chunk in self.stream(request):
            await asyncio.sleep(0)
            yield chunk

    def _deltas(self, text: str) -> Iterator[TextDelta]:
        for count, start in enumerate(range(0, len(text), self.size)):
            if self.fail_after is not None and count == self.fail_after:
                self.fail_after = None
                info = ErrorInfo(kind=ErrorKind.TRANSIENT, message="connection reset")
                raise ProviderError(info)
            yield TextDelta(text=text[start : start + self.size])


def shown_text(items: Sequence[object]) -> str:
    """What a UI showing the stream displays at the end: deltas, minus what was discarded."""
    text = ""
    for item in items:
        if isinstance(item, TextDelta):
            text += item.text
        elif isinstance(item, Discard):
            assert text.endswith(item.text)
            text = text[: len(text) - len(item.text)]
    return text


def long_answer(messages: Sequence[Message]) -> str:
    return " ".join(f"word{i}" for i in range(400))  # about 2,800 chars


def short(messages: Sequence[Message]) -> str:
    return "ok"


HISTORY = (Message.system("be brief"), Message.user("tell me everything"))


def no_sleep(seconds: float) -> None:
    return None


# -- settings --------------------------------------------------------------------------------


def test_client_settings_and_call_settings_reach_every_request() -> None:
    provider = ScriptedProvider(script=[response("a"), response("b")])
    client = Client(provider, settings=Settings(temperature=0.2, seed=1))
    client.send(HISTORY)
    client.send(HISTORY, settings=Settings(seed=7, stop=("END",)))
    first, second = (request.settings for request in provider.requests)
    assert (first.temperature, first.seed, first.stop) == (0.2, 1, None)
    assert (second.temperature, second.seed, second.stop) == (0.2, 7, ("END",))


def test_continuations_keep_the_settings_but_not_the_response_format() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    cut = response('{"a": "hel', stop=StopReason.MAX_TOKENS)
    provider = ScriptedProvider(script=[cut, response('lo"}')])
    settings = Settings(temperature=0.5, response_format=schema)
    reply = Client(provider).send(HISTORY, max_tokens=10, settings=settings)
    first, second = (request.settings for request in provider.requests)
    assert first.response_format == schema and first.temperature == 0.5
    assert second.response_format is None and second.temperature == 0.5
    assert json.loads(reply.message.text) == {"a": "hello"}
    assert not reply.truncated


def test_a_continued_json_answer_that_does_not_parse_is_truncated() -> None:
    cut = response('{"a": "hel', stop=StopReason.MAX_TOKENS)
    restarted = response('Sorry, here it is: {"a": "hello"}')  # not a resumption
    provider = ScriptedProvider(script=[cut, restarted])
    reply = Client(provider).send(HISTORY, max_tokens=10, settings=Settings(response_format="json"))
    assert reply.truncated
    plain = ScriptedProvider(script=[response("abc", stop=StopReason.MAX_TOKENS), response("d")])
    assert not Client(plain).send(HISTORY, max_tokens=10).truncated  # text is not judged


def test_a_thinking_budget_counts_in_the_output_reserve() -> None:
    # A 1,000-token window and a prompt of ~310 tokens: 200 tokens of answer fit next to it,
    # 200 + 700 of thinking do not, so the thinking request is recovered before it is sent.
    history = (Message.user("x" * 1000),)
    without = Client(WindowedProvider(window=1000, answer=short)).send(history, max_tokens=200)
    assert without.events == () and without.calls == 1
    provider = WindowedProvider(window=1000, answer=short)
    thinking = Settings(thinking_budget=700)
    reply = Client(provider).send(history, max_tokens=200, settings=thinking)
    assert reply.events, "the reserve with thinking does not fit: recovered before sending"
    assert reply.calls == 1


# -- streaming -------------------------------------------------------------------------------


def test_stream_yields_deltas_then_the_reply() -> None:
    provider = Streaming(inner=ScriptedProvider(script=[response("Hello, streaming world")]))
    items = list(Client(provider).stream(HISTORY))
    assert isinstance(items[-1], Reply)
    assert all(isinstance(item, TextDelta) for item in items[:-1])
    assert len(items) > 3
    assert shown_text(items) == items[-1].message.text == "Hello, streaming world"


def test_an_escalated_continuation_streams_as_one_answer_with_the_seam_removed() -> None:
    inner = WindowedProvider(window=100_000, answer=long_answer, repeat=25)
    items = list(Client(Streaming(inner=inner, size=5)).stream(HISTORY, max_tokens=300))
    reply = items[-1]
    assert isinstance(reply, Reply) and not reply.truncated
    assert reply.message.text == long_answer(HISTORY)
    assert shown_text(items) == reply.message.text  # the 25 repeated chars never shown
    assert not any(isinstance(item, Discard) for item in items)
    kinds = [type(item) for item in items if isinstance(item, Event)]
    assert kinds == [Escalated, Continued]
    # The events come between the first answer's deltas and the continuation's.
    at = items.index(next(item for item in items if isinstance(item, Escalated)))
    assert isinstance(items[at - 1], TextDelta) and isinstance(items[at + 2], TextDelta)


def test_an_overflow_before_the_first_token_is_recovered_before_anything_is_shown() -> None:
    history = tuple(
        Message.user(f"question {i} " + "x" * 400) if i % 2 == 0 else Message.assistant("y" * 400)
        for i in range(41)
    )
    inner = WindowedProvider(window=2_000, declares_limits=False)
    items = list(Client(Streaming(inner=inner)).stream(history))
    reply = items[-1]
    assert isinstance(reply, Reply)
    first_delta = next(i for i, item in enumerate(items) if isinstance(item, TextDelta))
    events = [item for item in items[:first_delta] if isinstance(item, Event)]
    assert isinstance(events[0], OverflowDetected)
    assert any(isinstance(event, LevelApplied) for event in events)
    assert not any(isinstance(item, Event) for item in items[first_delta:-1])
    assert shown_text(items) == reply.message.text == "Answer to: " + history[-1].text


def test_a_call_failing_mid_stream_is_discarded_and_retried() -> None:
    provider = Streaming(
        inner=ScriptedProvider(script=[response("abcdefghijklmnop"), response("the answer")]),
        size=3,
        fail_after=2,
    )
    items = list(Client(provider, sleep=no_sleep).stream(HISTORY))
    assert Discard(text="abcdef") in items
    retried = next(i for i, item in enumerate(items) if isinstance(item, Retried))
    assert items.index(Discard(text="abcdef")) < retried
    reply = items[-1]
    assert isinstance(reply, Reply) and reply.message.text == "the answer"
    assert shown_text(items) == "the answer"


def test_closing_the_stream_closes_the_provider_stream() -> None:
    provider = Streaming(inner=ScriptedProvider(script=[response("x" * 100)]), size=5)
    stream = Client(provider).stream(HISTORY)
    assert isinstance(next(stream), TextDelta)
    assert provider.closed == 0
    stream.close()
    assert provider.closed == 1


def test_tool_call_deltas_pass_through() -> None:
    call_delta = ToolCallDelta(index=0, id="c1", name="ls", arguments='{"p": 1}')

    class WithToolDelta(Streaming):
        def stream(self, request: Request) -> Iterator[TextDelta | Response]:
            yield call_delta  # type: ignore[misc]
            yield from super().stream(request)

    provider = WithToolDelta(inner=ScriptedProvider(script=[response("done")]))
    items = list(Client(provider).stream(HISTORY))
    assert items[0] == call_delta and shown_text(items) == "done"


def test_a_provider_that_cannot_stream_is_streamed_as_one_delta() -> None:
    provider = ScriptedProvider(script=[response("all at once", usage=Usage(5, 3))])
    items = list(Client(provider).stream(HISTORY))
    assert items[0] == TextDelta(text="all at once")
    assert isinstance(items[1], Reply) and items[1].usage == Usage(5, 3)


async def test_astream_is_the_same_stream() -> None:
    inner = WindowedProvider(window=100_000, answer=long_answer, repeat=25)
    items = [
        item
        async for item in Client(Streaming(inner=inner, size=5)).astream(HISTORY, max_tokens=300)
    ]
    reply = items[-1]
    assert isinstance(reply, Reply)
    assert shown_text(items) == reply.message.text == long_answer(HISTORY)
    assert [type(item) for item in items if isinstance(item, Event)] == [Escalated, Continued]


async def test_cancelling_astream_closes_the_provider_stream() -> None:
    started = asyncio.Event()

    class Slow(Streaming):
        async def astream(self, request: Request) -> AsyncIterator[TextDelta | Response]:
            try:
                yield TextDelta(text="first")
                started.set()
                await asyncio.sleep(3600)
                yield response("never")
            finally:
                self.closed += 1

    provider = Slow(inner=ScriptedProvider(script=[]))

    async def consume() -> None:
        async for _ in Client(provider).astream(HISTORY):
            pass

    task = asyncio.create_task(consume())
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert provider.closed == 1


def test_a_window_filled_mid_stream_is_continued_in_the_same_stream() -> None:
    # Anthropic's `model_context_window_exceeded`: the answer stopped because the window
    # filled up. The view is recovered and the answer continued, in the same stream.
    history = [Message.system("be brief")]
    for i in range(20):
        history += [Message.user(f"question {i} " + "x" * 200), Message.assistant("y" * 200)]
    history.append(Message.user("the last question"))
    filled = response("The first half of the answer, ", stop=StopReason.CONTEXT_WINDOW)
    inner = ScriptedProvider(script=[filled, response("and the second half.")])
    items = list(Client(Streaming(inner=inner, size=6)).stream(history))
    reply = items[-1]
    assert isinstance(reply, Reply) and not reply.truncated
    expected = "The first half of the answer, and the second half."
    assert shown_text(items) == reply.message.text == expected
    events = [type(item) for item in items if isinstance(item, Event)]
    assert events[0] is OverflowDetected and LevelApplied in events and events[-1] is Continued
    assert len(inner.requests) == 2 and len(inner.requests[1].messages) < len(history)


def _drained(run: StreamRun, chunks: Iterator[Any]) -> list[Any]:
    """The items of one call of `run` (its outcome dropped)."""
    call = run.call(chunks)
    items = []
    try:
        while True:
            items.append(next(call))
    except StopIteration:
        return items


def test_reasoning_streams_and_a_call_that_fails_after_it_is_discarded() -> None:
    def failing() -> Iterator[Any]:
        yield ReasoningDelta(index=0, block={"type": "thinking", "thinking": ""})
        yield ReasoningDelta(index=0, thinking="Let me think")
        raise ProviderError(ErrorInfo(kind=ErrorKind.TRANSIENT, message="dropped"))

    items = _drained(StreamRun(), failing())
    assert items[:2] == [
        ReasoningDelta(index=0, block={"type": "thinking", "thinking": ""}),
        ReasoningDelta(index=0, thinking="Let me think"),
    ]
    assert items[2:] == [Discard(text="", reasoning=True)]  # no text shown, reasoning was


def test_a_continuations_reasoning_is_not_shown() -> None:
    run = StreamRun()
    run.shown, run.continuing = "the first call's text", True
    chunks = iter([ReasoningDelta(index=0, thinking="again"), TextDelta(text=" and more")])
    items = _drained(run, chunks)
    assert not any(isinstance(item, ReasoningDelta) for item in items)

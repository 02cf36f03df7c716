"""What `Client.stream` / `astream` yield, and the bookkeeping that keeps the stream one answer.

A stream yields, in order: text deltas (`TextDelta`), tool-call deltas (`ToolCallDelta`),
reasoning deltas (`ReasoningDelta`) and the provider's compaction (`CompactionDelta`), the
last two the first call's only, as the provider sends them,
recovery events (`chatcli.events.Event`) as the policy emits them, and last the `Reply` —
the whole answer, which is what counts (the deltas are for showing it as it
comes). Three things keep what was shown equal to the reply's text:

- **An overflow before the first token** is recovered before anything is shown: the provider
  raises before its first delta, and the recovered request streams as the answer.
- **A continuation** (after max_tokens, or the window filling up) streams on as the same
  answer: its first chars are held back while they could still repeat the end of what was
  shown, and the repeated part (`chatcli.continuation.seam_overlap`, the rule `stitch` applies
  to the reply) is dropped from the stream.
- **A call that fails after it showed text** (a connection dropped mid-answer, then retried)
  is followed by `Discard`: the text it showed is not part of the answer; the retried call
  streams the answer again.

Closing the stream (or cancelling the task) closes the provider's stream, so its HTTP response
is released; nothing is recorded for a call that did not finish.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass

from chatcli.continuation import seam_overlap
from chatcli.events import Event
from chatcli.messages import StopReason
from chatcli.policy.actions import Outcome, Reply
from chatcli.providers.base import (
    CompactionDelta,
    Provider,
    ReasoningDelta,
    Request,
    Response,
    StreamChunk,
    TextDelta,
    ToolCallDelta,
)

__all__ = ["CallOutcome", "Discard", "StreamItem", "StreamRun", "async_chunks", "sync_chunks"]

# The answer stopped short of its end: the next call of the same send() continues it.
_CUT = frozenset({StopReason.MAX_TOKENS, StopReason.CONTEXT_WINDOW})


@dataclass(frozen=True, slots=True, kw_only=True)
class Discard:
    """The last `text` shown (the end of the stream so far) is not part of the answer: a call
    failed after showing it (and its reasoning or compaction, when `reasoning`), and the
    retried call streams the answer again."""

    text: str
    reasoning: bool = False


StreamItem = TextDelta | ToolCallDelta | ReasoningDelta | CompactionDelta | Event | Discard | Reply


@dataclass(frozen=True, slots=True, kw_only=True)
class CallOutcome:
    """The end of one call in an async stream: its outcome, for the policy (never yielded to
    the caller)."""

    outcome: Outcome


class _Seam:
    """Holds back the start of a continuation while it may repeat the end of `before`."""

    def __init__(self, before: str) -> None:
        self.before, self.held, self.open = before, "", True

    def feed(self, text: str) -> str:
        """What of `text` to show now."""
        if not self.open:
            return text
        self.held += text
        # Any repeat is a suffix of `before` that starts with all that is held, so the held
        # text can repeat the end only while it occurs in `before`.
        return "" if self.held in self.before else self.close()

    def close(self) -> str:
        """What is still held, minus what repeats the end of `before`."""
        if not self.open:
            return ""
        self.open = False
        return self.held[seam_overlap(self.before, self.held) :]


class StreamRun:
    """The state of one streamed send(): the events to yield, and the answer text shown."""

    def __init__(self) -> None:
        self.pending: list[Event] = []
        self.shown = ""
        self.continuing = False

    def emit(self, forward: Callable[[Event], None]) -> Callable[[Event], None]:
        """An emit function for the policy: `forward` the event (hooks, logging) and queue it."""

        def emit(event: Event) -> None:
            forward(event)
            self.pending.append(event)

        return emit

    def drain(self) -> Iterator[Event]:
        """The events emitted since the last drain, in order."""
        events, self.pending = self.pending, []
        yield from events

    def call(self, chunks: Iterator[StreamChunk]) -> Generator[StreamItem, None, Outcome]:
        """Yield one call's deltas; return its outcome (the Response, or the exception)."""
        call = _Call(self)
        try:
            for chunk in chunks:
                if isinstance(chunk, Response):
                    yield from call.text(call.seam_rest())
                    return call.done(chunk)
                yield from call.delta(chunk)
            raise RuntimeError("the stream ended without a response")
        except Exception as exc:
            yield from call.failed()
            return exc
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()

    async def acall(
        self, chunks: AsyncIterator[StreamChunk]
    ) -> AsyncIterator[StreamItem | CallOutcome]:
        """The async `call`: the outcome comes last, as a `CallOutcome`."""
        call = _Call(self)
        outcome: Outcome
        try:
            async for chunk in chunks:
                if isinstance(chunk, Response):
                    for item in call.text(call.seam_rest()):
                        yield item
                    outcome = call.done(chunk)
                    break
                for item in call.delta(chunk):
                    yield item
            else:
                raise RuntimeError("the stream ended without a response")
        except Exception as exc:
            for item in call.failed():
                yield item
            outcome = exc
        finally:
            aclose = getattr(chunks, "aclose", None)
            if aclose is not None:
                await aclose()
        yield CallOutcome(outcome=outcome)


class _Call:
    """One provider call of a streamed send()."""

    def __init__(self, run: StreamRun) -> None:
        self.run = run
        self.before = run.shown
        self.seam = _Seam(run.shown) if run.continuing else None
        self.reasoned = False  # reasoning or a compaction shown

    def delta(
        self, chunk: TextDelta | ToolCallDelta | ReasoningDelta | CompactionDelta
    ) -> Iterator[StreamItem]:
        if isinstance(chunk, ToolCallDelta):
            yield chunk
        elif isinstance(chunk, (ReasoningDelta, CompactionDelta)):
            if self.seam is None:  # a continuation's reasoning is not part of the answer shown
                self.reasoned = True
                yield chunk
        else:
            yield from self.text(self.seam.feed(chunk.text) if self.seam else chunk.text)

    def text(self, text: str) -> Iterator[StreamItem]:
        if text:
            self.run.shown += text
            yield TextDelta(text=text)

    def seam_rest(self) -> str:
        return self.seam.close() if self.seam else ""

    def done(self, response: Response) -> Response:
        if response.stop_reason in _CUT:
            self.run.continuing = True
        return response

    def failed(self) -> Iterator[StreamItem]:
        shown, self.run.shown = self.run.shown[len(self.before) :], self.before
        if shown or self.reasoned:
            yield Discard(text=shown, reasoning=self.reasoned)


def sync_chunks(provider: Provider, request: Request) -> Iterator[StreamChunk]:
    """The provider's stream, or, for a provider that cannot stream, its answer as one delta."""
    stream = getattr(provider, "stream", None)
    if stream is not None:
        yield from stream(request)
        return
    response = provider.complete(request)
    if response.message.text:
        yield TextDelta(text=response.message.text)
    yield response


async def async_chunks(provider: Provider, request: Request) -> AsyncIterator[StreamChunk]:
    """The async `sync_chunks`."""
    astream = getattr(provider, "astream", None)
    if astream is not None:
        stream = astream(request)
        try:
            async for chunk in stream:
                yield chunk
        finally:  # `async for` leaves an unfinished async generator open
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
        return
    response = await provider.acomplete(request)
    if response.message.text:
        yield TextDelta(text=response.message.text)
    yield response

"""The provider tap of a chat session: a Provider around the real one that streams answers
to the screen and records every call (why it was made, what it used), so that a turn's cost
can be split into the answer and the recovery around it.

A call the user cancelled, or one that failed after its answer began to arrive, was processed
(its prompt read, some output written) and maybe billed, though no usage came back: it is
recorded with the usage its stream reported, else an estimate (`CallRecord.estimated`): the
prompt counted by the session's estimator, the output from the text that arrived.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from chatcli.continuation import CONTINUATION_MESSAGE
from chatcli.cost import CallKind
from chatcli.messages import Message, StopReason, Usage
from chatcli.providers.base import Provider, Request, Response, StreamChunk, TextDelta
from chatcli.tokens.estimate import TokenEstimator

__all__ = ["CallRecord", "DeltaHook", "StreamingTap"]

DeltaHook = Callable[[str], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallRecord:
    """One provider call: why it was made (answer, continuation, failed) and its usage. A
    compaction the provider made on its servers during a call is a record of its own."""

    kind: CallKind
    usage: Usage
    estimated: bool = False  # the usage is chatcli's estimate: the server reported none


class StreamingTap:
    """A Provider around `inner`: streams answers to `on_delta` (when set and `inner` can
    stream) and records every call, so a turn's cost can be split into answer and recovery.

    `on_discard` is called when a call fails after streaming some text (that text is not
    part of the answer). A call the user cancelled (KeyboardInterrupt) is recorded too, with
    whatever usage its stream had reported (else `estimator`'s estimate), and its text is kept.
    """

    def __init__(self, inner: Provider, estimator: TokenEstimator | None = None) -> None:
        self.inner = inner
        self.estimator = estimator or TokenEstimator()
        self.on_delta: DeltaHook | None = None
        self.on_discard: Callable[[], None] | None = None
        self.calls: list[CallRecord] = []
        self._reported: Usage | None = None  # the usage the current call's stream reported
        self._streamed = 0  # chars of answer text the current call's stream delivered
        # The last prompt the provider counted: (messages sent, prompt tokens it reported).
        self.last_prompt: tuple[tuple[Message, ...], int] | None = None

    @property
    def model(self) -> str | None:
        """The inner provider's model: what `Client` keys the windows it learns by (without
        it, a window learned in the chat was kept under no model and never applied)."""
        model = getattr(self.inner, "model", None)
        return model if isinstance(model, str) else None

    @property
    def compaction_provider(self) -> str | None:
        """The inner provider's: whose compactions it reads (`chatcli.history.native`)."""
        owner = getattr(self.inner, "compaction_provider", None)
        return owner if isinstance(owner, str) else None

    def native_compaction_supported(self) -> bool:
        """The inner provider's: whether its model compacts on the provider's servers (the
        `Client` asks for it then)."""
        supported = getattr(self.inner, "native_compaction_supported", None)
        return callable(supported) and bool(supported())

    @property
    def context_window(self) -> int | None:
        return _int_attr(self.inner, "context_window")

    @property
    def max_output_tokens(self) -> int | None:
        return _int_attr(self.inner, "max_output_tokens")

    def complete(self, request: Request) -> Response:
        kind = _call_kind(request)
        self._reported, self._streamed = None, 0
        try:
            response = self._call(request)
        except BaseException as exc:  # a cancelled call may have been billed too
            self.calls.append(self._unanswered(request, cancelled=not isinstance(exc, Exception)))
            if isinstance(exc, Exception) and self.on_discard is not None:
                self.on_discard()
            raise
        if response.stop_reason is StopReason.CONTEXT_WINDOW:
            kind = CallKind.FAILED  # the window filled up: this answer is thrown away
            if self.on_discard is not None:
                self.on_discard()
        self.calls.append(CallRecord(kind=kind, usage=response.usage))
        if response.compaction_usage is not None:  # the provider's own summary, apart
            self.calls.append(CallRecord(kind=CallKind.COMPACTION, usage=response.compaction_usage))
        if response.usage.prompt_tokens > 0:
            self.last_prompt = (request.messages, response.usage.prompt_tokens)
        return response

    def _unanswered(self, request: Request, *, cancelled: bool) -> CallRecord:
        """The record of a call that raised: cancelled by the user, or failed. Its usage is
        what its stream reported; else, when it was processed (cancelled, or its answer had
        begun), an estimate; else none (a rejected request processed nothing)."""
        kind = CallKind.CANCELLED if cancelled else CallKind.FAILED
        if self._reported is not None:
            return CallRecord(kind=kind, usage=self._reported)
        if not (cancelled or self._streamed):
            return CallRecord(kind=kind, usage=Usage())
        prompt = self.estimator.count(request.messages)
        output = self.estimator.count_chars(self._streamed) if self._streamed else 0
        return CallRecord(kind=kind, usage=Usage(prompt, output), estimated=True)

    async def acomplete(self, request: Request) -> Response:
        return await asyncio.to_thread(self.complete, request)

    def _call(self, request: Request) -> Response:
        stream = getattr(self.inner, "stream", None)
        if self.on_delta is None or stream is None:
            return self.inner.complete(request)
        chunks: Iterator[StreamChunk] = stream(request)
        final: Response | None = None
        for chunk in chunks:
            if isinstance(chunk, TextDelta):
                self._streamed += len(chunk.text)
                self.on_delta(chunk.text)
            elif isinstance(chunk, Response):  # tool-call deltas show in the final answer
                final, self._reported = chunk, chunk.usage
        if final is None:
            raise RuntimeError("the stream ended without a response")
        return final


def _int_attr(obj: object, name: str) -> int | None:
    value = getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _call_kind(request: Request) -> CallKind:
    last = request.messages[-1] if request.messages else None
    is_continuation = last is not None and last.text == CONTINUATION_MESSAGE
    return CallKind.CONTINUATION if is_continuation else CallKind.ANSWER

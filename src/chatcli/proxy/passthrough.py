"""The proxy's fast path: a request the library would forward unchanged goes to the upstream
as the client's own bytes, and the upstream's event stream goes back as it arrives.

Most requests need nothing from recovery: nothing to microcompact, no tool result over
budget, a prompt that fits. For those, parsing the client's messages into a view, writing
them back for the SDK, decoding every event of the answer and writing it again in the
client's dialect is the proxy's whole cost. When the client speaks the upstream's wire (an
OpenAI client in front of an OpenAI or OpenAI-compatible server, Chat Completions, streamed),
the fast path skips it:

- **The verdict is the library's.** `Client.start_stream` runs the policy up to its first
  call (microcompaction, budget, pre-flight, a sticky view); `first_unchanged` accepts that
  call only when its view is the client's messages themselves (the same objects) and nothing
  happened before it. No rule of the library is repeated here.
- **The body is the client's bytes**, with only the fields the adapter itself sets
  (`OpenAIBase.passthrough_fields`: the upstream's model, the output limit when the client
  gives none, usage in the stream) spliced in; sent with plain httpx (`apassthrough`) over
  a lean HTTP/1.1 transport (`chatcli.providers.lean_http`: httpcore's read of each event
  was the proxy's largest cost per event).
- **The answer is piped** read by read (served by `chatcli proxy`, from callbacks on the
  upstream's connection straight to the client's, the response started by the first bytes
  to pass on: `chatcli.proxy.pipe`; else through this module's generators). Only what must
  be judged is held back: from the first event carrying a tool call, a finish reason or an
  error (or no `"finish_reason": null` at all), to the end. The stream is decoded once, the
  piped events a batch at a time as they pass (`PassthroughFold`, so that little is left to
  decode on the way to the client's last bytes), the rest at the end, and its outcome handed
  to the library (`Client.advance`, its verdict with no wait): when it takes the answer as
  it is (its Reply comes next), the held events follow and the request is recorded (with
  nothing to record, from the callback that read the answer's end: `FastPath.end_now`); when
  it makes another call (the output limit was reached: escalation and continuation; a
  silently cut prompt), the held events are dropped and the rest of the answer is written by
  the dialect after what was piped (`Client.resume_stream`), exactly as on the library's path.
  So a tool call cut by the limit is never forwarded, and no call is made that the library
  would not have made.
- **A failure before the answer began** (an error status, an overflow) is the first call's
  outcome too: the library goes on from it (`Performed`), recovers as it would have, or the
  client gets the error in its dialect, with its status.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import operator
import re
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from chatcli.client import Client, Performed, StreamStart
from chatcli.providers.base import Request, Response
from chatcli.providers.openai import OpenAIBase, PassthroughFold
from chatcli.proxy.dialect import ClientRequest
from chatcli.proxy.pipe import Pipe, ServerLink, sent_at_once
from chatcli.proxy.upstream import Upstream
from chatcli.recovery import Reply
from chatcli.streaming import StreamItem

__all__ = ["FastPath", "PipedResponse", "first_unchanged", "forwarded_body", "passthrough_of"]

# An event that can go to the client as it comes: a choice still open, and nothing to judge.
_OPEN = re.compile(rb'"finish_reason"\s*:\s*null')
_EVENT_END = re.compile(rb"\r?\n\r?\n")

Handover = Callable[[AsyncIterator[StreamItem], str], AsyncIterator[bytes]]


def first_unchanged(
    start: StreamStart, parsed: ClientRequest, max_tokens: int | None
) -> Request | None:
    """The library's first request, when it is the client's own: its view is the client's
    messages themselves (nothing microcompacted, cut or taken from a sticky view: those are
    new objects), with the client's tools and the output limit asked (`max_tokens`), and
    nothing happened before it (no pre-flight level). None: the library changes something,
    so it forwards the request itself."""
    first = start.first
    if first is None or start.events or first.max_tokens != max_tokens:
        return None
    view, messages = first.messages, parsed.messages
    if len(view) != len(messages) or not all(map(operator.is_, view, messages)):
        return None
    if tuple(first.tools) != tuple(parsed.tools):
        return None
    return first


def passthrough_of(upstream: Upstream, parsed: ClientRequest) -> OpenAIBase | None:
    """The adapter a streamed request can be piped through: an OpenAI client in front of an
    OpenAI or OpenAI-compatible upstream on Chat Completions; None for any other, for a
    request with headers to pass on (`upstream.passed_headers`: the library's path sends
    them), and behind a proxy from the environment (`OpenAIBase.passthrough_direct`)."""
    provider = upstream.provider
    if not parsed.stream or parsed.dialect != "openai" or upstream.dialect != "openai":
        return None
    if parsed.headers:
        return None
    if not isinstance(provider, OpenAIBase) or provider.api != "chat":
        return None
    return provider if provider.passthrough_direct else None


def forwarded_body(raw: bytes, body: Mapping[str, Any], fields: Mapping[str, Any]) -> bytes:
    """The client's body with `fields` set: its own bytes when it has them all already; the
    missing ones spliced in front of its own; re-encoded only when it gives one another
    value (a client's model name, say)."""
    missing = {k: v for k, v in fields.items() if k not in body}
    if any(body[k] != v for k, v in fields.items() if k in body):
        return json.dumps({**body, **fields}, ensure_ascii=False).encode()
    if not missing:
        return raw
    head = json.dumps(missing, ensure_ascii=False).encode()[:-1]  # without its "}"
    start = raw.index(b"{") + 1
    while raw[start : start + 1].isspace():
        start += 1
    between = b"" if raw[start : start + 1] == b"}" else b","
    return b"".join((head, between, memoryview(raw)[start:]))  # one copy of a large body


# The events piped to the client that are decoded together as they pass (`PassthroughFold`):
# an answer's end decodes fewer than this (at 150 events of ~200 bytes, its fold was 0.6 ms
# of the answer's end at 200 streams, benchmarks/proxy.py).
FOLDED_AFTER = 32


@dataclass(frozen=True, slots=True)
class Settled:
    """An answer's end: the text piped to the client, the call's outcome (`FastPath.ended`),
    and the library's stream gone on from them (`Client.advance`), with no wait."""

    shown: str
    outcome: Response | Exception
    start: StreamStart


class FastPath:
    """One request on the fast path: `open` sends it; `piped` is the client's stream.
    `unrecorded`: the request is recorded nowhere (the proxy has no recorder), so the
    response may end from the pipe's callback (`end_now`)."""

    def __init__(
        self,
        provider: OpenAIBase,
        library: Client,
        start: StreamStart,
        first: Request,
        parsed: ClientRequest,
        link: ServerLink | None = None,
        *,
        unrecorded: bool = False,
    ) -> None:
        self.provider, self.library, self.start = provider, library, start
        self.first, self.parsed, self.link = first, parsed, link
        self.unrecorded = unrecorded  # nothing to record: the end may go from the pipe
        self.stack = contextlib.AsyncExitStack()
        self.buffer = b""  # the read bytes not yet judged (an event not yet ended)
        self.sent: list[bytes] = []  # events piped to the client
        self.fold: PassthroughFold | None = None  # the piped events decoded (`folded_sent`)
        self.folded = 0  # of `sent`, by `fold`
        self.held: list[bytes] = []  # events held back (from the first judged one on)
        self.failure: Exception | None = None
        self.reads: AsyncGenerator[bytes, None] | None = None
        self.early = b""
        self.http_request: Any = None
        self.detachable: Any = None  # the upstream body's reads, to hand to callbacks
        self.head: Message | None = None  # the response's start (`PipedResponse.start`)
        self.head_sent = False  # by the pipe's callback (`started`)
        self.pipe: Pipe | None = None  # the body's reads from callbacks (`link`, `head`)
        self.forwarded = b""  # the body sent (`send_now`)
        self.sent_request: Any = None  # the request, when `send_now` sent it
        self.settled: Settled | Exception | None = None  # the answer's end (`settle`)
        self.finished = False  # the response's end sent from the pipe's callback (`end_now`)

    def send_now(self, raw: bytes, body: Mapping[str, Any]) -> None:
        """Send the request now, when that needs no wait (`OpenAIBase.passthrough_now`): from
        the callback that read the client's request, no turn of the event loop lost; `open`
        (which must follow) then reads its answer. Else `open` sends it."""
        fields = self.provider.passthrough_fields(self.first, body)
        self.forwarded = forwarded_body(raw, body, fields)
        self.sent_request = self.provider.passthrough_now(self.forwarded)

    async def open(self, raw: bytes, body: Mapping[str, Any]) -> Performed | None:
        """Send the request, unless `send_now` did; None once the answer has begun: the
        first bytes to pipe are ready, or, with the server's `link` and the response's
        `head`, already sent with the head from the callback that read them
        (`chatcli.proxy.pipe.Pipe`). Else (the whole answer came held, or the call failed
        before any of it was sent) the call's outcome: the library goes on from it
        (`Client.resume_stream`)."""
        if not self.forwarded:
            fields = self.provider.passthrough_fields(self.first, body)
            self.forwarded = forwarded_body(raw, body, fields)
        sent, self.sent_request = self.sent_request, None
        try:
            stream = await self.stack.enter_async_context(
                self.provider.apassthrough(self.forwarded, sent)
            )
        except Exception as exc:
            await self.stack.aclose()
            return Performed(shown="", outcome=exc)
        self.http_request, self.detachable = stream.request, stream.detachable
        reads, link = self.detachable, self.link
        if link is not None and self.head is not None and reads is not None and not reads.complete:
            return await self.piped_from_callbacks(reads, link)
        self.reads = self.judged(stream.chunks)
        try:
            self.early = await anext(self.reads, b"")
        except BaseException:  # cancelled: the upstream's response is released
            await self.stack.aclose()
            raise
        if not self.early and not self.held:
            await self.stack.aclose()
            shown, outcome = self.ended()
            return Performed(shown, outcome)
        return None

    async def piped_from_callbacks(self, body: Any, link: ServerLink) -> Performed | None:
        """`open`'s end with a `Pipe`: None once the answer has begun, else the call's
        outcome (the response not started)."""
        self.pipe = Pipe(self, body, link.client, self.started)
        try:
            if await self.pipe.begun:
                return None
        except BaseException:
            self.pipe = None
            await self.stack.aclose()
            raise
        self.pipe = None
        await self.stack.aclose()
        return Performed(*self.ended())

    def started(self) -> None:
        """The response's head sent now, by the server (from the pipe's callback)."""
        assert self.link is not None and self.head is not None
        sent_at_once(self.link.send, self.head)
        self.head_sent = True

    async def piped(
        self, handover: Handover, record: Callable[[Reply], Awaitable[None]]
    ) -> AsyncIterator[bytes]:
        """The client's stream: the upstream's bytes as they come, then the held end when the
        library takes the answer (after `record`), else `handover`'s stream of the rest. From
        a `Pipe`, the bytes go to the client from callbacks (`chatcli.proxy.pipe`), not
        through this stream, but for the first ones when the client could not take them at
        once."""
        try:
            if (pipe := self.pipe) is not None:
                if pipe.early:
                    yield pipe.early
                    pipe.body.resume()
                await pipe.ended
            else:
                if self.early:
                    yield self.early
                assert self.reads is not None
                async for chunk in self.reads:
                    yield chunk
        finally:
            self.pipe = None  # it refers to this fast path: no cycle left for the collector
            await self.stack.aclose()
        if self.finished:
            return
        settled = self.settle()
        engine = self.library.resume_stream(settled.start)
        head = await anext(engine)
        if isinstance(head, Reply) and _as_sent(head, settled.outcome):
            await record(head)
            yield self.tail()
            return
        async for chunk in handover(_prepended(head, engine), settled.shown):
            yield chunk

    def settle(self) -> Settled:
        """The answer's end, with no wait: once per answer, from the pipe's callback
        (`end_now`) or the request's task (`piped`), which raises what it raised."""
        if self.settled is None:
            try:
                shown, outcome = self.ended()
                start = self.library.advance(self.start, Performed(shown, outcome))
                self.settled = Settled(shown, outcome, start)
            except Exception as exc:
                self.settled = exc
        if isinstance(self.settled, Exception):
            raise self.settled
        return self.settled

    def end_now(self) -> None:
        """The response ended from the pipe's callback that read the answer's end
        (`Pipe.end`), when nothing in it waits: the response began there, the client can take
        more at once, there is nothing to record (`unrecorded`), and the library takes the
        answer as it is, with nothing before its Reply and no event in it (so no cut to keep,
        `chatcli.proxy.sessions.StickyViews`): the held events go as the response's last
        chunk, through the server's `send`, and the request's task finds it `finished`. Else
        the task ends it (`piped`), from what was settled here."""
        link = self.link
        if link is None or not (self.unrecorded and self.head_sent):
            return
        if link.client.paused or link.client.gone:
            return
        try:
            settled = self.settle()
        except Exception:
            return  # the task's to raise
        reply = settled.start.step
        if settled.start.events or not isinstance(reply, Reply) or reply.events:
            return
        if not _as_sent(reply, settled.outcome):
            return
        end: Message = {"type": "http.response.body", "body": self.tail(), "more_body": False}
        sent_at_once(link.send, end)
        self.finished = True

    async def judged(self, reads: AsyncIterator[bytes]) -> AsyncGenerator[bytes, None]:
        """The bytes to pipe, read by read: the whole events before the first to judge; a
        failure to read ends them (it is the call's outcome)."""
        try:
            async for data in reads:
                if out := self.judge(data):
                    yield out
        except Exception as exc:
            self.failure = exc

    def judge(self, data: bytes) -> bytes:
        """What of `data` (with what came before) can go to the client now. Run on every
        read of every answer, so plain byte searches, the regular expressions only where
        they are needed (an event end with a CR, an unusual spelling of an open choice); the
        usual read, one whole event with nothing before it, with no split and no copy. Each
        `FOLDED_AFTER` events piped are decoded here (`folded_sent`)."""
        if (
            not self.buffer
            and not self.held
            and data.endswith(b"\n\n")
            and data.find(b"\n") == len(data) - 2  # one line, then the event's end
            and data.find(b"\r") < 0
        ):
            if _judged(data):
                self.held.append(data)
                return b""
            self.sent.append(data)
            if len(self.sent) - self.folded >= FOLDED_AFTER:
                self.folded_sent()
            return data
        whole = self.buffer + data if self.buffer else data
        events = _EVENT_END.split(whole) if whole.find(b"\r") >= 0 else whole.split(b"\n\n")
        self.buffer = events.pop()
        if self.held:
            self.held.extend(event + b"\n\n" for event in events)
            return b""
        out: list[bytes] = []
        for i, event in enumerate(events):
            if _judged(event):
                self.held.extend(e + b"\n\n" for e in events[i:])
                break
            out.append(event + b"\n\n")
        self.sent.extend(out)
        if len(self.sent) - self.folded >= FOLDED_AFTER:
            self.folded_sent()
        return out[0] if len(out) == 1 else b"".join(out)

    def folded_sent(self) -> None:
        """The events piped so far, decoded now rather than at the answer's end."""
        self.folding().piped(b"".join(self.sent[self.folded :]))
        self.folded = len(self.sent)

    def folding(self) -> PassthroughFold:
        if self.fold is None:
            self.fold = PassthroughFold(self.provider, self.first, self.http_request)
        return self.fold

    def ended(self) -> tuple[str, Response | Exception]:
        """The answer text piped to the client, and the call's outcome: from the whole stream
        decoded once (`PassthroughFold`: what `folded_sent` left, then the rest), or its read
        failure. Once per answer (`settle`'s)."""
        self.folded_sent()
        rest = b"".join([*self.held, self.buffer])
        shown, outcome = self.folding().ended(rest)
        return shown, self.failure if self.failure is not None else outcome

    def tail(self) -> bytes:
        """The held events, once the library took the answer: all of them, but the usage
        event when the client did not ask for usage (the proxy did, to record it)."""
        kept = [e for e in self.held if self.parsed.include_usage or not _usage_only(e)]
        return b"".join(kept) + self.buffer


class PipedResponse(StreamingResponse):
    """A streamed answer written straight to the ASGI server, each chunk one `send`.

    Starlette's own, under a server of ASGI spec 2.3 (uvicorn), runs the stream in an anyio
    task group beside a task that waits for the client to go away; here that watch is one
    plain asyncio task, which cancels the stream (and so the upstream's) when the server says
    the client went away (`http.disconnect`), and only then: a `receive` that fails says
    nothing of the client, so the stream goes on to its end rather than being cut short,
    silently, with no end of the response.

    `fast`: the fast path whose stream this is; its callback may have sent the response's
    head already (`FastPath.head_sent`: `start` is the message it sent)."""

    def __init__(
        self, content: AsyncIterator[bytes], *, fast: FastPath | None = None, **kwargs: Any
    ) -> None:
        super().__init__(content, **kwargs)
        self.fast = fast

    def start(self) -> Message:
        """The response's start: its status and headers."""
        return {
            "type": "http.response.start",
            "status": self.status_code,
            "headers": self.raw_headers,
        }

    async def stream_response(self, send: Send) -> None:
        fast = self.fast
        if fast is None or not fast.head_sent:
            await send(self.start())
        async for chunk in self.body_iterator:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        if fast is None or not fast.finished:
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.current_task()
        assert streaming is not None

        def gone(watch: asyncio.Task[None]) -> None:
            if _disconnected(watch) and not (self.fast is not None and self.fast.finished):
                streaming.cancel()  # (once the response ended, uvicorn says disconnect)

        watch = asyncio.create_task(self.listen_for_disconnect(receive))
        watch.add_done_callback(gone)
        try:
            await self.stream_response(send)
        except asyncio.CancelledError:
            if not _disconnected(watch) or streaming.cancelling() > 1:
                raise
            streaming.uncancel()  # the client went away: the stream ends, quietly
        finally:
            watch.remove_done_callback(gone)
            watch.cancel()


def _disconnected(watch: asyncio.Task[None]) -> bool:
    """Whether the disconnect watch ended on the client's `http.disconnect` (it returned):
    not cancelled, not failed (its failure is retrieved here, so never reported as lost)."""
    return watch.done() and not watch.cancelled() and watch.exception() is None


def _judged(event: bytes) -> bool:
    """Whether an event must be held back: it carries a tool call, an error or the stream's
    end, or it does not say its choice is still open (`"finish_reason": null`)."""
    find = event.find  # half the cost of `in` on bytes (CPython 3.11), on every event
    if find(b'"tool_calls"') >= 0 or find(b'"error"') >= 0 or find(b"[DONE]") >= 0:
        return True
    if find(b'"finish_reason":null') >= 0 or find(b'"finish_reason": null') >= 0:
        return False  # the usual spellings, found without the regular expression
    return not _OPEN.search(event)


def _as_sent(reply: Reply, outcome: Response | Exception) -> bool:
    """Whether the library took the upstream's answer as it is: its Reply (come at once) has
    the answer's message (not, say, without a tool call cut by the output limit)."""
    return isinstance(outcome, Response) and reply.message == outcome.message


def _usage_only(event: bytes) -> bool:
    """An event carrying only usage: no choices."""
    for line in event.splitlines():
        if line.startswith(b"data:") and not line.endswith(b"[DONE]"):
            try:
                data = json.loads(line[5:])
            except ValueError:
                return False
            return isinstance(data, dict) and not data.get("choices") and "usage" in data
    return False


async def _prepended(
    head: StreamItem, rest: AsyncIterator[StreamItem]
) -> AsyncIterator[StreamItem]:
    yield head
    async for item in rest:
        yield item

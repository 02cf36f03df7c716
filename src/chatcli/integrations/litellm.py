"""LiteLLM with chatcli's recovery: `completion` / `acompletion`, drop-in for litellm's own.

    from chatcli.integrations.litellm import completion

    response = completion(model="openai/gpt-4o", messages=history, max_tokens=800)

Every argument is litellm's and reaches `litellm.completion` as given. Three keyword
arguments are chatcli's and are never sent: `context_window` (tokens; else chatcli's catalog,
else litellm's `get_model_info` `max_input_tokens`, else what the first overflow states),
`on_event` (a hook that receives every recovery event as it happens; the events are logged
under "chatcli" too) and `config` (a `RecoveryConfig`; default: the CHATCLI_* environment).

What happens (the engine is `chatcli.Client`; nothing here re-implements it):

- The keyword arguments are a Chat Completions body, litellm's input format: the OpenAI
  dialect reads them (`chatcli.wire`'s `OpenAIDialect.parse`), and its `Forwarder` writes each
  call back: every message recovery left whole as the caller's own JSON (images,
  `cache_control`, unknown fields), the tools and every other field verbatim.
- An overflow, from any provider litellm routes to, is classified by `classify_error` (from
  the provider's body that litellm's exception carries, not from litellm's class name): the
  recovery levels shape a working view and the call is retried. When the window is known, a
  view known not to fit is recovered before it is sent. The caller's `messages` is never
  changed, and tool call/result pairs stay valid.
- An answer cut at max_tokens is escalated and continued, and stitched into one answer.
- The result is litellm's own `ModelResponse`: the very object litellm returned when one
  call answered; after a continuation, the last call's response with the stitched answer, its
  finish reason and the usage summed over the calls. `stream=True` gives a `RecoveringStream`
  (an `AsyncRecoveringStream` from `acompletion`) of litellm's own `ModelResponseStream`
  chunks, which `litellm.stream_chunk_builder` folds like litellm's own stream.
- Errors: litellm's exceptions reach the caller unchanged (`except litellm.RateLimitError`
  keeps working). chatcli retries nothing itself (litellm's `num_retries` applies); a
  conversation that cannot be made to fit raises `chatcli.ContextRecoveryError`, chained to
  litellm's exception.

litellm is imported on first use, never when this module is imported.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    contextmanager,
    nullcontext,
)
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Self

from chatcli.catalog import lookup
from chatcli.config import RecoveryConfig
from chatcli.errors import ChatcliError, ProviderError
from chatcli.events import Event, Hook
from chatcli.messages import StopReason
from chatcli.policy.actions import Reply
from chatcli.providers._common import require_module
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta, ToolCallDelta
from chatcli.providers.openai import OpenAIBase
from chatcli.recovery import Client
from chatcli.streaming import StreamItem
from chatcli.wire.dialect import ClientRequest
from chatcli.wire.forwarding import Forwarder, Upstream, plan
from chatcli.wire.openai_chat import FINISH_REASONS, OpenAIDialect

__all__ = ["AsyncRecoveringStream", "LiteLLM", "RecoveringStream", "acompletion", "completion"]

Json = dict[str, Any]
_DIALECT = OpenAIDialect()


def _litellm() -> ModuleType:
    return require_module("litellm", "litellm")


class LiteLLM(OpenAIBase):
    """A chatcli provider that answers through `litellm.completion` / `acompletion`.

    `fields` are litellm keyword arguments sent with every call (`api_base`, `api_key`,
    `temperature`, ...); `Request.settings.extra` adds more and wins. litellm's answers are
    Chat Completions objects, so the OpenAI adapter's parsing and stream folding are reused.
    `answers` keeps litellm's `ModelResponse` of every whole answer, in order.
    litellm's exceptions are raised as they are: `Client` classifies them.
    """

    api_name = "LiteLLM"

    def __init__(
        self,
        model: str,
        *,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        max_tokens_param: str = "max_tokens",
        **fields: Any,
    ) -> None:
        window, output = _model_limits(model, context_window, max_output_tokens)
        super().__init__(
            model,
            api="chat",
            api_key="",
            base_url=fields.get("api_base") or fields.get("base_url"),
            timeout=0.0,  # litellm's own `timeout` argument applies, when given
            context_window=window,
            max_output_tokens=output,
            max_tokens_param=max_tokens_param,
        )
        self.fields: Json = dict(fields)
        self.answers: list[Any] = []

    def params(self, request: Request, *, stream: bool = False) -> Json:
        """litellm's keyword arguments: the OpenAI adapter's body, with the fields it would put
        in `extra_body` at the top level (litellm maps top-level fields for every provider)."""
        params = super().params(request, stream=stream)
        extra = params.pop("extra_body", {})
        return {**self.fields, **params, **extra}

    def _new_client(self) -> Any:
        return _litellm()

    def _new_async_client(self) -> Any:
        return _litellm()

    def _close(self, client: Any) -> None:
        """litellm keeps its HTTP clients in its own cache; there is nothing of ours to close."""

    async def _aclose(self, client: Any) -> None:
        """See `_close`."""

    def _errors(self) -> AbstractContextManager[None]:
        return nullcontext()

    def _send(self, client: Any, params: Json) -> Any:
        with _closing_stray_loop():
            return client.completion(**params)

    async def _asend(self, client: Any, params: Json) -> Any:
        return await client.acompletion(**params)

    def _open(self, client: Any, params: Json) -> AbstractContextManager[Any]:
        with _closing_stray_loop():
            stream: AbstractContextManager[Any] = client.completion(**params)
        return stream  # litellm's CustomStreamWrapper

    async def _aopen(self, client: Any, params: Json) -> AbstractAsyncContextManager[Any]:
        stream: AbstractAsyncContextManager[Any] = await client.acompletion(**params)
        return stream

    def _parse(self, raw: Any) -> Response:
        self.answers.append(raw)
        return super()._parse(raw)


@contextmanager
def _closing_stray_loop() -> Iterator[None]:
    """Close the event loop a blocking litellm call leaves in a thread that had none.

    litellm's sync `completion` runs its service hooks on the thread's loop, got with
    `asyncio.get_event_loop()`: in the main thread (Python < 3.14) that makes a loop, sets it
    and leaves it open, so a sync caller ends up holding an unclosed loop it never asked for
    (a ResourceWarning when it is collected). A loop the thread already had is the caller's and
    stays; one that appeared during the call is closed and unset, which leaves the thread as
    `asyncio.run` does (no current loop).
    """
    before = _thread_loop()
    try:
        yield
    finally:
        after = _thread_loop()
        if before is None and after is not None and not after.is_running():
            asyncio.set_event_loop(None)
            after.close()


def _thread_loop() -> asyncio.AbstractEventLoop | None:
    """The loop set for this thread, read without making one (`get_event_loop` would). The
    default policy keeps it in `_local._loop`; another policy's is not looked at (None), nor
    is any from Python 3.14, whose `get_event_loop` no longer makes one."""
    if sys.version_info >= (3, 14):
        return None
    local = getattr(asyncio.get_event_loop_policy(), "_local", None)
    loop = getattr(local, "_loop", None)
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


def _model_limits(
    model: str, context_window: int | None, max_output_tokens: int | None
) -> tuple[int | None, int | None]:
    """The model's window and output cap: the arguments, else chatcli's offline catalog, else
    litellm's model map (`get_model_info`: `max_input_tokens`, `max_output_tokens`); None
    when nobody knows (a local server: then the first overflow's numbers are learned)."""
    window, output = context_window, max_output_tokens
    info = lookup(model)
    if info is not None:
        known = [n for n in (info.context_window, info.max_input_tokens) if n is not None]
        window = window if window is not None else min(known, default=None)
        output = output if output is not None else info.max_output_tokens
    if window is None or output is None:
        mapped = _litellm_model_info(model)
        window = window if window is not None else _positive(mapped.get("max_input_tokens"))
        output = output if output is not None else _positive(mapped.get("max_output_tokens"))
    return window, output


def _litellm_model_info(model: str) -> Mapping[str, Any]:
    try:
        info: Mapping[str, Any] = _litellm().get_model_info(model)
    except Exception:  # litellm raises for any model its map does not list
        return {}
    return info


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


# -- one call -------------------------------------------------------------------------------


class _Forwarder(Forwarder):
    """`chatcli.wire`'s `Forwarder` (async only, as the proxy is) with the sync stream too."""

    def stream(self, request: Request) -> Iterator[StreamChunk]:
        for chunk in self.inner.stream(self.shaped(request)):  # type: ignore[attr-defined]
            yield self.checked(chunk, request) if isinstance(chunk, Response) else chunk


@dataclass(slots=True)
class _Call:
    """One `completion` call: the parsed body, the provider and the client that recovers it."""

    parsed: ClientRequest
    provider: LiteLLM
    client: Client

    @classmethod
    def prepare(
        cls,
        model: str,
        messages: Sequence[Mapping[str, Any]],
        kwargs: Mapping[str, Any],
        *,
        context_window: int | None,
        on_event: Hook | None,
        config: RecoveryConfig | None,
    ) -> Self:
        # A copy of the list: the caller's list and its messages are only ever read.
        body = {**kwargs, "model": model, "messages": list(messages)}
        parsed = _DIALECT.parse(body)
        model = str(body["model"])
        param = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
        provider = LiteLLM(model, context_window=context_window, max_tokens_param=param)
        upstream = Upstream(provider=provider, name="litellm", model=model, dialect="openai")
        forwarder = _Forwarder(upstream, parsed, plan(parsed, "openai"))
        hooks = (on_event,) if on_event is not None else ()
        # max_retries=0: litellm retries by itself (`num_retries`); chatcli only recovers.
        config = config if config is not None else RecoveryConfig.from_env()
        client = Client(forwarder, config, hooks=hooks, max_retries=0)
        return cls(parsed=parsed, provider=provider, client=client)

    def args(self) -> Json:
        """`Client.send`'s (and `stream`'s) arguments for the parsed body."""
        parsed = self.parsed
        return {"messages": parsed.messages, "max_tokens": parsed.max_tokens, "tools": parsed.tools}

    def response(self, outcome: Reply | BaseException) -> Any:
        """litellm's `ModelResponse` for the reply (see the module docstring); an exception
        (`_foreign`'s) is raised, here, outside the `except` block that caught it."""
        if isinstance(outcome, BaseException):
            raise outcome
        reply = outcome
        answers = self.provider.answers
        if len(answers) == 1:
            return answers[0]
        last = answers[-1]
        body = _DIALECT.reply(self.parsed, reply, model=str(last.model or self.parsed.model))
        response = _litellm().ModelResponse(**{**body, "id": last.id, "created": last.created})
        response._hidden_params = dict(getattr(last, "_hidden_params", None) or {})
        return response


def completion(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    context_window: int | None = None,
    on_event: Hook | None = None,
    config: RecoveryConfig | None = None,
    **kwargs: Any,
) -> Any:
    """`litellm.completion` with recovery; see the module docstring."""
    call = _Call.prepare(
        model, messages, kwargs, context_window=context_window, on_event=on_event, config=config
    )
    if call.parsed.stream:
        return RecoveringStream(call.client.stream(**call.args()), _Chunks.of(call.parsed))
    try:
        outcome: Reply | BaseException = call.client.send(**call.args())
    except ProviderError as exc:
        outcome = _foreign(exc)
    return call.response(outcome)


async def acompletion(
    model: str,
    messages: Sequence[Mapping[str, Any]],
    *,
    context_window: int | None = None,
    on_event: Hook | None = None,
    config: RecoveryConfig | None = None,
    **kwargs: Any,
) -> Any:
    """`litellm.acompletion` with recovery; see the module docstring."""
    call = _Call.prepare(
        model, messages, kwargs, context_window=context_window, on_event=on_event, config=config
    )
    if call.parsed.stream:
        return AsyncRecoveringStream(call.client.astream(**call.args()), _Chunks.of(call.parsed))
    try:
        outcome: Reply | BaseException = await call.client.asend(**call.args())
    except ProviderError as exc:
        outcome = _foreign(exc)
    return call.response(outcome)


def _foreign(error: ProviderError) -> BaseException:
    """The exception to raise for a failure the engine did not recover: litellm's own
    exception when the engine only wrapped it (raised outside the `except` block, so its
    chain stays the one litellm gave it), else chatcli's."""
    cause = error.__cause__
    if isinstance(cause, Exception) and not isinstance(cause, ChatcliError):
        return cause
    return error


# -- streams --------------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class _Chunks:
    """Turns the engine's stream items into litellm `ModelResponseStream` chunks."""

    model: str
    include_usage: bool
    id: str = field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")

    @classmethod
    def of(cls, parsed: ClientRequest) -> _Chunks:
        return cls(model=str(parsed.model), include_usage=parsed.include_usage)

    def convert(self, item: StreamItem) -> list[Any]:
        if isinstance(item, TextDelta):
            return [self.chunk({"content": item.text})]
        if isinstance(item, ToolCallDelta):
            function = {"name": item.name, "arguments": item.arguments}
            call = {"index": item.index, "id": item.id, "type": "function", "function": function}
            return [self.chunk({"tool_calls": [call]})]
        if isinstance(item, Reply):
            return self.last(item)
        return []  # events go to the hooks and the log; Discard needs a retry, and none is made

    def chunk(self, delta: Json, finish: StopReason | None = None, **fields: Any) -> Any:
        reason = FINISH_REASONS[finish] if finish is not None else None
        choice = {"index": 0, "delta": {"role": "assistant", **delta}, "finish_reason": reason}
        return _litellm().ModelResponseStream(
            id=self.id, model=self.model, choices=[choice], **fields
        )

    def last(self, reply: Reply) -> list[Any]:
        usage = reply.usage
        totals = {
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.output_tokens,
            "total_tokens": usage.prompt_tokens + usage.output_tokens,
        }
        fields = {"usage": totals} if self.include_usage else {}
        return [self.chunk({}, reply.stop_reason, **fields)]


class _Converting:
    """What both streams keep: the chunks not yet given, the events and the reply so far."""

    def __init__(self, chunks: _Chunks) -> None:
        self._chunks = chunks
        self._pending: list[Any] = []
        self.events: list[Event] = []
        self.reply: Reply | None = None

    def _take(self, item: StreamItem | BaseException) -> None:
        """Queue the chunks for the next stream item; an exception (`_foreign`'s) is raised,
        here, outside the `except` block that caught it."""
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Event):
            self.events.append(item)
        elif isinstance(item, Reply):
            self.reply = item
        self._pending.extend(self._chunks.convert(item))


class RecoveringStream(_Converting):
    """litellm `ModelResponseStream` chunks of a recovered answer, as they arrive.

    `events`: what recovery did so far; `reply`: chatcli's `Reply` once the stream ended.
    Closing it (or leaving a `with` block) closes litellm's stream.
    """

    def __init__(self, items: Iterator[StreamItem], chunks: _Chunks) -> None:
        super().__init__(chunks)
        self._items = items

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> Any:
        while not self._pending:
            try:
                item: StreamItem | BaseException = next(self._items)
            except ProviderError as exc:
                item = _foreign(exc)
            self._take(item)
        return self._pending.pop(0)

    def close(self) -> None:
        close: Callable[[], None] | None = getattr(self._items, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class AsyncRecoveringStream(_Converting):
    """The async `RecoveringStream` that `acompletion(..., stream=True)` returns: `async for`,
    `async with`, `await aclose()` (not iterable without `async`: it would yield nothing)."""

    def __init__(self, items: AsyncIterator[StreamItem], chunks: _Chunks) -> None:
        super().__init__(chunks)
        self._aitems = items

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> Any:
        while not self._pending:
            try:
                item: StreamItem | BaseException = await anext(self._aitems)
            except ProviderError as exc:
                item = _foreign(exc)
            self._take(item)
        return self._pending.pop(0)

    async def aclose(self) -> None:
        aclose: Callable[[], Any] | None = getattr(self._aitems, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

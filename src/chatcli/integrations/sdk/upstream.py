"""The provider recovery calls under `chatcli.wrap`: the caller's own SDK client and method.

`SdkCall` holds one caller's call: its keyword arguments (the request body the SDK writes)
and the neutral request the wire dialect (`chatcli.wire`) parsed from them. The adapters below are
chatcli's own OpenAI and Anthropic adapters (error translation, parsing, stream folding),
given the caller's SDK client instead of one of their own and the caller's keyword
arguments instead of a body they write: behind `chatcli.wire`'s `Forwarder` (which puts the
view recovery chose back into the caller's raw messages), each call is the caller's call
with the messages (and the output limit) the view needs.

A call whose arguments come out equal to the caller's (recovery changed nothing) is the
caller's call, exactly: its arguments are the caller's own objects, and its SDK answer is
kept (`SdkCall.answer`) so that a request needing no recovery returns the SDK's own object.
Raw stream events of such a call are kept for the caller too (`SdkCall.take_events`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatcli.providers._common import model_limits
from chatcli.providers.adapter import Adapter, Fold
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import Request, Response, StreamDelta
from chatcli.providers.openai import Api, OpenAIBase
from chatcli.wire.dialect import ClientRequest

__all__ = ["STREAM_ARGS", "AnthropicCall", "OpenAICall", "SdkCall"]

Json = dict[str, Any]
# Arguments a streamed call adds; recovery's own calls keep the caller's `stream_options`.
STREAM_ARGS = ("stream", "stream_options")


@dataclass(slots=True, kw_only=True)
class SdkCall:
    """One call of the caller's (see the module docstring); mutable, private to one create."""

    kwargs: Mapping[str, Any]
    canonical: Mapping[str, Any]  # `kwargs` as the Forwarder writes them, stream args left out
    parsed: ClientRequest
    max_tokens_arg: str
    stream_args: Json = field(default_factory=dict)
    calls: int = 0
    verbatim: bool = False  # the current call is the caller's own
    answer: Any = None  # the SDK's answer to the caller's own call, when it was the only call
    events: list[Any] = field(default_factory=list)

    def arguments(self, request: Request, *, stream: bool) -> Json:
        """The SDK arguments for `request`: the body fields the `Forwarder` put in
        `settings.extra`, the model, the output limit; the caller's own when equal."""
        kwargs = {**request.settings.extra, "model": self.kwargs["model"]}
        if request.max_tokens is not None:
            kwargs[self.max_tokens_arg] = request.max_tokens
        self.calls += 1
        self.verbatim = kwargs == self.canonical
        if self.verbatim and stream == bool(self.kwargs.get("stream")):
            return dict(self.kwargs)  # the caller's call, `stream=False` included if given
        return {**kwargs, **self.stream_args} if stream else kwargs

    def answered(self, raw: Any) -> None:
        self.answer = raw if self.verbatim and self.calls == 1 else None

    def take_events(self) -> list[Any]:
        """The raw stream events of the caller's own call not yet taken."""
        taken, self.events = self.events, []
        return taken

    def fold(self, inner: Fold) -> Fold:
        return _KeepingFold(inner=inner, call=self)


@dataclass(slots=True, kw_only=True)
class _KeepingFold:
    """A Fold that also keeps the raw events of the caller's own call for the caller."""

    inner: Fold
    call: SdkCall

    def feed(self, event: Any) -> Sequence[StreamDelta]:
        if self.call.verbatim:
            self.call.events.append(event)
        return self.inner.feed(event)

    def finish(self) -> Response:
        return self.inner.finish()


class _OnCallersClient(Adapter):
    """What both adapters change: the SDK client is the caller's, and what the caller's own
    call answers is kept for the caller (`SdkCall.answered`, `SdkCall.fold`)."""

    sdk_client: Any
    call: SdkCall

    def _new_client(self) -> Any:
        return self.sdk_client

    def _new_async_client(self) -> Any:
        return self.sdk_client

    # `super()` is the adapter these are mixed into (`OpenAIBase`, `Anthropic`), never Adapter.
    def _parse(self, raw: Any) -> Response:
        self.call.answered(raw)
        return super()._parse(raw)  # type: ignore[safe-super]

    def _fold(self) -> Any:
        return self.call.fold(super()._fold())  # type: ignore[safe-super]


class OpenAICall(_OnCallersClient, OpenAIBase):
    """chatcli's OpenAI adapter (Chat Completions or Responses) on the caller's SDK client."""

    raw_stream_events = False  # the caller's own call streams the SDK's own events to it

    def __init__(
        self,
        sdk_client: Any,
        call: SdkCall,
        *,
        api: Api,
        context_window: int | None,
        max_output_tokens: int | None,
    ) -> None:
        model = str(call.kwargs["model"])
        window, cap = model_limits(model, "openai", context_window, max_output_tokens)
        super().__init__(
            model,
            api=api,
            api_key="",
            base_url=None,
            timeout=0.0,
            context_window=window,
            max_output_tokens=cap,
        )
        self.sdk_client, self.call = sdk_client, call

    def params(self, request: Request, *, stream: bool = False) -> Json:
        return self.call.arguments(request, stream=stream)


class AnthropicCall(_OnCallersClient, Anthropic):
    """chatcli's Anthropic adapter on the caller's SDK client."""

    def __init__(
        self,
        sdk_client: Any,
        call: SdkCall,
        *,
        context_window: int | None,
        max_output_tokens: int | None,
    ) -> None:
        super().__init__(
            str(call.kwargs["model"]),
            api_key="unused",  # the caller's client carries its own credentials
            context_window=context_window,
            max_output_tokens=max_output_tokens,
            cache_control=None,
        )
        self.sdk_client, self.call = sdk_client, call

    def params(self, request: Request, *, stream: bool = False) -> Json:
        arguments = self.call.arguments(request, stream=stream)
        if stream:
            del arguments["stream"]  # the adapter's `_open` adds it
        return arguments

    def _streams_whole_answer(self, params: Json) -> bool:
        return False  # the caller's call is made as the caller made it

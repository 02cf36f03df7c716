"""The methods `chatcli.wrap` overrides: for each, its dialect, its adapter and the SDK's types
(imported when first needed: each SDK comes with its own extra)."""

from __future__ import annotations

import typing
from collections.abc import Callable, Mapping
from typing import Any

from chatcli.integrations.sdk.calls import (
    AsyncRecovering,
    Endpoint,
    Options,
    Recovering,
    omitted,
    plain,
)
from chatcli.integrations.sdk.chunks import AnthropicEvents, OpenAIChunks
from chatcli.integrations.sdk.responses import ResponsesEvents
from chatcli.integrations.sdk.upstream import AnthropicCall, OpenAICall, SdkCall
from chatcli.providers.base import Provider
from chatcli.providers.openai import Api
from chatcli.wire.anthropic import AnthropicDialect
from chatcli.wire.openai_chat import OpenAIDialect
from chatcli.wire.responses import ResponsesDialect, canonical_input

__all__ = ["ANTHROPIC_MESSAGES", "OPENAI_CHAT", "OPENAI_RESPONSES", "message_stream"]


def _openai_provider(api: Api) -> Callable[[Any, SdkCall, Options], Provider]:
    def provider(sdk_client: Any, call: SdkCall, options: Options) -> Provider:
        return OpenAICall(
            sdk_client,
            call,
            api=api,
            context_window=options.context_window,
            max_output_tokens=options.max_output_tokens,
        )

    return provider


def _anthropic_provider(sdk_client: Any, call: SdkCall, options: Options) -> Provider:
    return AnthropicCall(
        sdk_client,
        call,
        context_window=options.context_window,
        max_output_tokens=options.max_output_tokens,
    )


def _chat_completion(body: dict[str, Any]) -> Any:
    from openai.types.chat import ChatCompletion

    return ChatCompletion.model_validate(body)


def _chat_chunk(body: dict[str, Any]) -> Any:
    from openai.types.chat import ChatCompletionChunk

    return ChatCompletionChunk.model_validate(body)


def _message(body: dict[str, Any]) -> Any:
    from anthropic.types import Message

    return Message.model_validate(body)


def _message_event(body: dict[str, Any]) -> Any:
    from anthropic.types import RawMessageStreamEvent

    return _validated(RawMessageStreamEvent, body)


def _response(body: dict[str, Any]) -> Any:
    from openai.types.responses import Response

    return Response.model_validate(body)


def _response_event(body: dict[str, Any]) -> Any:
    from openai.types.responses import ResponseStreamEvent

    return _validated(ResponseStreamEvent, body)


def message_stream(create: Recovering, original: Callable[..., Any]) -> Callable[..., Any]:
    """Anthropic's `messages.stream(...)` helper (`with ... as stream`, `text_stream`,
    `get_final_message()`) over the wrapped `create`: the SDK's own stream manager, fed the
    recovered events. With `output_format` (structured output parsing) it is the SDK's own
    helper, without recovery."""
    from anthropic import NOT_GIVEN
    from anthropic.lib.streaming import AsyncMessageStreamManager, MessageStreamManager

    def stream(**kwargs: Any) -> Any:
        if kwargs.get("output_format") is not None and not omitted(kwargs["output_format"]):
            return original(**kwargs)
        kwargs = {k: v for k, v in kwargs.items() if k != "output_format"}
        if isinstance(create, AsyncRecovering):
            return AsyncMessageStreamManager(create(**kwargs, stream=True), output_format=NOT_GIVEN)
        return MessageStreamManager(lambda: create(**kwargs, stream=True), output_format=NOT_GIVEN)

    return stream


def _validated(union: Any, body: dict[str, Any]) -> Any:
    """`body` as the member of the SDK's event `union` its `type` names."""
    for cls in typing.get_args(typing.get_args(union)[0]):
        if body["type"] in typing.get_args(cls.model_fields["type"].annotation):
            return cls.model_validate(body)
    raise ValueError(f"no event type {body['type']!r} in {union}")


def _responses_canonical(kwargs: Mapping[str, Any]) -> Mapping[str, Any]:
    return {**plain(kwargs), "input": canonical_input(kwargs.get("input"))}


OPENAI_CHAT = Endpoint(
    name="openai",
    dialect=OpenAIDialect(),
    default_max_tokens_arg="max_completion_tokens",
    stream_args=("stream", "stream_options"),
    provider=_openai_provider("chat"),
    answer=_chat_completion,
    event=_chat_chunk,
    chunks=OpenAIChunks,
)
ANTHROPIC_MESSAGES = Endpoint(
    name="anthropic",
    dialect=AnthropicDialect(),
    default_max_tokens_arg="max_tokens",
    stream_args=("stream",),
    provider=_anthropic_provider,
    answer=_message,
    event=_message_event,
    chunks=AnthropicEvents,
)
OPENAI_RESPONSES = Endpoint(
    name="openai",
    dialect=ResponsesDialect(),
    default_max_tokens_arg="max_output_tokens",
    stream_args=("stream", "stream_options"),
    provider=_openai_provider("responses"),
    answer=_response,
    event=_response_event,
    chunks=ResponsesEvents,
    canonical=_responses_canonical,
)

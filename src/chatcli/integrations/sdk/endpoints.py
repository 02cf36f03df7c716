"""The methods `chatcli.wrap` overrides: for each, its dialect, its adapter and the SDK's types
(imported when first needed: each SDK comes with its own extra)."""

from __future__ import annotations

from typing import Any

from chatcli.integrations.sdk.calls import Endpoint, Options
from chatcli.integrations.sdk.chunks import AnthropicEvents, OpenAIChunks
from chatcli.integrations.sdk.upstream import AnthropicCall, OpenAICall, SdkCall
from chatcli.providers.base import Provider
from chatcli.proxy.anthropic_dialect import AnthropicDialect
from chatcli.proxy.openai_dialect import OpenAIDialect

__all__ = ["ANTHROPIC_MESSAGES", "OPENAI_CHAT"]


def _openai_provider(sdk_client: Any, call: SdkCall, options: Options) -> Provider:
    return OpenAICall(
        sdk_client,
        call,
        api="chat",
        context_window=options.context_window,
        max_output_tokens=options.max_output_tokens,
    )


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
    from anthropic import types

    classes: dict[str, Any] = {
        "message_start": types.RawMessageStartEvent,
        "message_delta": types.RawMessageDeltaEvent,
        "message_stop": types.RawMessageStopEvent,
        "content_block_start": types.RawContentBlockStartEvent,
        "content_block_delta": types.RawContentBlockDeltaEvent,
        "content_block_stop": types.RawContentBlockStopEvent,
    }
    return classes[body["type"]].model_validate(body)


OPENAI_CHAT = Endpoint(
    name="openai",
    dialect=OpenAIDialect(),
    default_max_tokens_arg="max_completion_tokens",
    stream_args=("stream", "stream_options"),
    provider=_openai_provider,
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

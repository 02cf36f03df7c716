"""The wire formats chatcli speaks and serves: OpenAI Chat Completions, OpenAI Responses and
Anthropic Messages, each parsed into the neutral messages and written back from a `Reply`.

The proxy serves them and `chatcli.wrap` and the LiteLLM wrapper read with them, so the
formats are a layer of their own below both. Modules: `dialect` (the parsed request, the
failure value, the protocol a dialect implements), `openai_chat`, `responses`, `anthropic`
(one wire format each), `schemas` (the request bodies, checked at the edge), `items` (the
typed items a streamed answer is written from), `usage` (the usage a client is told),
`forwarding` (what a request adds to each upstream call), `known` (the conversations a
server parsed lately, found again by content). They need pydantic, which the
`proxy` extra and each SDK's extra bring.
"""

from __future__ import annotations

from chatcli.wire.anthropic import AnthropicDialect
from chatcli.wire.dialect import ClientRequest, Dialect, Failure, FailureKind, RequestError
from chatcli.wire.forwarding import Forwarder, Forwarding, Upstream, passed_headers, plan
from chatcli.wire.items import StreamItem, stream_items
from chatcli.wire.openai_chat import OpenAIDialect
from chatcli.wire.responses import ResponsesDialect

__all__ = [
    "AnthropicDialect",
    "ClientRequest",
    "Dialect",
    "Failure",
    "FailureKind",
    "Forwarder",
    "Forwarding",
    "OpenAIDialect",
    "RequestError",
    "ResponsesDialect",
    "StreamItem",
    "Upstream",
    "passed_headers",
    "plan",
    "stream_items",
]

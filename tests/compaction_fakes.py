"""A scripted summariser for the compaction tests, and conversations to compact.

`ScriptedSummarizer` implements the Provider protocol: it records every request, enforces its
context window the way llama.cpp does (raising that server's real error body), and answers
from a script of replies: text, a function of the request, or an exception to raise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chatcli.messages import Message, StopReason, ToolCall, Usage
from chatcli.providers.base import Request, Response
from chatcli.tokens.estimate import TokenEstimator

# Real bodies from /work/shared/data/provider-errors.json.
# pe-041, llama.cpp server (tools/server/server.cpp, exceed_context_size_error):
LLAMA_OVERFLOW_BODY = (
    '{"error":{"code":400,"message":"the request exceeds the available context size. try '
    'increasing the context size or enable context shift","type":"exceed_context_size_error",'
    '"n_prompt_tokens":14429,"n_ctx":8192}}'
)


def llama_overflow_body(prompt_tokens: int, context_window: int) -> str:
    """The pe-041 body with this server's numbers."""
    return LLAMA_OVERFLOW_BODY.replace("14429", str(prompt_tokens)).replace(
        "8192", str(context_window)
    )


# llama.cpp's server (as built into xllamacpp 2026.10.11549, llama.cpp of October 2026),
# answering /v1/chat/completions whose `response_format` holds a json_schema it cannot turn
# into a grammar (here an unresolvable `$ref`); captured from the running server, HTTP 400.
LLAMA_SCHEMA_REFUSED_BODY = (
    '{"error":{"code":400,"message":"Unable to generate parser for this template. Automatic '
    "parser generation failed: JSON schema error at #: cannot resolve $ref #/nowhere, nowhere "
    'not found","type":"invalid_request_error"}}'
)

# pe-090, Anthropic (https://github.com/anthropics/claude-code issue thread on rate limits):
ANTHROPIC_RATE_LIMIT_BODY = (
    '429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would '
    "exceed your organization's rate limit of 30,000 input tokens per minute (org: "
    "5456025a-920d-4fae-83df-eb142ce029c1, model: claude-sonnet-4-20250514). For details, "
    'refer to: faviconhttps://docs.claude.com/en/api/rate-limits."}}'
)

# pe-083, OpenAI (https://github.com/ChatGPTNextWeb/NextChat/issues/3123), HTTP 429: billing
# quota, not a rate limit: retrying cannot help.
OPENAI_QUOTA_BODY = (
    '{"error":{"message":"You exceeded your current quota, please check your plan and billing '
    'details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}'
)

# pe-033, Azure OpenAI (https://github.com/vanderschaarlab/climb/issues/1; the paste ends
# there): a rate limit whose stated wait, a day, is far over any retry bound.
AZURE_RETRY_AFTER_A_DAY_BODY = (
    "Error code: 429 - {'error': {'code': '429', 'message': 'Requests to the "
    "ChatCompletions_Create Operation under Azure OpenAI API version 2024-08-01-preview have "
    "exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after "
    "86400 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to "
    "further increase the default rate limit."
)

SECTIONS_TEMPLATE = """## User's goal
{goal}
## Explicit instructions and constraints
{rules}
## Decisions made
Keep the parser in parser.py.
## Files and resources touched
parser.py, tests/test_parser.py
## Errors and how they were solved
The failing test was fixed by handling empty input.
## Done and pending
The parser is done; the docs are pending.
## Current step
Writing the docs."""

Reply = str | BaseException | Callable[[Request], str]


class HTTPStatusError(Exception):
    """What an HTTP client raises: a status code and the response body."""

    def __init__(self, status_code: int, body: str) -> None:
        super().__init__(body)
        self.status_code = status_code
        self.body = body


@dataclass
class ScriptedSummarizer:
    """A provider answering from `replies` in order (the last one repeats)."""

    replies: Sequence[Reply]
    context_window: int | None = None
    usage: Usage = field(default_factory=lambda: Usage(input_tokens=1000, output_tokens=200))
    model: str = "summarizer-mini"
    estimator: TokenEstimator = field(default_factory=TokenEstimator)

    def __post_init__(self) -> None:
        self.requests: list[Request] = []

    def complete(self, request: Request) -> Response:
        self.requests.append(request)
        needed = self.needed_tokens(request)
        if self.context_window is not None and needed > self.context_window:
            raise HTTPStatusError(400, llama_overflow_body(needed, self.context_window))
        reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
        if isinstance(reply, BaseException):
            raise reply
        text = reply(request) if callable(reply) else reply
        return Response(
            message=Message.assistant(text),
            stop_reason=StopReason.END_TURN,
            usage=self.usage,
            model=self.model,
        )

    async def acomplete(self, request: Request) -> Response:
        await asyncio.sleep(0)
        return self.complete(request)

    def needed_tokens(self, request: Request) -> int:
        return self.estimator.count(request.messages) + (request.max_tokens or 0)


@dataclass
class StructuredSummarizer(ScriptedSummarizer):
    """A summariser whose server can constrain its answer to a JSON schema."""

    def structured_output_supported(self) -> bool:
        return True


def conversation_text(request: Request) -> str:
    """The conversation part of a summary request."""
    return request.messages[-1].text


def faithful_summary(request: Request) -> str:
    """A sectioned summary that quotes every 'always'/'never' line of the conversation."""
    rules = [
        line.strip()
        for line in conversation_text(request).splitlines()
        if line.lower().startswith(("always", "never"))
    ]
    return SECTIONS_TEMPLATE.format(goal="Build a parser.", rules="\n".join(rules) or "None.")


def agent_session(turns: int = 6, *, result_chars: int = 800) -> list[Message]:
    """System prompt, then `turns` user turns, each with a tool call and an answer."""
    messages = [Message.system("You are a careful coding agent.")]
    for turn in range(turns):
        call = ToolCall(id=f"call_{turn}", name="read_file", arguments={"path": f"f{turn}.py"})
        messages += [
            Message.user(f"Please look at f{turn}.py and tell me about the parser, step {turn}."),
            Message.assistant("Reading it.", tool_calls=(call,)),
            Message.tool(
                call.id, f"def parse_{turn}(text):\n" + "    pass\n" * (result_chars // 9)
            ),
            Message.assistant(f"f{turn}.py defines parse_{turn}, which does nothing yet."),
        ]
    return messages

"""The compaction call on the warm prefix: the summary asked for after the conversation's
previous request, whose prefix the provider's prompt cache holds.

The rendered request (`chatcli.compaction.prompt.summary_request`) is a new prompt: the
summariser's instructions, then the conversation as one text, so none of it is in the cache
the conversation's last request warmed. The warm request (`summarise_warm`) is that last
request again as it was sent (`Plan.previous`): the same messages in the same order, tools
and settings, so the adapter writes the same body up to its end (Anthropic's cache breakpoint
where that request had it: `Request.cache_prefix`); then the messages the conversation added
since (its answer, the turns after it), and one final user turn holding the summariser's
instructions (`chatcli.compaction.prompt.summary_turn`). A prompt cache then serves all of
the request but what came since.

What the warm request keeps as it was, because the provider's cache keys on it: the tool
definitions (a change invalidates Anthropic's whole cache; OpenAI caches them as part of the
prefix), `tool_choice` and the thinking settings (Anthropic: a change invalidates the cached
messages), and the answer format. A JSON schema is part of the prompt on OpenAI (its
structured-output schema is put before the system message) and on Anthropic
(`output_config.format`), so there the summary's sections are asked for as Markdown, read as
always; a schema is asked for only where the server enforces it as a grammar on the output
and leaves the prompt alone (`Plan.grammar`: llama.cpp, vLLM, Ollama), as the rendered
request asks for one. Only `max_tokens` is the summary's, which no cache keys on.

The warm request is taken when the summariser shares the provider's cache (`make_plan`), the
previous request leaves the model free to answer with text (no forced tool, no answer format
of the caller's that only a prompt change could lift, no compaction on the provider's
servers, whose edits change what it cached), the messages added since keep every tool call
with its result, the request with the summary's output fits the summariser's window, and it
costs no more than the rendered request at the summariser's prices (`Plan.cache_read_ratio`:
its prefix at the cache-read price, the rest at the input price, against the rendered text
at the input price; unknown prices, a local server's: taken). The rendered request shows each
tool result cut to a few thousand characters, so a conversation of large results can cost
less rendered where a cache read is a large share of the input price (half, on some OpenAI
models). Otherwise the rendered request is made: a summariser of another model, a
conversation over the summariser's window, chunking. So it is when the warm summary fails
other than by the provider's state (a rate limit, a quota, a key, a transient failure its
retries did not fix: those are the compaction's failure): a window smaller than estimated, a
request the server refused, an answer that is no summary (a tool call, or text verification
rejects).

The warm summary covers what the previous request held (the conversation as the model saw
it: a microcompacted result as its stub; the kept tail too) and is checked against that text
with the same checks as any summary (`chatcli.compaction.verify.check_summary`); the
instructions of the summarised span are then pinned or carried as always.

A prefix the provider itself changes is not served, whatever is sent: a model that drops the
thinking blocks of earlier turns once a user turn is not a tool result reads a previous
request ending inside a tool loop with thinking only up to that loop.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from chatcli.compaction.drive import Steps
from chatcli.compaction.plan import Plan
from chatcli.compaction.prompt import render, summary_request, summary_schema, summary_turn
from chatcli.compaction.summarise import ask
from chatcli.compaction.verify import check_summary
from chatcli.errors import CompactionError, ErrorKind, ProviderError, classify_error
from chatcli.history.pairing import repair_tool_pairing
from chatcli.messages import Message, Role
from chatcli.policy.prediction import tool_definitions
from chatcli.providers.base import Request, Response

__all__ = ["continued", "rendered_tokens", "summarise_warm", "warm_request"]

logger = logging.getLogger("chatcli")

# Failures that are the provider's state, not the request's: the rendered request would meet
# them too.
_PROVIDER_STATES = frozenset(
    {ErrorKind.RATE_LIMIT, ErrorKind.QUOTA, ErrorKind.AUTH, ErrorKind.TRANSIENT}
)
# `tool_choice` values that let the model answer with text.
_FREE_CHOICES = (None, "auto", "none")


def summarise_warm(
    plan: Plan, calls: list[Response | None], rendered: int
) -> Steps[tuple[str, str] | None]:
    """(the summary, the text it was checked against) asked for on the warm prefix; None when
    the warm request is not taken or its summary failed (module docstring): the rendered
    request (`rendered`: its estimated tokens) is made then. Every call made is appended to
    `calls`."""
    conversation = continued(plan)
    if conversation is None:
        return None
    structured = plan.structured and plan.grammar
    request = warm_request(plan, conversation, structured=structured)
    if not (_fits(request, plan) and _cheaper(request, rendered, plan)):
        return None
    shown = tuple(m for m in conversation if m.role is not Role.SYSTEM)
    source = "\n".join(render(shown)) + (plan.focus or "")
    try:
        summary = yield from ask(
            lambda asked: warm_request(plan, conversation, structured=asked),
            calls,
            structured=structured,
        )
        check_summary(summary, source)
    except CompactionError as exc:
        if _provider_state(exc):
            raise
        logger.info("chatcli: the summary on the cached prefix failed (%s); asking anew", exc)
        return None
    return summary, source


def continued(plan: Plan) -> tuple[Message, ...] | None:
    """The conversation the warm request repeats and continues: the previous request's
    messages, then those added since; None when it is not taken (module docstring)."""
    previous = plan.previous
    if previous is None or not _free_to_answer(previous.request, plan):
        return None
    sent = previous.request.messages
    conversation = repair_tool_pairing((*sent, *previous.since)).messages
    if len(conversation) < len(sent) or any(
        a is not b for a, b in zip(sent, conversation, strict=False)
    ):
        return None  # repairing the messages since would change the prefix
    return conversation


def warm_request(plan: Plan, conversation: tuple[Message, ...], *, structured: bool) -> Request:
    """The previous request, continued by `conversation`'s messages after its own and the
    summary turn; its settings kept but the answer format (the summary's schema when
    `structured`, else none) and the output limit (the summary's)."""
    assert plan.previous is not None  # `continued` made `conversation` from it
    sent = plan.previous.request
    schema = summary_schema(plan.summary_tokens) if structured else None
    return replace(
        sent,
        messages=(*conversation, summary_turn(plan.focus, structured=structured)),
        max_tokens=plan.summary_tokens,
        settings=replace(sent.settings, response_format=schema),
        native_compaction=None,
        cache_prefix=len(sent.messages),
    )


def rendered_tokens(blocks: tuple[str, ...], plan: Plan) -> int:
    """The estimated prompt of the rendered request of `blocks` (as one call: chunks would
    add the instructions to each)."""
    body = "\n\n".join(blocks)
    request = summary_request(
        body, plan.summary_tokens, plan.focus, merging=False, structured=plan.structured
    )
    return plan.summary_estimator.count(request.messages)


def _free_to_answer(request: Request, plan: Plan) -> bool:
    """Whether `request`'s settings let the model answer with a summary, unchanged but the
    answer format where that leaves the prompt alone (module docstring)."""
    settings = request.settings
    if settings.tool_choice not in _FREE_CHOICES or request.native_compaction is not None:
        return False
    return settings.response_format is None or plan.grammar


def _fits(request: Request, plan: Plan) -> bool:
    """Whether `request`, its tool definitions and its output fit the summariser's window
    (an unknown window: the previous request was accepted, so it is tried)."""
    window = plan.summarizer_window
    if window is None:
        return True
    prompt = plan.summary_estimator.count((*tool_definitions(request.tools), *request.messages))
    output = (request.max_tokens or 0) + request.settings.output_reserve_extra
    return prompt + output <= window


def _cheaper(request: Request, rendered: int, plan: Plan) -> bool:
    """Whether `request` costs no more than `rendered` tokens at the input price: its prefix
    (the previous request) at the cache-read price, the rest at the input price."""
    ratio = plan.cache_read_ratio
    if ratio is None:
        return True
    count = plan.summary_estimator.count
    tools = tool_definitions(request.tools)
    prefix = count((*tools, *request.messages[: request.cache_prefix]))
    return prefix * ratio + count((*tools, *request.messages)) - prefix <= rendered


def _provider_state(error: CompactionError) -> bool:
    """Whether the warm call failed for the provider's state (module docstring)."""
    cause = error.__cause__
    if not isinstance(cause, Exception):
        return False
    info = cause.info if isinstance(cause, ProviderError) else classify_error(cause)
    return info.kind in _PROVIDER_STATES

"""Anthropic's native compaction and context editing: what a request asks for and what the
answer's compaction block becomes. Kept apart from the Messages API mapping
(`chatcli.providers.anthropic`) because it is a beta of its own, with its own models, limits
and flags.

For the models of `COMPACTION_MODELS`, the request goes to the beta Messages endpoint with the
`compact_20260112` edit in `context_management.edits` (its `trigger` in input tokens, no lower
than the API's `MIN_COMPACTION_TRIGGER`), and context editing (`clear_thinking_20251015`,
`clear_tool_uses_20250919`) when asked, with their beta flags. The answer's `compaction` block
becomes the message's `CompactionPart` (kept verbatim, sent back first in its message); a block
whose content is null (a failed compaction, a no-op for the API) is dropped.

The working view drops the span a compaction replaces (`chatcli.history.native`), so a
conversation can begin with the assistant turn holding the block. The API drops every block
before the compaction block, and its conversations begin with the user: `user_first` puts
`COMPACTED_OPENER` before such a turn, a user turn the API then drops unread.

Compaction on demand (`Anthropic.compact_on_demand`; platform.claude.com/docs/en/build-with-
claude/compaction-on-demand): the conversation with `"compaction": {"type": "summarize"}` and
the `ON_DEMAND_BETA` flag (`on_demand`); the answer is the block alone (`stop_reason`
"compaction"), signed (`on_demand_window`). A request that carries a signed block (`signed`)
is sent with that flag and without the compaction edit: the API runs no threshold compaction
on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatcli.errors import ErrorInfo, ErrorKind, ProviderError
from chatcli.messages import CompactionPart, Message, Role, Usage
from chatcli.providers.base import Compacted, NativeCompaction, Response

__all__ = [
    "COMPACTED_OPENER",
    "COMPACTION_MODELS",
    "COMPACTION_PROVIDER",
    "MIN_COMPACTION_TRIGGER",
    "ON_DEMAND_BETA",
    "betas",
    "compaction_block",
    "compaction_part",
    "context_edits",
    "on_demand",
    "on_demand_window",
    "signed",
    "supports_native_compaction",
    "user_first",
]

COMPACTED_OPENER = "(The conversation before this point was compacted.)"

# Models that take the `compact_20260112` edit: the "Supported models" of Anthropic's compaction
# page (platform.claude.com/docs/en/build-with-claude/compaction); the Models API states it per
# model too (`capabilities.context_management.compact_20260112`).
COMPACTION_MODELS = (
    "claude-opus-4-6",
    "claude-sonnet-4-6",
    "claude-opus-4-7",
    "claude-mythos-preview",
)
# The least `trigger` the compaction edit accepts (the same page, "Parameters").
MIN_COMPACTION_TRIGGER = 50_000
_COMPACTION_BETA = "compact-2026-01-12"
_CONTEXT_EDITING_BETA = "context-management-2025-06-27"
# The `CompactionPart.provider` of Anthropic's compactions.
COMPACTION_PROVIDER = "anthropic"
# Compaction on demand: the flag of its request and of every request carrying its block.
ON_DEMAND_BETA = "compact-2026-09-04"


def supports_native_compaction(model: str) -> bool:
    """Whether `model` (an id or a dated snapshot of one) is among `COMPACTION_MODELS`."""
    return any(model == known or model.startswith(known + "-") for known in COMPACTION_MODELS)


def context_edits(native: NativeCompaction) -> list[dict[str, Any]]:
    """`context_management.edits` for `native`: thinking first (the API wants it first), then
    tool uses, then the compaction."""
    edits: list[dict[str, Any]] = []
    if native.clear_thinking:
        edits.append({"type": "clear_thinking_20251015"})
    if native.clear_tool_uses:
        edits.append({"type": "clear_tool_uses_20250919"})
    compact: dict[str, Any] = {"type": "compact_20260112"}
    if native.trigger_tokens is not None:
        value = max(native.trigger_tokens, MIN_COMPACTION_TRIGGER)
        compact["trigger"] = {"type": "input_tokens", "value": value}
    if native.pause:
        compact["pause_after_compaction"] = True
    if native.instructions:
        compact["instructions"] = native.instructions
    return [*edits, compact]


def betas(native: NativeCompaction) -> list[str]:
    """The beta flags the request needs: compaction's, and context editing's when asked."""
    editing = native.clear_thinking or native.clear_tool_uses
    return [_COMPACTION_BETA, *([_CONTEXT_EDITING_BETA] if editing else [])]


def on_demand(params: dict[str, Any]) -> dict[str, Any]:
    """`messages.create` arguments for a conversation (`params`, without native compaction)
    turned into its compaction request."""
    extra = {**params.get("extra_body", {}), "compaction": {"type": "summarize"}}
    return {**params, "betas": [ON_DEMAND_BETA], "extra_body": extra}


def on_demand_window(response: Response) -> Compacted:
    """A compaction request's answer as the window it makes: the block alone. An answer
    without it (the docs' "missing summary") raises a ProviderError naming its stop reason."""
    part = response.message.compaction
    if part is None:
        stop = (response.provider_details or {}).get("anthropic", {}).get("stop_reason")
        message = f"no summary came back (stop_reason {stop!r})"
        raise ProviderError(ErrorInfo(kind=ErrorKind.OTHER, message=message))
    anchor = Message(role=Role.ASSISTANT, compaction=part)
    return Compacted(window=(anchor,), usage=response.compaction_usage or Usage())


def signed(message: Message) -> bool:
    """Whether `message` carries a compaction block made on demand (they are signed)."""
    part = message.compaction
    return (
        part is not None
        and part.provider == COMPACTION_PROVIDER
        and "signature" in part.provider_details
    )


def compaction_block(message: Message) -> list[dict[str, Any]]:
    """The message's compaction block, sent back first in its message (none: not ours)."""
    part = message.compaction
    if part is None or part.provider != COMPACTION_PROVIDER:
        return []  # another provider's: unreadable here (the Client's view drops it first)
    return [dict(part.provider_details)]


def compaction_part(blocks: Sequence[Mapping[str, Any]], model: str) -> CompactionPart | None:
    """The answer's latest `compaction` block that has content, as a CompactionPart."""
    made = [b for b in blocks if b.get("type") == "compaction" and b.get("content") is not None]
    if not made:
        return None
    block = dict(made[-1])
    return CompactionPart(
        provider=COMPACTION_PROVIDER,
        model=model,
        summary=str(block["content"]),
        provider_details=block,
    )


def user_first(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`turns`, with `COMPACTED_OPENER` before them when they begin with the assistant's
    compaction block (see the module docstring)."""
    first = turns[0] if turns else None
    if first is None or first["role"] != "assistant" or not first["content"]:
        return turns
    if first["content"][0].get("type") != "compaction":
        return turns
    opener = {"role": "user", "content": [{"type": "text", "text": COMPACTED_OPENER}]}
    return [opener, *turns]

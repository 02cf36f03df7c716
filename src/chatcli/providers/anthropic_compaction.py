"""Anthropic's native compaction and context editing: what a request asks for and what the
answer's compaction block becomes. Kept apart from the Messages API mapping
(`chatcli.providers.anthropic`) because it is a beta of its own, with its own models, limits
and flags.

For the models of `COMPACTION_MODELS`, the request goes to the beta Messages endpoint with the
`compact_20260112` edit in `context_management.edits` (its `trigger` in input tokens, no lower
than the API's `MIN_COMPACTION_TRIGGER`), and context editing (`clear_thinking_20251015`,
`clear_tool_uses_20250919`) when asked, with their beta flags. The answer's `compaction` block
becomes the message's `CompactionPart`, kept verbatim (every field as the API sent it) and sent
back first in its message; a block whose content is null (a failed compaction, a no-op for
the API) is dropped.

The working view drops the span a compaction replaces (`chatcli.history.native`), so the
conversation sent begins with the assistant turn holding the block, as Anthropic's compaction
pages send it: after a threshold compaction the response is appended as usual (the API drops
what came before the block), and a block made on demand must come first (anything before it
is refused as `compaction_block_misplaced`).

Compaction on demand (`Anthropic.compact_on_demand`; platform.claude.com/docs/en/build-with-
claude/compaction-on-demand): the conversation with `"compaction": {"type": "summarize"}` and
the `ON_DEMAND_BETA` flag (`on_demand`), without the fields that only shape a reply, which the
API refuses there (the anthropic SDK's tool runner drops the same: `stop_sequences`, a
`tool_choice` of `any` or `tool`, `output_config.format`, `context_management`); the answer is
the block alone (`stop_reason` "compaction"), signed (`on_demand_window`). A request that
carries a signed block (`signed`) is sent with that flag and without the compaction edit (the
API takes no compaction edit beside such a block, the SDK says); context editing still applies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from chatcli.errors import ErrorInfo, ErrorKind, ProviderError
from chatcli.messages import CompactionPart, Message, Role, Usage
from chatcli.providers.base import Compacted, NativeCompaction, Response

__all__ = [
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
    "part_block",
    "signed",
    "supports_native_compaction",
]

# Models that compact on Anthropic's servers, at a threshold and on demand: the
# `supportedModels` of Anthropic's pages (platform.claude.com/docs/en/build-with-claude/
# compaction-threshold.md and compaction-background.md, the same list); the Models API states
# it per model too (`capabilities.context_management.compact_20260112`).
COMPACTION_MODELS = (
    "claude-fable-5-1",
    "claude-mythos-5-1",
    "claude-fable-5",
    "claude-mythos-5",
    "claude-mythos-preview",
    "claude-opus-5-5",
    "claude-opus-5",
    "claude-opus-4-8",
    "claude-opus-4-7",
    "claude-opus-4-6",
    "claude-sonnet-5-5",
    "claude-sonnet-5",
    "claude-sonnet-4-6",
    "claude-haiku-5-5",
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


def context_edits(native: NativeCompaction, *, compact: bool = True) -> list[dict[str, Any]]:
    """`context_management.edits` for `native`: thinking first (the API wants it first), then
    tool uses, then the compaction (`compact`: not beside a signed block)."""
    edits: list[dict[str, Any]] = []
    if native.clear_thinking:
        edits.append({"type": "clear_thinking_20251015"})
    if native.clear_tool_uses:
        edits.append({"type": "clear_tool_uses_20250919"})
    return [*edits, _compact_edit(native)] if compact else edits


def _compact_edit(native: NativeCompaction) -> dict[str, Any]:
    compact: dict[str, Any] = {"type": "compact_20260112"}
    if native.trigger_tokens is not None:
        value = max(native.trigger_tokens, MIN_COMPACTION_TRIGGER)
        compact["trigger"] = {"type": "input_tokens", "value": value}
    if native.pause:
        compact["pause_after_compaction"] = True
    if native.instructions:
        compact["instructions"] = native.instructions
    return compact


def betas(native: NativeCompaction | None, *, signed: bool = False) -> list[str]:
    """The beta flags the request needs: compaction's (`ON_DEMAND_BETA` for a conversation that
    carries a signed block), and context editing's when asked."""
    editing = native is not None and (native.clear_thinking or native.clear_tool_uses)
    return [
        ON_DEMAND_BETA if signed else _COMPACTION_BETA,
        *([_CONTEXT_EDITING_BETA] if editing else []),
    ]


def on_demand(params: dict[str, Any]) -> dict[str, Any]:
    """`messages.create` arguments for a conversation (`params`, without native compaction)
    turned into its compaction request, without what only shapes a reply (module docstring)."""
    extra = {**_without_reply_fields(params.get("extra_body", {})), "compaction": _SUMMARIZE}
    return {**params, "betas": [ON_DEMAND_BETA], "extra_body": extra}


_SUMMARIZE = {"type": "summarize"}
_REPLY_FIELDS = ("stop_sequences", "context_management", "output_format")


def _without_reply_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """`body` without the fields a compaction request refuses (module docstring)."""
    kept = {k: v for k, v in body.items() if k not in _REPLY_FIELDS}
    choice = kept.get("tool_choice")
    if isinstance(choice, Mapping) and choice.get("type") in ("any", "tool"):
        del kept["tool_choice"]
    config = kept.pop("output_config", None)
    if isinstance(config, Mapping):
        config = {k: v for k, v in config.items() if k != "format"}
    if config:
        kept["output_config"] = config
    return kept


def on_demand_window(response: Response, *, model: str) -> Compacted:
    """A compaction request's answer as the window it makes: the block alone, tagged with the
    `model` asked for. An answer without it (the docs' "missing summary") raises a
    ProviderError naming its stop reason."""
    part = response.message.compaction
    if part is None:
        stop = (response.provider_details or {}).get("anthropic", {}).get("stop_reason")
        message = f"no summary came back (stop_reason {stop!r})"
        raise ProviderError(ErrorInfo(kind=ErrorKind.OTHER, message=message))
    anchor = Message(role=Role.ASSISTANT, compaction=replace(part, model=model))
    return Compacted(window=(anchor,), usage=response.compaction_usage or Usage())


def signed(message: Message) -> bool:
    """Whether `message` carries a compaction block made on demand (they are signed)."""
    part = message.compaction
    return (
        part is not None
        and part.provider == COMPACTION_PROVIDER
        and part.provider_details.get("signature") is not None
    )


def compaction_block(message: Message) -> list[dict[str, Any]]:
    """The message's compaction block, sent back first in its message (none: not ours)."""
    return part_block(message.compaction)


def part_block(part: CompactionPart | None) -> list[dict[str, Any]]:
    """A compaction's block as Anthropic sent it (none: not Anthropic's)."""
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

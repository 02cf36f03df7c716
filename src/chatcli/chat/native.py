"""Who compacts in a chat session: the provider on its own servers, or chatcli.

`RecoveryConfig.compaction` chooses. With "auto" (the default) or "native", a provider whose
model supports it compacts on its own servers (`Client` asks for it on every request,
triggered at the share of the room chatcli's auto-compaction uses: `CompactionConfig.trigger`;
the session's Client stops asking once "auto" gave up on it). With "auto", chatcli's
own auto-compaction runs instead where the model has none, and from the moment the provider's
fails (`failed`: a request it refused, an answer past the trigger without the compaction);
"native" never falls back; "chatcli" is chatcli's own only; "off" neither. /compact follows
the same choice: the provider's compaction on demand where it compacts and can (`on_demand`),
else chatcli's own summary.

The session keeps why "auto" gave up (`failed`, None while it relies on the provider) and asks
these functions before each request and after each answer; they read the strategy from the
session's `RecoveryConfig` each time, so a replaced config applies at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from chatcli.chat.tap import CallRecord
from chatcli.cost import CallKind
from chatcli.messages import Message, Role, Usage
from chatcli.providers.base import Compacted, Provider, Request

__all__ = [
    "chatcli_compacts",
    "compaction_usage",
    "native_active",
    "on_demand",
    "replaced_count",
]


def native_active(provider: Provider, strategy: str, failed: str | None) -> bool:
    """Whether `provider` compacts on its servers: the strategy allows it, its model supports
    it and ("auto") it has not failed in this session."""
    allowed = strategy == "native" or (strategy == "auto" and failed is None)
    supported = getattr(provider, "native_compaction_supported", None)
    return allowed and callable(supported) and bool(supported())


def chatcli_compacts(provider: Provider, strategy: str, failed: str | None) -> bool:
    """Whether chatcli's own auto-compaction runs before a request."""
    return strategy in ("auto", "chatcli") and not native_active(provider, strategy, failed)


def on_demand(
    provider: Provider, strategy: str, failed: str | None, focus: str | None
) -> Callable[[Request], Compacted] | str:
    """What /compact calls: the provider's compaction on demand (its adapter's
    `compact_on_demand`), or why not ("" when that is no news: "auto" on a model that does not
    compact, "chatcli")."""
    if not native_active(provider, strategy, failed):
        model = getattr(provider, "model", "the model")
        return f"{model} does not compact on the provider's servers" if strategy == "native" else ""
    if focus is not None:
        return "a focus is for chatcli's own summary"
    compact: Callable[[Request], Compacted] | None = getattr(provider, "compact_on_demand", None)
    if not callable(compact):
        return f"{type(provider).__name__} has no compaction on demand"
    return compact


def compaction_usage(calls: Iterable[CallRecord]) -> Usage:
    """What the provider's own compactions among `calls` used."""
    return sum((c.usage for c in calls if c.kind is CallKind.COMPACTION), Usage())


def replaced_count(view: Sequence[Message]) -> int:
    """How many messages a compaction of `view` replaces (system messages stay)."""
    return sum(1 for m in view if m.role is not Role.SYSTEM)

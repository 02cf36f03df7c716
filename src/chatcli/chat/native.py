"""Who compacts in a chat session: the provider on its own servers, or chatcli.

`RecoveryConfig.compaction` chooses. With "auto" (the default) or "native", a provider whose
model supports it compacts on its own servers (its adapter's `native_compaction`, triggered at
the share of the room chatcli's auto-compaction uses: `native_trigger`). With "auto", chatcli's
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
from chatcli.providers.base import Compacted, NativeCompaction, Provider, Request

__all__ = [
    "chatcli_compacts",
    "compaction_usage",
    "native_active",
    "native_trigger",
    "on_demand",
    "replaced_count",
    "request_native",
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


def request_native(provider: Provider, active: bool, trigger: int | None) -> None:
    """Ask `provider` to compact at `trigger` (or not: `active` False) from its next request
    on; a provider without native compaction is left alone."""
    if hasattr(provider, "native_compaction"):
        native = NativeCompaction(trigger_tokens=trigger)
        provider.native_compaction = native if active else None


def native_trigger(window: int | None, max_tokens: int | None, pct: int) -> int | None:
    """The prompt size at which chatcli's own auto-compaction would run: `pct` percent of the
    room the output limit leaves (None: the window is unknown, the provider's default
    applies)."""
    if window is None:
        return None
    return max(window - (max_tokens or 0), 0) * pct // 100


def compaction_usage(calls: Iterable[CallRecord]) -> Usage:
    """What the provider's own compactions among `calls` used."""
    return sum((c.usage for c in calls if c.kind is CallKind.COMPACTION), Usage())


def replaced_count(view: Sequence[Message]) -> int:
    """How many messages a compaction of `view` replaces (system messages stay)."""
    return sum(1 for m in view if m.role is not Role.SYSTEM)

"""A session's cost ledger: the cost of one turn from the calls it made, and a session's cost
from its stored requests (so a resumed session shows all of it), per model, with the parts
that were overhead (recovery, compaction). Unknown is None, never 0.

Each stored request keeps its own usage (cache reads and writes included), so views of it
per request (a cache share, say) are computed from `CostSummary.requests` alike. A request
whose usage holds chatcli's estimate for a call the server reported none for (cancelled, or
failed mid-answer) carries an event saying so (`ESTIMATED_USAGE`), so /cost can mark it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chatcli.catalog import ModelInfo
from chatcli.chat.tap import CallRecord
from chatcli.cost import CostLedger
from chatcli.messages import Usage
from chatcli.store import StoredRequest

__all__ = [
    "COMPACTION_TAGS",
    "ESTIMATED_USAGE",
    "CostSummary",
    "ModelTally",
    "TurnCost",
    "estimated_usage_event",
    "turn_cost",
]

# Tags of the stored requests that are compactions (a failed one was paid for too).
COMPACTION_TAGS = ("compaction", "compaction-failed")
# The kind of the event stored with a request whose usage holds an estimate.
ESTIMATED_USAGE = "usage-estimated"


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnCost:
    """What one turn's calls used and cost (None: unknown), and the recovery share of it."""

    usage: Usage
    cost: float | None
    recovery_cost: float | None


def turn_cost(calls: Sequence[CallRecord], model: str, info: ModelInfo | None) -> TurnCost:
    """The cost of a turn's calls, priced with `info` (None: unknown prices)."""
    ledger = CostLedger()
    for call in calls:
        ledger = ledger.record(call.usage, request=0, model=model, info=info, kind=call.kind)
    return TurnCost(
        usage=ledger.total.usage,
        cost=ledger.total.cost.total,
        recovery_cost=ledger.recovery.cost.total,
    )


def estimated_usage_event(calls: Sequence[CallRecord]) -> tuple[str, str, dict[str, Any]]:
    """The stored event of a request some of whose calls' usage is chatcli's estimate."""
    estimated = [call for call in calls if call.estimated]
    usage = sum((call.usage for call in estimated), Usage())
    text = (
        f"usage of {len(estimated)} call(s) estimated ({usage.prompt_tokens:,} in, "
        f"{usage.output_tokens:,} out): the server reported none before the call ended"
    )
    return ESTIMATED_USAGE, text, {"calls": len(estimated)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelTally:
    """Requests, tokens and cost of one model in a session (`cost` None: partly unknown), and
    the parts of it that were overhead: recovery (failed and continuation calls) and
    compaction (summary calls, including those of failed compactions)."""

    requests: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    recovery_cost: float | None = 0.0
    compaction_cost: float | None = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CostSummary:
    """A session's cost from its stored requests (so a resumed session shows all of it).
    `cache_breaks`: the requests that broke the prompt cache (by id), and why
    (`chatcli.chat.cache`); `estimated`: the requests whose usage holds an estimate."""

    requests: tuple[StoredRequest, ...]
    cache_breaks: Mapping[int, str] = field(default_factory=dict)
    estimated: frozenset[int] = frozenset()

    @property
    def total(self) -> ModelTally:
        return _tally(self.requests)

    @property
    def known_cost(self) -> float:
        """The sum of the known costs: what is surely spent (a lower bound when any is
        unknown)."""
        return sum(r.cost_usd for r in self.requests if r.cost_usd is not None)

    def by_model(self) -> dict[str, ModelTally]:
        models = dict.fromkeys(r.model or "?" for r in self.requests)
        return {m: _tally([r for r in self.requests if (r.model or "?") == m]) for m in models}


def _tally(requests: Sequence[StoredRequest]) -> ModelTally:
    return ModelTally(
        requests=len(requests),
        usage=sum((r.usage for r in requests), Usage()),
        cost=_sum_known(r.cost_usd for r in requests),
        recovery_cost=_sum_known(r.recovery_cost_usd for r in requests),
        compaction_cost=_sum_known(r.cost_usd for r in requests if r.tag in COMPACTION_TAGS),
    )


def _sum_known(values: Iterator[float | None] | Sequence[float | None]) -> float | None:
    total = 0.0
    for value in values:
        if value is None:
            return None
        total += value
    return total

"""Cost and context accounting: what each call cost, totals per request, model and session,
the cost of recovery itself, and how full the context window is. Pure values, no I/O.

Unknown is never zero: a component whose price is unknown costs None (unless it used no
tokens, which costs nothing whatever the price), and any total that includes it is None.

The token convention is `Usage`'s: `input_tokens` is the uncached part of the prompt, cache
reads and writes are counted apart (Anthropic reports them that way; adapters normalise the
others to it), so `usage.prompt_tokens` is the whole prompt. `output_tokens` includes any
reasoning tokens, which are billed as output.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from chatcli.catalog import ModelInfo
from chatcli.messages import Usage

__all__ = [
    "CallKind",
    "ContextFill",
    "Cost",
    "CostLedger",
    "LedgerEntry",
    "Tally",
    "context_fill",
    "usage_cost",
]

_PER_MILLION = 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Cost:
    """USD per component; None where the price is unknown. Adds up with `+`."""

    input: float | None = 0.0
    output: float | None = 0.0
    cache_read: float | None = 0.0
    cache_write: float | None = 0.0

    @property
    def total(self) -> float | None:
        """The whole cost, or None when any component is unknown."""
        parts = self._parts()
        return None if None in parts else sum(p for p in parts if p is not None)

    @property
    def known_total(self) -> float:
        """The sum of the known components: a lower bound when `total` is None."""
        return sum(p for p in self._parts() if p is not None)

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(
            input=_add(self.input, other.input),
            output=_add(self.output, other.output),
            cache_read=_add(self.cache_read, other.cache_read),
            cache_write=_add(self.cache_write, other.cache_write),
        )

    def _parts(self) -> tuple[float | None, ...]:
        return (self.input, self.output, self.cache_read, self.cache_write)


def usage_cost(usage: Usage, info: ModelInfo | None) -> Cost:
    """The cost of one call's `usage` at `info`'s prices (None: nothing known).

    Per call, because the price tier depends on that call's prompt size (some models cost
    more above `catalog.LONG_CONTEXT_THRESHOLD` prompt tokens).
    """
    prices = info.prices_for(usage.prompt_tokens) if info is not None else None
    return Cost(
        input=_component(usage.input_tokens, prices.input if prices else None),
        output=_component(usage.output_tokens, prices.output if prices else None),
        cache_read=_component(usage.cache_read_tokens, prices.cache_read if prices else None),
        cache_write=_component(usage.cache_write_tokens, prices.cache_write if prices else None),
    )


def _component(tokens: int, price_per_million: float | None) -> float | None:
    if tokens == 0:
        return 0.0
    return None if price_per_million is None else tokens * price_per_million / _PER_MILLION


def _add(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


class CallKind(StrEnum):
    """Why a call was made; everything but `answer` is overhead worth showing apart."""

    ANSWER = "answer"
    FAILED = "failed"  # a call that failed (an overflow, a broken stream) and was retried
    CONTINUATION = "continuation"  # an extra call after a stop at max_tokens
    COMPACTION = "compaction"  # a summary made to shrink the history
    CANCELLED = "cancelled"  # a call the user cancelled: what it processed was still paid

    @property
    def is_recovery(self) -> bool:
        return self in (CallKind.FAILED, CallKind.CONTINUATION)


@dataclass(frozen=True, slots=True, kw_only=True)
class Tally:
    """Tokens, cost and number of calls of a group of calls. Adds up with `+`."""

    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    cost: Cost = field(default_factory=Cost)

    def __add__(self, other: Tally) -> Tally:
        if not isinstance(other, Tally):
            return NotImplemented
        return Tally(
            calls=self.calls + other.calls,
            usage=self.usage + other.usage,
            cost=self.cost + other.cost,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerEntry:
    """One provider call: which request it served, the model, why, its usage and cost."""

    request: int
    model: str
    kind: CallKind
    usage: Usage
    cost: Cost

    @property
    def tally(self) -> Tally:
        return Tally(calls=1, usage=self.usage, cost=self.cost)


_Key = TypeVar("_Key", bound=Hashable)


@dataclass(frozen=True, slots=True, kw_only=True)
class CostLedger:
    """Every call of a session, in order; totals per request, model, kind, and overall.

    `record` returns a new ledger; ledgers of separate requests join with `+`.
    """

    entries: tuple[LedgerEntry, ...] = ()

    def record(
        self,
        usage: Usage,
        *,
        request: int,
        model: str,
        info: ModelInfo | None,
        kind: CallKind = CallKind.ANSWER,
    ) -> CostLedger:
        """A ledger with one more call, costed at `info`'s prices."""
        entry = LedgerEntry(
            request=request, model=model, kind=kind, usage=usage, cost=usage_cost(usage, info)
        )
        return CostLedger(entries=(*self.entries, entry))

    def __add__(self, other: CostLedger) -> CostLedger:
        if not isinstance(other, CostLedger):
            return NotImplemented
        return CostLedger(entries=self.entries + other.entries)

    @property
    def total(self) -> Tally:
        return sum((entry.tally for entry in self.entries), Tally())

    @property
    def recovery(self) -> Tally:
        """What recovery itself cost: failed calls and continuation calls."""
        return sum((e.tally for e in self.entries if e.kind.is_recovery), Tally())

    def by_request(self) -> Mapping[int, Tally]:
        return self._group(lambda entry: entry.request)

    def by_model(self) -> Mapping[str, Tally]:
        return self._group(lambda entry: entry.model)

    def by_kind(self) -> Mapping[CallKind, Tally]:
        return self._group(lambda entry: entry.kind)

    def _group(self, key: Callable[[LedgerEntry], _Key]) -> dict[_Key, Tally]:
        groups: dict[_Key, Tally] = {}
        for entry in self.entries:
            groups[key(entry)] = groups.get(key(entry), Tally()) + entry.tally
        return groups


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextFill:
    """How much of the prompt limit the conversation takes up."""

    tokens: int
    limit: int | None

    @property
    def fraction(self) -> float | None:
        """tokens / limit (above 1.0 when over), or None when the limit is unknown."""
        return None if not self.limit else self.tokens / self.limit

    @property
    def remaining(self) -> int | None:
        return None if self.limit is None else max(self.limit - self.tokens, 0)


def context_fill(last_call: Usage, limit: int | None) -> ContextFill:
    """How full the window is after the last call, measured from its usage.

    The next request carries the whole prompt of the last call and its answer. The prompt is
    `prompt_tokens`, cache reads and writes included: Anthropic reports them apart from
    `input_tokens`, and counting `input_tokens` alone would show a nearly empty window while
    the cache holds almost all of it. Reasoning tokens are not carried to the next turn. Pass
    the usage of one call (not a sum over calls) and the prompt limit, for example
    `ModelInfo.prompt_limit(max_tokens)`.
    """
    answer = max(last_call.output_tokens - last_call.reasoning_tokens, 0)
    return ContextFill(tokens=last_call.prompt_tokens + answer, limit=limit)

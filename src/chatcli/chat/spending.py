"""The session budget (CHATCLI_SESSION_BUDGET_USD) and how money is written: pure functions,
no I/O."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["BUDGET_WARN_FRACTION", "BudgetCheck", "check_budget", "usd"]

BUDGET_WARN_FRACTION = 0.8


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetCheck:
    """Where a request stands against the session budget.

    `status`: "ok"; "warn" (spending passed `BUDGET_WARN_FRACTION` of the budget); "over"
    (this request would go past it: ask first); "unknown" (the next request's price is
    unknown, so the budget cannot be enforced).
    """

    status: str
    spent: float
    next_cost: float | None
    budget: float

    @property
    def message(self) -> str:
        spent = f"{usd(self.spent)} of the {usd(self.budget)} session budget spent"
        if self.status == "over":
            cost = "?" if self.next_cost is None else usd(self.next_cost)
            return f"{spent}; the next request (about {cost}) would go past it"
        if self.status == "unknown":
            return f"{spent}; the model's price is unknown, so the budget cannot be enforced"
        return f"{spent} ({self.spent / self.budget:.0%})"


def usd(value: float) -> str:
    """Dollars, with two significant digits below $1: a $0.005 budget is not "$0.00"."""
    if value <= 0 or value >= 1:
        return f"${value:.2f}"
    decimals = max(2, 1 - math.floor(math.log10(value)))
    whole, _, cents = f"{value:.{decimals}f}".partition(".")
    return f"${whole}.{cents.rstrip('0').ljust(2, '0')}"


def check_budget(
    spent: float, next_cost: float | None, budget: float, *, approved: bool = False
) -> BudgetCheck:
    """Pure: the budget status before a request estimated to cost `next_cost` (None:
    unknown), with `spent` already spent; `approved`: the user agreed to go past it ("ok"
    instead of "over")."""
    if spent >= budget or (next_cost is not None and spent + next_cost > budget):
        status = "ok" if approved else "over"
    elif next_cost is None:
        status = "unknown"
    elif spent + next_cost >= BUDGET_WARN_FRACTION * budget:
        status = "warn"
    else:
        status = "ok"
    return BudgetCheck(status=status, spent=spent, next_cost=next_cost, budget=budget)

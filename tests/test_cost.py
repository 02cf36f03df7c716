"""Tests for cost per call, the cost ledger (per request, model, kind; recovery apart) and
context fill."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.catalog import LONG_CONTEXT_THRESHOLD, ModelInfo, Prices, lookup
from chatcli.cost import (
    CallKind,
    ContextFill,
    Cost,
    CostLedger,
    Tally,
    context_fill,
    usage_cost,
)
from chatcli.messages import Usage

SONNET = ModelInfo(
    model="claude-sonnet-4-5",
    provider="anthropic",
    context_window=200_000,
    max_output_tokens=64_000,
    prices=Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
)


def test_cost_of_each_component() -> None:
    usage = Usage(
        input_tokens=1_000_000,
        output_tokens=500_000,
        cache_read_tokens=2_000_000,
        cache_write_tokens=100_000,
    )
    cost = usage_cost(usage, SONNET)
    assert cost.input == pytest.approx(3.0)
    assert cost.output == pytest.approx(7.5)
    assert cost.cache_read == pytest.approx(0.6)
    assert cost.cache_write == pytest.approx(0.375)
    assert cost.total == pytest.approx(11.475)


def test_prices_from_the_catalog() -> None:
    info = lookup("claude-sonnet-4-5")
    assert info is not None
    cost = usage_cost(Usage(input_tokens=10_000, output_tokens=2_000), info)
    # $3 / $15 per million tokens, as the bundled models.dev data states for this model.
    assert cost.total == pytest.approx(0.03 + 0.03)


def test_unknown_price_is_none_not_zero() -> None:
    gpt = ModelInfo(model="gpt-4o", prices=Prices(input=2.5, output=10.0, cache_read=1.25))
    cost = usage_cost(Usage(input_tokens=1000, output_tokens=100, cache_write_tokens=50), gpt)
    assert cost.cache_write is None
    assert cost.total is None
    assert cost.known_total == pytest.approx(1000 * 2.5e-6 + 100 * 10e-6)


def test_unused_component_costs_nothing_even_without_a_price() -> None:
    free_text = ModelInfo(model="m", prices=Prices(input=1.0, output=2.0))
    cost = usage_cost(Usage(input_tokens=1_000_000, output_tokens=1_000_000), free_text)
    assert (cost.cache_read, cost.cache_write) == (0.0, 0.0)
    assert cost.total == pytest.approx(3.0)


def test_unknown_model_costs_none() -> None:
    cost = usage_cost(Usage(input_tokens=10, output_tokens=5), None)
    assert (cost.input, cost.output, cost.total) == (None, None, None)
    assert usage_cost(Usage(), None).total == 0.0


def test_free_model_costs_zero() -> None:
    local = ModelInfo(model="llama", prices=Prices(input=0.0, output=0.0))
    assert usage_cost(Usage(input_tokens=500, output_tokens=50), local).total == 0.0


def test_long_context_tier_applies_per_call() -> None:
    tiered = ModelInfo(
        model="gemini-2.5-pro",
        prices=Prices(input=1.25, output=10.0),
        long_context_prices=Prices(input=2.5, output=15.0),
    )
    small = usage_cost(Usage(input_tokens=LONG_CONTEXT_THRESHOLD, output_tokens=0), tiered)
    large = usage_cost(Usage(input_tokens=LONG_CONTEXT_THRESHOLD + 1, output_tokens=0), tiered)
    assert small.input == pytest.approx(LONG_CONTEXT_THRESHOLD * 1.25e-6)
    assert large.input == pytest.approx((LONG_CONTEXT_THRESHOLD + 1) * 2.5e-6)


def test_long_context_tier_counts_cached_prompt_tokens() -> None:
    tiered = ModelInfo(
        model="m",
        prices=Prices(input=1.0, cache_read=0.1),
        long_context_prices=Prices(input=2.0, cache_read=0.2),
    )
    usage = Usage(input_tokens=1000, cache_read_tokens=LONG_CONTEXT_THRESHOLD)
    assert usage_cost(usage, tiered).input == pytest.approx(1000 * 2e-6)


def test_cost_addition_propagates_unknown() -> None:
    known = Cost(input=1.0, output=2.0)
    unknown = Cost(input=None, output=1.0)
    assert (known + known).total == pytest.approx(6.0)
    total = known + unknown
    assert total.input is None
    assert total.output == pytest.approx(3.0)
    assert total.total is None
    assert total.known_total == pytest.approx(3.0)


# --- the ledger ----------------------------------------------------------------------------


def _session() -> CostLedger:
    ledger = CostLedger()
    # Request 0: an overflow (billed nothing), then the answer.
    ledger = ledger.record(Usage(), request=0, model="claude", info=SONNET, kind=CallKind.FAILED)
    ledger = ledger.record(
        Usage(input_tokens=1000, output_tokens=200), request=0, model="claude", info=SONNET
    )
    # Request 1: stopped at max_tokens, then a continuation call.
    ledger = ledger.record(
        Usage(input_tokens=2000, output_tokens=100), request=1, model="claude", info=SONNET
    )
    ledger = ledger.record(
        Usage(input_tokens=2100, output_tokens=300),
        request=1,
        model="claude",
        info=SONNET,
        kind=CallKind.CONTINUATION,
    )
    # Request 2 on a model with no known prices.
    return ledger.record(
        Usage(input_tokens=50, output_tokens=5), request=2, model="local", info=None
    )


def test_ledger_totals_per_request_model_and_kind() -> None:
    ledger = _session()
    assert ledger.total.calls == 5
    assert ledger.total.usage == Usage(input_tokens=5150, output_tokens=605)
    assert ledger.total.cost.total is None  # the unpriced model makes the session unknown

    by_request = ledger.by_request()
    assert list(by_request) == [0, 1, 2]
    assert by_request[0].calls == 2
    assert by_request[1].usage == Usage(input_tokens=4100, output_tokens=400)

    by_model = ledger.by_model()
    claude = by_model["claude"]
    assert claude.cost.total == pytest.approx((5100 * 3 + 600 * 15) / 1e6)
    assert by_model["local"].cost.total is None

    assert set(ledger.by_kind()) == {CallKind.ANSWER, CallKind.FAILED, CallKind.CONTINUATION}


def test_recovery_cost_is_separate() -> None:
    recovery = _session().recovery
    assert recovery.calls == 2  # the failed call and the continuation
    assert recovery.usage == Usage(input_tokens=2100, output_tokens=300)
    assert recovery.cost.total == pytest.approx((2100 * 3 + 300 * 15) / 1e6)


def test_ledger_is_immutable_and_joins() -> None:
    first = CostLedger().record(Usage(input_tokens=1), request=0, model="m", info=SONNET)
    second = first.record(Usage(input_tokens=2), request=1, model="m", info=SONNET)
    assert len(first.entries) == 1
    assert len(second.entries) == 2
    joined = first + CostLedger(entries=second.entries[1:])
    assert joined == second


def test_empty_ledger() -> None:
    ledger = CostLedger()
    assert ledger.total == Tally()
    assert ledger.total.cost.total == 0.0
    assert ledger.by_model() == {}


_usages = st.builds(
    Usage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**5),
    cache_read_tokens=st.integers(0, 10**6),
    cache_write_tokens=st.integers(0, 10**5),
)
_calls = st.lists(
    st.tuples(
        _usages,
        st.integers(0, 3),
        st.sampled_from(["a", "b"]),
        st.sampled_from(list(CallKind)),
        st.sampled_from([SONNET, None]),
    ),
    max_size=12,
)


@given(calls=_calls)
@settings(max_examples=100)
def test_groupings_add_up_to_the_total(
    calls: list[tuple[Usage, int, str, CallKind, ModelInfo | None]],
) -> None:
    ledger = CostLedger()
    for usage, request, model, kind, info in calls:
        ledger = ledger.record(usage, request=request, model=model, info=info, kind=kind)
    total = ledger.total
    for grouping in (ledger.by_request(), ledger.by_model(), ledger.by_kind()):
        summed = sum(grouping.values(), Tally())
        assert (summed.calls, summed.usage) == (total.calls, total.usage)
        assert summed.cost.known_total == pytest.approx(total.cost.known_total)
        assert (summed.cost.total is None) == (total.cost.total is None)
    assert total.calls == len(calls)


# --- context fill --------------------------------------------------------------------------


def test_context_fill_counts_anthropic_cache_tokens() -> None:
    # Anthropic: a mostly cached prompt reports few input_tokens beside large cache counts.
    usage = Usage(
        input_tokens=12, output_tokens=1000, cache_read_tokens=150_000, cache_write_tokens=2_000
    )
    fill = context_fill(usage, SONNET.prompt_limit())
    assert fill.tokens == 153_012
    assert fill.fraction == pytest.approx(153_012 / 200_000)
    assert fill.remaining == 200_000 - 153_012


def test_context_fill_leaves_out_reasoning() -> None:
    usage = Usage(input_tokens=1000, output_tokens=900, reasoning_tokens=800)
    assert context_fill(usage, 10_000).tokens == 1100


def test_context_fill_unknown_and_over_limit() -> None:
    assert context_fill(Usage(input_tokens=10), None) == ContextFill(tokens=10, limit=None)
    assert context_fill(Usage(input_tokens=10), None).fraction is None
    over = context_fill(Usage(input_tokens=300), 200)
    assert over.fraction == pytest.approx(1.5)
    assert over.remaining == 0

"""The retry policy's waits: full jitter on the backoff, the provider's Retry-After as given."""

from __future__ import annotations

import random

import pytest

from chatcli.policy import retry
from chatcli.policy.retry import RETRY_MAX_DELAY, retry_delay

BACKOFFS = [(1, 1.0), (2, 2.0), (3, 4.0), (5, 16.0), (6, RETRY_MAX_DELAY), (40, RETRY_MAX_DELAY)]


@pytest.mark.parametrize(("attempt", "backoff"), BACKOFFS)
@pytest.mark.parametrize("draw", [0.0, 0.25, 0.999])
def test_full_jitter_is_a_draw_in_zero_to_the_backoff(
    attempt: int, backoff: float, draw: float
) -> None:
    assert retry_delay(attempt, None, random=lambda: draw) == pytest.approx(backoff * draw)


def test_real_draws_spread_over_the_whole_range() -> None:
    source = random.Random(13)
    delays = [retry_delay(3, None, random=source.random) for _ in range(2_000)]
    assert all(d is not None and 0.0 <= d <= 4.0 for d in delays)
    assert min(d for d in delays if d is not None) < 0.1
    assert max(d for d in delays if d is not None) > 3.9
    assert len(set(delays)) > 1_900  # not one fixed backoff


def test_a_retry_after_is_waited_as_given_without_a_draw() -> None:
    def no_draw() -> float:
        raise AssertionError("a Retry-After needs no jitter")

    assert retry_delay(1, 7.0, random=no_draw) == 7.0
    assert retry_delay(4, 0.0, random=no_draw) == 0.0
    assert retry_delay(1, RETRY_MAX_DELAY + 1, random=no_draw) is None


def test_without_a_source_the_module_source_is_drawn(monkeypatch: pytest.MonkeyPatch) -> None:
    draws: list[float] = []

    def recorded() -> float:
        draws.append(0.5)
        return 0.5

    monkeypatch.setattr(retry, "jitter_source", recorded)
    assert retry_delay(2, None) == 1.0
    assert draws == [0.5]


def test_a_source_out_of_range_cannot_exceed_the_backoff() -> None:
    assert retry_delay(2, None, random=lambda: 1.5) == 2.0
    assert retry_delay(2, None, random=lambda: -1.0) == 0.0

"""The proxy's counters, served as Prometheus text at `GET /metrics`.

Requests (by endpoint and status), recoveries by level, max_tokens escalations, the upstream
calls a recovery made besides each answer's last one and the tokens they used
(`chatcli.wire.usage`), upstream errors (by classified kind), session-store errors and
request latency (a histogram, by endpoint). Labels hold only these names and numbers: never a
key, a model answer or a client's text.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator

from chatcli.events import Escalated, Event, LevelApplied
from chatcli.recovery import Reply
from chatcli.wire.usage import recovery_calls, recovery_usage

__all__ = ["LATENCY_BUCKETS", "Metrics"]

# Seconds: from the proxy's own overhead (ms) to a long answer (minutes).
LATENCY_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0)


class Metrics:
    """Counters of one proxy process. Updated from the event loop only (no lock needed)."""

    def __init__(self) -> None:
        self.requests: Counter[tuple[str, int]] = Counter()
        self.recoveries: Counter[int] = Counter()
        self.escalations = 0
        self.recovery_calls = 0
        self.recovery_tokens: Counter[str] = Counter()
        self.upstream_errors: Counter[str] = Counter()
        self.store_errors = 0  # records or window reads the session store failed
        self._buckets: dict[str, list[int]] = {}
        self._sums: dict[str, float] = {}

    def record_event(self, event: Event) -> None:
        if isinstance(event, LevelApplied):
            self.recoveries[event.level] += 1
        elif isinstance(event, Escalated):
            self.escalations += 1

    def record_reply(self, reply: Reply) -> None:
        """The calls `reply` took besides its last one, and their usage."""
        self.recovery_calls += recovery_calls(reply)
        usage = recovery_usage(reply)
        self.recovery_tokens["input"] += usage.input_tokens
        self.recovery_tokens["output"] += usage.output_tokens
        self.recovery_tokens["cache_read"] += usage.cache_read_tokens
        self.recovery_tokens["cache_write"] += usage.cache_write_tokens

    def record_request(self, endpoint: str, status: int, seconds: float) -> None:
        self.requests[(endpoint, status)] += 1
        counts = self._buckets.setdefault(endpoint, [0] * (len(LATENCY_BUCKETS) + 1))
        counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self._sums[endpoint] = self._sums.get(endpoint, 0.0) + seconds

    def render(self) -> str:
        return "".join(f"{line}\n" for line in self._lines())

    def _lines(self) -> Iterator[str]:
        yield from _header("chatcli_proxy_requests_total", "counter", "requests answered")
        for (endpoint, status), n in sorted(self.requests.items()):
            yield f'chatcli_proxy_requests_total{{endpoint="{endpoint}",status="{status}"}} {n}'
        yield from _header("chatcli_proxy_recoveries_total", "counter", "recovery levels applied")
        for level in (1, 2, 3):
            yield f'chatcli_proxy_recoveries_total{{level="{level}"}} {self.recoveries[level]}'
        yield from _header("chatcli_proxy_escalations_total", "counter", "max_tokens escalations")
        yield f"chatcli_proxy_escalations_total {self.escalations}"
        name = "chatcli_proxy_recovery_calls_total"
        yield from _header(name, "counter", "upstream calls besides each answer's last")
        yield f"{name} {self.recovery_calls}"
        name = "chatcli_proxy_recovery_tokens_total"
        yield from _header(name, "counter", "tokens used by those calls")
        for kind in ("input", "output", "cache_read", "cache_write"):
            yield f'{name}{{kind="{kind}"}} {self.recovery_tokens[kind]}'
        yield from _header("chatcli_proxy_upstream_errors_total", "counter", "failed requests")
        for kind, n in sorted(self.upstream_errors.items()):
            yield f'chatcli_proxy_upstream_errors_total{{kind="{kind}"}} {n}'
        yield from _header("chatcli_proxy_store_errors_total", "counter", "session-store errors")
        yield f"chatcli_proxy_store_errors_total {self.store_errors}"
        yield from self._latency()

    def _latency(self) -> Iterator[str]:
        name = "chatcli_proxy_request_duration_seconds"
        yield from _header(name, "histogram", "time to answer a request")
        for endpoint, counts in sorted(self._buckets.items()):
            total = 0
            for bound, n in zip((*LATENCY_BUCKETS, "+Inf"), counts, strict=True):
                total += n
                yield f'{name}_bucket{{endpoint="{endpoint}",le="{bound}"}} {total}'
            yield f'{name}_sum{{endpoint="{endpoint}"}} {self._sums[endpoint]:.6f}'
            yield f'{name}_count{{endpoint="{endpoint}"}} {total}'


def _header(name: str, kind: str, text: str) -> Iterator[str]:
    yield f"# HELP {name} {text}"
    yield f"# TYPE {name} {kind}"

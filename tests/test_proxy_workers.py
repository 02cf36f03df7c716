"""`chatcli proxy --workers 2`, the real command in a subprocess: every compaction item any
worker makes is accepted by every worker, on fresh connections (each may land on either
worker), with no session store (the parent's secret, or a configured one), and with a SQLite
or PostgreSQL store (whose keys also outlive a restart); a tampered or expired item is a 400
naming its cause.

Which worker answered is read from each worker's own `/metrics` (its request counters and
latency sums: no two workers' are alike), fetched on fresh connections until both answered.
The upstream is a replay server playing a recorded Chat Completions stream; an item is sent
back on a streamed Responses request, which reaches the upstream only once the item opened.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatcli.proxy.compaction import TOKEN_PREFIX, Sealed, Sealer
from chatcli.proxy.keys import configured_key, stored_key
from chatcli.store import SessionStore
from tests.proxy_harness import running_command
from tests.recorded import sse_events
from tests.replay import ReplayServer, Scripted, replay_server

pytest_plugins = ("tests.postgres",)

WORKERS = 2
ITEMS = 6
SENDS = 3  # each item sent back this many times, each on a fresh connection
SECRET = "a-compaction-secret-of-forty-characters-00"
DAY = 86400.0
_ANSWERED = re.compile(r'chatcli_proxy_requests_total\{endpoint="([^"]+)",status="(\d+)"\} (\d+)')


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


def command(upstream: ReplayServer, *extra: str) -> list[str]:
    argv = ["--provider", "openai-compatible", "--model", "m", "--context-window", "32000"]
    return [*argv, "--base-url", upstream.url + "/v1", *extra]


def environment(home: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CHATCLI_")}
    return {**env, "CHATCLI_HOME": str(home), **more}


def make_items(url: str) -> list[dict[str, Any]]:
    """ITEMS compaction items or more, until each worker made some, each from `POST
    /v1/responses/compact` on a fresh connection (a one-message conversation: compacted
    without an upstream call, its turn kept)."""
    items: list[dict[str, Any]] = []
    while len(items) < ITEMS or not all(made_by_worker(url)):
        assert len(items) < 10 * ITEMS, "one worker made every item"
        text = f"Item {len(items)}: the code {len(items)}7."
        body = {"model": "m", "input": [{"role": "user", "content": text}]}
        answer = httpx.post(url + "/v1/responses/compact", json=body, timeout=60)
        assert answer.status_code == 200, answer.text
        item = answer.json()["output"][-1]
        assert item["type"] == "compaction" and item["encrypted_content"].startswith(TOKEN_PREFIX)
        items.append(item)
    return items


def made_by_worker(url: str) -> list[int]:
    return [c.get(("/v1/responses/compact", "200"), 0) for c in served_by_worker(url)]


def send_back(url: str, item: dict[str, Any]) -> httpx.Response:
    """`item`, then a new user turn, on a streamed Responses request (a fresh connection)."""
    body = {"model": "m", "stream": True, "input": [item, {"role": "user", "content": "Go on."}]}
    return httpx.post(url + "/v1/responses", json=body, timeout=60)


def accepted_everywhere(url: str, upstream: ReplayServer, items: list[dict[str, Any]]) -> int:
    """Sends each item back SENDS times; the number accepted (all, asserted)."""
    events = [data for _, data in sse_events("openai-chat-text.txt")]
    upstream.add(*(Scripted(events=events) for _ in range(len(items) * SENDS)))
    answers = [send_back(url, item) for item in items for _ in range(SENDS)]
    refused = [a.text[:200] for a in answers if a.status_code != 200]
    assert refused == [], refused
    assert all("response.completed" in a.text for a in answers)
    return len(answers)


def served_by_worker(url: str) -> list[dict[tuple[str, str], int]]:
    """Each worker's answered requests, by endpoint and status, from its own /metrics."""
    seen: dict[str, dict[tuple[str, str], int]] = {}
    deadline = time.monotonic() + 30
    while len(seen) < WORKERS and time.monotonic() < deadline:
        text = httpx.get(url + "/metrics", timeout=10).text
        sums = "\n".join(line for line in text.splitlines() if "_sum{" in line)
        seen[sums] = {(e, s): int(n) for e, s, n in _ANSWERED.findall(text)}
    assert len(seen) == WORKERS, "the workers' metrics could not be told apart"
    return list(seen.values())


def refusal(url: str, token: str) -> str:
    item = {"type": "compaction", "id": "cmp_1", "encrypted_content": token}
    answer = send_back(url, item)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["type"] == "invalid_request_error"
    return str(error["message"])


def tampered(token: str) -> str:
    at = len(token) * 2 // 3
    return token[:at] + ("B" if token[at] == "A" else "A") + token[at + 1 :]


def check_workers(url: str, upstream: ReplayServer, items: list[dict[str, Any]]) -> None:
    """Every item accepted SENDS times, and again until both workers accepted some (the
    kernel may hand one worker every fresh connection of a round: seen once in CI, 18 to
    0), at most 10 rounds."""
    sent = 0
    for _ in range(10):  # bounded: a round sends every item SENDS times
        sent += accepted_everywhere(url, upstream, items)
        counts = served_by_worker(url)
        sent_back = [c.get(("/v1/responses", "200"), 0) for c in counts]
        if all(sent_back):
            break
    made = [c.get(("/v1/responses/compact", "200"), 0) for c in counts]
    print(f"items made per worker {made}, accepted per worker {sent_back}")  # seen with -s
    assert sum(sent_back) == sent and all(sent_back), sent_back
    assert all(c.get(("/v1/responses", "400"), 0) == 0 for c in counts)


@pytest.mark.parametrize("secret", [False, True], ids=["parent's secret", "configured secret"])
def test_without_a_store_the_workers_share_one_key(
    upstream: ReplayServer, tmp_path: Path, secret: bool
) -> None:
    extra = ["--no-sessions", *(["--compaction-secret", SECRET] if secret else [])]
    with running_command(command(upstream, *extra), environment(tmp_path), workers=WORKERS) as (
        url,
        _,
    ):
        items = make_items(url)
        check_workers(url, upstream, items)
        token = items[0]["encrypted_content"]
        assert "altered" in refusal(url, tampered(token))
        if secret:
            old = Sealer(
                [configured_key(SECRET)], ttl=30 * DAY, clock=lambda: time.time() - 31 * DAY
            )
            assert "expired" in refusal(url, old.seal(Sealed(summary="Long ago.")))
    with running_command(command(upstream, *extra), environment(tmp_path), workers=WORKERS) as (
        url,
        _,
    ):  # restarted: a configured secret still opens the items; the parent's new one does not
        if secret:
            assert accepted_everywhere(url, upstream, items[:2]) == 2 * SENDS
        else:
            assert "wrong key" in refusal(url, items[0]["encrypted_content"])


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_with_a_store_the_workers_share_its_keys_across_restarts(
    upstream: ReplayServer, tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "sqlite":
        database = str(tmp_path / "sessions.db")  # $CHATCLI_HOME/sessions.db
        env = environment(tmp_path)
    else:
        database = str(request.getfixturevalue("postgres_url"))
        env = environment(tmp_path, CHATCLI_DATABASE_URL=database)
    with running_command(command(upstream), env, workers=WORKERS) as (url, _):
        items = make_items(url)
        check_workers(url, upstream, items)
        assert "altered" in refusal(url, tampered(items[0]["encrypted_content"]))
    with SessionStore(database) as store:  # the key the store holds: an old item forged
        ((name, secret),) = store.proxy_keys("compaction.").items()
    key = stored_key(name.removeprefix("compaction."), secret)
    old = Sealer([key], ttl=30 * DAY, clock=lambda: time.time() - 31 * DAY)
    with running_command(command(upstream), env, workers=WORKERS) as (url, _):
        check_workers(url, upstream, items)  # after a restart, both workers still open them
        assert "expired" in refusal(url, old.seal(Sealed(summary="Long ago.")))

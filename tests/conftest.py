"""Suite-wide guards: no test may reach the network beyond this machine's loopback; retry waits
are deterministic; with CHATCLI_REQUIRE_SERVERS=1 no test may be skipped; hypothesis judges
inputs, not the machine's speed; a test marked `sdk_schema` sends Anthropic and OpenAI only
what their SDKs' types describe (tests/sdk_schema.py). Shared fixtures: `server`, a replay
server (tests/replay.py) of the test's own."""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from chatcli.policy import retry
from tests.replay import ReplayServer, replay_server
from tests.sdk_schema import check_requests

# The suite shares two cores with its servers and other work: a slow draw or example is the
# machine's load, not a property's failure (a loaded run failed `too_slow` on a 0.1 s draw).
settings.register_profile("chatcli", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("chatcli")

_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


def _is_local(address: Any) -> bool:
    if isinstance(address, (str, bytes)):  # AF_UNIX paths
        return True
    host = address[0]
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _guarded(real: Any) -> Any:
    def connect(self: socket.socket, address: Any) -> Any:
        if not _is_local(address):
            raise RuntimeError(f"test tried to reach the network: {address!r}")
        return real(self, address)

    return connect


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(socket.socket, "connect", _guarded(_real_connect))
    monkeypatch.setattr(socket.socket, "connect_ex", _guarded(_real_connect_ex))
    yield


@pytest.fixture(autouse=True)
def _full_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries wait the whole backoff (the top of the jitter's range), so tests that count the
    waits see 1 s, 2 s, ...; tests/test_retry.py checks the jitter itself."""
    monkeypatch.setattr(retry, "jitter_source", lambda: 1.0)


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    """A replay server for this test alone, stopped after it."""
    with replay_server() as replay:
        yield replay


# The replay servers a test's requests to Anthropic or OpenAI go to.
_REPLAYS = ("server", "upstream")


@pytest.fixture(autouse=True)
def _sdk_schema(request: pytest.FixtureRequest) -> Iterator[None]:
    """In a test marked `sdk_schema`, every request its replay servers (`server`,
    `upstream`) were sent must match the official SDK's type of its endpoint
    (tests/sdk_schema.py). `sdk_schema(allow=(...), why="...")` names the top-level fields a
    test sends on purpose that the type lacks, and why."""
    marker = request.node.get_closest_marker("sdk_schema")
    if marker is None:
        yield
        return
    allow = frozenset(marker.kwargs.get("allow", ()))
    assert not allow or marker.kwargs.get("why"), "sdk_schema(allow=...) needs a why"
    named = [request.getfixturevalue(n) for n in _REPLAYS if n in request.fixturenames]
    yield
    for replay in named:
        if isinstance(replay, ReplayServer):  # not a test's parameter of that name
            check_requests(replay.requests, allow=allow)


# CI sets CHATCLI_REQUIRE_SERVERS=1 after installing everything: there, a test skipped because
# a server, a package or the real small model is missing is a broken build, not a pass.
_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    # A module-level `pytest.importorskip` (or `skip(allow_module_level=True)`) skips the whole
    # module at collection: its tests never run, so `pytest_runtest_logreport` never sees them.
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and os.environ.get("CHATCLI_REQUIRE_SERVERS") == "1":
        print(f"\nCHATCLI_REQUIRE_SERVERS=1 but {len(_skipped)} test(s) or module(s) were skipped:")
        for nodeid in _skipped:
            print(f"  {nodeid}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

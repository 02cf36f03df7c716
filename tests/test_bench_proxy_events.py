"""`benchmarks/proxy_events.py` pipes real fast-path answers read by read to real client
sockets: every round checks each fast path's events and each client's bytes (`measure`
asserts them), and gives its three figures, CPU per read."""

from __future__ import annotations

import uvloop
from benchmarks.proxy_events import measure


def test_each_read_is_piped_and_timed() -> None:
    whole, python, write = uvloop.run(measure(streams=3, answers=2, tokens=12, messages=10))
    assert all(figure > 0 for figure in (whole, python, write))

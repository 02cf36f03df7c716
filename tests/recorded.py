"""Recorded provider data for adapter tests: SSE streams in tests/data/sse/ and the real error
bodies of provider-errors.json (tests/data/ when engineer A's copy is there, else ../shared)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.replay import Scripted

DATA = Path(__file__).parent / "data"
_SHARED_ERRORS = Path(__file__).resolve().parents[2] / "shared" / "data" / "provider-errors.json"


def sse_events(name: str) -> list[tuple[str | None, str]]:
    """The events of tests/data/sse/<name> as (event name, data) pairs, data verbatim.

    Lines starting with ":" are SSE comments (the files cite their source there).
    """
    events: list[tuple[str | None, str]] = []
    for chunk in (DATA / "sse" / name).read_text().split("\n\n"):
        lines = [line for line in chunk.splitlines() if line and not line.startswith(":")]
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        events.append((fields.get("event"), fields["data"]))
    return events


def provider_errors(*providers: str) -> list[dict[str, Any]]:
    path = DATA / "provider-errors.json"
    records: list[dict[str, Any]] = json.loads(
        (path if path.exists() else _SHARED_ERRORS).read_text()
    )
    return [r for r in records if r["provider"] in providers]


def replayed_error(record: dict[str, Any]) -> Scripted:
    """The record's body with its status: JSON bodies as JSON, the others as text."""
    body: str = record["body"]
    try:
        json.loads(body)
    except ValueError:
        return Scripted(status=record["http_status"], body=body)
    return Scripted(
        status=record["http_status"],
        body=body.encode(),
        headers={"content-type": "application/json"},
    )

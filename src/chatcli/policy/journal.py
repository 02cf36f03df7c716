"""What one send() did: its events, in order, and the recovery steps it tried.

Every part of a run reports here, so the Reply's events and a give-up's attempts are complete
whichever part acted.
"""

from __future__ import annotations

from collections.abc import Callable

from chatcli.events import Event

__all__ = ["Journal"]


class Journal:
    """Events (also passed on to `emit` as they happen) and attempts (one line each)."""

    def __init__(self, emit: Callable[[Event], None]) -> None:
        self._emit = emit
        self.events: list[Event] = []
        self.attempts: list[str] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self._emit(event)

    def attempt(self, event: Event, line: str) -> None:
        """Emit `event`, a recovery step described by `line` in a give-up's attempts."""
        self.emit(event)
        self.attempts.append(line)

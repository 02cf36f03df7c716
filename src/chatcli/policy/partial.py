"""The continuation: the cut answer kept so far, its escalations and continuations (see
docs/design/recovery.md: "Escalation stops at the room the window leaves", "Escalation at the
cap still continues").
"""

from __future__ import annotations

from chatcli.continuation import continuation_request_messages, next_max_tokens, stitch
from chatcli.events import Continued, Escalated
from chatcli.messages import Message, StopReason
from chatcli.policy.journal import Journal
from chatcli.policy.prediction import Prediction

__all__ = ["PartialAnswer"]


class PartialAnswer:
    """The answer being continued (None until one is cut) and what cut it.

    `escalations` counts the cut answers continued, up to `max_escalations`.
    """

    def __init__(self, journal: Journal, *, max_escalations: int) -> None:
        self.journal = journal
        self.max_escalations = max_escalations
        self.message: Message | None = None
        self.stop = StopReason.MAX_TOKENS
        self.escalations = self.continuations = 0

    def request_messages(self, view: tuple[Message, ...]) -> tuple[Message, ...]:
        """`view`, followed by the partial answer and the request to continue it, if any."""
        return view if self.message is None else continuation_request_messages(view, self.message)

    def keep(self, message: Message, stop_reason: StopReason) -> Message:
        """Keep a cut answer as the partial (stitched to the one before it); return it."""
        self.message = message if self.message is None else stitch(self.message, message)
        self.stop = stop_reason
        return self.message

    def stitched(self, message: Message) -> Message:
        """The complete answer: `message` after the partial, if any."""
        return message if self.message is None else stitch(self.message, message)

    def may_escalate(self) -> bool:
        """Whether one more cut answer may be continued; counts it when so."""
        if self.escalations >= self.max_escalations:
            return False
        self.escalations += 1
        return True

    def continue_(self, max_tokens: int | None) -> None:
        self.continuations += 1
        self.journal.emit(Continued(attempt=self.continuations, max_tokens=max_tokens))

    def escalate(self, prediction: Prediction, produced: int, room: int | None) -> None:
        """Raise max_tokens for a continuation: doubled up to the cap, and no higher than the
        `room` the window is predicted to leave (a limit above it is certain to be rejected).
        Never lowered: a room not above the current limit means no escalation. With no limit
        set, the one the provider applied is the `produced` tokens the cut answer holds."""
        raised = next_max_tokens(prediction.max_tokens, cap=prediction.cap, produced=produced)
        if raised is not None and room is not None:
            raised = min(raised, room)
        current = prediction.max_tokens if prediction.max_tokens is not None else produced
        if raised is not None and raised > current:
            old = prediction.max_tokens
            self.journal.emit(Escalated(attempt=self.escalations, old=old, new=raised))
            prediction.max_tokens = raised

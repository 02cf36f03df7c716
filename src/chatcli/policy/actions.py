"""The protocol between the recovery policy and the drivers that run it.

The policy yields an `Action` (`Send` a request, or `Sleep` before a retry), is sent back the
`Outcome` (the provider's Response or exception; None after a sleep), and returns the `Reply`.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

from chatcli.events import Event
from chatcli.messages import Message, StopReason, Usage
from chatcli.providers.base import Request, Response

__all__ = ["Action", "Flow", "Outcome", "Reply", "Send", "Sleep"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """The answer to one `send()`.

    `message`: one assistant message (continuations stitched in). `usage`: summed over every
    provider call that reported usage (what the answer cost). `final_usage`: the last
    call's alone (None: not known, `usage` stands for it), what the prompt the answer ended
    on holds: the figure a client's context meter reads, where the sum would count a prompt
    once per call. `events`: everything recovery did, in order. `truncated`: the answer is
    partial (escalations ran out, or a cut answer was returned). `view`: the working view the
    answer is based on. `calls`: provider calls made.
    """

    message: Message
    usage: Usage
    events: tuple[Event, ...]
    truncated: bool
    view: tuple[Message, ...]
    stop_reason: StopReason
    calls: int
    final_usage: Usage | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """Action: call the provider with `request`; answer with its Response or exception."""

    request: Request


@dataclass(frozen=True, slots=True, kw_only=True)
class Sleep:
    """Action: wait `seconds` before the next action; answer with None."""

    seconds: float


Action = Send | Sleep
Outcome = Response | Exception | None
Flow = Generator[Action, Outcome, Reply]

"""`RecoveryPolicy`: the values of the recovery policy (`PolicyValues`), and `flow()`, which
runs it for one send() (see docs/design/recovery.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from chatcli.events import Event
from chatcli.history.numbers import transcript_numbers
from chatcli.messages import Message
from chatcli.policy.actions import Flow
from chatcli.policy.run import Run
from chatcli.policy.values import PolicyValues
from chatcli.providers.base import ToolSpec
from chatcli.request_settings import Settings

__all__ = ["RecoveryPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryPolicy(PolicyValues):
    """The recovery policy: its values (`PolicyValues`, which documents each) and `flow()`,
    which runs it for one send()."""

    def flow(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        settings: Settings | None = None,
        emit: Callable[[Event], None] = lambda event: None,
        history: Sequence[Message] | None = None,
    ) -> Flow:
        """The generator for one send(); `emit` receives each event as it happens. `settings`
        go with every request (a continuation's without `response_format`: see `Run`).
        `history`: the conversation `messages` were made from (a sticky view's), whose
        message numbers carried instructions cite; by default `messages` themselves."""
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        chosen = settings if settings is not None else Settings()
        numbering = transcript_numbers(messages if history is None else history, self.memos)
        run = Run(self, tuple(messages), max_tokens, tuple(tools), emit, chosen, numbering)
        return run.steps()

"""`RecoveryPolicy`: the settings of the recovery policy, and `flow()`, which runs it for one
send() (see docs/design/recovery.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.errors import ConfigError
from chatcli.events import Event
from chatcli.history.carry import Numbering
from chatcli.history.microcompact import microcompact
from chatcli.history.scan import ScanMemos
from chatcli.messages import Message
from chatcli.policy.actions import Flow
from chatcli.policy.retry import DEFAULT_MAX_RETRIES
from chatcli.policy.run import Run
from chatcli.providers.base import ToolSpec
from chatcli.request_settings import Settings
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator

__all__ = ["MICROCOMPACT_DEFAULTS", "RecoveryPolicy"]

# Microcompaction is on by default, with `MicrocompactConfig`'s defaults (a frozen value, so
# one shared instance is safe as a default argument).
MICROCOMPACT_DEFAULTS = MicrocompactConfig()


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryPolicy:
    """The settings of the recovery policy; `flow()` runs it for one send().

    `estimator`: what predictions are counted with; by default `MarginEstimator`, what
    `Client` gives a provider with no local exact counter (one default everywhere).
    `context_window` / `max_output_tokens`: the model's limits, None when unknown.
    `predictive=False` is the SPEC's plain ladder: no pre-flight, no calibration, no skips,
    every level sent in turn (the benchmark compares the two).
    `microcompact`: how old tool results are shrunk in every request's view (the first stage
    of the working view, see the design); None turns microcompaction off.
    `memos`: its owner's memoised scans of the transforms (`chatcli.history.scan`: a
    `Client`'s, the proxy app's), so a request costs what was appended since the last one;
    None reads every transcript whole. Either way, the same views.
    """

    config: RecoveryConfig = field(default_factory=RecoveryConfig)
    estimator: TokenEstimator = field(default_factory=MarginEstimator)
    context_window: int | None = None
    max_output_tokens: int | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    predictive: bool = True
    microcompact: MicrocompactConfig | None = MICROCOMPACT_DEFAULTS
    memos: ScanMemos | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("context_window", "max_output_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name}={value!r} must be a positive integer or None")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ConfigError(f"max_retries={self.max_retries!r} must be an integer >= 0")

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
        numbering = Numbering(messages if history is None else history)
        run = Run(self, tuple(messages), max_tokens, tuple(tools), emit, chosen, numbering)
        return run.steps()

    def apply_microcompaction(
        self,
        messages: Sequence[Message],
        numbering: Callable[[Message], int | None] | None = None,
    ) -> tuple[Message, ...]:
        """The first stage of every request's view: `messages` with old tool results shrunk
        (`chatcli.history.microcompact`), as they are when `microcompact` is None; its markers
        name each result's transcript number by `numbering` (None: by default, the numbers of
        `messages` themselves). Idempotent, so a flow given its output sends the view a flow
        given `messages` sends."""
        if self.microcompact is None:
            return tuple(messages)
        config, room = self.microcompact, self.context_window
        number = numbering if numbering is not None else Numbering(messages)
        return microcompact(
            messages, config, room=room, memos=self.memos, numbering=number
        ).messages

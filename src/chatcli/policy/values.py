"""`PolicyValues`: what the recovery policy runs with (its config, estimator, the model's
limits, retries, microcompaction, memos), apart from `RecoveryPolicy.flow()`.

The parts of one send() (`Run`, the `Ladder`) read these values; `RecoveryPolicy` adds the
flow that builds them. Keeping the values here lets the parts depend on them without
depending on the class that depends on the parts.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.errors import ConfigError
from chatcli.history.microcompact import microcompact
from chatcli.history.numbers import transcript_numbers
from chatcli.history.scan import ScanMemos
from chatcli.messages import Message
from chatcli.policy.retry import DEFAULT_MAX_RETRIES
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator

__all__ = ["MICROCOMPACT_DEFAULTS", "PolicyValues"]

# Microcompaction is on by default, with `MicrocompactConfig`'s defaults (a frozen value, so
# one shared instance is safe as a default argument).
MICROCOMPACT_DEFAULTS = MicrocompactConfig()


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyValues:
    """The values of the recovery policy (`RecoveryPolicy` is these plus `flow()`).

    `estimator`: what predictions are counted with; by default `MarginEstimator`, what
    `Client` gives a provider with no local exact counter (one default everywhere).
    `context_window` / `max_output_tokens`: the model's limits, None when unknown.
    `predictive=False` is the plain ladder: no pre-flight, no calibration, no skips, every
    level sent in turn.
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
        number = numbering if numbering is not None else transcript_numbers(messages, self.memos)
        return microcompact(
            messages, config, room=room, memos=self.memos, numbering=number
        ).messages

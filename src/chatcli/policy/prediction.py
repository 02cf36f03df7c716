"""Prediction: the window, the token estimate and its calibration, the output limit, what fits.

The one place that knows how large a request is predicted to be and how much room the window
leaves next to it (see docs/design/recovery.md: "The output reserve", "Lowering max_tokens
beats truncating", "Skips are trusted only when calibrated").

A request's prompt is its messages and its tool definitions: a chat template or an API puts
the definitions (as JSON) into the prompt, and a coding agent's are the larger part of its
first requests. Every request of a send carries the same tools, so they are counted as one
message before the view (`tool_definitions`), by whatever estimator counts the view, and a
count a provider states calibrates on both.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence

from chatcli.errors import ErrorInfo
from chatcli.events import MaxTokensFitted, OutputCapLowered
from chatcli.history.retain import Retention
from chatcli.history.running import request_chars, request_shape
from chatcli.history.scan import ScanMemos
from chatcli.messages import Message
from chatcli.policy.journal import Journal
from chatcli.providers.base import ToolSpec
from chatcli.request_settings import Settings, output_reserve
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator

__all__ = [
    "LAST_LEVEL_MARGIN",
    "MIN_OUTPUT_ROOM",
    "PREFLIGHT_MARGIN",
    "Prediction",
    "tool_definitions",
    "useful_output_room",
]

# The least output room worth lowering max_tokens to instead of truncating history (see
# "Lowering max_tokens beats truncating" in the design and `useful_output_room`).
MIN_OUTPUT_ROOM = 1024
# The uncalibrated estimate is a guess: recovering pre-emptively from a near miss would drop
# history that fits, so only a clear excess counts. The default estimate (the text's shape)
# lands close to tiktoken's counts, so a small margin suffices; a larger one lets
# conversations slightly over the window through to a rejected call (`benchmarks/estimates.py`
# compares margins). Tokenizers far from tiktoken's are learned from their first statement.
PREFLIGHT_MARGIN = 0.03
# A calibrated prediction for the last allowed level within this fraction over the window is
# a near miss, still sent (see "the last level only when clear" in the design).
LAST_LEVEL_MARGIN = 0.15


def useful_output_room(requested: int, limit: int) -> int:
    """The least room for the answer (tokens) that is worth lowering max_tokens to, rather than
    truncating history, when `requested` output tokens do not fit a `limit`-token window.

    A quarter of the request, at least `MIN_OUTPUT_ROOM`, at most the request itself; a
    request above the whole window counts as a request for the window.
    """
    wanted = min(requested, limit)
    return min(wanted, max(MIN_OUTPUT_ROOM, wanted // 4))


def tool_definitions(tools: Sequence[ToolSpec]) -> tuple[Message, ...]:
    """What `tools` put into a prompt, as messages to count: one system message holding their
    definitions as JSON (the form chat templates and APIs render them in); none without
    tools."""
    if not tools:
        return ()
    functions = [
        {
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": dict(tool.parameters),
            },
        }
        for tool in tools
    ]
    return (Message.system(json.dumps(functions, ensure_ascii=False)),)


class Prediction:
    """The limits of one send() as known so far, and predictions made from them.

    `window` / `cap`: the model's context window and output cap (None: unknown; the provider
    may state them). `max_tokens`: the output limit the next request asks for.
    `estimator` counts prompts; `calibrated` once a provider stated a real count.
    `fitted`: the current request's max_tokens was fitted from the provider's numbers.
    `memos`: the owner's memoised scans, which the running sums of the counts use.
    `tools`: the tool definitions every request carries, counted with each prompt.
    """

    def __init__(
        self,
        journal: Journal,
        *,
        window: int | None,
        cap: int | None,
        max_tokens: int | None,
        estimator: TokenEstimator,
        settings: Settings | None = None,
        memos: ScanMemos | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> None:
        self.journal, self.settings, self.memos = journal, settings, memos
        self.tools = tool_definitions(tools)  # counted before every view
        self.window, self.cap, self.max_tokens = window, cap, max_tokens
        # An exact count (or a margin estimate once calibrated) is no guess: trusted from the start.
        self.estimator, self.calibrated = estimator, estimator.trusted
        # What retention counts with: the estimator, calibrated on every count a provider
        # stated, in the plain ladder too (which makes no prediction from it).
        self.counter = estimator
        self.fitted = False
        # The output a retained view leaves room for: what was asked at the start (no more
        # than the cap). Not the limit fitted later: a view that grew into the room a lower
        # limit made would undo the fit.
        reserve = self.reserve()
        self.planned_reserve = reserve if cap is None else min(reserve, cap)

    def count(self, messages: Sequence[Message]) -> int:
        """The prompt of a request of `messages`: they and the tool definitions."""
        messages = (*self.tools, *messages) if self.tools else messages
        estimator = self.estimator
        # An estimate from the total chars or shape: their running sum gives the same count,
        # at the cost of what is new since the last request (`chatcli.history.running`).
        if type(estimator).count is TokenEstimator.count:
            return estimator.count_chars(request_chars(messages, self.memos), len(messages))
        if (
            isinstance(estimator, MarginEstimator)
            and type(estimator).count is MarginEstimator.count
        ):
            return estimator.count_shape(request_shape(messages, self.memos), len(messages))
        return estimator.count(messages)

    def retention(self) -> Retention | None:
        """What levels 2 and 3 keep by tokens: the room the window leaves next to the planned
        output (at least half the window: an output asked for above that is fitted to the
        room left) and the estimator's count; None when the window is unknown."""
        if self.window is None:
            return None
        room = self.window - min(self.planned_reserve, self.window // 2)
        if self.tools:  # what the definitions take is no room for messages
            room = max(1, room - self.counter.count(self.tools))
        return Retention(room=room, count=self.counter.count)

    def reserve(self) -> int:
        """The output tokens a prediction counts next to the prompt: max_tokens, or, with
        none set, the model's cap no higher than `DEFAULT_MAX_TOKENS` (see "The output
        reserve"), plus a thinking budget (`output_reserve`, the one rule the adapters use
        too); 0 when the cap is unknown too."""
        return output_reserve(self.max_tokens, self.cap, self.settings) or 0

    def fits(self, predicted: int) -> bool:
        """`predicted` prompt tokens plus the output asked for fit the window (uncalibrated:
        unless clearly over it, by more than `PREFLIGHT_MARGIN`)."""
        if self.window is None:
            return True
        margin = 1.0 if self.calibrated else 1.0 + PREFLIGHT_MARGIN
        return predicted + self.reserve() <= self.window * margin

    def near_miss(self, predicted: int) -> bool:
        """The last level is worth a call: uncalibrated (a guess), or calibrated and over the
        window by no more than `LAST_LEVEL_MARGIN`."""
        if not self.calibrated or self.window is None:
            return True
        return predicted + self.reserve() <= self.window * (1.0 + LAST_LEVEL_MARGIN)

    def leaves_room(self, predicted: int) -> bool:
        """A calibrated prediction that the view fits with a useful room for the answer, if
        not all that was asked: the level is sent with max_tokens fitted (`fit_calibrated`)."""
        if not self.calibrated or self.window is None:
            return False
        return self.window - predicted >= useful_output_room(self.reserve(), self.window)

    def room(self, messages: Sequence[Message]) -> int | None:
        """The output room the window is predicted to leave next to a request of `messages`;
        None when the window is unknown or the estimate uncalibrated (a guess would hold back
        an escalation the provider would accept)."""
        if not self.calibrated or self.window is None:
            return None
        return self.window - self.count(messages)

    def lower_to_cap(self) -> None:
        """Pre-flight: max_tokens above the model's known cap is lowered to it."""
        if self.cap is not None and self.max_tokens is not None and self.max_tokens > self.cap:
            self.journal.emit(OutputCapLowered(old=self.max_tokens, new=self.cap))
            self.max_tokens = self.cap

    def lower_output_cap(self, info: ErrorInfo) -> bool:
        """An output-cap error: lower max_tokens to the stated cap (else the known one).
        False when there is no lower limit to try."""
        new = info.output_limit if info.output_limit is not None else self.cap
        old = self.max_tokens
        if new is None or (old is not None and new >= old):
            return False
        self.cap = self.max_tokens = new
        self.journal.emit(OutputCapLowered(old=old, new=new))
        return True

    def learn(
        self, prompt: int | None, limit: int | None, messages: Sequence[Message], *, predict: bool
    ) -> None:
        """Take the provider's numbers: its limit is the window, its count of `messages`
        calibrates the counter retention uses and, when `predict`, the estimator that
        predictions (pre-flight, skips, fits) are made with."""
        if limit is not None:
            self.window = limit
        if prompt is not None:
            counted = (*self.tools, *messages)  # what the provider counted
            self.counter = self.counter.calibrated(counted, prompt)
            if predict:
                self.estimator, self.calibrated = self.counter, True

    def fit_estimated(self, estimate: int) -> bool:
        """Pre-flight: the prompt fits but the output asked for does not. The estimate is a
        guess, so the room it leaves is measured with `PREFLIGHT_MARGIN` added to it; if the
        guess is still short, the provider's numbers fit it exactly after one call."""
        if self.window is None:
            return False
        return self.fit_output(
            prompt=estimate,
            limit=self.window,
            requested=self.reserve(),
            margin=PREFLIGHT_MARGIN,
            estimated=True,
        )

    def fit_calibrated(self, messages: Sequence[Message]) -> None:
        """After a level: a calibrated prediction that the output asked for does not fit next
        to its request `messages` lowers max_tokens to the room left, not a rejected call."""
        if not self.calibrated or self.window is None:
            return
        predicted = self.count(messages)
        limit, requested = self.window, self.reserve()
        self.fit_output(prompt=predicted, limit=limit, requested=requested, estimated=True)

    def fit_stated(self, info: ErrorInfo, prompt: int | None, sent_max_tokens: int | None) -> bool:
        """Fit max_tokens to the room the provider's numbers leave, once per request."""
        requested = info.max_tokens if info.max_tokens is not None else sent_max_tokens
        if self.fitted or prompt is None or info.limit is None or requested is None:
            return False
        self.fitted = self.fit_output(prompt=prompt, limit=info.limit, requested=requested)
        return self.fitted

    def fit_output(
        self,
        *,
        prompt: int,
        limit: int,
        requested: int,
        margin: float = 0.0,
        estimated: bool = False,
    ) -> bool:
        """Lower max_tokens to the room `prompt` (grown by `margin`) leaves in the window,
        when that room is useful; False when it is not, or the output was not the problem."""
        room = limit - math.ceil(prompt * (1.0 + margin))
        if room >= requested or room < useful_output_room(requested, limit):
            return False
        fitted = MaxTokensFitted(
            old=self.max_tokens, new=room, prompt_tokens=prompt, limit=limit, estimated=estimated
        )
        self.journal.emit(fitted)
        self.max_tokens = room
        return True

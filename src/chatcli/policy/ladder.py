"""The ladder: the working view at each recovery level, and choosing, skipping and applying
levels (see docs/design/recovery.md: "Levels are cumulative", "A level that changes nothing is
never sent", "Skips are trusted only when calibrated").
"""

from __future__ import annotations

from collections.abc import Sequence

from chatcli.events import InstructionsCarried, LevelApplied, LevelSkipped, PreflightRecovery
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.carry import CarryBudget, carried_items, carrying, is_carry_block
from chatcli.history.numbers import transcript_numbers
from chatcli.history.pairing import interrupted_result, repair_tool_pairing
from chatcli.history.result import TransformResult
from chatcli.history.retain import level_target, recover
from chatcli.history.statements import Reading
from chatcli.history.truncate import LEVEL_NAMES, Number, is_compaction_notice
from chatcli.messages import Message, total_chars
from chatcli.policy.journal import Journal
from chatcli.policy.partial import PartialAnswer
from chatcli.policy.prediction import Prediction
from chatcli.policy.values import PolicyValues

__all__ = ["Ladder", "Views"]

# Levels from this one on depend on the room (levels 0 and 1 on the config only).
_FIRST_FIT_LEVEL = 2


class Views:
    """The working view at each level, computed lazily (see "cumulative"). Levels 2 and 3 keep
    what fits the room the prediction knows (`chatcli.history.retain`): they are computed
    again when it changes (a window or a calibration learned from an overflow). What the user
    messages they drop said is carried into the view (`chatcli.history.carry`), within
    `RecoveryConfig.carry_pct` of what the level keeps (`level_target`; of the view before the
    level when the window is unknown), and out of it: the view with the block stays within
    the level's target. Items are numbered by `numbering` (the transcript's message numbers),
    which the levels' markers name too."""

    def __init__(
        self,
        transcript: tuple[Message, ...],
        policy: PolicyValues,
        prediction: Prediction,
        numbering: Number | None = None,
    ) -> None:
        config = policy.config
        self._numbering = (
            numbering if numbering is not None else transcript_numbers(transcript, policy.memos)
        )
        budgeted = enforce_tool_result_budget(
            policy.apply_microcompaction(transcript, self._numbering),
            per_result_chars=config.tool_result_max_chars,
            per_turn_chars=config.tool_result_budget_chars,
            memos=policy.memos,
        )
        self._config, self._prediction = config, prediction
        repaired = repair_tool_pairing(budgeted.messages, memos=policy.memos)
        self._results: list[TransformResult] = [repaired]
        self._retention = prediction.retention() if config.retention == "fit" else None
        self._reading = Reading()  # the levels of this request read the same user messages

    def at(self, level: int) -> TransformResult:
        self._follow_prediction()
        while len(self._results) <= level:
            self._results.append(self._recover(self._results[-1].messages, len(self._results)))
        return self._results[level]

    def _recover(self, previous: tuple[Message, ...], level: int) -> TransformResult:
        config, retention = self._config, self._retention
        number = self._numbering
        if level < _FIRST_FIT_LEVEL or not config.carry_pct:
            return recover(previous, level, config, retention, number)
        if retention is not None:  # what the level keeps: the block comes out of it
            count, room = retention.count, level_target(level, config, retention.room)
            limit: int | None = room
        else:
            count = self._prediction.count
            room, limit = count(previous), None
        budget = CarryBudget(
            tokens=room * config.carry_pct // 100, count=count, room=room, limit=limit
        )
        return carrying(
            lambda m: recover(m, level, config, retention, number),
            previous,
            budget=budget,
            numbering=self._numbering,
            reading=self._reading,
        )

    def _follow_prediction(self) -> None:
        if self._config.retention != "fit":
            return
        retention = self._prediction.retention()
        if retention != self._retention:
            self._retention = retention
            del self._results[_FIRST_FIT_LEVEL:]


class Ladder:
    """The level the run is at, and the choice of the next one.

    `max_level`: the levels allowed (`max_recovery_attempts`, at most three). In predictive
    mode a level is skipped without a call when it changes nothing or is predicted to miss
    the window; the plain ladder sends every level in turn.

    A level kept by tokens (2 or 3) that was rejected is sent once more, before the next
    level, when the counts the rejection stated change its view and it is predicted to fit:
    a view chosen with an uncalibrated estimate (a tokenizer far from 4 chars per token)
    misses the window by that estimate's error, and the next level's lower share would throw
    away what the calibrated count of the same level keeps. `max_steps` bounds the levels
    sent, these included.
    """

    def __init__(
        self,
        transcript: tuple[Message, ...],
        policy: PolicyValues,
        prediction: Prediction,
        answer: PartialAnswer,
        journal: Journal,
        numbering: Number | None = None,
    ) -> None:
        self.transcript = transcript
        self.views = Views(transcript, policy, prediction, numbering)
        self.predictive = policy.predictive
        self.max_level = min(len(LEVEL_NAMES), policy.config.max_recovery_attempts)
        self.level = 0
        self.view = self.views.at(0).messages  # the view of the level applied last
        self.prediction, self.answer, self.journal = prediction, answer, journal
        self.resent: set[int] = set()  # the levels sent again with a recalibrated view
        self.counted: set[int] = set()  # the levels whose request was counted exactly

    @property
    def max_steps(self) -> int:
        """The most levels a run sends: each allowed level, and each one kept by tokens
        once more (see the class docstring)."""
        return self.max_level + max(0, self.max_level - _FIRST_FIT_LEVEL + 1)

    def request_messages(self, level: int | None = None) -> tuple[Message, ...]:
        """What a request at `level` (default: the current one) sends: its view, and the
        continuation of the partial answer when there is one."""
        view = self.view if level is None else self.views.at(level).messages
        return self.answer.request_messages(view)

    def predicted(self, level: int | None = None) -> int:
        return self.prediction.count(self.request_messages(level))

    def next_level(self) -> int | None:
        """The next level worth sending, emitting a `LevelSkipped` for each one passed over:
        the current one again when its view was recalibrated (see the class docstring)."""
        if self.recalibrated():
            self.resent.add(self.level)
            return self.level
        for level in range(self.level + 1, self.max_level + 1):  # bounded: the allowed levels
            if self.predictive and self.unchanged(level):
                self.skip(LevelSkipped(level=level, name=LEVEL_NAMES[level], unchanged=True))
            elif self.worth_sending(level):
                return level
        return None

    def recalibrated(self) -> bool:
        """The current level, kept by tokens and not sent again yet, has a new view since it
        was sent (the prediction learned a count), and the new view is predicted to fit."""
        level, prediction = self.level, self.prediction
        if not self.predictive or level < _FIRST_FIT_LEVEL or level in self.resent:
            return False
        if not prediction.calibrated or prediction.window is None or self.unchanged(level):
            return False
        return prediction.fits(self.predicted(level))

    def unchanged(self, level: int) -> bool:
        """`level` leaves the view as it is now (the one just rejected, or predicted not to
        fit before sending): e.g. level 1 on plain chat, level 2 on a short history."""
        return self.views.at(level).messages == self.view

    def worth_sending(self, level: int) -> bool:
        """`level` is worth a call: nothing predicts that its view misses the window (when
        something does, a `LevelSkipped` says so)."""
        prediction = self.prediction
        if not self.predictive or prediction.window is None:
            return True
        predicted = self.predicted(level)
        if not (prediction.fits(predicted) or prediction.leaves_room(predicted)):
            predicted = self.counted_exactly(level) or predicted
        if prediction.fits(predicted) or prediction.leaves_room(predicted):
            return True
        if level == self.max_level and prediction.near_miss(predicted):
            return True  # the last chance: refusing it fails the request
        skipped = LevelSkipped(
            level=level,
            name=LEVEL_NAMES[level],
            predicted_tokens=predicted,
            reserve=prediction.reserve(),
            limit=prediction.window,
        )
        self.skip(skipped)
        return False

    def counted_exactly(self, level: int) -> int | None:
        """`level`'s prediction after the provider's own count of its request, where one is at
        hand (`TokenEstimator.exact`), once per level: a calibration learned from another view
        (a request that a pasted file filled) misjudges this one. The count calibrates the
        prediction as a stated count does, and the level's view is made again from it."""
        if level in self.counted:
            return None
        self.counted.add(level)
        messages = self.request_messages(level)
        actual = self.prediction.estimator.exact(messages)
        if actual is None:
            return None
        self.prediction.learn(actual, None, messages, predict=True)
        return self.predicted(level)

    def skip(self, event: LevelSkipped) -> None:
        self.journal.attempt(event, event.describe())

    def apply(self, level: int, *, preflight: bool = False) -> None:
        """Move to `level`; a calibrated prediction then fits max_tokens to its view."""
        result = self.views.at(level)
        before = self.view
        self.level, self.view, self.prediction.fitted = level, result.messages, False
        notices, synthetic = _added_messages(self.transcript, result.messages)
        block = any(is_carry_block(m) for m in result.messages)
        event = LevelApplied(
            level=level,
            name=LEVEL_NAMES[level],
            report=result.report,
            kept=len(result.messages) - notices - synthetic - block,
            total=len(self.transcript),
            chars_freed=total_chars(self.transcript) - total_chars(result.messages),
            added=_added_phrases(notices, synthetic, block),
            preflight=preflight,
        )
        self.journal.attempt(event, event.action())
        self.announce_carried(f"level {level}", before, result.messages)
        self.prediction.fit_calibrated(self.request_messages(level))

    def announce_carried(
        self, by: str, before: tuple[Message, ...], after: tuple[Message, ...]
    ) -> None:
        """An `InstructionsCarried` when `after`'s block holds items `before`'s did not."""
        old, _ = carried_items(before)
        items, left_out = carried_items(after)
        new = len(set(items) - set(old))
        if new:
            event = InstructionsCarried(by=by, carried=len(items), new=new, left_out=left_out)
            self.journal.emit(event)

    def shorten_before_sending(self, estimate: int) -> bool:
        """The next request is predicted not to fit (`estimate` tokens of prompt): apply the
        first level predicted to fit, without a call. False when none is: only a calibrated
        prediction says so (an uncalibrated one is a guess, and the provider is asked)."""
        prediction = self.prediction
        assert prediction.window is not None  # for the type checker: callers checked it
        reserve = prediction.reserve()
        self.journal.emit(
            PreflightRecovery(estimate=estimate, reserve=reserve, window=prediction.window)
        )
        level = self.next_level()
        if level is not None:
            self.apply(level, preflight=True)
        return level is not None or not prediction.calibrated


def _added_messages(transcript: tuple[Message, ...], view: tuple[Message, ...]) -> tuple[int, int]:
    """(compaction notices, synthetic results for interrupted calls) in `view` that chatcli
    made: the transcript does not hold them. Only an error result equal to the one pairing
    repair makes for its call is looked up in the transcript (a linear `in`); those are few."""
    notices = max(0, _notices(view) - _notices(transcript))
    errors = [m for m in view if m.tool_result is not None and m.tool_result.is_error]
    calls = {call.id: call for m in view for call in m.tool_calls} if errors else {}
    synthetic = 0
    for message in errors:
        call = calls.get(message.tool_result.call_id) if message.tool_result else None
        if call is not None and interrupted_result(call) == message and message not in transcript:
            synthetic += 1
    return notices, synthetic


def _notices(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if is_compaction_notice(m))


def _added_phrases(notices: int, synthetic: int, block: bool = False) -> tuple[str, ...]:
    phrases = ["the compaction notice"] if notices else []
    if block:
        phrases.append("the carried instructions")
    if synthetic == 1:
        phrases.append("a result for an interrupted tool call")
    elif synthetic:
        phrases.append(f"{synthetic} results for interrupted tool calls")
    return tuple(phrases)

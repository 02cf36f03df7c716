"""Microcompaction: shrinking old tool results in the working view under pressure (no model call).

Runs on every request, on the full transcript. A tool result's age is the number of assistant
messages after it (each is one model turn that has already read it). Each result of at least
`MicrocompactConfig.min_content` chars (its original size) has a stage (texts in
`chatcli.history.stubs`): 0 whole; 1 cut to its first 2,000 and last 500 chars, with a marker
saying how much was cut and where the full output is (allowed once it is 2+ turns old, with
the defaults); 2 a one-line stub saying what it was (tool, kind, lines, chars) and how to see
it again (allowed once 4+ turns old).

**Pressure, not age alone.** While the view (the transcript with the stages applied, estimated
in tokens) stays at or below the trigger (`MicrocompactConfig.trigger`: 100,000 tokens, or half
of the room when it is known, whichever is lower), nothing moves. When it passes the trigger,
one *batch* moves results to the stage their age allows (the seed's ages choose which results
may go) until the view is at most the batch's target: room for `BATCH_ROOM_TURNS` turns of
the transcript's mean growth per turn below the trigger, but never below `BATCH_TARGET_SHARE`
of it. The batch is the eligible results after the latest start that reaches the target (all
of them when none does). The turns that follow grow on an unchanged prefix, which a provider's
prompt cache bills at a tenth of the price, until the next batch. A trigger of 0 acts on every
request and keeps nothing back: the seed's aging by age alone.

**Why from the back.** A cache reads the prefix up to the first changed message (0.1x of the
input price) and writes everything after it (1.25x). Whichever eligible results a batch moves
to reach its target, the view after it is about the target, so the turns that follow read
the same number of tokens; what differs is the one-off write, 1.25x of everything after the
batch's first change. So the prices choose the start: the latest one that still reaches the
target, i.e. the batch takes the newest eligible results first (those of the last
`truncate_turns` turns are never eligible) and keeps the results before them whole and
cached. Moving the oldest results first instead changes the view near its start, so each
batch rewrites nearly all of it. The price is what the model sees: a batch keeps the oldest
results whole and stubs those read in between, and the oldest go only when the newer ones no
longer suffice.

**Why this depth.** A batch down to `low` tokens costs per turn about `read * (low +
trigger) / 2` plus its one-off write spread over the `(trigger - low) / growth` turns it makes
room for: both fall as `low` falls, so the cache prices alone would stub everything old enough
at every batch. What holds a batch back is what the model loses, so the depth is the least
that leaves room for many turns: `BATCH_ROOM_TURNS` turns of the transcript's own growth (in
tokens per turn, from the counts the scan keeps), which adapts to sessions of small and large
steps. `BATCH_TARGET_SHARE` bounds it: however large the steps, a batch keeps at least half
of the trigger. The number of turns is measured, not derived: `python benchmarks/cache.py
--depths 4 6 8 10 12 15 100 --seeds 2026 1 2 3 4 5 6 7` compares depths by prefix reuse and
cost over whole sessions; it is the one that kept every session's reuse high at a cost below
microcompaction off's.

**Stable, so caches work.** A message's output depends only on the message and its stage (no
relative age in any text), and stages are decided by scanning the transcript one message at a
time: the decision after message p depends only on messages up to p. So appending messages
never changes an earlier decision; the output of earlier messages changes only when the
appended messages fire a batch. There is no hidden state: the same transcript always gives the
same view. With its caller's memoised scans (`chatcli.history.scan`) a request costs what was
appended since the last one, not the whole transcript again.

The pressure estimate counts each result by its ORIGINAL size at its stage: the original chars
at stage 0, the nominal cut (head + tail + marker) at stage 1, its stub at stage 2. A result
that was already cut (by the tool-result budget or an earlier microcompaction) or stubbed
counts the same, since its marker or stub states the original size. So microcompacting the
output again decides exactly the same stages and changes nothing (`chatcli.chat.session` relies on
that); and a result cut to 2,500 chars still reaches the stub stage.

Invariants: the input is never mutated; only tool-result contents change (no message is
added, dropped or reordered, so tool pairing is untouched); the same input always gives the
same output; applying it twice changes nothing more; while the view stays at or below the
trigger, nothing is shrunk.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Sequence
from typing import cast

from chatcli.config import MicrocompactConfig
from chatcli.history.result import TransformResult, build_result
from chatcli.history.scan import ScanMemos
from chatcli.history.stubs import (
    STUB_PREFIX,
    cut_head_tail,
    describe_content,
    is_microcompacted,
    nominal_cut_chars,
    original_size,
    stub,
)
from chatcli.messages import Message, Role
from chatcli.tokens.estimate import TokenEstimator

__all__ = [
    "BATCH_ROOM_TURNS",
    "BATCH_TARGET_SHARE",
    "PRESSURE_CHARS_PER_TOKEN",
    "STUB_PREFIX",
    "describe_content",
    "microcompact",
    "original_size",
]

# The deepest a batch goes: down to this share of the trigger (see "Why this depth" above).
BATCH_TARGET_SHARE = 0.5
# A batch makes room for this many turns of the transcript's mean growth per turn, unless
# that is deeper than `BATCH_TARGET_SHARE` (see "Why this depth" above).
BATCH_ROOM_TURNS = 8
# The pressure estimate's chars per token when the caller gives no estimator. Denser than
# `TokenEstimator`'s uncalibrated 4.0: tool results are mostly code, logs and JSON, which real
# tokenizers count at fewer chars per token than prose, and a trigger in tokens should not be
# passed far before it acts. A fixed ratio also keeps the decisions still when a session's
# calibrated estimate moves from one request to the next.
PRESSURE_CHARS_PER_TOKEN = 3.5
# A given estimator's ratio is rounded down to this step, so that small moves of a calibrated
# ratio do not move earlier decisions (and break the cache).
_RATIO_STEP = 0.25
_NAME = "microcompact"
_Key = tuple[MicrocompactConfig, TokenEstimator, int, bool]
# A message's transcript number (None: not known), as `chatcli.history.carry.Numbering` gives.
Number = Callable[[Message], int | None]
_DEFAULT_ESTIMATOR = TokenEstimator(chars_per_token=PRESSURE_CHARS_PER_TOKEN)


def microcompact(
    messages: Sequence[Message],
    config: MicrocompactConfig | None = None,
    *,
    estimator: TokenEstimator | None = None,
    room: int | None = None,
    memos: ScanMemos | None = None,
    numbering: Number | None = None,
) -> TransformResult:
    """Shrink old tool results once the view passes the trigger (see the module docstring).

    `estimator` turns the view's chars into tokens (default: `PRESSURE_CHARS_PER_TOKEN`; a
    given one's ratio is rounded down to a multiple of 0.25); `room` is the tokens a prompt
    may use (window minus output reserve), None when unknown; `memos`: the caller's memoised
    scans (`chatcli.history.scan`), None to read the transcript whole; `numbering`: each
    message's transcript number, which the cut markers and stubs name (None: they name the
    call id only, as for a caller without a transcript).

    The numbering is asked when a result is first staged, of the caller's message (a scan
    taken by value read other objects, which the numbering may find elsewhere or not at all),
    and a memoised scan keeps the texts it made, so the key tells only whether there is a
    numbering, not which (a key naming each request's numbering would never find a scan
    again): that is right because a message's number in the transcript never changes as the
    transcript grows (the policy's numbering, `chatcli.history.numbers`, finds the very
    message objects), so each request's numbering gives a result the number an earlier
    request's gave, and memoised and whole reads agree. Two exceptions: a copy found by its
    text only takes the number of the last equal message, and a message object sent twice
    the number of its last place, which a later equal message (or place) can move; a kept
    text then names the earlier one, of the same content.
    """
    config = config or MicrocompactConfig()
    key = (config, _pressure(estimator), config.trigger(room), numbering is not None)
    transcript = tuple(messages)
    memo = memos.of(_Scan) if memos is not None else None
    scan = memo.take(key, transcript) if memo is not None else _Scan(key)
    scan.numbering, scan.transcript = numbering, transcript
    for message in transcript[len(scan.messages) :]:
        scan.push(message)
    result = scan.result(transcript)
    scan.numbering, scan.transcript = None, ()  # not kept with the scan: this request's
    if memo is not None:
        memo.keep(scan)
    return result


def _pressure(estimator: TokenEstimator | None) -> TokenEstimator:
    """The estimator of the pressure estimate (see `PRESSURE_CHARS_PER_TOKEN`, `_RATIO_STEP`)."""
    if estimator is None:
        return _DEFAULT_ESTIMATOR
    ratio = max(_RATIO_STEP, estimator.chars_per_token // _RATIO_STEP * _RATIO_STEP)
    return TokenEstimator(chars_per_token=ratio, per_message=estimator.per_message)


class _Result:
    """One tool result the scan may shrink: where it is, its original size, its stage."""

    __slots__ = ("born", "index", "number", "numbered", "original", "stage", "stub_chars")

    def __init__(self, *, index: int, born: int, original: int) -> None:
        self.index, self.born, self.original = index, born, original
        self.number: int | None = None  # its transcript number, asked when first staged
        self.numbered = False
        self.stage = 0
        self.stub_chars = 0  # known once it is stubbed


class _Scan:
    """Microcompaction of one transcript prefix, extended one message at a time.

    Mutable, private to this module; a memo (`chatcli.history.scan`) hands each scan to one
    caller at a time.
    `view_chars` is the pressure estimate in chars (see the module docstring); `chars_in` /
    `chars_out` are what the report states (the input's and the output's real sizes).
    """

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.config, self.estimator, self.trigger, _ = cast(_Key, key)
        self.numbering: Number | None = None  # the current call's (see `microcompact`)
        self.transcript: tuple[Message, ...] = ()  # the current call's
        self.messages: list[Message] = []
        self.out: list[Message] = []  # the output for `messages`
        self.shrunk = 0  # how many messages of `out` are not the input's
        self.tools: dict[str, str] = {}
        self.open: list[_Result] = []  # the results not yet stubbed, oldest first
        self.lines: dict[int, str] = {}  # the report line of each changed message
        self.line_order: list[int] = []  # their indices, sorted
        self.cut: tuple[str, ...] | None = None  # the lines in order, once asked (None: not yet)
        self.assistants = self.view_chars = self.chars_in = self.chars_out = 0
        self.grown_chars = 0  # the view's chars with nothing shrunk: what the turns added

    def push(self, message: Message) -> None:
        index = len(self.messages)
        self.messages.append(message)
        self.out.append(message)
        chars = message.char_count
        self.chars_in += chars
        self.chars_out += chars
        if message.role is Role.ASSISTANT:
            self.assistants += 1
            self.tools.update((call.id, call.name) for call in message.tool_calls)
        original = original_size(message.text) if message.tool_result is not None else 0
        if original >= self.config.min_content:
            self.open.append(_Result(index=index, born=self.assistants, original=original))
            chars = original
        self.view_chars += chars
        self.grown_chars += chars
        if self.trigger == 0 or self.tokens() > self.trigger:
            self.batch(self.target())

    def rewind(self, count: int) -> bool:
        return False  # a batch may have moved results before `count`: scan again

    def tokens(self, chars: int | None = None) -> int:
        """The pressure estimate of the view, or of the view at `chars`."""
        chars = self.view_chars if chars is None else chars
        return self.estimator.count_chars(chars, len(self.messages))

    def target(self) -> int:
        """How far down a batch brings the view: room for `BATCH_ROOM_TURNS` turns of the
        transcript's mean growth per turn, but never below `BATCH_TARGET_SHARE` of the
        trigger (see "Why this depth" in the module docstring)."""
        growth = self.tokens(self.grown_chars) / max(self.assistants, 1)
        floor = int(self.trigger * BATCH_TARGET_SHARE)
        return max(floor, int(self.trigger - BATCH_ROOM_TURNS * growth))

    def batch(self, target: int) -> None:
        """Move the results after the latest start that brings the view to at most `target`
        tokens to the stage their age allows (all of them when none does).

        Walks the results not yet stubbed from the newest back, so the first changed message,
        and with it the prefix a cache keeps, is as late as the target allows (see "Why from
        the back" in the module docstring)."""
        config, chars = self.config, self.view_chars
        moves: list[tuple[_Result, int, str]] = []
        for result in reversed(self.open):
            if self.tokens(chars) <= target:
                break
            age = self.assistants - result.born
            if age < config.truncate_turns:
                continue  # too young to move (the newest results come first)
            stage = 2 if age >= config.summarize_turns else 1
            if stage > result.stage:
                content = self.staged(self.messages[result.index], result, stage)
                chars += self.view_size(result, stage, content) - self.view_size(result)
                moves.append((result, stage, content))
        for result, stage, content in moves:
            self.advance(result, stage, content)
        if moves:
            self.open = [result for result in self.open if result.stage < 2]

    def advance(self, result: _Result, stage: int, content: str) -> None:
        """Put `result` at `stage`, whose text is `content`."""
        before = self.view_size(result)
        result.stage = stage
        message = self.messages[result.index]
        if stage == 2:
            result.stub_chars = len(content)
        self.view_chars += self.view_size(result) - before
        current = self.out[result.index].text
        if content == current:
            return
        self.chars_out += len(content) - len(current)
        self.out[result.index] = message.with_text(content)
        if result.index not in self.lines:
            self.shrunk += 1
            bisect.insort(self.line_order, result.index)
        self.lines[result.index] = self.report_line(message, content)
        self.cut = None

    def view_size(self, result: _Result, stage: int | None = None, content: str = "") -> int:
        """What `result` counts in the pressure estimate at its stage, or at `stage` with the
        text `content`."""
        stage = result.stage if stage is None else stage
        if stage == 0:
            return result.original
        if stage == 1:
            call_id, number, config = self.call_id(result), self.number(result), self.config
            return nominal_cut_chars(
                result.original, call_id, config.head_chars, config.tail_chars, number
            )
        return len(content) if content else result.stub_chars

    def staged(self, message: Message, result: _Result, stage: int) -> str:
        """The text of `message` at `stage` (itself when already there)."""
        content, call_id = message.text, self.call_id(result)
        if is_microcompacted(content, stage):
            return content
        if stage == 1:
            config = self.config
            return cut_head_tail(
                content,
                result.original,
                call_id,
                config.head_chars,
                config.tail_chars,
                self.number(result),
            )
        tool_result = message.tool_result
        return stub(
            content,
            original=result.original,
            call_id=call_id,
            tool=self.tools.get(call_id, "unknown tool"),
            is_error=tool_result is not None and tool_result.is_error,
            number=self.number(result),
        )

    def number(self, result: _Result) -> int | None:
        """The transcript number of `result`, asked once (see `microcompact`)."""
        if not result.numbered and self.numbering is not None:
            # The caller's object, not the one read: a scan taken by value read another's.
            result.number = self.numbering(self.transcript[result.index])
            result.numbered = True
        return result.number

    def call_id(self, result: _Result) -> str:
        tool_result = self.messages[result.index].tool_result
        return tool_result.call_id if tool_result is not None else "?"

    def report_line(self, message: Message, content: str) -> str:
        call_id = message.tool_result.call_id if message.tool_result else "?"
        label = f"tool result {call_id} ({self.tools.get(call_id, 'unknown tool')})"
        if content.startswith(STUB_PREFIX):
            return f"{label}: {len(message.text):,} chars -> one-line stub"
        return f"{label}: {len(message.text):,} -> {len(content):,} chars"

    def result(self, before: tuple[Message, ...]) -> TransformResult:
        """The transform's result for `before`, the transcript this scan has read."""
        # Where nothing changed, `out` holds the messages the scan read: the caller's own
        # objects when the transcript extends the one of the previous call, else equal ones.
        if self.cut is None:  # kept until a result moves: most requests move none
            self.cut = tuple(map(self.lines.__getitem__, self.line_order))
        return build_result(
            _NAME,
            before,
            tuple(self.out) if self.shrunk else before,
            cut=self.cut,
            chars_freed=self.chars_in - self.chars_out,
            chars_before=self.chars_in,
        )

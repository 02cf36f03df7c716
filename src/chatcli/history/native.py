"""The working view around a provider's own compaction (`CompactionPart`).

A provider that compacts on its own servers answers with an opaque compaction (Anthropic's
`compaction` block, OpenAI's encrypted `compaction` item) that the client keeps and sends
back; the provider then ignores everything before it (Anthropic drops the blocks before it;
OpenAI lets the client drop the items before the latest one). `native_view` makes the view
say so before anything counts or cuts it:

- For the provider and model that made it, the latest compaction replaces the span before
  it: every non-system message before its message is dropped, but the ones the provider
  returned with it (`CompactionPart.keeps`) and chatcli's block of carried instructions
  (moved after it: the provider reads nothing before its compaction), and its message is
  split into the compaction alone and the rest of the answer (so a recovery level can keep
  the one without the other; the adapters send them back as one answer).
- Any other compaction is removed, with the messages it keeps: it is never shown to another
  provider or model. The span before it, which the transcript keeps whole, is sent instead,
  and chatcli's own compaction summarises it when it is too big (the fallback the strategy
  prescribes).

Invariants: system messages are kept, in order; messages after the latest own compaction are
kept whole and in order; the input is never mutated; the same input gives the same output.
With its caller's memoised scans (`chatcli.history.scan`) a request costs what was appended
since the last one (and a new compaction, the messages read before it).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import replace
from typing import cast

from chatcli.history.result import TransformResult, build_result
from chatcli.history.scan import ScanMemos, run_scan, unchanged
from chatcli.messages import Message, Role, total_chars

__all__ = ["is_anchor", "native_view", "owns"]

_NAME = "native compaction"


def owns(message: Message, provider: str | None, model: str | None) -> bool:
    """Whether `message` carries a compaction that `provider` and `model` made."""
    part = message.compaction
    return part is not None and part.provider == provider and part.model == model


def is_anchor(message: Message) -> bool:
    """A compaction alone in its message (as `native_view` leaves it), which stands for the
    whole span before it, or chatcli's block of carried instructions
    (`chatcli.history.carry`), which quotes what left the view: the recovery levels keep
    either like a system message, never cut it."""
    if message.carried is not None:
        return True
    return message.compaction is not None and not message.parts and not message.tool_calls


def native_view(
    messages: Sequence[Message],
    *,
    provider: str | None,
    model: str | None,
    memos: ScanMemos | None = None,
) -> TransformResult:
    """`messages` as the provider sees them (see the module docstring); `provider` None (a
    provider without native compaction) removes every compaction. `memos`: the caller's
    memoised scans (`chatcli.history.scan`), so a request costs what was appended since the
    last one; None reads the transcript whole."""
    before = tuple(messages)
    if memos is not None:
        return run_scan(memos, _Scan, (provider, model), before)
    kept, dropped = _view(before, provider, model)
    return build_result(_NAME, before, kept, dropped=dropped)


def _view(
    before: tuple[Message, ...], provider: str | None, model: str | None
) -> tuple[tuple[Message, ...], list[str]]:
    """The view of `before` and the report's lines of what it dropped."""
    if not any(m.compaction is not None for m in before):
        return before, []
    latest = max((i for i, m in enumerate(before) if owns(m, provider, model)), default=None)
    foreign = [
        i for i, m in enumerate(before) if m.compaction is not None and not owns(m, provider, model)
    ]
    start = None if latest is None else latest - _keeps(before[latest])
    copies = {j for i in foreign for j in range(i - _keeps(before[i]), i)}
    kept: list[Message] = []
    for i, message in enumerate(before):
        replaced = start is not None and i < start and message.role is not Role.SYSTEM
        if replaced or i in copies:
            continue
        if i == latest:
            kept.extend(_split(message))
            # chatcli's carried block quotes what the span said: it goes on after it.
            kept.extend(m for m in before[: start or 0] if m.carried is not None)
        elif message.compaction is not None:
            kept.extend(_without_compaction(message))
        else:
            kept.append(message)
    dropped = []
    if latest is not None:
        span = sum(1 for m in before[:start] if m.role is not Role.SYSTEM)
        dropped.append(f"{span} messages before the provider's compaction (it replaces them)")
    if foreign:
        dropped.append(f"{len(foreign)} compaction(s) made by another provider or model")
    return tuple(kept), dropped


class _Scan:
    """The view of a transcript prefix, extended one message at a time (mutable, private; a
    memo hands it to one caller at a time, see `chatcli.history.scan`).

    A message without a compaction, read after every compaction so far, is in the view as it
    is (no compaction read yet keeps or replaces it): it is appended. A compaction makes the
    view anew from the messages read (`_view`), once per compaction read."""

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.provider, self.model = cast(tuple[str | None, str | None], key)
        self.messages: list[Message] = []
        self.chars = [0]  # chars of the first n messages read, for each n
        self.view: list[Message] = []  # the view of the messages read
        self.view_chars = 0
        self.dropped: list[str] = []  # the report's lines
        self.compactions = 0  # the messages read that carry a compaction

    def push(self, message: Message) -> None:
        chars = message.char_count
        self.messages.append(message)
        self.chars.append(self.chars[-1] + chars)
        if message.compaction is None:
            self.view.append(message)
            self.view_chars += chars
        else:
            self.compactions += 1
            self.remake()

    def rewind(self, count: int) -> bool:
        removed = self.messages[count:]
        del self.messages[count:], self.chars[count + 1 :]
        lost = sum(1 for m in removed if m.compaction is not None)
        if lost:
            self.compactions -= lost
            self.remake()
        elif removed:  # the newest messages of the view are the ones removed
            del self.view[len(self.view) - len(removed) :]
            self.view_chars -= sum(m.char_count for m in removed)
        return True

    def remake(self) -> None:
        view, self.dropped = _view(tuple(self.messages), self.provider, self.model)
        self.view, self.view_chars = list(view), total_chars(view)

    def result(self, transcript: tuple[Message, ...]) -> TransformResult:
        chars = self.chars[-1]
        if not self.compactions:
            return unchanged(_NAME, transcript, chars)
        return build_result(
            _NAME,
            transcript,
            tuple(self.view),
            dropped=self.dropped,
            chars_before=chars,
            chars_freed=chars - self.view_chars,
        )


def _keeps(message: Message) -> int:
    """How many messages right before `message` its compaction keeps."""
    return max(message.compaction.keeps, 0) if message.compaction is not None else 0


def _split(message: Message) -> tuple[Message, ...]:
    """The compaction alone, then the rest of the answer when there is any."""
    alone = Message(role=Role.ASSISTANT, compaction=message.compaction)
    return (alone, *_without_compaction(message))


def _without_compaction(message: Message) -> tuple[Message, ...]:
    rest = replace(message, compaction=None)
    return (rest,) if rest.parts or rest.tool_calls or rest.provider_details else ()

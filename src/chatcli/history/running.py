"""The size of a request as a running sum: what the pre-flight estimate counts, per request
only what is new since the last one.

Every request's view mostly extends the previous request's (the same message objects, from
the memoised transforms), so its size is kept as prefix sums in a memoised scan (the
caller's `chatcli.history.scan.ScanMemos`): counting a request costs a pointer comparison per
message it shares with a kept one, and the size of the messages after them. Two sizes, one
scan each (the scan's key): chars (`request_chars`, the flat estimate's) and the shape estimate
(`request_shape`, `chatcli.tokens.MarginEstimator`'s). The sum is the same as summing the
messages one by one (`chatcli.messages.total_chars`; the shape's in the same order), whatever
the memo holds; without one, the messages are summed one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from chatcli.history.scan import ScanMemos
from chatcli.messages import Message
from chatcli.tokens.estimate import message_shape_tokens

__all__ = ["request_chars", "request_shape"]

# What each scan sums, by its key.
_SIZES: dict[Hashable, Callable[[Message], float]] = {
    "chars": lambda message: message.char_count,
    "shape": message_shape_tokens,
}


def request_chars(messages: Sequence[Message], memos: ScanMemos | None = None) -> int:
    """`total_chars(messages)`, from the kept sums of a request they extend."""
    return int(_request_size("chars", messages, memos))


def request_shape(messages: Sequence[Message], memos: ScanMemos | None = None) -> float:
    """The sum of `messages`' shape estimates (`message_shape_tokens`), from the kept sums of
    a request they extend."""
    return _request_size("shape", messages, memos)


def _request_size(key: Hashable, messages: Sequence[Message], memos: ScanMemos | None) -> float:
    if memos is None:
        sums = _Sums(key)
        for message in messages:
            sums.push(message)
        return sums.sums[-1]
    memo = memos.of(_Sums)
    scan = memo.extend(key, tuple(messages))
    size = scan.sums[-1]
    memo.keep(scan)
    return size


class _Sums:
    """The size (by `key`: see `_SIZES`) of the first p messages read, for every p (mutable,
    private: a memo hands it to one caller at a time)."""

    __slots__ = ("key", "messages", "size", "sums")

    def __init__(self, key: Hashable) -> None:
        self.key, self.size = key, _SIZES[key]
        self.messages: list[Message] = []
        self.sums: list[float] = [0]

    def push(self, message: Message) -> None:
        self.messages.append(message)
        self.sums.append(self.sums[-1] + self.size(message))

    def rewind(self, count: int) -> bool:
        del self.messages[count:]
        del self.sums[count + 1 :]
        return True

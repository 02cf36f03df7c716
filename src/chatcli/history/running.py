"""The size of a request as a running sum: what the pre-flight estimate counts, per request
only what is new since the last one.

Every request's view mostly extends the previous request's (the same message objects, from
the memoised transforms), so its size in chars is kept as prefix sums in a memoised scan
(`chatcli.history.memo`): counting a request costs a pointer comparison per message it shares
with a kept one, and the chars of the messages after them. The sum is exact: the same as
`chatcli.messages.total_chars`, whatever the memo holds.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from chatcli.history.memo import ScanMemo
from chatcli.messages import Message

__all__ = ["request_chars"]


def request_chars(messages: Sequence[Message]) -> int:
    """`total_chars(messages)`, from the kept sums of a request they extend."""
    scan = _SUMS.extend(None, tuple(messages))
    chars = scan.sums[-1]
    _SUMS.keep(scan)
    return chars


class _Sums:
    """The chars of the first p messages read, for every p (mutable, private: `_SUMS` hands
    it to one caller at a time)."""

    __slots__ = ("key", "messages", "sums")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.messages: list[Message] = []
        self.sums = [0]

    def push(self, message: Message) -> None:
        self.messages.append(message)
        self.sums.append(self.sums[-1] + message.char_count)

    def rewind(self, count: int) -> bool:
        del self.messages[count:]
        del self.sums[count + 1 :]
        return True


_SUMS = ScanMemo(_Sums)

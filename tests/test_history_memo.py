"""The memoised scans (`chatcli.history.scan.ScanMemo`): which kept scan a transcript takes,
and what the memo keeps, counted by the messages each scan is fed; and that each owner's
memos are its own."""

from __future__ import annotations

import copy
from collections.abc import Hashable

from chatcli.history.scan import MEMO_RECENT, ScanMemo, ScanMemos
from chatcli.messages import Message


class Counted:
    """A scan that notes every message it is fed (in `fed`, shared by all its memo's
    scans) and can always rewind."""

    fed: list[Message]

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.messages: list[Message] = []

    def push(self, message: Message) -> None:
        self.messages.append(message)
        Counted.fed.append(message)

    def rewind(self, count: int) -> bool:
        del self.messages[count:]
        return True


SYSTEM = Message.system("You are a helpful assistant.")


def chat(number: int, turns: int) -> tuple[Message, ...]:
    """Conversation `number`: the one system prompt object every conversation starts with,
    then `turns` messages of its own."""
    own = (Message.user(f"conversation {number}, message {i}") for i in range(turns))
    return (SYSTEM, *own)


def fed_by(memo: ScanMemo[Counted], transcript: tuple[Message, ...], key: str = "k") -> int:
    """How many messages the scan of `transcript` was fed, the scan kept again."""
    Counted.fed = []
    scan = memo.extend(key, transcript)
    assert scan.messages == list(transcript)
    memo.keep(scan)
    return len(Counted.fed)


def test_conversations_taken_in_turn_each_find_their_own_scan() -> None:
    # 200 conversations sharing their system prompt (the proxy's streams): each request
    # after the first of its conversation is fed only what it added, not the whole of it.
    memo = ScanMemo(Counted)
    chats = [chat(n, 20) for n in range(200)]
    assert sum(fed_by(memo, c) for c in chats) == 200 * 21
    assert sum(fed_by(memo, c) for c in chats) == 0  # each asks again: nothing new
    grown = [(*c, Message.assistant("an answer"), Message.user("and?")) for c in chats]
    assert [fed_by(memo, g) for g in grown] == [2] * 200


def test_a_short_shared_prefix_does_not_take_another_conversations_scan() -> None:
    memo = ScanMemo(Counted)
    first, second = chat(1, 30), chat(2, 30)
    fed_by(memo, first)
    assert fed_by(memo, second) == 31  # a new scan: sharing the system prompt is not enough
    assert fed_by(memo, first) == 0  # so the first conversation's is still there


def test_a_changed_end_rewinds_the_conversations_scan() -> None:
    memo = ScanMemo(Counted)
    transcript = chat(1, 30)
    fed_by(memo, transcript)
    changed = (*transcript[:-2], Message.user("edited"))
    assert fed_by(memo, changed) == 1  # rewound to the 29 it shares, fed the new one


def test_messages_equal_by_value_reuse_a_recent_scan() -> None:
    memo = ScanMemo(Counted)
    fed_by(memo, chat(1, 30))
    for n in range(2, MEMO_RECENT):  # other conversations kept since, within the recent
        fed_by(memo, chat(n, 3))
    again = tuple(Message.user(m.text) if m is not SYSTEM else m for m in chat(1, 30))
    assert fed_by(memo, (*again, Message.user("more"))) == 1


def test_scans_are_bounded_by_number_and_by_messages_read() -> None:
    by_number = ScanMemo(Counted, size=3)
    chats = [chat(n, 10) for n in range(4)]
    for c in chats:
        fed_by(by_number, c)
    assert len(by_number.scans) == 3
    assert fed_by(by_number, chats[0]) == 11  # the least recently kept went first
    assert fed_by(by_number, chats[3]) == 0

    by_messages = ScanMemo(Counted, messages=25)
    for c in chats:
        fed_by(by_messages, c)
    assert by_messages.held <= 25 and len(by_messages.scans) == 2
    assert sum(len(scans) for scans in by_messages.ends.values()) == 2
    assert fed_by(by_messages, chats[3]) == 0


def test_scans_of_other_settings_are_not_taken() -> None:
    memo = ScanMemo(Counted)
    transcript = chat(1, 10)
    fed_by(memo, transcript, key="a")
    assert fed_by(memo, transcript, key="b") == 11
    assert fed_by(memo, transcript, key="a") == 0


def test_each_owners_memos_are_its_own_and_bounded() -> None:
    # Two owners (two Clients, say) never see each other's scans; each memo is bounded.
    first, second = ScanMemos(size=2), ScanMemos()
    transcript = chat(1, 10)
    assert fed_by(first.of(Counted), transcript) == 11
    assert fed_by(second.of(Counted), transcript) == 11  # not the first owner's scan
    assert fed_by(first.of(Counted), transcript) == 0
    for n in range(2, 5):
        fed_by(first.of(Counted), chat(n, 3))
    assert len(first.of(Counted).scans) == 2
    first.clear()
    assert not first.of(Counted).scans and second.of(Counted).scans


def test_take_same_takes_only_a_scan_of_the_very_objects() -> None:
    # Numbers found by identity: a scan of equal copies, or of a start with one copy in it,
    # would number other objects.
    memo = ScanMemo(Counted)
    transcript = chat(1, 20)
    memo.keep(memo.extend("k", transcript))
    grown = (*transcript, Message.user("more"))
    scan = memo.take_same("k", grown)
    assert scan.messages == list(transcript)  # the kept scan, nothing read yet
    memo.keep(scan)
    copied = (transcript[0], Message.user(transcript[1].text), *transcript[2:])
    assert copied == transcript
    assert memo.take_same("k", copied).messages == []  # a new scan
    assert memo.take_same("k", tuple(copy.copy(m) for m in transcript)).messages == []
    assert memo.take_same("k", grown).messages == list(transcript)  # still kept

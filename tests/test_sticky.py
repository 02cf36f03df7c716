"""Sticky views through `Client`: after a recovery cut, the following requests of the same
conversation start with the cut view, byte for byte, until the window forces a new cut.

The provider really enforces its window (`tests/fakes.WindowedProvider`: its own tokenizer,
real corpus error bodies through the SDK), and every request it was sent is compared as JSON.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from chatcli.chat.session import ChatSession
from chatcli.events import LevelApplied
from chatcli.history.sticky import StickyView, history_digest
from chatcli.messages import Message
from chatcli.recovery import Client, Reply
from chatcli.serialize import message_from_dict, message_to_dict
from chatcli.store import SessionStore
from tests.fakes import WindowedProvider

# Prose of a few hundred chars per message, each turn different (no repeated text).
WORDS = tuple(
    ["the", "cache", "reuses", "an", "exact", "prefix", "of", "the", "previous", "request", "only"]
)


def prose(turn: int, chars: int = 300) -> str:
    words = [WORDS[(turn * 7 + i * 3) % len(WORDS)] for i in range(chars // 5)]
    return f"turn {turn}: " + " ".join(words)[:chars]


def wire(messages: Sequence[Message]) -> list[str]:
    """Messages as their bytes on the wire (their lossless JSON form)."""
    return [json.dumps(message_to_dict(m), sort_keys=True) for m in messages]


def chat(client: Client, turns: int) -> tuple[list[Message], list[Reply]]:
    """A chat of `turns` requests, each the previous history plus its answer and a question."""
    history = [Message.system("You are terse."), Message.user(prose(0))]
    replies = []
    for turn in range(1, turns + 1):
        reply = client.send(history, max_tokens=400)
        replies.append(reply)
        history = [*history, reply.message, Message.user(prose(turn))]
    return history, replies


def last_requests(provider: WindowedProvider, replies: list[Reply]) -> list[list[str]]:
    """The request each reply's answer came from, on the wire."""
    ends = itertools.accumulate(reply.calls for reply in replies)
    return [wire(provider.requests[end - 1].messages) for end in ends]


def cut(reply: Reply) -> bool:
    return any(isinstance(event, LevelApplied) for event in reply.events)


def test_after_a_cut_requests_share_its_prefix_until_the_window_forces_a_new_one() -> None:
    provider = WindowedProvider(window=3_000)
    client = Client(provider, microcompact=None)
    _, replies = chat(client, 30)
    cuts = [i for i, reply in enumerate(replies) if cut(reply)]
    assert len(cuts) >= 2, "the window forces more than one cut over 30 turns"
    sent = last_requests(provider, replies)
    for first, second in itertools.pairwise(cuts):
        assert second - first >= 3, "a cut leaves room for several turns"
        kept = wire(replies[first].view)
        for i in range(first + 1, second):
            assert sent[i][: len(kept)] == kept  # the cut prefix, byte for byte
            assert len(sent[i]) > len(kept)  # and the turns after it
        assert sent[second][: len(kept)] != kept
    assert client.sticky_view is not None
    assert client.sticky_view.view == replies[cuts[-1]].view


def test_without_the_sticky_view_the_cut_slides_every_turn() -> None:
    """The anchor: the same chat where each request is sent by a new Client (no memory of
    the cut) recomputes it from the whole history, so the first kept message moves."""
    provider = WindowedProvider(window=3_000)
    history = [Message.system("You are terse."), Message.user(prose(0))]
    firsts = []
    for turn in range(1, 30):
        reply = Client(provider, microcompact=None).send(history, max_tokens=400)
        if cut(reply):
            firsts.append(reply.view[2])  # after the system prompt and the pinned goal
        history = [*history, reply.message, Message.user(prose(turn))]
    # A new first message at every turn: it slides (it may come back to one it had when a
    # turn's cut was made from a stated count and the next one from the estimate).
    assert len(firsts) > 5
    assert all(a is not b for a, b in itertools.pairwise(firsts))


def cut_chat(provider: WindowedProvider) -> tuple[Client, list[Message], StickyView]:
    """A client whose chat the window has cut: (it, the history, the cut)."""
    client = Client(provider, microcompact=None)
    history, _ = chat(client, 17)
    assert client.sticky_view is not None
    return client, history, client.sticky_view


def test_a_persisted_sticky_view_is_restored_and_applies_to_the_same_history() -> None:
    provider = WindowedProvider(window=3_000)
    _, history, sticky = cut_chat(provider)
    # Persisted as JSON, restored in another process: equal messages, other objects.
    restored = StickyView(
        upto=sticky.upto,
        view=tuple(message_from_dict(message_to_dict(m)) for m in sticky.view),
        digest=sticky.digest,
    )
    copy = [message_from_dict(message_to_dict(m)) for m in history]
    again = Client(provider, microcompact=None, sticky_view=restored)
    reply = again.send(copy, max_tokens=400)
    assert not cut(reply)
    assert wire(provider.requests[-1].messages)[: len(sticky.view)] == wire(sticky.view)
    assert again.sticky_view == restored


def test_a_history_that_does_not_extend_the_cut_one_drops_the_sticky_view() -> None:
    provider = WindowedProvider(window=3_000)
    client, history, sticky = cut_chat(provider)
    # The application edits a message the cut kept: the kept view no longer holds it.
    edited = list(history)
    edited[sticky.upto - 1] = Message.user("an edited question")
    client.send(edited, max_tokens=400)
    sent = [m.text for m in provider.requests[-1].messages]
    assert "an edited question" in sent and history[sticky.upto - 1].text not in sent
    assert client.sticky_view != sticky


def test_a_sticky_view_must_cover_something() -> None:
    with pytest.raises(ValueError, match="upto=0"):
        StickyView(upto=0, view=(), digest="")


def test_the_digest_is_the_same_for_equal_messages_only() -> None:
    messages = [Message.system("s"), Message.user("u")]
    copy = [message_from_dict(message_to_dict(m)) for m in messages]
    assert history_digest(messages) == history_digest(copy)
    assert history_digest(messages) != history_digest([messages[0], Message.user("v")])


# -- the chat: the cut lives with the session in the store ----------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore(tmp_path / "s.db") as opened:
        yield opened


def open_chat(store: SessionStore, provider: WindowedProvider, **options: Any) -> ChatSession:
    """A chat whose view only recovery cuts (no auto-compaction: its summary calls would go
    to the same provider)."""
    return ChatSession.open(
        store,
        provider,
        provider_name="test",
        model="m",
        max_tokens=400,
        auto_compaction=False,
        **options,
    )


def test_in_the_chat_requests_share_the_cut_prefix_also_after_a_reopen(
    store: SessionStore,
) -> None:
    provider = WindowedProvider(window=3_000)
    session = open_chat(store, provider)
    replies = [session.send(prose(turn)).reply for turn in range(18)]
    cuts = [i for i, reply in enumerate(replies) if cut(reply)]
    assert cuts, "the window forced a cut"
    kept = wire(replies[cuts[-1]].view)
    # Reopened from the store (another process): the next requests start with the cut.
    reopened = open_chat(store, provider, resume=session.info.id)
    more = [reopened.send(prose(turn)).reply for turn in range(18, 21)]
    assert not any(cut(reply) for reply in more[:2])
    everything = replies + more
    sent = last_requests(provider, everything)
    for i in range(cuts[-1] + 1, len(everything)):
        if cut(everything[i]):
            break
        assert sent[i][: len(kept)] == kept and len(sent[i]) > len(kept)
    assert len(reopened.transcript) == 2 * 21  # nothing lost


def test_a_compaction_or_clear_replaces_the_cut(store: SessionStore) -> None:
    provider = WindowedProvider(window=3_000)
    session = open_chat(store, provider)
    for turn in range(18):
        session.send(prose(turn))
    assert store.sticky_view(session.info.id) is not None
    session.clear()
    assert store.sticky_view(session.info.id) is None
    session.send("a new start")
    assert [m.text for m in provider.requests[-1].messages] == ["a new start"]
    reopened = open_chat(store, provider, resume=session.info.id)
    assert reopened.working_messages()[0].text == "a new start"

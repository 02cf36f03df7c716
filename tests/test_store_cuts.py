"""The store's conversation cuts (m009): a proxied conversation's latest sticky cut, found by
the conversation's key whichever of its sessions holds it, kept as that session's own sticky
view (so the chat reads it too). On a new SQLite file and a new PostgreSQL database."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from chatcli.messages import Message, Usage
from chatcli.store import SessionInfo, SessionStore, StoredStickyView

pytest_plugins = ("tests.postgres",)


def session_with_a_view(store: SessionStore, session_id: str) -> int:
    store.save_session(replace(SessionInfo.new(provider="openai", model="m"), id=session_id))
    store.append_messages(session_id, [Message.user("q"), Message.assistant("a")])
    return store.record_request(
        session_id, tag="proxy", model="m", usage=Usage(), view=[Message.user("q")]
    )


def test_the_latest_cut_of_a_conversation_is_found_by_its_key(location: str | Path) -> None:
    with SessionStore(location) as store:
        assert store.conversation_cut("conv") is None
        root = session_with_a_view(store, "conv")
        branch = session_with_a_view(store, "conv~1")
        first = StoredStickyView(request_id=root, upto=1, digest="d1")
        store.cut_conversation("conv", "conv", first)
        assert store.conversation_cut("conv") == ("conv", first)
        assert store.sticky_view("conv") == first  # the session's own, as the chat reads it
        latest = StoredStickyView(request_id=branch, upto=1, digest="d2")
        store.cut_conversation("conv", "conv~1", latest)
        assert store.conversation_cut("conv") == ("conv~1", latest)
        assert store.sticky_view("conv") == first  # the root keeps its own cut
        # A compaction or clear of the session (in a chat that resumed it) drops its cut.
        store.save_sticky_view("conv~1", None)
        assert store.conversation_cut("conv") is None


def test_a_chats_cut_has_no_digest_and_a_deleted_session_takes_its_cut_along(
    location: str | Path,
) -> None:
    with SessionStore(location) as store:
        request = session_with_a_view(store, "chat")
        store.save_sticky_view("chat", StoredStickyView(request_id=request, upto=1))
        assert store.sticky_view("chat") == StoredStickyView(request_id=request, upto=1)
        store.cut_conversation("chat", "chat", StoredStickyView(request_id=request, upto=1))
        store.delete_session("chat")
        assert store.conversation_cut("chat") is None

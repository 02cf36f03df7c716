"""What the user typed in a message whose copy in the view was cut (`typed_parts`): the cut's
marker is chatcli's text, not the user's, and is never carried as their words."""

from __future__ import annotations

from chatcli.history.carry import carried_items, carry_instructions
from chatcli.history.retain import CUT_NOTE
from chatcli.history.text import cut_middle, without_markers
from chatcli.history.typed import typed_parts
from chatcli.messages import Message
from tests.carry_cases import BANANA, SYSTEM

# A long message typed by the user: a rule at its head, chatter, a limit at its tail.
LONG = (
    f"{BANANA}\n\n"
    + "I spent the morning reading the release notes and most of it is routine. " * 30
    + "\n\nKeep every answer under two hundred words."
)


def _cut_copy() -> str:
    """`LONG` as a level cuts it in a view (`retain`): head and tail around a marker that
    names the message's transcript number."""
    cut = cut_middle(LONG, 400, note=f"{CUT_NOTE} #1")
    assert "chars cut" in cut and len(cut) <= 400
    return cut


def test_without_markers_keeps_the_pieces_apart() -> None:
    cut = _cut_copy()
    plain = without_markers(cut)
    assert "chars cut" not in plain and "transcript keeps" not in plain
    assert plain.startswith(BANANA)
    assert plain.endswith("Keep every answer under two hundred words.")
    assert without_markers(LONG) == LONG


def test_typed_parts_of_a_cut_copy_hold_no_marker() -> None:
    parts = typed_parts(_cut_copy())
    assert parts and not any("chars cut" in p or "transcript keeps" in p for p in parts)
    assert BANANA in parts


def test_a_cut_copy_that_leaves_the_view_carries_its_words_not_its_marker() -> None:
    # A sticky re-cut: the view being cut again holds the earlier cut copy of message #1.
    before = [SYSTEM, Message.user(_cut_copy()), Message.assistant("OK."), Message.user("Next.")]
    after = [SYSTEM, Message.user("Next.")]
    items, _ = carried_items(carry_instructions(before, after).messages)
    texts = [item.text for item in items]
    assert "Never use the word BANANA; the deploy code is ZX-4471." in " ".join(texts)
    assert not any("chars cut" in t or "transcript keeps" in t for t in texts), texts

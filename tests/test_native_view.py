"""The working view around a provider's own compaction (chatcli.history.native), and the
recovery levels that never cut it."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.config import RecoveryConfig
from chatcli.history.native import is_anchor, native_view, owns
from chatcli.history.retain import Retention, retain
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import CompactionPart, Message, Role, TextPart, ToolCall
from chatcli.serialize import message_from_dict, message_to_dict
from tests.strategies import conversations

BLOCK = {"type": "compaction", "content": "Summary: the user builds a parser."}
PART = CompactionPart(
    provider="anthropic",
    model="claude-sonnet-4-6",
    summary="Summary: the user builds a parser.",
    provider_details=BLOCK,
)


def _answer(text: str = "Next, the lexer.", part: CompactionPart = PART) -> Message:
    return Message(role=Role.ASSISTANT, parts=(TextPart(text=text),), compaction=part)


def _history() -> tuple[Message, ...]:
    return (
        Message.system("You are terse."),
        Message.user("Build a parser."),
        Message.assistant("Sure: " + "x" * 500),
        Message.user("Go on."),
        _answer(),
        Message.user("And the lexer?"),
    )


def test_own_compaction_replaces_the_span_before_it() -> None:
    result = native_view(_history(), provider="anthropic", model="claude-sonnet-4-6")
    roles = [(m.role, m.text, m.compaction is not None) for m in result.messages]
    assert roles == [
        (Role.SYSTEM, "You are terse.", False),
        (Role.ASSISTANT, "", True),  # the compaction alone
        (Role.ASSISTANT, "Next, the lexer.", False),  # the rest of the answer
        (Role.USER, "And the lexer?", False),
    ]
    assert result.report.dropped == (
        "3 messages before the provider's compaction (it replaces them)",
    )


def test_only_the_latest_own_compaction_counts() -> None:
    older = _answer("first", replace_summary("older"))
    history = (Message.user("a"), older, Message.user("b"), _answer(), Message.user("c"))
    view = native_view(history, provider="anthropic", model="claude-sonnet-4-6").messages
    assert [m.compaction.summary for m in view if m.compaction] == [PART.summary]
    assert view[-1].text == "c"


def replace_summary(summary: str) -> CompactionPart:
    return CompactionPart(
        provider=PART.provider,
        model=PART.model,
        summary=summary,
        provider_details={"type": "compaction", "content": summary},
    )


def test_another_model_or_provider_never_sees_it() -> None:
    for provider, model in (("anthropic", "claude-opus-4-6"), ("openai", "gpt-5"), (None, None)):
        view = native_view(_history(), provider=provider, model=model).messages
        assert all(m.compaction is None for m in view)
        assert [m.text for m in view][:4] == [m.text for m in _history()][:4]  # span back
        assert view[4].text == "Next, the lexer."


def test_an_answer_of_only_a_compaction_leaves_nothing_for_another_model() -> None:
    history = (Message.user("a"), Message(role=Role.ASSISTANT, compaction=PART), Message.user("b"))
    view = native_view(history, provider="openai", model="gpt-5").messages
    assert [m.text for m in view] == ["a", "b"]


def test_input_is_not_mutated_and_output_is_stable() -> None:
    history = _history()
    first = native_view(history, provider="anthropic", model="claude-sonnet-4-6")
    second = native_view(history, provider="anthropic", model="claude-sonnet-4-6")
    assert history == _history() and first == second
    plain = (Message.user("hi"),)
    assert native_view(plain, provider="anthropic", model="m").messages is plain


def _long_view() -> tuple[Message, ...]:
    view = native_view(_history(), provider="anthropic", model="claude-sonnet-4-6").messages
    tail: list[Message] = []
    for i in range(30):
        call = ToolCall(id=f"c{i}", name="read", arguments={"path": f"f{i}"})
        tail += [Message.assistant("", (call,)), Message.tool(f"c{i}", "y" * 2000)]
    return (*view, *tail, Message.user("finish it"))


def test_the_seed_levels_keep_the_compaction() -> None:
    for level in (2, 3):
        kept = apply_recovery_level(_long_view(), level, RecoveryConfig()).messages
        anchors = [m for m in kept if is_anchor(m)]
        assert anchors == [Message(role=Role.ASSISTANT, compaction=PART)]
        assert kept[-1].text == "finish it"
        assert len(kept) < len(_long_view())


def test_the_fit_levels_keep_the_compaction() -> None:
    retention = Retention(room=3000, count=lambda ms: sum(m.char_count for m in ms) // 4)
    for level in (2, 3):
        kept = retain(_long_view(), level, RecoveryConfig(), retention).messages
        assert sum(1 for m in kept if is_anchor(m)) == 1
        assert len(kept) < len(_long_view())


def test_a_compaction_survives_the_store() -> None:
    message = _answer()
    assert message_from_dict(message_to_dict(message)) == message
    assert message.char_count == len("Next, the lexer.") + len(PART.summary)


def _window() -> tuple[Message, ...]:
    """OpenAI's compaction on demand, as the session adds it: the user messages the API
    returned, then the item keeping them."""
    item = {"type": "compaction", "id": "cmp_001", "encrypted_content": "encrypted-summary"}
    part = CompactionPart(provider="openai", model="gpt-5", provider_details=item, keeps=2)
    anchor = Message(role=Role.ASSISTANT, compaction=part)
    return (Message.user("Build a parser."), Message.user("Go on."), anchor)


def test_the_messages_a_compaction_keeps_stay_before_it() -> None:
    history = (*_history()[:4], *_window(), Message.user("And the lexer?"))
    result = native_view(history, provider="openai", model="gpt-5")
    assert [m.text for m in result.messages] == [
        "You are terse.",
        "Build a parser.",
        "Go on.",
        "",  # the item
        "And the lexer?",
    ]
    assert result.messages[3].compaction is not None
    assert result.report.dropped == (
        "3 messages before the provider's compaction (it replaces them)",
    )
    assert message_from_dict(message_to_dict(history[-2])) == history[-2]  # keeps is stored


def test_another_provider_drops_a_compaction_with_what_it_keeps() -> None:
    history = (*_history()[:4], *_window(), Message.user("And the lexer?"))
    view = native_view(history, provider="anthropic", model="claude-sonnet-4-6").messages
    assert view == (*_history()[:4], Message.user("And the lexer?"))


OWNERS = (("anthropic", "claude-sonnet-4-6"), ("anthropic", "claude-opus-4-6"), ("openai", "gpt-5"))


@st.composite
def compacted_conversations(draw: st.DrawFn) -> list[Message]:
    """A conversation whose assistant messages may carry a compaction of any owner."""
    messages = draw(conversations())
    out = []
    for message in messages:
        if message.role is Role.ASSISTANT and draw(st.booleans()):
            provider, model = draw(st.sampled_from(OWNERS))
            part = CompactionPart(
                provider=provider, model=model, summary="s", provider_details={"type": "compaction"}
            )
            message = replace(message, compaction=part)
        out.append(message)
    return out


@settings(max_examples=150, deadline=None)
@given(compacted_conversations(), st.sampled_from((*OWNERS, (None, None))))
def test_native_view_invariants(messages: list[Message], owner: tuple[str, str]) -> None:
    provider, model = owner
    before = tuple(messages)
    view = native_view(before, provider=provider, model=model).messages
    assert before == tuple(messages)  # never mutated
    assert native_view(before, provider=provider, model=model).messages == view
    systems = [m for m in before if m.role is Role.SYSTEM]
    assert [m for m in view if m.role is Role.SYSTEM] == systems
    assert all(m.compaction is None or owns(m, provider, model) for m in view)
    own = [i for i, m in enumerate(before) if owns(m, provider, model)]
    if own:  # the latest own compaction leads, what follows it is kept whole
        anchors = [m for m in view if m.compaction is not None]
        assert anchors == [Message(role=Role.ASSISTANT, compaction=before[own[-1]].compaction)]
        after = [_stripped(m) for m in before[own[-1] + 1 :] if m.role is not Role.SYSTEM]
        after = [m for m in after if m is not None]
        others = [m for m in view if m.role is not Role.SYSTEM]
        assert others[len(others) - len(after) :] == after
    assert native_view(view, provider=provider, model=model).messages == view  # idempotent
    for level in (2, 3):
        kept = apply_recovery_level(view, level, RecoveryConfig()).messages
        assert [m for m in kept if is_anchor(m)] == [m for m in view if is_anchor(m)]


def _stripped(message: Message) -> Message | None:
    """`message` without a compaction (None: nothing left), as another owner's view has it."""
    if message.compaction is None:
        return message
    rest = replace(message, compaction=None)
    return rest if rest.parts or rest.tool_calls or rest.provider_details else None

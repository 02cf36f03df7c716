"""The pre-flight estimate as a running sum (`chatcli.history.running`): always the exact
total, and per request only the chars of what is new."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.history.running import request_chars, request_shape
from chatcli.history.scan import ScanMemos
from chatcli.messages import Message, total_chars
from chatcli.policy.journal import Journal
from chatcli.policy.prediction import Prediction
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator, message_shape_tokens
from tests.strategies import assistant_messages

# Short texts: the sums, not the texts, are under test (long ones make generation slow).
MESSAGES = st.lists(
    st.one_of(
        st.builds(Message.user, st.text(max_size=40)),
        st.builds(Message.assistant, st.text(max_size=40)),
        assistant_messages(max_calls=2),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(MESSAGES, MESSAGES, st.integers(0, 12))
def test_the_sum_is_the_total_whatever_was_counted_before(
    first: list[Message], other: list[Message], cut: int
) -> None:
    # Extended, cut back, branched off, or another conversation: always the exact total.
    memos = ScanMemos()
    for messages in (first, first + other, first[:cut], first[:cut] + other, other):
        for kept in (memos, None):
            assert request_chars(messages, kept) == total_chars(messages)
            # The shape estimate's sum too, in the same order: the same float, bit for bit.
            shape = sum(message_shape_tokens(m) for m in messages)
            assert request_shape(messages, kept) == shape


class CountingMessage(Message):
    """A message that counts how often its size is asked for."""

    __slots__ = ()
    asked: list[int] = []  # noqa: RUF012 - a class-wide tally, on purpose

    @property
    def char_count(self) -> int:
        CountingMessage.asked.append(1)
        return len(self.text)


def test_an_appended_turn_costs_only_its_own_chars() -> None:
    memos = ScanMemos()
    history = tuple(CountingMessage(role=m.role, parts=m.parts) for m in long_chat(2_000))
    grown = (*history, CountingMessage.user("one more turn"))
    expected = total_chars(grown)
    request_chars(history, memos)
    CountingMessage.asked.clear()
    assert request_chars(grown, memos) == expected
    assert len(CountingMessage.asked) == 1  # the new message's size only


def long_chat(count: int) -> list[Message]:
    return [
        Message.user(f"question {i}") if i % 2 else Message.assistant(f"answer {i}")
        for i in range(count)
    ]


def test_prediction_counts_with_the_sum_what_the_estimator_counts() -> None:
    messages = long_chat(50)
    for estimator in (TokenEstimator(), MarginEstimator(chars_per_token=3.1, margin=0.2)):
        prediction = Prediction(
            Journal(lambda event: None), window=1000, cap=None, max_tokens=None, estimator=estimator
        )
        assert prediction.count(messages) == estimator.count(messages)

"""The size of a request as the pre-flight estimate counts it: its chars
(`request_chars`, the flat estimate's) and its shape estimate (`request_shape`,
`chatcli.tokens.MarginEstimator`'s), summed message by message in order.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatcli.messages import Message
from chatcli.tokens import message_shape_tokens

__all__ = ["request_chars", "request_shape"]


def request_chars(messages: Sequence[Message]) -> int:
    """The chars of `messages` (`chatcli.messages.total_chars`)."""
    return sum(message.char_count for message in messages)


def request_shape(messages: Sequence[Message]) -> float:
    """The sum of `messages`' shape estimates (`message_shape_tokens`), in order."""
    total = 0.0
    for message in messages:
        total += message_shape_tokens(message)
    return total

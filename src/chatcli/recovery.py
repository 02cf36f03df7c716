"""The recovery engine: a pure policy, and `Client`, which drives it over a provider.

The policy (`chatcli.policy`) is a sans-IO generator: it yields an action — `Send` a request,
or `Sleep` before a retry — and is sent back the outcome; it returns the `Reply`, or raises
`ContextRecoveryError` / `ProviderError`. `Client` (`chatcli.client`) performs the actions,
sync or async. What one send() does, in which order, and why: docs/design/recovery.md.

This module is where the public names live; the code is in the modules named above.
"""

from __future__ import annotations

from chatcli.client import Client
from chatcli.policy.actions import Action, Flow, Outcome, Reply, Send, Sleep
from chatcli.policy.policy import RecoveryPolicy
from chatcli.policy.prediction import (
    LAST_LEVEL_MARGIN,
    MIN_OUTPUT_ROOM,
    PREFLIGHT_MARGIN,
    useful_output_room,
)
from chatcli.policy.retry import DEFAULT_MAX_RETRIES, RETRY_BASE_DELAY, RETRY_MAX_DELAY, retry_delay
from chatcli.policy.run import MAX_OUTPUT_CAP_LOWERINGS

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "LAST_LEVEL_MARGIN",
    "MAX_OUTPUT_CAP_LOWERINGS",
    "MIN_OUTPUT_ROOM",
    "PREFLIGHT_MARGIN",
    "RETRY_BASE_DELAY",
    "RETRY_MAX_DELAY",
    "Action",
    "Client",
    "Flow",
    "Outcome",
    "RecoveryPolicy",
    "Reply",
    "Send",
    "Sleep",
    "retry_delay",
    "useful_output_room",
]

"""Settings, resolved once from an injected environment mapping.

A bad value is an error that names the variable and the value; it is never silently ignored.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields

from chatcli.errors import ConfigError

__all__ = ["RecoveryConfig", "read_int"]


def read_int(environ: Mapping[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    """Read integer `name` from `environ`; unset or blank gives `default`."""
    raw = environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryConfig:
    """The recovery settings of SPEC section 5. Values are validated on construction."""

    max_recovery_attempts: int = 3
    max_token_escalations: int = 2
    emergency_keep_messages: int = 10
    tool_result_budget_chars: int = 200_000
    tool_result_max_chars: int = 20_000

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            minimum = _MINIMUMS[f.name]
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ConfigError(f"{f.name}={value!r} must be an integer >= {minimum}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RecoveryConfig:
        env = os.environ if environ is None else environ
        return cls(
            **{
                f.name: read_int(env, _ENV_NAMES[f.name], f.default, minimum=_MINIMUMS[f.name])  # type: ignore[arg-type]
                for f in fields(cls)
            }
        )


_ENV_NAMES = {
    "max_recovery_attempts": "CHATCLI_MAX_RECOVERY_ATTEMPTS",
    "max_token_escalations": "CHATCLI_MAX_TOKEN_ESCALATIONS",
    "emergency_keep_messages": "CHATCLI_EMERGENCY_KEEP_MESSAGES",
    "tool_result_budget_chars": "CHATCLI_TOOL_RESULT_BUDGET_CHARS",
    "tool_result_max_chars": "CHATCLI_TOOL_RESULT_MAX_CHARS",
}
# Zero recovery attempts or escalations is a meaningful choice (turn the feature off);
# zero kept messages or a zero budget is not.
_MINIMUMS = {
    "max_recovery_attempts": 0,
    "max_token_escalations": 0,
    "emergency_keep_messages": 1,
    "tool_result_budget_chars": 1,
    "tool_result_max_chars": 1,
}

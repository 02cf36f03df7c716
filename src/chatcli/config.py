"""The library's recovery configuration (`RecoveryConfig` and its parts), resolved once from an
injected environment mapping.

A bad value is an error that names the variable and the value; it is never silently ignored.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from chatcli.errors import ConfigError

__all__ = [
    "COMPACTIONS",
    "CONTEXT_EDITS",
    "RETENTIONS",
    "CompactionConfig",
    "MicrocompactConfig",
    "RecoveryConfig",
    "read_int",
]

_INTEGER = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)


def read_int(environ: Mapping[str, str], name: str, default: int, *, minimum: int = 1) -> int:
    """Read integer `name` from `environ`; unset gives `default`.

    Only plain ASCII decimal integers are accepted (surrounding blanks aside): an empty value,
    "3.5", "1e3", "1_000" or non-ASCII digits are errors that name the variable and the value,
    never silently ignored or reinterpreted.
    """
    raw = environ.get(name)
    if raw is None:
        return default
    if not _INTEGER.fullmatch(raw):
        what = "is empty" if raw.strip() == "" else "is not an integer"
        raise ConfigError(f"{name}={raw!r} {what}")
    value = int(raw)
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be at least {minimum}")
    return value


RETENTIONS = ("fit", "seed")
COMPACTIONS = ("auto", "native", "chatcli", "off")
CONTEXT_EDITS = ("tool_uses", "thinking")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryConfig:
    """The library's recovery settings (`from_env`: the CHATCLI_* variables). Values are
    validated on construction.

    `retention`: "fit" (the default) keeps, at levels 2 and 3, the newest messages that fit
    `target_pct` / `nuclear_pct` percent of the room the window leaves, when the window is
    known (`chatcli.history.retain`); "seed" keeps the seed's fixed counts. The counts
    (`emergency_keep_messages` at level 2) are the floor of "fit" and all of "seed".
    `carry_pct`: the most (percent) of what a level keeps that the instructions and facts of
    removed user messages may take in the view (`chatcli.history.carry`: rules and
    constraints first, up to half of it, facts and preferences in what is left; the
    block comes out of the level's target, never on top of it; in a compaction, a share of
    its budget); 0 carries nothing. The block takes only what it holds: the cap binds in
    small windows, where it was chosen (benchmarks/fidelity.py on the tuning sentences,
    docs/configuration.md).

    `compaction` (`CHATCLI_COMPACTION`) chooses who compacts: "auto" (the default) the
    provider on its own servers where the model supports it, chatcli's own verified compaction
    otherwise or when the provider's fails; "native" only the provider; "chatcli" only
    chatcli; "off" neither (overflow recovery still applies).
    `context_editing` (`CHATCLI_CONTEXT_EDITING`, a comma list): what the provider's context
    editing clears from old turns with its native compaction, where the adapter takes it
    (Anthropic): "tool_uses" (old tool results), "thinking" (old thinking blocks).
    """

    max_recovery_attempts: int = 3
    max_token_escalations: int = 2
    emergency_keep_messages: int = 10
    tool_result_budget_chars: int = 200_000
    tool_result_max_chars: int = 20_000
    retention: str = "fit"
    target_pct: int = 75
    nuclear_pct: int = 40
    carry_pct: int = 85
    compaction: str = "auto"
    context_editing: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check_ranges(self, _RECOVERY_BOUNDS)
        unknown = [e for e in self.context_editing if e not in CONTEXT_EDITS]
        if isinstance(self.context_editing, str) or unknown:
            raise ConfigError(
                f"context_editing={self.context_editing!r} must be a tuple of "
                f"{', '.join(CONTEXT_EDITS)}"
            )
        if self.retention not in RETENTIONS:
            raise ConfigError(
                f"retention={self.retention!r} must be one of {', '.join(RETENTIONS)}"
            )
        if self.compaction not in COMPACTIONS:
            raise ConfigError(
                f"compaction={self.compaction!r} must be one of {', '.join(COMPACTIONS)}"
            )
        if self.nuclear_pct > self.target_pct:
            raise ConfigError(
                f"CHATCLI_RECOVERY_NUCLEAR_PCT={self.nuclear_pct} (nuclear_pct) must be at most "
                f"CHATCLI_RECOVERY_TARGET_PCT={self.target_pct} (target_pct): level 3 keeps "
                "less than level 2"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RecoveryConfig:
        env = os.environ if environ is None else environ
        defaults = {f.name: f.default for f in fields(cls) if f.name in _RECOVERY_ENV}
        ints = _ints_from_env(env, _RECOVERY_ENV, _RECOVERY_BOUNDS, defaults)  # type: ignore[arg-type]
        retention = _read_choice(env, _RETENTION_ENV, RETENTIONS)
        compaction = _read_choice(env, _STRATEGY_ENV, COMPACTIONS)
        editing = _read_list(env, _EDITING_ENV, CONTEXT_EDITS)
        return cls(retention=retention, compaction=compaction, context_editing=editing, **ints)


def _read_choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    """`name`'s value, one of `choices` (case and blanks aside); unset: the first."""
    raw = env.get(name)
    if raw is None:
        return choices[0]
    value = raw.strip().lower()
    if value not in choices:
        raise ConfigError(f"{name}={raw!r} must be one of {', '.join(choices)}")
    return value


def _read_list(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> tuple[str, ...]:
    """`name`'s comma-separated values, each one of `choices` (case and blanks aside); unset or
    empty: none."""
    values = [v.strip().lower() for v in env.get(name, "").split(",") if v.strip()]
    unknown = [v for v in values if v not in choices]
    if unknown:
        raise ConfigError(
            f"{name}={env[name]!r}: {unknown[0]!r} is not one of {', '.join(choices)}"
        )
    return tuple(dict.fromkeys(values))


_RETENTION_ENV = "CHATCLI_RETENTION"
_EDITING_ENV = "CHATCLI_CONTEXT_EDITING"
_STRATEGY_ENV = "CHATCLI_COMPACTION"
_RECOVERY_ENV = {
    "max_recovery_attempts": "CHATCLI_MAX_RECOVERY_ATTEMPTS",
    "max_token_escalations": "CHATCLI_MAX_TOKEN_ESCALATIONS",
    "emergency_keep_messages": "CHATCLI_EMERGENCY_KEEP_MESSAGES",
    "tool_result_budget_chars": "CHATCLI_TOOL_RESULT_BUDGET_CHARS",
    "tool_result_max_chars": "CHATCLI_TOOL_RESULT_MAX_CHARS",
    "target_pct": "CHATCLI_RECOVERY_TARGET_PCT",
    "nuclear_pct": "CHATCLI_RECOVERY_NUCLEAR_PCT",
    "carry_pct": "CHATCLI_CARRY_PCT",
}
# Zero recovery attempts or escalations is a meaningful choice (turn the feature off);
# zero kept messages or a zero budget is not, nor is a share of the room of 0%.
_RECOVERY_BOUNDS: dict[str, tuple[int, int | None]] = {
    "max_recovery_attempts": (0, None),
    "max_token_escalations": (0, None),
    "emergency_keep_messages": (1, None),
    "tool_result_budget_chars": (1, None),
    "tool_result_max_chars": (1, None),
    "target_pct": (1, 100),
    "nuclear_pct": (1, 100),
    "carry_pct": (0, 100),
}


def _check_ranges(obj: object, bounds: Mapping[str, tuple[int, int | None]]) -> None:
    """Raise ConfigError for a field that is not an int within its (minimum, maximum)."""
    for name, (minimum, maximum) in bounds.items():
        value = getattr(obj, name)
        too_big = maximum is not None and isinstance(value, int) and value > maximum
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum or too_big:
            upper = "" if maximum is None else f" and <= {maximum}"
            raise ConfigError(f"{name}={value!r} must be an integer >= {minimum}{upper}")


def _ints_from_env(
    env: Mapping[str, str],
    names: Mapping[str, str],
    bounds: Mapping[str, tuple[int, int | None]],
    defaults: Mapping[str, int],
) -> dict[str, int]:
    """Read each field's variable; a value above its maximum names the variable too."""
    values: dict[str, int] = {}
    for name, variable in names.items():
        minimum, maximum = bounds[name]
        value = read_int(env, variable, defaults[name], minimum=minimum)
        if maximum is not None and value > maximum:
            raise ConfigError(f"{variable}={env[variable]!r} must be at most {maximum}")
        values[name] = value
    return values


@dataclass(frozen=True, slots=True, kw_only=True)
class MicrocompactConfig:
    """Shrinking of old tool results under pressure (see `chatcli.history.microcompact`).

    Nothing is shrunk while the working view stays at or below the trigger: `trigger_tokens`,
    or `trigger_pct` percent of the room (window minus output reserve) when the room is known,
    whichever is lower; a trigger of 0 (either setting) shrinks by age alone on every request,
    as the seed did. Past the trigger, a tool result of at least `min_content` chars (its
    original size) may be cut to `head_chars` + `tail_chars` once `truncate_turns` assistant
    turns followed it, and replaced by a one-line stub once `summarize_turns` did. So
    `summarize_turns >= truncate_turns` (equal skips the cut stage) and `head_chars +
    tail_chars < min_content` (else the cut stage keeps results of the smallest sizes whole);
    anything else is a ConfigError.
    """

    min_content: int = 3000
    truncate_turns: int = 2
    summarize_turns: int = 4
    head_chars: int = 2000
    tail_chars: int = 500
    trigger_tokens: int = 100_000
    trigger_pct: int = 50

    def __post_init__(self) -> None:
        _check_ranges(self, _MICROCOMPACT_BOUNDS)
        # Each check names the variables and the fields, so the message fits both ways in.
        if self.summarize_turns < self.truncate_turns:
            raise ConfigError(
                f"{self._setting('summarize_turns')} must be at least "
                f"{self._setting('truncate_turns')}: the stub stage cannot come before the cut "
                "stage"
            )
        if self.head_chars + self.tail_chars >= self.min_content:
            raise ConfigError(
                f"{self._setting('head_chars')} + {self._setting('tail_chars')} must be less "
                f"than {self._setting('min_content')}: a result of that size would be kept "
                "whole at the cut stage"
            )

    def _setting(self, name: str) -> str:
        return f"{_MICROCOMPACT_ENV[name]}={getattr(self, name)} ({name})"

    def trigger(self, room: int | None = None) -> int:
        """The view size (tokens) above which microcompaction acts; 0: on every request."""
        if room is None:
            return self.trigger_tokens
        return min(self.trigger_tokens, max(room, 0) * self.trigger_pct // 100)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> MicrocompactConfig:
        env = os.environ if environ is None else environ
        defaults = {f.name: f.default for f in fields(cls)}
        return cls(**_ints_from_env(env, _MICROCOMPACT_ENV, _MICROCOMPACT_BOUNDS, defaults))  # type: ignore[arg-type]


_MICROCOMPACT_ENV = {
    "min_content": "CHATCLI_MICROCOMPACT_MIN_CONTENT",
    "truncate_turns": "CHATCLI_MICROCOMPACT_TRUNCATE_TURNS",
    "summarize_turns": "CHATCLI_MICROCOMPACT_SUMMARIZE_TURNS",
    "head_chars": "CHATCLI_MICROCOMPACT_HEAD_CHARS",
    "tail_chars": "CHATCLI_MICROCOMPACT_TAIL_CHARS",
    "trigger_tokens": "CHATCLI_MICROCOMPACT_TRIGGER_TOKENS",
    "trigger_pct": "CHATCLI_MICROCOMPACT_TRIGGER_PCT",
}
# A zero tail is a meaningful choice (keep only the head), and so is a zero trigger (the seed's
# always-on aging); a zero age would shrink results the model has not even read yet.
_MICROCOMPACT_BOUNDS: dict[str, tuple[int, int | None]] = {
    "min_content": (1, None),
    "truncate_turns": (1, None),
    "summarize_turns": (1, None),
    "head_chars": (1, None),
    "tail_chars": (0, None),
    "trigger_tokens": (0, None),
    "trigger_pct": (0, 100),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionConfig:
    """/compact and auto-compaction settings (see `chatcli.compaction`).

    `auto_compact_pct`: compact before a request whose estimate passes this percentage of the
    effective window (window minus output reserve). `keep_turns`: user turns kept verbatim
    after the summary. `summary_tokens`: max_tokens of each summary call. The circuit breaker
    opens after `max_failures` consecutive failed compactions or compactions that freed less
    than `min_freed_pct` percent of the tokens.
    """

    auto_compact_pct: int = 80
    keep_turns: int = 2
    summary_tokens: int = 4000
    min_freed_pct: int = 10
    max_failures: int = 3

    def __post_init__(self) -> None:
        _check_ranges(self, _COMPACTION_BOUNDS)

    def trigger(self, window: int | None, output_reserve: int | None = None) -> int | None:
        """The prompt size (tokens) past which auto-compaction runs: `auto_compact_pct` of the
        room `window` leaves after `output_reserve`; None when the window is unknown. The
        provider's native compaction is asked to trigger there too."""
        if window is None:
            return None
        return max(window - (output_reserve or 0), 0) * self.auto_compact_pct // 100

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CompactionConfig:
        env = os.environ if environ is None else environ
        defaults = {f.name: f.default for f in fields(cls)}
        return cls(**_ints_from_env(env, _COMPACTION_ENV, _COMPACTION_BOUNDS, defaults))  # type: ignore[arg-type]


_COMPACTION_ENV = {
    "auto_compact_pct": "CHATCLI_AUTO_COMPACT_PCT",
    "keep_turns": "CHATCLI_COMPACT_KEEP_TURNS",
    "summary_tokens": "CHATCLI_COMPACT_SUMMARY_TOKENS",
    "min_freed_pct": "CHATCLI_COMPACT_MIN_FREED_PCT",
    "max_failures": "CHATCLI_COMPACT_MAX_FAILURES",
}
# 100% means "only when the effective window is full"; a 0% breaker threshold disables the
# "freed too little" strike while keeping the failure strike.
_COMPACTION_BOUNDS: dict[str, tuple[int, int | None]] = {
    "auto_compact_pct": (1, 100),
    "keep_turns": (1, None),
    "summary_tokens": (1, None),
    "min_freed_pct": (0, 100),
    "max_failures": (1, None),
}

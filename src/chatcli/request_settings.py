"""Request settings: how the model should answer (sampling, stops, tools, formats, reasoning).

`Settings` is the one neutral value for everything a caller may tune on a request besides the
messages, the tools and the output limit. It is validated when built (a bad value is a
`ValueError` naming the field), merged with `merge` (a per-call value wins over a client's
default), and carried by `Request.settings` to the adapters, each of which maps what its API
takes (see each adapter's module docstring; a setting an API cannot take is an error there, or
a documented, logged drop where providers disagree).

`extra` is for anything else: a mapping merged into the provider's request body last (top-level
keys; it wins over what the adapter built), in the provider's own wire names.

The output reserve (`output_reserve`) lives here too, so that an adapter choosing the
`max_tokens` it sends and the recovery planner predicting whether a prompt fits count the same
number: the answer's limit plus the thinking budget, which the providers that take one
(Anthropic, Gemini) count inside the output limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Final, Literal

from chatcli.continuation import DEFAULT_MAX_TOKENS
from chatcli.errors import ConfigError

__all__ = [
    "JSON_MODE",
    "REASONING_EFFORTS",
    "TOOL_CHOICE_MODES",
    "Settings",
    "UnsupportedSetting",
    "default_output_limit",
    "output_reserve",
]

# `response_format="json"`: any JSON object, no schema (where the API has such a mode).
JSON_MODE: Final = "json"
# The efforts the reasoning APIs name (OpenAI's list is the longest; the others take a subset).
REASONING_EFFORTS: Final = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
# `tool_choice` modes; any other string is the name of the one tool the model must call.
TOOL_CHOICE_MODES: Final = frozenset({"auto", "none", "required"})

ToolChoice = Literal["auto", "none", "required"] | str
ResponseFormat = Literal["json"] | Mapping[str, Any]


class UnsupportedSetting(ConfigError):
    """A setting the provider's API cannot take, raised by the adapter before any call (the
    message names the setting and says what the API takes instead)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """How the model should answer. None (or empty) means "not set": the provider's default.

    - `temperature` (0-2), `top_p` (0-1): sampling.
    - `stop`: stop sequences (a string or a sequence of strings; kept as a tuple).
    - `seed`: best-effort reproducible sampling.
    - `tool_choice`: "auto", "none", "required" (some tool), or the name of one tool to call.
    - `parallel_tool_calls`: False asks for at most one tool call per answer.
    - `response_format`: "json" (any JSON object) or a JSON schema (a mapping) the answer must
      follow.
    - `reasoning_effort`: one of `REASONING_EFFORTS`.
    - `thinking_budget`: tokens the model may think before answering (0: no thinking); it
      counts toward the output reserve (`output_reserve_extra`).
    - `extra`: merged into the provider's request body last, for anything else.

    Tool settings only apply to requests that offer tools (a summary request has none).
    """

    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: ResponseFormat | None = None
    reasoning_effort: str | None = None
    thinking_budget: int | None = None
    extra: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        _check_number("temperature", self.temperature, 0.0, 2.0)
        _check_number("top_p", self.top_p, 0.0, 1.0)
        object.__setattr__(self, "stop", _stops(self.stop))
        _check_int("seed", self.seed, minimum=None)
        _check_tool_choice(self.tool_choice)
        if self.parallel_tool_calls is not None and not isinstance(self.parallel_tool_calls, bool):
            raise ValueError(
                f"parallel_tool_calls must be True or False, got {self.parallel_tool_calls!r}"
            )
        object.__setattr__(self, "response_format", _response_format(self.response_format))
        if self.reasoning_effort is not None and self.reasoning_effort not in REASONING_EFFORTS:
            raise ValueError(
                f"reasoning_effort must be one of {sorted(REASONING_EFFORTS)},"
                f" got {self.reasoning_effort!r}"
            )
        _check_int("thinking_budget", self.thinking_budget, minimum=0)
        object.__setattr__(self, "extra", _frozen_mapping("extra", self.extra))

    def merge(self, override: Settings | None) -> Settings:
        """These settings with `override`'s set values on top (`extra` merged key by key, the
        override's keys winning): a client's defaults merged with one call's settings."""
        if override is None:
            return self
        changes: dict[str, Any] = {
            f.name: getattr(override, f.name)
            for f in fields(override)
            if f.name != "extra" and getattr(override, f.name) is not None
        }
        return replace(self, **changes, extra={**self.extra, **override.extra})

    @property
    def output_reserve_extra(self) -> int:
        """Output tokens these settings add to the answer's own limit (the thinking budget)."""
        return self.thinking_budget or 0

    def is_set(self, name: str) -> bool:
        """Whether the field `name` has a value (not None, not empty)."""
        value = getattr(self, name)
        return value is not None and value != {} and value != ()


# The chat's default output limit is at most the window divided by this: the rest is the
# conversation's (a local server given no limit writes until its window is full).
_WINDOW_SHARE = 4


def default_output_limit(window: int | None, cap: int | None) -> int:
    """The output limit a chat sends when the user set none: `DEFAULT_MAX_TOKENS`, no more
    than the model's output `cap` and a quarter of its `window` (each when known). An
    answer that reaches it is continued (max_tokens escalation), so the limit bounds one
    call, not the answer."""
    limits = [DEFAULT_MAX_TOKENS]
    if cap is not None:
        limits.append(cap)
    if window is not None:
        limits.append(max(1, window // _WINDOW_SHARE))
    return min(limits)


def output_reserve(
    max_tokens: int | None, cap: int | None, settings: Settings | None = None
) -> int | None:
    """The output tokens a request reserves next to its prompt, and the `max_tokens` to send
    when the caller set none: `max_tokens`, else the model's `cap` but no more than
    `DEFAULT_MAX_TOKENS` (a long answer: reserving a 64k cap would cut history for output
    most answers never use), plus the thinking budget, clipped to the cap. None when neither
    the limit nor the cap is known (nothing to reserve: the server answers into what is left).
    """
    if max_tokens is None and cap is None:
        return None
    if max_tokens is not None:
        answer = max_tokens
    else:
        assert cap is not None  # checked above
        answer = min(cap, DEFAULT_MAX_TOKENS)
    extra = settings.output_reserve_extra if settings is not None else 0
    if cap is None or not extra:
        return answer + extra
    return max(answer, min(answer + extra, cap))  # the thinking never asks past the cap


# -- validation ---------------------------------------------------------------------------


def _check_number(name: str, value: object, low: float, high: float) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not low <= value <= high:
        raise ValueError(f"{name} must be between {low:g} and {high:g}, got {value!r}")


def _check_int(name: str, value: object, *, minimum: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")


def _stops(stop: object) -> tuple[str, ...] | None:
    if stop is None:
        return None
    stops = (stop,) if isinstance(stop, str) else stop
    if not isinstance(stops, Sequence) or not all(isinstance(s, str) and s for s in stops):
        raise ValueError(f"stop must be a non-empty string or a sequence of them, got {stop!r}")
    return tuple(stops) or None


def _check_tool_choice(choice: object) -> None:
    if choice is not None and (not isinstance(choice, str) or not choice.strip()):
        raise ValueError(
            f"tool_choice must be one of {sorted(TOOL_CHOICE_MODES)} or a tool's name,"
            f" got {choice!r}"
        )


def _response_format(value: object) -> ResponseFormat | None:
    if value is None or value == JSON_MODE:
        return value  # None or the literal "json"
    if isinstance(value, Mapping) and value:
        return _frozen_mapping("response_format", value)
    raise ValueError(f'response_format must be "json" or a JSON schema (a mapping), got {value!r}')


def _frozen_mapping(name: str, value: object) -> Mapping[str, Any]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ValueError(f"{name} must be a mapping with string keys, got {value!r}")
    return MappingProxyType(dict(value))

"""`chatcli.Settings`: validation with errors that name the field, merging, the output reserve."""

from __future__ import annotations

from typing import Any

import pytest

from chatcli import Settings
from chatcli.continuation import DEFAULT_MAX_TOKENS
from chatcli.request_settings import default_output_limit, output_reserve


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("temperature", 2.5, "temperature must be between 0 and 2"),
        ("temperature", True, "temperature must be a number"),
        ("top_p", -0.1, "top_p must be between 0 and 1"),
        ("stop", ["ok", ""], "stop must be a non-empty string"),
        ("seed", 1.5, "seed must be an integer"),
        ("tool_choice", " ", "tool_choice must be one of"),
        ("parallel_tool_calls", "no", "parallel_tool_calls must be True or False"),
        ("response_format", "yaml", "response_format must be"),
        ("response_format", {}, "response_format must be"),
        ("reasoning_effort", "extreme", "reasoning_effort must be one of"),
        ("thinking_budget", -1, "thinking_budget must be at least 0"),
        ("extra", {1: "x"}, "extra must be a mapping with string keys"),
    ],
)
def test_bad_values_are_errors_that_name_the_field(field: str, value: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Settings(**{field: value})


def test_values_are_normalised_and_frozen() -> None:
    settings = Settings(stop="END", extra={"top_k": 3}, response_format={"type": "object"})
    assert settings.stop == ("END",)
    with pytest.raises(TypeError):
        settings.extra["top_k"] = 4  # type: ignore[index]
    with pytest.raises(AttributeError):
        settings.temperature = 1.0  # type: ignore[misc]


def test_merge_lets_the_call_win_and_keeps_the_rest() -> None:
    defaults = Settings(temperature=0.2, seed=7, extra={"top_k": 3, "user": "a"})
    call = Settings(temperature=0.9, stop=("END",), extra={"user": "b"})
    merged = defaults.merge(call)
    assert merged == Settings(
        temperature=0.9, seed=7, stop=("END",), extra={"top_k": 3, "user": "b"}
    )
    assert defaults.merge(None) is defaults
    assert Settings().merge(defaults) == defaults


@pytest.mark.parametrize(
    ("max_tokens", "cap", "budget", "expected"),
    [
        (None, None, None, None),  # nothing known: nothing reserved
        (None, 64_000, None, DEFAULT_MAX_TOKENS),  # never the whole cap
        (None, 1000, None, 1000),
        (800, None, None, 800),
        (800, None, 1024, 1824),  # the thinking budget counts
        (None, 64_000, 10_000, DEFAULT_MAX_TOKENS + 10_000),
        (60_000, 64_000, 10_000, 64_000),  # clipped to the cap
        (70_000, 64_000, None, 70_000),  # an explicit limit is the caller's (no budget to clip)
    ],
)
def test_output_reserve(
    max_tokens: int | None, cap: int | None, budget: int | None, expected: int | None
) -> None:
    settings = Settings(thinking_budget=budget)
    assert output_reserve(max_tokens, cap, settings) == expected
    assert settings.output_reserve_extra == (budget or 0)


@pytest.mark.parametrize(
    ("window", "cap", "expected"),
    [
        (None, None, DEFAULT_MAX_TOKENS),  # nothing known: still a limit
        (4096, None, 1024),  # SmolLM2 behind llama-server: a quarter of its window
        (512, None, 128),
        (200_000, 64_000, DEFAULT_MAX_TOKENS),  # a large model: the usual default
        (8192, 1000, 1000),  # the model's own cap is lower
        (3, None, 1),
    ],
)
def test_the_default_output_limit_is_sized_from_the_window_and_the_cap(
    window: int | None, cap: int | None, expected: int
) -> None:
    assert default_output_limit(window, cap) == expected

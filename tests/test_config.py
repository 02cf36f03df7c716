"""RecoveryConfig: the five CHATCLI_* variables of SPEC section 5, defaults and errors."""

from __future__ import annotations

import pytest

from chatcli.config import RecoveryConfig
from chatcli.errors import ConfigError

VARIABLES = {
    "CHATCLI_MAX_RECOVERY_ATTEMPTS": ("max_recovery_attempts", 3, 0),
    "CHATCLI_MAX_TOKEN_ESCALATIONS": ("max_token_escalations", 2, 0),
    "CHATCLI_EMERGENCY_KEEP_MESSAGES": ("emergency_keep_messages", 10, 1),
    "CHATCLI_TOOL_RESULT_BUDGET_CHARS": ("tool_result_budget_chars", 200_000, 1),
    "CHATCLI_TOOL_RESULT_MAX_CHARS": ("tool_result_max_chars", 20_000, 1),
}


def test_defaults_are_the_specs() -> None:
    config = RecoveryConfig.from_env({})
    assert config == RecoveryConfig()
    for field, default, _ in VARIABLES.values():
        assert getattr(config, field) == default


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize("raw", ["7", " 7 ", "+7"])
def test_each_variable_is_read(variable: str, raw: str) -> None:
    field, _, _ = VARIABLES[variable]
    config = RecoveryConfig.from_env({variable: raw})
    assert getattr(config, field) == 7
    others = {k: v for k, v in VARIABLES.items() if k != variable}
    for other_field, default, _ in others.values():
        assert getattr(config, other_field) == default


@pytest.mark.parametrize("variable", VARIABLES)
@pytest.mark.parametrize("raw", ["", "  ", "abc", "3.5", "1e3", "1_000", "٣", "-1"])
def test_an_invalid_value_names_the_variable_and_the_value(variable: str, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RecoveryConfig.from_env({variable: raw})
    assert variable in str(caught.value) and repr(raw) in str(caught.value)


@pytest.mark.parametrize("variable", VARIABLES)
def test_zero_only_where_it_makes_sense(variable: str) -> None:
    field, _, minimum = VARIABLES[variable]
    if minimum == 0:  # zero attempts / escalations turns the feature off
        assert getattr(RecoveryConfig.from_env({variable: "0"}), field) == 0
    else:
        with pytest.raises(ConfigError, match=f"{variable}='0' must be at least 1"):
            RecoveryConfig.from_env({variable: "0"})


def test_direct_construction_is_validated_too() -> None:
    with pytest.raises(ConfigError, match="emergency_keep_messages=0"):
        RecoveryConfig(emergency_keep_messages=0)
    with pytest.raises(ConfigError, match="max_recovery_attempts=True"):
        RecoveryConfig(max_recovery_attempts=True)

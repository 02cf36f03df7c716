"""Settings: config file < environment < flags; bad values name their source; API keys never
come from the config file."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatcli.chat.settings import default_config_path, load_settings
from chatcli.errors import ConfigError
from chatcli.providers.keys import lookup_api_key


def _home(tmp_path: Path, config: str | None = None) -> dict[str, str]:
    env = {"CHATCLI_HOME": str(tmp_path), "HOME": str(tmp_path)}
    if config is not None:
        (tmp_path / "config.toml").write_text(config, encoding="utf-8")
    return env


def test_defaults_without_a_config_file(tmp_path: Path) -> None:
    settings = load_settings({}, _home(tmp_path))
    assert settings.provider is None and settings.model is None and settings.max_tokens is None
    assert settings.config_path is None
    assert settings.db_path == tmp_path / "sessions.db"
    assert settings.history_path == tmp_path / "history"


def test_precedence_file_then_env_then_flags(tmp_path: Path) -> None:
    env = _home(tmp_path, 'provider = "anthropic"\nmodel = "from-file"\nmax_tokens = 100\n')
    from_file = load_settings({}, env)
    assert (from_file.provider, from_file.model, from_file.max_tokens) == (
        "anthropic",
        "from-file",
        100,
    )
    assert from_file.config_path == tmp_path / "config.toml"
    env["CHATCLI_MODEL"] = "from-env"
    assert load_settings({}, env).model == "from-env"
    flags = {"model": "from-flag", "provider": None}
    settings = load_settings(flags, env)
    assert settings.model == "from-flag"
    assert settings.provider == "anthropic"  # a flag set to None is not given


def test_budget_accepts_an_integer_in_toml(tmp_path: Path) -> None:
    assert load_settings({}, _home(tmp_path, "session_budget_usd = 2\n")).session_budget_usd == 2.0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ('api_key = "sk-123"', "API keys are not read from config files"),
        ('openai_api_key = "sk-123"', "API keys are not read from config files"),
        ('modle = "x"', "unknown setting"),
        ('max_tokens = "many"', "must be a int"),
        ("max_tokens = 0", "must be positive"),
        ("provider = [", "not valid TOML"),
    ],
)
def test_bad_config_file_names_the_file(tmp_path: Path, config: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load_settings({}, _home(tmp_path, config))
    assert "config.toml" in str(caught.value)
    assert "sk-123" not in str(caught.value)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("CHATCLI_MAX_TOKENS", "lots"),
        ("CHATCLI_MAX_TOKENS", "-5"),
        ("CHATCLI_CONTEXT_WINDOW", "8k"),
        ("CHATCLI_CONTEXT_WINDOW", "0"),
        ("CHATCLI_SESSION_BUDGET_USD", "free"),
    ],
)
def test_bad_environment_value_names_the_variable(
    tmp_path: Path, variable: str, value: str
) -> None:
    env = {**_home(tmp_path), variable: value}
    with pytest.raises(ConfigError, match=variable):
        load_settings({}, env)


def test_chatcli_config_naming_a_missing_file_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "config.toml"
    env = {**_home(tmp_path), "CHATCLI_CONFIG": str(missing)}
    with pytest.raises(ConfigError) as raised:
        load_settings({}, env)
    assert "CHATCLI_CONFIG" in str(raised.value) and str(missing) in str(raised.value)
    # The same file, once it exists, is read.
    missing.parent.mkdir()
    missing.write_text('model = "named"\n', encoding="utf-8")
    settings = load_settings({}, env)
    assert (settings.model, settings.config_path) == ("named", missing)


def test_config_path_order() -> None:
    assert default_config_path({"CHATCLI_CONFIG": "/x/c.toml", "CHATCLI_HOME": "/h"}) == Path(
        "/x/c.toml"
    )
    assert default_config_path({"CHATCLI_HOME": "/h"}) == Path("/h/config.toml")
    assert default_config_path({"XDG_CONFIG_HOME": "/xdg", "HOME": "/home/u"}) == Path(
        "/xdg/chatcli/config.toml"
    )
    assert default_config_path({"HOME": "/home/u"}) == Path("/home/u/.config/chatcli/config.toml")


def test_api_key_from_env_first_then_keyring() -> None:
    calls: list[tuple[str, str]] = []

    def keyring(service: str, user: str) -> str | None:
        calls.append((service, user))
        return "from-keyring"

    assert (
        lookup_api_key("openai", ("OPENAI_API_KEY",), {"OPENAI_API_KEY": "env"}, keyring) == "env"
    )
    assert calls == []
    assert lookup_api_key("openai", ("OPENAI_API_KEY",), {}, keyring) == "from-keyring"
    assert calls == [("chatcli", "openai")]


def test_a_broken_keyring_means_no_key() -> None:
    def keyring(service: str, user: str) -> str | None:
        raise RuntimeError("no backend")

    assert lookup_api_key("anthropic", ("ANTHROPIC_API_KEY",), {}, keyring) is None

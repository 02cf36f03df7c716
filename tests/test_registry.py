"""The provider registry: names to adapters, keys from the environment, limits from the
catalog, the python:MODULE:FACTORY hook, and what to set when nothing is configured."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatcli.providers._common import model_limits
from chatcli.providers.registry import (
    PROVIDERS,
    ProviderNotConfigured,
    create_provider,
    detect_provider,
    model_info,
    setup_help,
)
from tests.cli_provider import StreamingWindowed


def test_the_five_names() -> None:
    assert set(PROVIDERS) == {"openai", "anthropic", "gemini", "openai-compatible", "llama-cpp"}


def test_openai_gets_its_key_from_the_environment_and_its_limits_from_the_adapter() -> None:
    from chatcli.providers.openai import OpenAI

    provider = create_provider("openai", model="gpt-5-mini", environ={"OPENAI_API_KEY": "sk-t"})
    assert isinstance(provider, OpenAI)
    assert provider.model == "gpt-5-mini"
    # The adapter's limits, not a second computation: gpt-5-mini's 400k context has a 272k
    # input cap, and a prompt predicted to fit must fit the cap.
    limits = model_limits("gpt-5-mini", "openai", None, None)
    assert (provider.context_window, provider.max_output_tokens) == limits == (272_000, 128_000)
    assert "sk-t" not in repr(provider)


def test_a_window_the_user_sets_wins() -> None:
    env = {"ANTHROPIC_API_KEY": "k"}
    provider = create_provider("anthropic", context_window=50_000, environ=env)
    assert provider.context_window == 50_000  # type: ignore[attr-defined]


def test_default_model_when_none_is_given() -> None:
    provider = create_provider("anthropic", environ={"ANTHROPIC_API_KEY": "k"})
    assert provider.model == PROVIDERS["anthropic"].default_model


def test_missing_key_says_which_variable() -> None:
    with pytest.raises(ProviderNotConfigured, match="ANTHROPIC_API_KEY"):
        create_provider("anthropic", model="claude-sonnet-4-5", environ={})


def test_openai_compatible_needs_a_url_and_a_model_but_no_key() -> None:
    with pytest.raises(ProviderNotConfigured, match="--model"):
        create_provider("openai-compatible", base_url="http://127.0.0.1:9/v1", environ={})
    with pytest.raises(ProviderNotConfigured, match="--base-url"):
        create_provider("openai-compatible", model="qwen", environ={})
    provider = create_provider(
        "openai-compatible", model="qwen", base_url="http://127.0.0.1:9/v1", environ={}
    )
    assert provider.base_url == "http://127.0.0.1:9/v1"


@pytest.mark.parametrize(
    ("name", "key_variable"),
    [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
    ],
)
def test_base_url_reaches_the_cloud_adapters(name: str, key_variable: str) -> None:
    url = "http://127.0.0.1:9/gateway"
    provider = create_provider(name, base_url=url, environ={key_variable: "k"})
    assert provider.base_url == url  # type: ignore[attr-defined]


def test_llama_cpp_needs_an_existing_file(tmp_path: Path) -> None:
    with pytest.raises(ProviderNotConfigured, match="no model file"):
        create_provider("llama-cpp", model=str(tmp_path / "missing.gguf"), environ={})


def test_unknown_name_lists_the_known_ones() -> None:
    with pytest.raises(ProviderNotConfigured, match="openai, anthropic, gemini"):
        create_provider("mistral", model="x", environ={})


def test_python_factory_hook() -> None:
    env = {"CHATCLI_TEST_WINDOW": "777"}
    provider = create_provider("python:tests.cli_provider:windowed", model="m", environ=env)
    assert isinstance(provider, StreamingWindowed)
    assert provider.window == 777 and provider.model == "m"


@pytest.mark.parametrize(
    "name",
    [
        "python:no_such_module_xyz:make",
        "python:nosuch.mod:f",  # a missing package above the module
        "python:tests.cli_provider:nothing",
        "python:x",
    ],
)
def test_python_hook_errors_are_configuration_errors(name: str) -> None:
    with pytest.raises(ProviderNotConfigured):
        create_provider(name, model="m", environ={})


def test_detect_provider_from_keys() -> None:
    assert detect_provider({}) is None
    assert detect_provider({"GEMINI_API_KEY": "g"}) == "gemini"
    assert detect_provider({"ANTHROPIC_API_KEY": "a", "GEMINI_API_KEY": "g"}) == "anthropic"
    assert detect_provider({"CHATCLI_API_KEY": "x"}) is None  # needs a URL: never guessed


def test_setup_help_fits_one_screen_and_names_every_way_in() -> None:
    text = setup_help("/cfg/config.toml")
    assert len(text.splitlines()) <= 24
    assert max(len(line) for line in text.splitlines()) <= 80
    for needed in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "--base-url",
        "llama-cpp",
        "/cfg/config.toml",
        "chatcli demo",
        "chatcli --local",
    ):
        assert needed in text


def test_model_info_local_models_are_free_cloud_ones_from_the_catalog() -> None:
    local = model_info("llama-cpp", "/m/tiny.gguf", StreamingWindowed(window=512))
    assert local is not None and local.context_window == 512
    assert local.prices.input == 0.0 and local.prices.output == 0.0
    cloud = model_info("openai", "gpt-5-mini")
    assert cloud is not None and cloud.prices.input == 0.25
    assert model_info("openai-compatible", "my-own-finetune") is None

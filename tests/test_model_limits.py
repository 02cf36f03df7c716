"""Adapters take the model's limits from the offline catalog unless told otherwise."""

from chatcli.providers._common import model_limits
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.gemini import Gemini
from chatcli.providers.openai import OpenAI

ENV = {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k", "GEMINI_API_KEY": "k"}


def test_input_cap_is_the_window_when_smaller_than_the_context() -> None:
    # models.dev: gpt-5 has a 400k context but a 272k input cap, and a 128k output cap.
    assert model_limits("gpt-5", "openai", None, None) == (272_000, 128_000)


def test_explicit_limits_win_and_unknown_models_stay_unknown() -> None:
    assert model_limits("gpt-5", "openai", 1000, None) == (1000, 128_000)
    assert model_limits("no-such-model-xyz", "openai", None, None) == (None, None)


def test_adapters_declare_catalog_limits() -> None:
    assert OpenAI("gpt-4o", environ=ENV).context_window == 128_000
    claude = Anthropic("claude-sonnet-4-5", environ=ENV)
    assert (claude.context_window, claude.max_output_tokens) == (200_000, 64_000)
    assert Gemini("gemini-2.5-pro", environ=ENV).max_output_tokens == 65_536
    assert OpenAI("gpt-4o", environ=ENV, context_window=8192).context_window == 8192

"""`chatcli.__all__` is exactly the public API: the issue's contract names, nothing private."""

import inspect
import subprocess
import sys

import chatcli

CONTRACT = {
    # issue 2
    "Message",
    "ToolCall",
    "ToolResult",
    "TextPart",
    "Usage",
    "StopReason",
    "ErrorKind",
    "ErrorInfo",
    "classify_error",
    "RecoveryConfig",
    "ConfigError",
    "repair_tool_pairing",
    "enforce_tool_result_budget",
    "apply_recovery_level",
    "Provider",
    "Request",
    "Response",
    "Client",
    "Reply",
    "ContextRecoveryError",
    # issue 3 and 5
    "OpenAI",
    "OpenAICompatible",
    "Anthropic",
    "Gemini",
    "CompactionError",
    # issue 10
    "Settings",
    "ToolCallDelta",
    # issue 27
    "recall_tool",
}


def test_all_matches_the_public_names_defined_in_the_package() -> None:
    public = {
        name
        for name, value in vars(chatcli).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert set(chatcli.__all__) == public
    assert len(chatcli.__all__) == len(set(chatcli.__all__))


def test_contract_names_are_exported() -> None:
    assert set(chatcli.__all__) >= CONTRACT


def test_import_needs_no_sdk_rich_or_sqlite() -> None:
    """The core imports no SDK, HTTP library, rich or sqlite3 (ARCHITECTURE)."""
    code = (
        "import sys, chatcli; "
        "bad = [m for m in ('openai', 'anthropic', 'google.genai', 'httpx', 'rich', "
        "'prompt_toolkit', 'sqlite3') if m in sys.modules]; print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

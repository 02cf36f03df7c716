"""`chatcli proxy`: the command's flags, its refusals, and the package's import boundary."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from chatcli.cli import main
from chatcli.proxy.main import DEFAULT_HOST, DEFAULT_PORT, build_parser


def test_defaults_are_loopback_8787() -> None:
    args = build_parser().parse_args([])
    assert (args.host, args.port) == (DEFAULT_HOST, DEFAULT_PORT) == ("127.0.0.1", 8787)
    assert args.cors_origin == [] and args.api_key == []


def test_binding_beyond_loopback_without_keys_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["proxy", "--host", "0.0.0.0", "--provider", "openai-compatible"]
    argv += ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main(argv, environ={"CHATCLI_HOME": str(tmp_path)}) == 2
    assert "CHATCLI_PROXY_KEYS" in capsys.readouterr().err


def test_no_upstream_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    environ = {"CHATCLI_HOME": str(tmp_path), "HOME": str(tmp_path)}
    assert main(["proxy"], environ=environ) == 2
    assert "--provider" in capsys.readouterr().err


def test_the_proxy_imports_nothing_from_the_chat() -> None:
    code = (
        "import sys, chatcli.proxy.app, chatcli.proxy.main; "
        "bad = [m for m in sys.modules "
        "if m.split('.')[:2] == ['chatcli', 'cli'] or m in ('rich', 'prompt_toolkit')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

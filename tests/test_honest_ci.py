"""CI that cannot pass by accident: skips fail it when the servers are required.

This runs the real thing in a subprocess: pytest with this suite's conftest on a scratch test
directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODULE_SKIP = """\
import pytest

pytest.importorskip("chatcli_no_such_module")


def test_needs_the_module() -> None:
    pass
"""


def run_pytest(tests: Path, require: str | None) -> subprocess.CompletedProcess[str]:
    """pytest on `tests` with this suite's conftest as a plugin (and no other configuration)."""
    (tests / "pytest.ini").write_text("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    env = {k: v for k, v in os.environ.items() if k != "CHATCLI_REQUIRE_SERVERS"}
    if require is not None:
        env["CHATCLI_REQUIRE_SERVERS"] = require
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "tests.conftest",
        "-p",
        "no:cacheprovider",
    ]
    command += ["-c", str(tests / "pytest.ini"), "--rootdir", str(tests), str(tests)]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    (tmp_path / "test_needs_a_module.py").write_text(MODULE_SKIP)
    (tmp_path / "test_fine.py").write_text("def test_fine() -> None:\n    pass\n")
    return tmp_path


def test_a_module_skipped_at_collection_fails_when_servers_are_required(suite: Path) -> None:
    result = run_pytest(suite, require="1")
    assert "1 passed, 1 skipped" in result.stdout
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "test_needs_a_module.py" in result.stdout.split("were skipped:")[1]


def test_the_same_skip_passes_when_servers_are_not_required(suite: Path) -> None:
    result = run_pytest(suite, require=None)
    assert "1 passed, 1 skipped" in result.stdout
    assert result.returncode == pytest.ExitCode.OK, result.stdout


def test_a_runtime_skip_still_fails_when_servers_are_required(tmp_path: Path) -> None:
    (tmp_path / "test_skips.py").write_text(
        "import pytest\n\n\ndef test_skips() -> None:\n    pytest.skip('no server')\n"
    )
    result = run_pytest(tmp_path, require="1")
    assert result.returncode == pytest.ExitCode.TESTS_FAILED, result.stdout
    assert "test_skips.py::test_skips" in result.stdout

"""CI that cannot pass by accident: skips fail it when the servers are required, and the cached
llama-server is rebuilt when the flags it was built with change.

Both run the real thing in a subprocess: pytest with this suite's conftest on a scratch test
directory, and scripts/build-llama-server.sh --check on a scratch cache holding a stand-in
binary (nothing is built).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "build-llama-server.sh"
VERSION = "0.3.36"

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


# --- the llama-server build cache ---------------------------------------------------------------


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """A cache holding a stand-in llama-server that runs (answers --version)."""
    binary = tmp_path / f"llama-server-{VERSION}" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\necho 'version: stand-in'\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    return tmp_path


def build_script(
    cache: Path, *args: str, flags: str = "", version: str = VERSION
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "CHATCLI_CACHE": str(cache),
        "LLAMA_CPP_PYTHON_VERSION": version,
        "LLAMA_SERVER_CMAKE_FLAGS": flags,
    }
    command = ["bash", str(SCRIPT), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)


def stamp(cache: Path) -> Path:
    return cache / f"llama-server-{VERSION}" / "build-flags"


def test_a_binary_built_before_stamps_is_reused_with_the_default_flags(cache: Path) -> None:
    # The cache built by the previous script (no stamp) stays valid: same version, same flags.
    assert build_script(cache, "--check").returncode == 0
    result = build_script(cache)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].endswith(f"llama-server-{VERSION}/bin/llama-server")
    assert "reusing" in result.stderr
    assert "-DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF" in stamp(cache).read_text()
    assert build_script(cache, "--check").returncode == 0  # adopted: now stamped


def test_other_flags_mean_a_rebuild(cache: Path) -> None:
    build_script(cache)  # stamps the stand-in with the default flags
    result = build_script(cache, "--check", flags="-DGGML_AVX2=ON")
    assert result.returncode == 1
    assert "-DGGML_AVX2=ON" in result.stderr


def test_a_stamp_of_other_flags_means_a_rebuild(cache: Path) -> None:
    stamp(cache).write_text(f"llama-cpp-python {VERSION}: -DCMAKE_BUILD_TYPE=Debug\n")
    assert build_script(cache, "--check").returncode == 1


def test_another_version_or_no_working_binary_means_a_build(cache: Path) -> None:
    assert build_script(cache, "--check", version="0.3.99").returncode == 1
    (cache / f"llama-server-{VERSION}" / "bin" / "llama-server").write_text("#!/bin/sh\nexit 3\n")
    assert build_script(cache, "--check").returncode == 1

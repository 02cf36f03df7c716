"""The README tells the truth: its example output is what the example prints today, and every
CHATCLI_* variable it documents exists in the code (and the other way round)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", ["recover", "stream"])
def test_example_output_matches_the_readme(name: str) -> None:
    block = re.search(
        rf"```console\n\$ \.venv/bin/python examples/{name}\.py\n(.*?)```", README, re.S
    )
    assert block is not None
    example = str(ROOT / "examples" / f"{name}.py")
    run = subprocess.run([sys.executable, example], capture_output=True, text=True, check=True)
    assert run.stdout == block.group(1)


def _names(paths: list[Path]) -> set[str]:
    name = r"CHATCLI_[A-Z_]*[A-Z](?![A-Z_]*\*)"  # not a family written as CHATCLI_X_*
    return set(re.findall(name, "\n".join(p.read_text() for p in paths)))


def test_documented_settings_are_the_ones_the_code_reads() -> None:
    library = _names(list((ROOT / "src" / "chatcli").rglob("*.py")))
    tooling = _names([*(ROOT / "tests").glob("*.py"), *(ROOT / "scripts").glob("*.sh")])
    documented = _names([ROOT / "README.md"])
    documented |= {"CHATCLI_MICROCOMPACT_TAIL_CHARS"}  # written as `_TAIL_CHARS` in the table
    assert documented - (library | tooling) == set()  # no setting the README invents
    assert library - documented == set()  # every setting of the library is documented

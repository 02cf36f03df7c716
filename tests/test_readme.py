"""The README tells the truth: its example output is what the example prints today, and every
CHATCLI_* variable it documents exists in the code (and the other way round)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def test_example_output_matches_the_readme() -> None:
    block = re.search(
        r"```console\n\$ \.venv/bin/python examples/recover\.py\n(.*?)```", README, re.S
    )
    assert block is not None
    example = str(ROOT / "examples" / "recover.py")
    run = subprocess.run([sys.executable, example], capture_output=True, text=True, check=True)
    assert run.stdout == block.group(1)


def test_documented_settings_are_the_ones_the_code_reads() -> None:
    source = "\n".join(p.read_text() for p in (ROOT / "src" / "chatcli").rglob("*.py"))
    name = r"CHATCLI_[A-Z_]*[A-Z](?![A-Z_]*\*)"  # not a family written as CHATCLI_X_*
    in_code = set(re.findall(name, source))
    documented = set(re.findall(name, README))
    documented |= {"CHATCLI_MICROCOMPACT_TAIL_CHARS"}  # written as `_TAIL_CHARS` in the table
    assert documented - in_code == set()
    assert in_code - documented == set()

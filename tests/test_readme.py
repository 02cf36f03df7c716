"""The docs tell the truth: the examples print what README.md and docs/ show, and the CHATCLI_*
variables they document are exactly the ones the code reads."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
DOCS = "\n".join(page.read_text() for page in PAGES)


@pytest.mark.parametrize("name", ["recover", "stream"])
def test_example_output_matches_the_docs(name: str) -> None:
    block = re.search(
        rf"```console\n\$ \.venv/bin/python examples/{name}\.py\n(.*?)```", DOCS, re.S
    )
    assert block is not None
    example = str(ROOT / "examples" / f"{name}.py")
    run = subprocess.run([sys.executable, example], capture_output=True, text=True, check=True)
    assert run.stdout == block.group(1)


def test_the_readme_shows_the_recovery_output() -> None:
    assert (
        "```console\n$ .venv/bin/python examples/recover.py\n" in (ROOT / "README.md").read_text()
    )


def _names(paths: list[Path]) -> set[str]:
    name = r"CHATCLI_[A-Z_]*[A-Z](?![A-Z_]*\*)"  # not a family written as CHATCLI_X_*
    return set(re.findall(name, "\n".join(p.read_text() for p in paths)))


def test_documented_settings_are_the_ones_the_code_reads() -> None:
    library = _names(list((ROOT / "src" / "chatcli").rglob("*.py")))
    tooling = _names([*(ROOT / "tests").glob("*.py"), *(ROOT / "scripts").glob("*.sh")])
    documented = _names(PAGES)
    assert documented - (library | tooling) == set()  # no setting the docs invent
    assert library - documented == set()  # every setting of the library is documented


def test_every_setting_is_in_the_configuration_page() -> None:
    library = _names(list((ROOT / "src" / "chatcli").rglob("*.py")))
    assert library - _names([ROOT / "docs" / "configuration.md"]) == set()

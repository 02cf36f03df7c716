"""Print pip constraints that pin the provider SDKs to the floors pyproject.toml declares.

`.ci/run` installs with them in a second virtualenv and runs the adapter tests there, so the
floors are the lowest versions the tests pass with, not a guess. Usage:
    python scripts/floor-constraints.py [pyproject.toml] > constraints.txt
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# The extras whose floors are tested: the provider SDKs (dev tools are pinned or unbounded).
EXTRAS = ("openai", "anthropic", "gemini")


def floors(pyproject: Path) -> list[str]:
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    pins = []
    for extra in EXTRAS:
        for requirement in extras[extra]:
            found = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([0-9][^,;\s]*)", requirement.strip())
            if found is None:
                raise SystemExit(f"{extra}: {requirement!r} states no '>=' floor")
            pins.append(f"{found[1]}=={found[2]}")
    return pins


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml")
    print("\n".join(floors(path)))

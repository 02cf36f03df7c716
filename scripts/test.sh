#!/usr/bin/env bash
# Install everything the tests need from the project's own files and run the whole suite:
# a virtualenv with chatcli and every extra, llama-cpp-python[server] (built from its PyPI sdist,
# the wheel cached in ~/.cache/chatcli), the C++ llama-server (built from the llama.cpp tree
# vendored in that sdist, cached too), then pytest, one worker process per core (pytest-xdist;
# a test file runs whole in one worker, so the servers its fixtures start are started once).
# Arguments are passed to pytest (`-n 0`: one process).
# A first run builds for about 8 minutes on 2 cores; later runs reuse the builds.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

step "virtualenv .venv + chatcli[dev,all,clients]"
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/pip install -q -U pip
.venv/bin/pip install -q -e '.[dev,all,clients]'

step "llama-cpp-python[server] (the embedded engine and its Python server)"
bash scripts/install-llama-cpp-python.sh .venv/bin/python

step "llama-server (C++)"
bash scripts/build-llama-server.sh >/dev/null

step "coding agents from the npm registry (Claude Code, Codex)"
bash scripts/install-claude-code.sh
bash scripts/install-codex.sh

step "pytest"
.venv/bin/pytest -n auto --dist loadfile "$@"

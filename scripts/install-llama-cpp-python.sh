#!/usr/bin/env bash
# Install llama-cpp-python[server] (pinned) into a virtualenv, for the optional integration tests
# against its OpenAI-compatible Python server (tests/servers.py, marker `llama_cpp_python`;
# scripts/test.sh runs this only with CHATCLI_LLAMA_CPP_PYTHON=1). chatcli itself does not use
# llama-cpp-python: its embedded engine is the prebuilt xllamacpp wheel.
# PyPI has only its source: pip compiles the vendored llama.cpp (about 8 minutes of CPU, 4 on
# 2 idle cores). The wheel is cached outside the repo, so a fresh virtualenv installs it in
# seconds.
#
# Usage: scripts/install-llama-cpp-python.sh [PYTHON]   (default: the repo's .venv/bin/python)
# Environment: CHATCLI_CACHE (default ~/.cache/chatcli), LLAMA_CPP_PYTHON_VERSION (0.3.36).
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${CHATCLI_CACHE:-$HOME/.cache/chatcli}"
wheel_dir="$cache/wheels/llama-cpp-python-$version"
here="$(cd "$(dirname "$0")" && pwd)"
python="${1:-$here/../.venv/bin/python}"

log() { printf 'install-llama-cpp-python: %s (%s)\n' "$1" "$(date +%T)" >&2; }

installed_version() {
    "$python" -c 'import importlib.metadata as m; print(m.version("llama_cpp_python"))' \
        2>/dev/null || true
}

find_wheel() { compgen -G "$wheel_dir/llama_cpp_python-$version-*.whl" | head -n 1 || true; }

build_wheel() {
    local sdist
    sdist="$(PYTHON="$python" "$here/llama-sdist.sh")"
    command -v cmake >/dev/null && command -v g++ >/dev/null || {
        log "installing missing build tools with apt-get: cmake g++ make"
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q cmake g++ make >&2
    }
    log "building the wheel from $sdist (about 4 minutes on 2 idle cores)"
    mkdir -p "$wheel_dir"
    # Portable code (no -march=native), so the cached wheel runs on any x86-64 machine; the UI
    # and OpenSSL flags keep the vendored build from reaching for anything beyond PyPI; no
    # multimodal library (LLAVA_BUILD), which chatcli does not use and llama_cpp loads lazily.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_UI=OFF \
-DLLAMA_USE_PREBUILT_UI=OFF -DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL="${JOBS:-2}" \
        "$python" -m pip wheel -q --no-deps -w "$wheel_dir" "$sdist" >&2
}

if [[ "$(installed_version)" == "$version" ]]; then
    # Already there: only add the server's extras.
    log "llama-cpp-python $version is already installed in $python; checking the [server] extras"
    "$python" -m pip install -q "llama-cpp-python[server]==$version"
    exit 0
fi
start=$SECONDS
wheel="$(find_wheel)"
if [[ -z "$wheel" ]]; then
    build_wheel
    wheel="$(find_wheel)"
else
    log "reusing the cached wheel $wheel"
fi
"$python" -m pip install -q "$wheel[server]"
log "installed llama-cpp-python $version[server] in $((SECONDS - start)) s"

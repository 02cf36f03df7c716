#!/usr/bin/env bash
# Build (or reuse) the C++ llama-server of llama.cpp, for the integration tests against a real
# server (tests/servers.py). The source is the llama.cpp tree vendored in the pinned
# llama-cpp-python sdist on PyPI, so nothing but PyPI (and Debian, for missing compilers) is
# needed. The binary is cached outside the repo and the build is skipped when it is present.
#
# Prints the binary's path on its last line of stdout. The build takes about 10 minutes of CPU
# (5 minutes on 2 idle cores); later runs reuse the cached binary at once.
# Environment: CHATCLI_CACHE (default ~/.cache/chatcli), LLAMA_CPP_PYTHON_VERSION (0.3.36),
# JOBS (parallel compile jobs, default 2).
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${CHATCLI_CACHE:-$HOME/.cache/chatcli}"
prefix="$cache/llama-server-$version"
binary="$prefix/bin/llama-server"
here="$(cd "$(dirname "$0")" && pwd)"

log() { printf 'build-llama-server: %s (%s)\n' "$1" "$(date +%T)" >&2; }

ensure_build_tools() {
    local missing=()
    command -v cmake >/dev/null || missing+=(cmake)
    command -v g++ >/dev/null || missing+=(g++)
    command -v make >/dev/null || missing+=(make)
    if ((${#missing[@]})); then
        log "installing missing build tools with apt-get: ${missing[*]}"
        apt-get update -q >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >&2
    fi
}

build() {
    local work="$cache/build/llama-server-$version"
    local sdist
    sdist="$("$here/llama-sdist.sh")"
    ensure_build_tools
    rm -rf "$work" && mkdir -p "$work"
    log "unpacking $sdist"
    tar -xzf "$sdist" -C "$work" --strip-components=1
    log "configuring"
    # UI off: otherwise configure downloads a prebuilt web UI. OpenSSL off: the tests speak
    # plain HTTP on 127.0.0.1, and it avoids needing libssl-dev. Static: one relocatable file.
    cmake -S "$work/vendor/llama.cpp" -B "$work/build" -DCMAKE_BUILD_TYPE=Release \
        -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
        -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >"$work/configure.log" 2>&1 \
        || { tail -n 40 "$work/configure.log" >&2; exit 1; }
    log "compiling the llama-server target with ${JOBS:-2} jobs (about 5 minutes on 2 idle cores)"
    cmake --build "$work/build" --target llama-server -j "${JOBS:-2}" >"$work/build.log" 2>&1 \
        || { tail -n 40 "$work/build.log" >&2; exit 1; }
    mkdir -p "$prefix/bin"
    # Copy then rename, so an interrupted run never leaves a half-written binary in the cache.
    cp "$work/build/bin/llama-server" "$binary.tmp"
    mv "$binary.tmp" "$binary"
    rm -rf "$work"
}

if [[ -x "$binary" ]] && "$binary" --version >/dev/null 2>&1; then
    log "reusing $binary"
else
    start=$SECONDS
    build
    log "built $binary in $((SECONDS - start)) s"
fi
echo "$binary"

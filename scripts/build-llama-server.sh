#!/usr/bin/env bash
# Build (or reuse) the C++ llama-server of llama.cpp, for the integration tests against a real
# server (tests/servers.py). The source is the llama.cpp tree vendored in the pinned
# llama-cpp-python sdist on PyPI, so nothing but PyPI (and Debian, for missing compilers) is
# needed. The binary is cached outside the repo, keyed by the version AND the build flags: the
# flags it was built with are stamped beside it (build-flags), and a binary whose stamp differs
# from the flags asked for is rebuilt in place, so its path stays the same.
#
# Prints the binary's path on its last line of stdout. The build takes about 10 minutes of CPU
# (5 minutes on 2 idle cores); later runs reuse the cached binary at once.
# `--check` builds nothing: exit 0 when the cached binary is current, 1 when it would be built.
# Environment: CHATCLI_CACHE (default ~/.cache/chatcli), LLAMA_CPP_PYTHON_VERSION (0.3.36),
# LLAMA_SERVER_CMAKE_FLAGS (extra cmake flags, appended to the defaults below), JOBS (parallel
# compile jobs, default 2).
set -euo pipefail

version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
cache="${CHATCLI_CACHE:-$HOME/.cache/chatcli}"
prefix="$cache/llama-server-$version"
binary="$prefix/bin/llama-server"
stamp="$prefix/build-flags"
here="$(cd "$(dirname "$0")" && pwd)"

# UI off: otherwise configure downloads a prebuilt web UI. OpenSSL off: the tests speak plain
# HTTP on 127.0.0.1, and it avoids needing libssl-dev. Static: one relocatable file.
default_flags=(
    -DCMAKE_BUILD_TYPE=Release
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
    -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
)
read -r -a extra_flags <<<"${LLAMA_SERVER_CMAKE_FLAGS:-}"
flags=("${default_flags[@]}" "${extra_flags[@]}")
# What the stamp holds: the version and every flag, one line.
wanted="llama-cpp-python $version: ${flags[*]}"
# A binary without a stamp was built before stamps existed, always with the default flags.
legacy="llama-cpp-python $version: ${default_flags[*]}"

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
    log "configuring with ${flags[*]}"
    cmake -S "$work/vendor/llama.cpp" -B "$work/build" "${flags[@]}" >"$work/configure.log" 2>&1 \
        || { tail -n 40 "$work/configure.log" >&2; exit 1; }
    log "compiling the llama-server target with ${JOBS:-2} jobs (about 5 minutes on 2 idle cores)"
    cmake --build "$work/build" --target llama-server -j "${JOBS:-2}" >"$work/build.log" 2>&1 \
        || { tail -n 40 "$work/build.log" >&2; exit 1; }
    mkdir -p "$prefix/bin"
    # Copy then rename, so an interrupted run never leaves a half-written binary in the cache.
    # The old binary goes and the new stamp is written before the new binary appears: a
    # binary is never beside a stamp that is not its own.
    rm -f "$binary"
    printf '%s\n' "$wanted" >"$stamp"
    cp "$work/build/bin/llama-server" "$binary.tmp"
    mv "$binary.tmp" "$binary"
    rm -rf "$work"
}

# The flags the cached binary was built with, or nothing when there is no working binary.
cached_flags() {
    [[ -x "$binary" ]] && "$binary" --version >/dev/null 2>&1 || return 0
    if [[ -f "$stamp" ]]; then
        cat "$stamp"
    else
        printf '%s\n' "$legacy"
    fi
}

current="$(cached_flags)"
if [[ "${1:-}" == "--check" ]]; then
    [[ "$current" == "$wanted" ]] && exit 0
    log "would build: cached [${current:-none}], wanted [$wanted]"
    exit 1
fi
if [[ "$current" == "$wanted" ]]; then
    [[ -f "$stamp" ]] || printf '%s\n' "$wanted" >"$stamp"  # adopt a legacy build
    log "reusing $binary"
else
    [[ -z "$current" ]] || log "rebuilding: $binary was built with other flags [$current]"
    start=$SECONDS
    build
    log "built $binary in $((SECONDS - start)) s"
fi
echo "$binary"

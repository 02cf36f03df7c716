#!/usr/bin/env bash
# Install the coding agents the proxy's client tests drive (tests/test_proxy_claude_code.py),
# from the npm registry, into a project-local prefix: .cache/npm-clients (CHATCLI_NPM_CLIENTS
# overrides). Pinned: an agent's requests change from release to release, and the tests say
# what one release sends. Prints the prefix on its last line of stdout. A prefix that already
# holds the pinned versions is reused at once.
#
# Claude Code's package is a wrapper whose postinstall copies the platform's native binary
# (an optional dependency) over bin/claude.exe: npm must not be run with --ignore-scripts or
# --omit=optional.
set -euo pipefail

claude_code="2.1.332"  # @anthropic-ai/claude-code
here="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${CHATCLI_NPM_CLIENTS:-$here/.cache/npm-clients}"

log() { printf 'install-agent-clients: %s (%s)\n' "$1" "$(date +%T)" >&2; }

installed() {  # the version an installed package states, or nothing
    local manifest="$prefix/node_modules/$1/package.json"
    [[ -f "$manifest" ]] && node -p "require('$manifest').version" 2>/dev/null || true
}

if [[ "$(installed @anthropic-ai/claude-code)" != "$claude_code" ]]; then
    log "npm install @anthropic-ai/claude-code@$claude_code into $prefix"
    mkdir -p "$prefix"
    npm install --prefix "$prefix" --no-audit --no-fund --no-save \
        "@anthropic-ai/claude-code@$claude_code" >&2
fi
# Offline: the version check is local, no request is made.
version="$(DISABLE_AUTOUPDATER=1 "$prefix/node_modules/.bin/claude" --version)"
log "claude $version"
echo "$prefix"

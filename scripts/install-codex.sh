#!/usr/bin/env bash
# Install the Codex CLI (`@openai/codex`, pinned) from the npm registry into the project-local
# prefix .cache/npm-clients, for tests/test_proxy_codex.py (real Codex in front of the proxy).
# npm brings the Linux binary as an optional dependency of the package; nothing is installed
# globally, and a prefix that already holds the pinned version is left as it is.
#
# Usage: scripts/install-codex.sh
# Environment: CODEX_VERSION (0.171.0), CHATCLI_NPM_PREFIX (default: <repo>/.cache/npm-clients).
set -euo pipefail

version="${CODEX_VERSION:-0.171.0}"
here="$(cd "$(dirname "$0")" && pwd)"
prefix="${CHATCLI_NPM_PREFIX:-$here/../.cache/npm-clients}"
codex="$prefix/node_modules/.bin/codex"

log() { printf 'install-codex: %s (%s)\n' "$1" "$(date +%T)" >&2; }

command -v npm >/dev/null || { log "npm not found: install Node.js 18 or later"; exit 1; }
if [[ -x "$codex" ]] && [[ "$("$codex" --version 2>/dev/null)" == "codex-cli $version" ]]; then
    log "codex $version already in $prefix"
    exit 0
fi
log "npm install @openai/codex@$version into $prefix"
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --no-update-notifier --loglevel=error \
    "@openai/codex@$version" >&2
log "installed: $("$codex" --version)"

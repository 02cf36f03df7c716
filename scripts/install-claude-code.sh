#!/usr/bin/env bash
# Install Claude Code (`@anthropic-ai/claude-code`, pinned) from the npm registry into the
# project-local prefix .cache/npm-clients, for tests/test_proxy_claude_code.py (real Claude
# Code in front of the proxy), beside Codex (scripts/install-codex.sh). Pinned: an agent's
# requests change from release to release, and the tests say what one release sends. The
# package is a wrapper whose postinstall copies the platform's native binary (an optional
# dependency) over bin/claude.exe: npm must not run with --ignore-scripts or --omit=optional.
# Nothing is installed globally, and a prefix that already holds the pinned version is left
# as it is.
#
# Usage: scripts/install-claude-code.sh
# Environment: CLAUDE_CODE_VERSION (2.1.332), CHATCLI_NPM_PREFIX (default:
# <repo>/.cache/npm-clients).
set -euo pipefail

version="${CLAUDE_CODE_VERSION:-2.1.332}"
here="$(cd "$(dirname "$0")" && pwd)"
prefix="${CHATCLI_NPM_PREFIX:-$here/../.cache/npm-clients}"
claude="$prefix/node_modules/.bin/claude"

log() { printf 'install-claude-code: %s (%s)\n' "$1" "$(date +%T)" >&2; }

command -v npm >/dev/null || { log "npm not found: install Node.js 18 or later"; exit 1; }
# `--version` is answered locally: no request is made.
installed() { DISABLE_AUTOUPDATER=1 "$claude" --version 2>/dev/null || true; }
if [[ -x "$claude" ]] && [[ "$(installed)" == "$version (Claude Code)" ]]; then
    log "claude $version already in $prefix"
    exit 0
fi
log "npm install @anthropic-ai/claude-code@$version into $prefix"
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --no-update-notifier --loglevel=error \
    "@anthropic-ai/claude-code@$version" >&2
log "installed: $(installed)"

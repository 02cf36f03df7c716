#!/usr/bin/env bash
# LiteLLM's proxy, the anchor `benchmarks/proxy.py --litellm` runs beside chatcli's, in a
# virtualenv of its own (benchmarks/.litellm-proxy): its `proxy` extra pins packages that
# chatcli's own environment (its litellm extra, >= 1.110) cannot share. 1.108.5 is the newest
# release whose `proxy` extra resolves from the package registry this project can reach
# (1.108.10 and later pin litellm-enterprise / litellm-proxy-extras releases it lacks).
# Prints the path of its `litellm` command.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="$here/.litellm-proxy"
if [ ! -x "$venv/bin/litellm" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q "litellm[proxy]==1.108.5" >&2
fi
echo "$venv/bin/litellm"

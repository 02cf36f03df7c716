"""Real Codex compacting through the proxy, in front of llama-server (tests/test_proxy_codex.py's
20k-window server with the ending grammar, offline Codex config): one `codex exec` then
`codex exec resume --last`, with Codex's auto-compaction limit (`model_auto_compact_token_limit`)
below its first request's size, so that it compacts before every later turn.

The two setups users have take different paths, which the proxy's log shows:

- a custom model provider (`model_providers.chatcli`, `wire_api = "responses"`): Codex
  compacts with a normal turn (its own summary prompt, a plain `/v1/responses` request), and
  keeps the summary in its history (the rollout's `compacted` item has the summary text); the
  proxy makes no compaction of its own;
- Codex's own OpenAI provider with `openai_base_url` set to the proxy: Codex compacts
  remotely, with the inline `compaction_trigger` item (remote compaction v2), expects exactly
  one `compaction` output item, and sends it back on its next requests; the proxy compacts
  with chatcli's own compaction and expands the item each time.

The tiny random model cannot write a summary that passes chatcli's checks, so the proxy's
compactions keep the conversation whole (said in the log); what is tested is the protocol:
every turn is answered, Codex reports no compaction error.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from chatcli.proxy.compaction import TOKEN_PREFIX
from tests import test_proxy_codex as base
from tests.test_proxy_codex import OFFLINE, RUN_TIMEOUT_S

# Codex, and the proxy in front of the 20k-window llama-server, of tests/test_proxy_codex.py.
codex, codex_llama, proxy = base.codex, base.codex_llama, base.proxy

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

TURNS = 4  # the first turn, then three that each begin with a compaction
# Below Codex's first request (about 14,400 tokens), so that every later turn compacts first.
LIMITS = "model_auto_compact_token_limit = 12000\nmodel_context_window = 20480\n"


def custom_provider(url: str) -> tuple[str, dict[str, str]]:
    config = (
        f'model = "local"\nmodel_provider = "chatcli"\n{LIMITS}{OFFLINE}\n'
        '[model_providers.chatcli]\nname = "chatcli proxy"\n'
        f'base_url = "{url}/v1"\nenv_key = "CODEX_PROXY_KEY"\nwire_api = "responses"\n'
    )
    return config, {"CODEX_PROXY_KEY": "any"}


def openai_provider(url: str) -> tuple[str, dict[str, str]]:
    return f'model = "gpt-5.4"\nopenai_base_url = "{url}/v1"\n{LIMITS}{OFFLINE}', {
        "OPENAI_API_KEY": "any"
    }


def session(binary: Path, tmp_path: Path, config: str, env: dict[str, str]) -> list[str]:
    """`TURNS` turns of one Codex session; each turn's stdout and stderr. A turn that fails
    fails the test."""
    home, codex_home, work = tmp_path / "home", tmp_path / "codex-home", tmp_path / "work"
    for directory in (home, codex_home, work):
        directory.mkdir()
    (codex_home / "config.toml").write_text(config)
    environ = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        **env,
    }
    outputs = []
    for turn in range(TURNS):
        command = [str(binary), "exec", "--json", "--strict-config", "--skip-git-repo-check"]
        command += [*(["resume", "--last"] if turn else []), f"Say hi, turn {turn}."]
        done = subprocess.run(
            command,
            input="",
            capture_output=True,
            text=True,
            env=environ,
            cwd=work,
            timeout=RUN_TIMEOUT_S,
        )
        events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
        kinds = [e.get("type") for e in events]
        assert done.returncode == 0 and "turn.completed" in kinds, (turn, events, done.stderr)
        assert "turn.failed" not in kinds
        answers = [
            e["item"]["text"]
            for e in events
            if e.get("type") == "item.completed" and e["item"].get("type") == "agent_message"
        ]
        assert [a for a in answers if a.strip()], (turn, events)
        outputs.append(done.stdout + done.stderr)
    joined = "\n".join(outputs)
    assert "compaction output item" not in joined
    return outputs


def compactions(tmp_path: Path) -> list[dict[str, Any]]:
    """The `compacted` items of the session's rollout (what Codex keeps of each compaction)."""
    out = []
    for rollout in (tmp_path / "codex-home").rglob("*.jsonl"):
        for line in rollout.read_text().splitlines():
            record = json.loads(line)
            if record.get("type") == "compacted":
                out.append(record["payload"])
    return out


def proxy_log(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "chatcli.proxy"]


def test_a_custom_provider_compacts_with_normal_turns(
    codex: Path,
    proxy: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="chatcli.proxy")
    session(codex, tmp_path, *custom_provider(proxy))
    made = compactions(tmp_path)
    assert len(made) >= TURNS - 1  # compacted before each later turn
    assert all(c["message"] for c in made)  # Codex's own summary, from a normal turn
    log = proxy_log(caplog)
    print("\n".join(log))
    assert not [line for line in log if "compacted (" in line or "compaction item" in line]


def test_codexs_openai_provider_compacts_remotely_through_the_proxy(
    codex: Path,
    proxy: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="chatcli.proxy")
    session(codex, tmp_path, *openai_provider(proxy))
    log = proxy_log(caplog)
    print("\n".join(log))
    triggered = [line for line in log if "compacted (compaction_trigger)" in line]
    assert len(triggered) >= TURNS - 1  # remote compaction v2: the inline trigger
    assert not [line for line in log if "/responses/compact" in line]
    assert len([line for line in log if "expanded a compaction item" in line]) >= TURNS - 1
    made = compactions(tmp_path)
    assert len(made) >= TURNS - 1
    for compacted in made:  # Codex keeps the proxy's item, and sends it back
        kept = [i for i in compacted["replacement_history"] if i.get("type") == "compaction"]
        assert len(kept) == 1 and kept[0]["encrypted_content"].startswith(TOKEN_PREFIX)

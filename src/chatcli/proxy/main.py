"""`chatcli proxy`: parse the flags, open the upstream, serve the app with uvicorn.

The upstream flags are the chat's (`--provider`, `--model`, `--base-url`,
`--context-window`, `--max-tokens`, with the same variables and config file, resolved by
`chatcli.chat.settings.load_settings`); the proxy adds `--host`/`--port` (127.0.0.1:8787),
client keys, limits and CORS. Library settings (`CHATCLI_MAX_RECOVERY_ATTEMPTS`, ...) come
from the environment, as for the chat. Requests are recorded in the chat's session store
(`chatcli.store.open_store`: the SQLite file, or PostgreSQL with `CHATCLI_DATABASE_URL`,
which replicas share) unless `--no-sessions`. `--workers N` runs N processes on the port
(uvicorn's own process manager), each a proxy of its own, sharing the session store and the
keys of the compaction items (`chatcli.proxy.keys`: configured with `--compaction-secret`,
else the store's; with neither, the parent makes a secret and hands it to its workers).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from chatcli.chat.settings import CliSettings, load_settings, positive_int
from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.errors import ConfigError
from chatcli.redact import redact_url

if TYPE_CHECKING:
    from chatcli.proxy.app import ProxyOptions
    from chatcli.proxy.guard import Guard
    from chatcli.proxy.sessions import SessionRecorder
    from chatcli.wire.forwarding import Upstream

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "build_parser", "main", "worker_app"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8787
PROXY_EXTRA_MISSING = (
    "chatcli proxy needs starlette, uvicorn and cryptography: pip install 'chatcli-recovery[proxy]'"
)


def build_parser() -> argparse.ArgumentParser:
    from chatcli.proxy.app import DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_CONCURRENCY

    parser = argparse.ArgumentParser(
        prog="chatcli proxy",
        description="An OpenAI- and Anthropic-compatible endpoint that keeps any client's "
        "conversations alive: chatcli's recovery in front of any upstream.",
    )
    parser.add_argument(
        "--provider",
        help="the upstream: openai, anthropic, gemini, "
        "openai-compatible, llama-cpp, or python:MODULE:FACTORY",
    )
    parser.add_argument("--model", help="the upstream model (a .gguf path for llama-cpp)")
    parser.add_argument("--base-url", help="the upstream's URL (openai-compatible, or a gateway)")
    parser.add_argument(
        "--context-window",
        type=positive_int,
        metavar="N",
        help="the upstream model's window in tokens, when not the catalog's",
    )
    parser.add_argument(
        "--max-tokens", type=positive_int, help="output limit when a client sets none"
    )
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (%(default)s)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (%(default)s)")
    parser.add_argument(
        "--api-key",
        action="append",
        default=[],
        metavar="KEY",
        help="a client key (repeatable; also CHATCLI_PROXY_KEYS, comma-separated);"
        " required to bind beyond loopback",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=positive_int,
        default=DEFAULT_MAX_BODY_BYTES,
        help="largest request body (%(default)s)",
    )
    parser.add_argument(
        "--max-concurrency",
        type=positive_int,
        default=DEFAULT_MAX_CONCURRENCY,
        help="requests in flight per client key (%(default)s)",
    )
    parser.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="allow browser requests from ORIGIN (repeatable; default: no CORS)",
    )
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="worker processes sharing the port (%(default)s); each one is a proxy of its own",
    )
    parser.add_argument(
        "--escalate-past-client-limit",
        action="store_true",
        help="continue an answer cut at the max_tokens its client set, with a higher limit "
        "(default: the client's max_tokens is its ceiling; the answer is returned as cut)",
    )
    parser.add_argument(
        "--compaction-secret",
        action="append",
        default=[],
        metavar="SECRET",
        help="a secret the compaction items' key is derived from (repeatable: the first seals,"
        " all open; also CHATCLI_PROXY_COMPACTION_SECRETS, comma-separated; default: keys kept"
        " in the session store)",
    )
    parser.add_argument(
        "--compaction-ttl",
        type=positive_int,
        metavar="DAYS",
        help="days a compaction item is accepted after it was made (30)",
    )
    parser.add_argument(
        "--public-metrics",
        action="store_true",
        help="serve GET /metrics without a client key (default: every route but /healthz"
        " needs one when client keys are set)",
    )
    parser.add_argument(
        "--no-sessions",
        action="store_true",
        help="record nothing in the session store (default: every request, grouped into"
        " sessions; CHATCLI_DATABASE_URL=postgresql://... for a store replicas share)",
    )
    return parser


def main(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> int:
    """Run the proxy until interrupted; the exit status (2: configuration or missing extra)."""
    env = os.environ if environ is None else environ
    try:
        import uvicorn

        from chatcli.proxy.app import create_app
        from chatcli.proxy.keys import SECRETS_ENV, new_secret
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in ("starlette", "uvicorn", "cryptography"):
            raise
        print(PROXY_EXTRA_MISSING, file=sys.stderr)
        return 2
    given = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(given)
    try:
        app = create_app(*_configured(args, env))
    except (ConfigError, ImportError) as exc:
        print(f"chatcli proxy: {exc}", file=sys.stderr)
        return 2
    print(
        f"chatcli proxy: http://{args.host}:{args.port} -> {app.state.proxy.upstream.name} "
        f"({app.state.proxy.upstream.model}), {args.workers} worker(s)",
        file=sys.stderr,
    )
    if args.workers == 1:
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
        return 0
    # Each worker process builds its own app from the same flags (`worker_app`), with the
    # same compaction keys: with no secret and no store to share them, the parent's secret.
    os.environ[_WORKER_ARGV] = json.dumps(given)
    if args.no_sessions and not app.state.proxy.sealing.config.secrets:
        os.environ[SECRETS_ENV] = new_secret()
    uvicorn.run(
        f"{__name__}:worker_app",
        factory=True,
        workers=args.workers,
        host=args.host,
        port=args.port,
        log_level="warning",
    )
    return 0


_WORKER_ARGV = "CHATCLI_PROXY_WORKER_ARGV"  # the flags, for `worker_app` in each worker


def worker_app() -> Any:
    """The app of one worker process of `chatcli proxy --workers N` (uvicorn's factory)."""
    from chatcli.proxy.app import create_app
    from chatcli.proxy.keys import SECRETS_ENV, sealing_config

    args = build_parser().parse_args(json.loads(os.environ[_WORKER_ARGV]))
    if args.no_sessions and not sealing_config(args.compaction_secret, os.environ).secrets:
        raise ConfigError(
            "several workers must share the key of the compaction items: give one"
            f" --compaction-secret (or set {SECRETS_ENV}), or use a session store"
        )
    return create_app(*_configured(args, os.environ))


def _configured(
    args: argparse.Namespace, env: Mapping[str, str]
) -> tuple[Upstream, Guard, ProxyOptions]:
    from chatcli.proxy.app import ProxyOptions
    from chatcli.proxy.guard import Guard, parse_keys
    from chatcli.proxy.keys import sealing_config
    from chatcli.proxy.upstream import open_upstream

    flags = {
        k: getattr(args, k)
        for k in ("provider", "model", "base_url", "context_window", "max_tokens")
    }
    guard = Guard(
        parse_keys(args.api_key, env), host=args.host, max_concurrency=args.max_concurrency
    )
    settings = load_settings(flags, env)
    upstream = open_upstream(settings, env)
    options = ProxyOptions(
        max_body_bytes=args.max_body_bytes,
        cors_origins=tuple(args.cors_origin),
        recovery=RecoveryConfig.from_env(env),
        microcompact=MicrocompactConfig.from_env(env),
        sessions=None if args.no_sessions else _recorder(upstream, settings, env),
        escalate_past_client_limit=args.escalate_past_client_limit,
        public_metrics=args.public_metrics,
        sealing=sealing_config(args.compaction_secret, env, ttl_days=args.compaction_ttl),
    )
    return upstream, guard, options


def _recorder(upstream: Upstream, settings: CliSettings, env: Mapping[str, str]) -> SessionRecorder:
    """The session recorder over the chat's store; learned windows are scoped to this
    upstream (its provider and redacted URL)."""
    from chatcli.proxy.sessions import SessionRecorder
    from chatcli.store import open_store, window_scope

    base_url = redact_url(settings.base_url)
    return SessionRecorder(
        open_store(env),
        upstream=window_scope(upstream.name, base_url),
        settings={
            "provider": upstream.name,
            "model": upstream.model,
            "base_url": base_url,
            "context_window": settings.context_window,
            "max_tokens": upstream.max_tokens,
        },
    )

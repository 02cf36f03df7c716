"""llama.cpp's HTTP server, prebuilt: `llama-server` from the xllamacpp wheel, no compiler.

The test suite (tests/servers.py), the examples, the benchmarks and scripts/check-installs.sh
start it as they would start a compiled `llama-server`, with the same options (the ones they
use), and stop it with SIGTERM (or Ctrl-C):

    python scripts/llama-server.py --model tiny.gguf --alias chatcli-tiny \
        --host 127.0.0.1 --port 8080 --ctx-size 1024 --parallel 1 --threads 1 --seed 1

It serves llama-server's whole API (/health, /props, /tokenize, /apply-template,
/v1/chat/completions, /v1/messages, /v1/responses, ...) from the code xllamacpp compiled in
(`chatcli.providers.llama_engine`). Needs `pip install 'chatcli-recovery[local]'`.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
from pathlib import Path

from chatcli.providers.llama_engine import EngineOptions, start_engine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--model", "-m", required=True)
    parser.add_argument("--alias", "-a")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--ctx-size", "-c", type=int, default=4096)
    parser.add_argument("--parallel", "-np", type=int, default=1)
    parser.add_argument("--threads", "-t", type=int)
    parser.add_argument("--seed", "-s", type=int)
    parser.add_argument("--temp", type=float)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--reverse-prompt", "-r", action="append", default=[])
    parser.add_argument("--grammar")
    parser.add_argument("--no-cache-prompt", dest="cache_prompt", action="store_false")
    parser.add_argument("--chat-template-file", type=Path)
    parser.add_argument("--verbosity", "-lv", type=int, default=0)  # 3: llama-server's log
    args = parser.parse_args()
    options = EngineOptions(
        n_ctx=args.ctx_size,
        host=args.host,
        port=args.port,
        alias=args.alias,
        n_parallel=args.parallel,
        n_threads=args.threads,
        seed=args.seed,
        temperature=args.temp,
        top_p=args.top_p,
        stop=tuple(args.reverse_prompt),
        grammar=args.grammar,
        cache_prompt=args.cache_prompt,
        chat_template=args.chat_template_file.read_text() if args.chat_template_file else None,
        verbosity=args.verbosity,
    )
    engine = start_engine(args.model, options)
    print(f"llama-server (xllamacpp) listening on {engine.listening_address}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C, or SIGTERM's default: the end
        threading.Event().wait()


if __name__ == "__main__":
    main()

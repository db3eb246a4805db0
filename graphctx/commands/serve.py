"""Serve answers over HTTP: POST /v1/answer (batched), add/edit/delete questions, a page at / (LitServe)."""

from __future__ import annotations

import argparse
import os
import signal
from typing import TextIO

from graphctx.command_line import add_config
from graphctx.prompts import VARIANTS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "YAML config (model, data, retrieval, knowledge; the adapter: evaluation.adapter)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    parser.add_argument("--pool-dir", help="the live pool's folder (default <cache_dir>/serve-pool)")
    parser.add_argument(
        "--variant", default="GraphContextGen", choices=list(VARIANTS), help="a request's default variant"
    )
    parser.add_argument(
        "--max-batch-size", type=int, help="requests answered together (default: generation.batch_size)"
    )
    parser.add_argument(
        "--batch-timeout",
        type=float,
        default=0.5,
        help="seconds a batch waits to fill (0.5; a lone request waits that long)",
    )
    parser.add_argument("--max-body-bytes", type=int, default=65536, help="request body limit (65536)")
    parser.add_argument("--max-question-chars", type=int, default=8000, help="question length limit")
    parser.add_argument("--max-question-tokens", type=int, default=1024, help="question token limit")
    parser.add_argument(
        "--body-timeout", type=float, default=10.0, help="seconds a request body may take to arrive (10)"
    )
    parser.add_argument(
        "--docs", action="store_true", help="serve /docs and /openapi.json (their pages load a CDN's scripts)"
    )
    parser.add_argument(
        "--read-key", action="store_true", help="reads need the API key too (GRAPHCTX_API_KEY)"
    )


def stop(signum: int, frame: object) -> None:
    """SIGTERM (a service manager's stop): end LitServe's worker processes, then this one (LitServe's own
    shutdown fails on HTTP servers run as threads, and a plain exit would leave its workers running)."""
    import multiprocessing

    for child in multiprocessing.active_children():
        child.terminate()
    os._exit(0)


def execute(args: argparse.Namespace, out: TextIO) -> int:
    from graphctx.errors import ConfigError
    from graphctx.serve.lifetime import guard_children
    from graphctx.serve.requests import Limits
    from graphctx.serve.server import ServeSettings, build_server

    key = os.environ.get("GRAPHCTX_API_KEY") or None  # the writes' key; never on the command line
    if args.read_key and key is None:
        raise ConfigError("--read-key: set GRAPHCTX_API_KEY")
    if (args.max_batch_size is not None and args.max_batch_size < 1) or args.batch_timeout < 0:
        raise ConfigError("--max-batch-size: at least 1; --batch-timeout: not negative")
    if not args.body_timeout > 0:
        raise ConfigError(f"--body-timeout: a positive number of seconds, not {args.body_timeout}")
    limits = Limits(args.max_body_bytes, args.max_question_chars, args.max_question_tokens, args.body_timeout)
    settings = ServeSettings(
        args,
        args.pool_dir,
        args.variant,
        limits,
        key,
        key if args.read_key else None,
        args.max_batch_size,
        args.batch_timeout,
        args.docs,
    )
    signal.signal(signal.SIGTERM, stop)
    guard_children()
    server = build_server(settings)
    server.on_listening = lambda: print(
        f"serving on http://{args.host}:{args.port}/ (writes {'on' if key else 'off'})", file=out, flush=True
    )
    server.run(
        host=args.host,
        port=args.port,
        num_api_servers=1,
        api_server_worker_type="thread",
        generate_client_file=False,
        log_level="warning",
    )
    return 0

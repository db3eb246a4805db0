"""Load on ``graphctx serve`` (LitServe, batched) against a naive server that runs ``graphctx answer``'s
path per request, one at a time, in the same run, on the same questions; then add/edit/delete latency.

Workspace: the tiny random Llama with a random LoRA adapter (seed 0) on the cardano sample's recent
questions (the pool the tests use), GraphContextGen, ``--new-tokens`` greedy tokens. Each server is a real
process on 127.0.0.1; ``--clients`` asyncio clients (httpx) send ``--requests`` questions in all, each
client waiting for its answer before sending the next, bounded by ``--seconds``. Measured per server:
throughput (answers/s), p50/p99 latency, errors (non-200 or transport failures), the server's resident
memory (all its processes) at start and end.

The naive server: one ``Answerer`` per request, the whole of ``graphctx answer``'s recipe (config, models,
index read from the cache, contexts, prompt, answer), requests served one at a time (a plain
``http.server``). Writes: ``--writes`` adds, edits and deletes on the live pool of ``--pool-sizes`` synthetic
questions (random unit vectors of the embedder's dimension, k-NN build above 100k), timed in-process through
:func:`graphctx.retrieval.scale.updates.update_graph` and the question embedding.

    python benchmarks/serve_load.py --clients 8 --requests 48
    python benchmarks/serve_load.py --pool-sizes 20000 1000000

Prints progress to stderr and one JSON object as the last line of stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil
import torch
import yaml

QUESTIONS = [
    "How do I delegate my ADA to a stake pool from Daedalus?",
    "Why is my transaction stuck as pending in Yoroi?",
    "How long is one epoch on the Cardano mainnet?",
    "What is the difference between a UTXO and an account?",
    "How can I mint a native token with cardano-cli?",
    "Where do staking rewards appear in my wallet?",
]

NAIVE = """
import json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from graphctx.pipeline.answerer import Answerer
from graphctx.pipeline.config_file import load_config
from graphctx.prompts import VARIANTS

CONFIG = sys.argv[1]

class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        self.send_response(200); self.end_headers(); self.wfile.write(b"ok")

    def do_POST(self):
        question = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["question"]
        config = load_config(CONFIG)  # graphctx answer's path, whole, per request
        variant = VARIANTS["GraphContextGen"]
        answerer = Answerer.from_config(config)
        retrieved = answerer.contexts([variant], [question])[variant.name][0]
        prompts = answerer.prompts(variant, [question], [retrieved])
        answer = answerer.answer_prompts(variant, prompts)[0]
        answerer.release()
        body = json.dumps({"answer": answer.text}).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)

HTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def workspace(root: Path, cardano: Path, new_tokens: int) -> Path:
    """The tiny random Llama, a random LoRA adapter (seed 0), the config serving it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from graphctx.model import ModelSpec, load_tokenizer, resolve_source

    cache = root / "cache"
    spec = ModelSpec(source="tiny-random", cache_dir=str(cache))
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(resolve_source(spec))
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, lora).save_pretrained(root / "adapter")
    load_tokenizer(spec).save_pretrained(root / "adapter")
    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    split = {**yaml.safe_load(tiny.read_text())["data"]["dataset"]["split"], "train_start": "2021-08-20"}
    settings = {
        "cache_dir": str(cache),
        "model": {"spec": {"source": "tiny-random"}},
        "data": {"dataset": {"source": str(cardano), "split": split}},
        "knowledge": {"token_budget": 160},
        "generation": {"max_new_tokens": new_tokens, "batch_size": 8, "max_prompt_tokens": 320},
        "evaluation": {"adapter": str(root / "adapter"), "wandb_project": None, "metrics": []},
    }
    path = root / "serve.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def memory(process: subprocess.Popen) -> int:
    """Resident bytes of ``process`` and its children."""
    parent = psutil.Process(process.pid)
    return sum(p.memory_info().rss for p in [parent, *parent.children(recursive=True)])


def wait_ready(url: str, process: subprocess.Popen, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"error: the server at {url} exited ({process.returncode})")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit(f"error: the server at {url} was not ready in {timeout} s")


async def load(url: str, clients: int, requests: int, seconds: float) -> dict[str, object]:
    """``requests`` questions from ``clients`` closed-loop clients, stopped at ``seconds``."""
    latencies: list[float] = []
    errors = 0
    sent = 0
    stop = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient) -> None:
        nonlocal sent, errors
        while sent < requests and time.monotonic() < stop:
            question = QUESTIONS[sent % len(QUESTIONS)]
            sent += 1
            start = time.perf_counter()
            try:
                response = await http.post(f"{url}/v1/answer", json={"question": question})
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            latencies.append(time.perf_counter() - start)
            errors += not ok

    begin = time.perf_counter()
    async with httpx.AsyncClient(timeout=max(seconds, 1.0)) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    wall = time.perf_counter() - begin
    ordered = sorted(latencies)

    def quantile(q: float) -> float | None:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None

    return {
        "answered": len(latencies) - errors,
        "errors": errors,
        "seconds": wall,
        "throughput_per_s": (len(latencies) - errors) / wall,
        "p50_s": quantile(0.5),
        "p99_s": quantile(0.99),
    }


def http_writes(url: str, count: int) -> dict[str, float]:
    """Median seconds of ``count`` adds, edits and deletes through the endpoints (embedding, graph update,
    index and pool written, committed)."""
    headers = {"X-API-Key": "bench"}
    timings: dict[str, list[float]] = {"add": [], "edit": [], "delete": []}
    for step in range(count):
        qid = 10**12 + step
        calls = {
            "add": (
                "POST",
                "/v1/questions",
                {"id": qid, "question": f"{QUESTIONS[step % 6]} (asked again {step})"},
            ),
            "edit": (
                "PUT",
                f"/v1/questions/{qid}",
                {"question": f"{QUESTIONS[(step + 1) % 6]} (edited {step})"},
            ),
            "delete": ("DELETE", f"/v1/questions/{qid}", None),
        }
        for name, (method, path, body) in calls.items():
            start = time.perf_counter()
            response = httpx.request(method, f"{url}{path}", json=body, headers=headers, timeout=300)
            timings[name].append(time.perf_counter() - start)
            if response.status_code != 200:
                raise SystemExit(f"error: {method} {path}: {response.status_code} {response.text}")
    return {f"http_{name}_median_s": sorted(times)[len(times) // 2] for name, times in timings.items()}


def run_server(argv: list[str], url: str, args: argparse.Namespace, writes: int = 0) -> dict[str, object]:
    env = {**os.environ, "GRAPHCTX_API_KEY": "bench"}
    process = subprocess.Popen(argv, env=env, stdout=sys.stderr, stderr=sys.stderr, start_new_session=True)
    try:
        wait_ready(url, process, args.startup_seconds)
        asyncio.run(load(url, 1, 1, args.seconds))  # warm: the first request pays nothing extra after
        start = memory(process)
        result = asyncio.run(load(url, args.clients, args.requests, args.seconds))
        result |= {"rss_start_mb": start / 2**20, "rss_end_mb": memory(process) / 2**20}
        result |= http_writes(url, writes) if writes else {}
        log(json.dumps(result))
        return result
    finally:
        if process.poll() is None:
            process.terminate()  # graphctx serve ends LitServe's processes on SIGTERM
            try:
                process.wait(timeout=30)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # whatever is left of its process group


def write_latency(size: int, operations: int) -> dict[str, object]:
    """Median seconds of one add, edit and delete on a synthetic pool of ``size`` (graph update only, the
    question's embedding excluded: that is one encoder call whatever the pool)."""
    from graphctx.retrieval.builders import build_graph
    from graphctx.retrieval.scale.settings import ScaleSettings
    from graphctx.retrieval.scale.updates import update_graph
    from graphctx.retrieval.settings import RetrievalSettings

    knn = size > 100_000
    scale = ScaleSettings(graph_build="knn" if knn else "exact", knn_k=8)
    settings = RetrievalSettings(device="cpu", threshold=0.15, scale=scale)
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.nn.functional.normalize(torch.randn(size, 384, generator=generator), dim=1)
    start = time.perf_counter()
    graph = build_graph(embeddings, settings)
    built = time.perf_counter() - start
    timings: dict[str, list[float]] = {"add": [], "edit": [], "delete": []}
    for step in range(operations):
        fresh_row = torch.nn.functional.normalize(torch.randn(1, 384, generator=generator), dim=1)
        count = len(embeddings)
        for name in ("add", "edit", "delete"):
            start = time.perf_counter()
            if name == "add":
                kept = torch.arange(count)
                embeddings = torch.cat([embeddings, fresh_row])
                fresh = torch.tensor([count])
            elif name == "edit":
                kept = torch.arange(len(embeddings))
                kept[step] = -1
                embeddings = embeddings.clone()
                embeddings[step] = fresh_row[0]
                fresh = torch.tensor([step])
            else:
                kept = torch.arange(len(embeddings))
                kept[step + 1 :] -= 1
                kept[step] = -1
                embeddings = torch.cat([embeddings[:step], embeddings[step + 1 :]])
                fresh = torch.tensor([], dtype=torch.long)
            graph = update_graph(graph, kept, embeddings, fresh, settings)
            timings[name].append(time.perf_counter() - start)
    medians = {name: sorted(times)[len(times) // 2] for name, times in timings.items()}
    return {
        "pool": size,
        "graph_build": settings.scale.graph_build,
        "build_s": built,
        **{f"{name}_median_s": seconds for name, seconds in medians.items()},
        "delete_over_add": medians["delete"] / medians["add"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cardano", default=str(Path(__file__).resolve().parents[1] / "../shared/data/stackexchange/cardano")
    )
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--seconds", type=float, default=240.0, help="each load's time bound")
    parser.add_argument("--startup-seconds", type=float, default=600.0)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--max-batch-size", type=int, default=8)
    parser.add_argument("--pool-sizes", type=int, nargs="*", default=[20000])
    parser.add_argument("--writes", type=int, default=5, help="adds, edits and deletes timed per pool size")
    parser.add_argument("--skip-naive", action="store_true")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="serve-load-"))
    config = workspace(root, Path(args.cardano), args.new_tokens)
    report: dict[str, object] = {
        "clients": args.clients,
        "requests": args.requests,
        "new_tokens": args.new_tokens,
    }
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = [sys.executable, "-m", "graphctx.cli", "serve", "--config", str(config), "--port", str(port)]
    argv += ["--max-batch-size", str(args.max_batch_size), "--pool-dir", str(root / "pool")]
    log(f"graphctx serve on {url}")
    report["graphctx_serve"] = run_server(argv, url, args, args.writes)
    if not args.skip_naive:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        naive = root / "naive.py"
        naive.write_text(NAIVE)
        log(f"naive server on {url}")
        report["naive_per_request"] = run_server(
            [sys.executable, str(naive), str(config), str(port)], url, args
        )
        serve, plain = report["graphctx_serve"], report["naive_per_request"]
        if plain["throughput_per_s"]:
            report["throughput_ratio"] = serve["throughput_per_s"] / plain["throughput_per_s"]
    report["writes"] = []
    for size in args.pool_sizes:
        log(f"writes on a pool of {size}")
        report["writes"].append(write_latency(size, args.writes))
    print(json.dumps(report))


if __name__ == "__main__":
    main()

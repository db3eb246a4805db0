"""Load on ``graphctx serve`` (LitServe, batched): today's settings against the fast path, in the same run,
on the same questions, with the answers compared; optionally a naive server that runs ``graphctx answer``'s
path per request; then add/edit/delete latency.

Workspace: ``--model`` with a LoRA adapter on the cardano sample's recent questions (the pool the tests
use), GraphContextGen, ``--new-tokens`` greedy tokens, prompts of at most 320 tokens. ``tiny-random``: the
tiny random Llama with a random adapter (seed 0); ``smollm2-gguf``: tiny.yaml's SmolLM2-135M-Instruct
(NF4 base, as train.py tunes it) with an adapter as peft initialises it (B = 0: the base model's answers).
Questions: the sample's test then validation questions (126 distinct, real), each sent once while
``--requests`` allows. Each server is a real process on 127.0.0.1 with one torch/OpenMP thread (so the
servers compare on equal terms on a shared machine); ``--clients`` asyncio clients (httpx) send
``--requests`` questions in all, each client waiting for its answer before sending the next, bounded by
``--seconds``.

The servers (:data:`SERVERS`): ``before``, serve as ``benchmarks/serve_load.py`` ran it at ff8500a (padded
batches, ``generation.backend: generate``, float32, batches of 8 requests); ``fast_float32``,
``generation.backend: prefix`` with requests batched by ``generation.batch_size`` (16, gathered for up to
0.5 s), float32; ``fast_bfloat16``, the same with ``generation.dtype: fastest`` (bfloat16 where the CPU has
it, tiny.yaml's settings). Measured per server: throughput (answers/s), p50/p99 latency, errors (non-200 or
transport failures), the CPU seconds its processes used per answer (``cpu_efficiency_over_before``:
``before``'s over this server's; less sensitive than answers/s to other jobs on a shared machine), the
server's resident memory (all its processes) at start and end, where a batch's time went (the stage times
serve returns, averaged over batches, and the rest of a request's latency: HTTP, JSON, LitServe's queue),
and the answers that differ from ``before``'s to the same request.

The naive server (left out with ``--skip-naive``): one ``Answerer`` per request, the whole of
``graphctx answer``'s recipe (config, models, index read from the cache, contexts, prompt, answer), requests
served one at a time (a plain ``http.server``). Writes: ``--writes`` adds, edits and deletes through the last
server's endpoints, and on the live pool of ``--pool-sizes`` synthetic questions (random unit vectors of the
embedder's dimension, k-NN build above 100k), timed in-process through
:func:`graphctx.retrieval.scale.updates.update_graph` and the question embedding.

    python benchmarks/serve_load.py --clients 16 --requests 96 --skip-naive
    python benchmarks/serve_load.py --model smollm2-gguf --skip-naive --writes 0 --pool-sizes
    python benchmarks/serve_load.py --servers fast_bfloat16 --skip-naive --pool-sizes 20000 1000000

Prints progress to stderr and one JSON object as the last line of stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
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

SERVERS: dict[str, list[str]] = {
    "before": [
        *("--max-batch-size", "8", "--batch-timeout", "0.05", "--generation.batch_size", "8"),
        *("--generation.backend", "generate", "--generation.dtype", "float32"),
    ],
    "fast_float32": [
        *("--generation.batch_size", "16"),
        *("--generation.backend", "prefix", "--generation.dtype", "float32"),
    ],
    "fast_bfloat16": [
        *("--generation.batch_size", "16"),
        *("--generation.backend", "prefix", "--generation.dtype", "fastest"),
    ],
}
"""Each server's ``graphctx serve`` options beyond the workspace's config. ``before``: as this benchmark ran
serve at ff8500a; the fast ones leave ``--max-batch-size`` and ``--batch-timeout`` to serve, which batches
``generation.batch_size`` requests waiting up to 0.5 s."""

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


def workspace(root: Path, cardano: Path, new_tokens: int, model: str) -> Path:
    """``model`` with a LoRA adapter (random, seed 0, on the tiny random Llama; as peft initialises it, B = 0,
    on a real model), the config serving it."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    from graphctx.model import ModelSpec, load_tokenizer, resolve_source
    from graphctx.model.settings import TINY_RANDOM

    cache = root / "cache"
    spec = ModelSpec(source=model, cache_dir=str(cache))
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(resolve_source(spec))
    lora = LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=model != TINY_RANDOM
    )
    get_peft_model(base, lora).save_pretrained(root / "adapter")
    load_tokenizer(spec).save_pretrained(root / "adapter")
    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    split = {**yaml.safe_load(tiny.read_text())["data"]["dataset"]["split"], "train_start": "2021-08-20"}
    settings = {
        "cache_dir": str(cache),
        "model": {"spec": {"source": model}},
        "data": {"dataset": {"source": str(cardano), "split": split}},
        "knowledge": {"token_budget": 160},
        "generation": {"max_new_tokens": new_tokens, "max_prompt_tokens": 320},
        "evaluation": {"adapter": str(root / "adapter"), "wandb_project": None, "metrics": []},
    }
    path = root / "serve.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def load_questions(config: Path) -> list[str]:
    """The workspace's test then validation questions (its pool is the train split)."""
    from graphctx.pipeline.config_file import load_config

    splits = load_config(str(config)).load_dataset()
    return [str(question) for split in ("test", "validation") for question in splits[split]["question"]]


def memory(process: subprocess.Popen) -> int:
    """Resident bytes of ``process`` and its children."""
    parent = psutil.Process(process.pid)
    return sum(p.memory_info().rss for p in [parent, *parent.children(recursive=True)])


def cpu_seconds(process: subprocess.Popen) -> float:
    """User + system CPU seconds of ``process`` and its children so far."""
    parent = psutil.Process(process.pid)
    return sum(sum(p.cpu_times()[:2]) for p in [parent, *parent.children(recursive=True)])


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


async def load(
    url: str, questions: list[str], clients: int, requests: int, seconds: float
) -> tuple[dict[str, object], list[str | None]]:
    """``requests`` of ``questions`` (in order, from the first again when they run out) from ``clients``
    closed-loop clients, stopped at ``seconds``: the figures, and each request's answer (None: an error)."""
    replies: list[tuple[float, dict[str, object]]] = []
    answers: list[str | None] = []
    stop = time.monotonic() + seconds

    async def client(http: httpx.AsyncClient) -> None:
        while len(answers) < requests and time.monotonic() < stop:
            index = len(answers)
            answers.append(None)
            start = time.perf_counter()
            try:
                response = await http.post(
                    f"{url}/v1/answer", json={"question": questions[index % len(questions)]}
                )
            except httpx.HTTPError:
                continue
            if response.status_code == 200:
                reply = response.json()
                answers[index] = reply["answer"]
                replies.append((time.perf_counter() - start, reply))

    begin = time.perf_counter()
    async with httpx.AsyncClient(timeout=max(seconds, 1.0)) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    wall = time.perf_counter() - begin
    ordered = sorted(latency for latency, _ in replies)

    def quantile(q: float) -> float | None:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else None

    figures = {
        "answered": len(replies),
        "errors": len(answers) - len(replies),
        "seconds": wall,
        "throughput_per_s": len(replies) / wall,
        "p50_s": quantile(0.5),
        "p99_s": quantile(0.99),
        "batches": batch_stages(replies),
    }
    return figures, answers


def batch_stages(replies: list[tuple[float, dict[str, object]]]) -> dict[str, float]:
    """Where a batch's time went: each stage's mean over the batches (the requests of one batch carry its
    ``timings``: the batch's requests, its stages in ms), and ``outside_ms``, the mean of a request's
    latency less its batch's ``total_ms`` (HTTP, JSON, waiting in LitServe's queue for earlier batches)."""
    batches = {json.dumps(reply["timings"], sort_keys=True): reply["timings"] for _, reply in replies}
    if not batches:
        return {}
    means = {
        key: sum(t[key] for t in batches.values()) / len(batches) for key in next(iter(batches.values()))
    }
    outside = [1000 * latency - reply["timings"]["total_ms"] for latency, reply in replies]
    return {"count": len(batches), **means, "outside_ms": sum(outside) / len(outside)}


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


def run_server(
    argv: list[str], url: str, args: argparse.Namespace, questions: list[str], writes: int = 0
) -> tuple[dict[str, object], list[str | None]]:
    """The figures of the server that ``argv`` starts (one torch/OpenMP thread) under the load, and its
    answers."""
    env = {**os.environ, "GRAPHCTX_API_KEY": "bench", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    process = subprocess.Popen(argv, env=env, stdout=sys.stderr, stderr=sys.stderr, start_new_session=True)
    try:
        wait_ready(url, process, args.startup_seconds)
        asyncio.run(load(url, QUESTIONS, 1, 1, args.seconds))  # warm, on a question not in the load
        start, cpu = memory(process), cpu_seconds(process)
        result, answers = asyncio.run(load(url, questions, args.clients, args.requests, args.seconds))
        used = cpu_seconds(process) - cpu
        result["cpu_s_per_answer"] = used / result["answered"] if result["answered"] else None
        result |= {"rss_start_mb": start / 2**20, "rss_end_mb": memory(process) / 2**20}
        result |= http_writes(url, writes) if writes else {}
        log(json.dumps(result))
        return result, answers
    finally:
        if process.poll() is None:
            process.terminate()  # graphctx serve ends LitServe's processes on SIGTERM
            try:
                process.wait(timeout=30)
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)  # whatever is left of its process group


def differing(answers: list[str | None], reference: list[str | None]) -> dict[str, int]:
    """How many requests both servers answered, and how many of them got different answers."""
    both = [(a, b) for a, b in zip(answers, reference, strict=False) if a is not None and b is not None]
    return {"answers_compared": len(both), "answers_differing": sum(a != b for a, b in both)}


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
    from graphctx.generation.loading import native_bf16

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--cardano", default=str(Path(__file__).resolve().parents[1] / "../shared/data/stackexchange/cardano")
    )
    parser.add_argument("--model", choices=["tiny-random", "smollm2-gguf"], default="tiny-random")
    parser.add_argument("--servers", nargs="+", choices=list(SERVERS), default=list(SERVERS))
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=96)
    parser.add_argument("--seconds", type=float, default=600.0, help="each load's time bound")
    parser.add_argument("--startup-seconds", type=float, default=600.0)
    parser.add_argument("--new-tokens", type=int, default=8)
    parser.add_argument("--pool-sizes", type=int, nargs="*", default=[20000])
    parser.add_argument("--writes", type=int, default=5, help="adds, edits and deletes timed per pool size")
    parser.add_argument("--skip-naive", action="store_true")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="serve-load-"))
    config = workspace(root, Path(args.cardano), args.new_tokens, args.model)
    questions = load_questions(config)
    report: dict[str, object] = {
        "model": args.model,
        "clients": args.clients,
        "requests": args.requests,
        "distinct_questions": min(args.requests, len(questions)),
        "new_tokens": args.new_tokens,
        "load_average_1m": os.getloadavg()[0],
        "cpu_bfloat16": native_bf16(),
    }
    answers: dict[str, list[str | None]] = {}
    for name in args.servers:
        shutil.rmtree(root / "cache" / "enhanced", ignore_errors=True)  # no server reads another's KG
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "graphctx.cli", "serve", "--config", str(config), "--port", str(port)]
        argv += ["--pool-dir", str(root / f"pool-{name}"), *SERVERS[name]]
        log(f"graphctx serve ({name}) on {url}")
        writes = args.writes if name == args.servers[-1] else 0
        report[name], answers[name] = run_server(argv, url, args, questions, writes)
        if "before" in answers and name != "before":
            before = report["before"]["throughput_per_s"]
            report[name]["throughput_over_before"] = report[name]["throughput_per_s"] / before
            cpu = report["before"]["cpu_s_per_answer"], report[name]["cpu_s_per_answer"]
            report[name]["cpu_efficiency_over_before"] = cpu[0] / cpu[1] if all(cpu) else None
            report[name] |= differing(answers[name], answers["before"])
    if not args.skip_naive:
        shutil.rmtree(root / "cache" / "enhanced", ignore_errors=True)
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        naive = root / "naive.py"
        naive.write_text(NAIVE)
        log(f"naive server on {url}")
        report["naive_per_request"], _ = run_server(
            [sys.executable, str(naive), str(config), str(port)], url, args, questions
        )
        plain = report["naive_per_request"]["throughput_per_s"]
        for name in args.servers:
            report[name]["throughput_over_naive"] = (
                report[name]["throughput_per_s"] / plain if plain else None
            )
    report["writes"] = []
    for size in args.pool_sizes:
        log(f"writes on a pool of {size}")
        report["writes"].append(write_latency(size, args.writes))
    print(json.dumps(report))


if __name__ == "__main__":
    main()

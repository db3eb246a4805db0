"""graphctx serve after ``kill -9`` of its main process: none of its processes is left (no port held, no
worker), the writes it acknowledged are in the pool, and a new server starts on the same port and serves
them; "serving on" is printed only once the port is bound (a second server on a taken port fails without
it). Loopback only, one ephemeral port, bounded waits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import psutil
import pytest
from evaluation_workspace import write_workspace

pytestmark = pytest.mark.slow

START_S = 600
KEY = "crash-key"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start(config: Path, port: int, pool: Path, log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "graphctx.cli", "serve", "--config", str(config), "--port", str(port)]
    argv += ["--pool-dir", str(pool)]
    env = {**os.environ, "GRAPHCTX_API_KEY": KEY}
    with open(log, "w") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env=env)


def wait_serving(server: subprocess.Popen, log: Path) -> None:
    """Until the log says "serving on" (then /health answers 200); fails if the server ends first."""
    deadline = time.monotonic() + START_S
    while "serving on" not in log.read_text():
        assert server.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.5)


def stop(server: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(server.pid, signal.SIGKILL)
    server.wait(timeout=30)


def test_kill_9_leaves_no_process_and_the_port_restarts(tmp_path, cardano_dir, tiny_bert):
    generation = {"max_new_tokens": 2, "batch_size": 1, "max_prompt_tokens": 320}
    evaluation = {"output_dir": str(tmp_path / "out"), "limit": 1}
    config = write_workspace(
        tmp_path, cardano_dir, tiny_bert, "serve.yaml", evaluation, generation=generation
    )
    port, pool = free_port(), tmp_path / "pool"
    first = start(config, port, pool, tmp_path / "first.log")
    second = third = None
    try:
        wait_serving(first, tmp_path / "first.log")
        url, headers = f"http://127.0.0.1:{port}", {"X-API-Key": KEY}
        added = {"id": 10**9, "question": "How do I delegate my ADA after a crash?", "answer": "Daedalus."}
        assert httpx.post(f"{url}/v1/questions", json=added, headers=headers, timeout=120).status_code == 200
        edited = json.loads((pool / "pool.jsonl").read_text().splitlines()[0])["id"]
        answer = {"answer": "acknowledged before the kill"}
        put = httpx.put(f"{url}/v1/questions/{edited}", json=answer, headers=headers, timeout=120)
        assert put.status_code == 200
        children = psutil.Process(first.pid).children(recursive=True)
        assert children, "LitServe started no child process"
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
        _gone, alive = psutil.wait_procs(children, timeout=30)
        assert not [child.pid for child in alive if child.status() != psutil.STATUS_ZOMBIE], (
            f"left after kill -9 of the main process: {[child.cmdline()[:3] for child in alive]}"
        )
        second = start(config, port, pool, tmp_path / "second.log")
        wait_serving(second, tmp_path / "second.log")
        assert httpx.get(f"{url}/health", timeout=10).status_code == 200
        rows = {row["id"]: row for row in map(json.loads, (pool / "pool.jsonl").read_text().splitlines())}
        assert rows[10**9] == added and rows[edited]["answer"] == "acknowledged before the kill"
        asked = httpx.post(f"{url}/v1/answer", json={"question": added["question"]}, timeout=300)
        assert asked.status_code == 200, asked.text
        assert 10**9 in [hit["id"] for hit in asked.json()["hits"]]  # the restarted worker serves it
        third = start(config, port, pool, tmp_path / "third.log")  # the port is taken: no "serving on"
        assert third.wait(timeout=START_S) != 0
        assert "serving on" not in (tmp_path / "third.log").read_text()
    finally:
        for server in (first, second, third):
            if server is not None:
                stop(server)

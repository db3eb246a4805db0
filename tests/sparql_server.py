"""A real SPARQL endpoint for tests and benchmarks: Oxigraph's HTTP server (the ``oxigraph`` package's CLI)
on a store folder, and a small fault-injecting HTTP proxy in front of it.

Faults the proxy can inject into a request (each named by a string):

* ``429``: HTTP 429 with ``Retry-After: 1``;  ``503``: HTTP 503 with ``Retry-After: 0``;
* ``stall``: no answer until ``stall_s`` has passed (past the client's timeout), then the connection closes;
* ``drop``: the connection closes without any answer;
* ``html``: HTTP 200 with an HTML maintenance page;  ``garbage``: HTTP 200 with cut-off JSON;
* ``wrongvars``: HTTP 200 with well-formed SPARQL JSON results that bind other variables than asked.
"""

from __future__ import annotations

import http.server
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

MAINTENANCE_PAGE = (
    b"<!DOCTYPE html><html><head><title>Wikimedia Error</title></head>"
    b"<body><p>Our servers are currently under maintenance.</p></body></html>"
)
FAULTS = ("429", "503", "stall", "drop", "html", "garbage", "wrongvars")
WRONG_VARIABLES = (
    b'{"head": {"vars": ["x"]}, "results": {"bindings": [{"x": {"type": "literal", "value": "1"}}]}}'
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def oxigraph_server(store: Path, timeout_s: float = 30.0) -> Iterator[str]:
    """``oxigraph serve-read-only`` on the RocksDB folder ``store``; yields its query URL."""
    beside_python = Path(sys.executable).with_name("oxigraph")
    binary = str(beside_python) if beside_python.is_file() else shutil.which("oxigraph")
    if binary is None:
        raise RuntimeError(
            "the oxigraph CLI is not installed: pip install -e '.[dev]' (it ships in 'oxigraph')"
        )
    port = free_port()
    process = subprocess.Popen(
        [binary, "serve-read-only", "--location", str(store), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/query"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(url + "?query=ASK%7B%7D", timeout=1).read()
                break
            except (urllib.error.URLError, ConnectionError):
                if process.poll() is not None or time.monotonic() > deadline:
                    error = process.stderr.read().decode() if process.poll() is not None else "timeout"
                    raise RuntimeError(f"oxigraph server on {store} did not start: {error}") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


class FaultyProxy:
    """Forwards POSTed queries to ``upstream``; ``inject(number, query)`` names the fault of each request
    (numbered from 1) or ``None`` to forward it. ``log`` records (number, fault) of every request,
    ``queries`` its query."""

    def __init__(self, upstream: str, stall_s: float = 2.0) -> None:
        self.upstream = upstream
        self.stall_s = stall_s
        self.inject: Callable[[int, str], str | None] = lambda number, query: None
        self.log: list[tuple[int, str | None]] = []
        self.queries: list[str] = []
        self.user_agents: set[str] = set()
        self.in_flight = 0
        self.max_in_flight = 0
        """Most requests the proxy was answering at once. A stalled request counts until its stall ends, past
        the client's timeout, as a query the client gave up on still runs on a real endpoint."""
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                with proxy._lock:
                    proxy.in_flight += 1
                    proxy.max_in_flight = max(proxy.max_in_flight, proxy.in_flight)
                self.answered = False
                try:
                    self._handle()
                finally:
                    self._answered()

            def _answered(self) -> None:
                """The request stops counting as in flight: called before the client can see the end of
                the answer (its last byte, or the closed connection), so its next request cannot overlap."""
                if not self.answered:
                    self.answered = True
                    with proxy._lock:
                        proxy.in_flight -= 1

            def _handle(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                query = urllib.parse.parse_qs(body.decode())["query"][0]
                with proxy._lock:
                    number = len(proxy.log) + 1
                    fault = proxy.inject(number, query)
                    proxy.log.append((number, fault))
                    proxy.queries.append(query)
                    proxy.user_agents.add(self.headers["User-Agent"])
                if fault in ("stall", "drop"):
                    if fault == "stall":
                        time.sleep(proxy.stall_s)
                    self._answered()
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "429":
                    self._answer(429, b"Too Many Requests", "text/plain", {"Retry-After": "1"})
                elif fault == "503":
                    self._answer(503, b"Service Unavailable", "text/plain", {"Retry-After": "0"})
                elif fault == "html":
                    self._answer(200, MAINTENANCE_PAGE, "text/html")
                elif fault == "wrongvars":
                    self._answer(200, WRONG_VARIABLES, "application/sparql-results+json")
                elif fault == "garbage":
                    self._answer(200, b'{"head": {"vars": ["item"]}, "results": {"bindi', "application/json")
                else:
                    self._forward(body)

            def _forward(self, body: bytes) -> None:
                request = urllib.request.Request(
                    proxy.upstream,
                    data=body,
                    headers={
                        "Accept": self.headers["Accept"],
                        "Content-Type": "application/x-www-form-urlencoded",
                    },
                )
                try:
                    with urllib.request.urlopen(request, timeout=60) as response:
                        self._answer(response.status, response.read(), response.headers["Content-Type"])
                except urllib.error.HTTPError as error:
                    self._answer(error.code, error.read(), "text/plain")

            def _answer(self, status: int, payload: bytes, kind: str, headers: dict | None = None) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload[:-1])
                self.wfile.flush()
                self._answered()
                self.wfile.write(payload[-1:])

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/sparql"

    def reset(self, faults: Callable[[int, str], str | None]) -> None:
        """Forget the requests seen so far and follow ``faults`` from now on."""
        with self._lock:
            self.log.clear()
            self.queries.clear()
            self.inject = faults

    def faults(self) -> dict[str, int]:
        """How many times each fault was injected."""
        counts = dict.fromkeys(FAULTS, 0)
        for _, fault in self.log:
            if fault is not None:
                counts[fault] += 1
        return counts

    def __enter__(self) -> FaultyProxy:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


_VALUES = re.compile(r"VALUES \?\w+ \{ (.*?) \}\n")
_TERM = re.compile(r'<[^>]*>|"(?:[^"\\]|\\.)*"(?:@[A-Za-z-]+)?')


def values_terms(query: str) -> int:
    """How many terms the VALUES blocks of ``query`` hold (its entities)."""
    return sum(len(_TERM.findall(block)) for block in _VALUES.findall(query))


def first_requests(*faults: str) -> Callable[[int, str], str | None]:
    """Faults that give the next requests the ``faults`` in order, then forwards everything."""
    pending = list(faults)
    return lambda number, query: pending.pop(0) if pending else None

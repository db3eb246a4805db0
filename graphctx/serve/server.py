"""``graphctx serve`` on LitServe: ``POST /v1/answer`` (batched), the pool's write endpoints, the page.

Processes: LitServe runs :class:`AnswerAPI` in its own worker process, which loads the models, the knowledge
stage and the index once (:meth:`AnswerAPI.setup`) and answers whole batches of requests (up to
``max_batch_size``, by default ``generation.batch_size``, gathered for ``batch_timeout`` seconds). The
HTTP server runs in this process (its thread): it checks every body before the worker sees it
(:class:`BodyCheck`), and applies the writes to the :class:`~graphctx.serve.live_pool.LivePool`, one at a
time; the worker sees a committed update at its next batch.

Keys: ``api_key`` guards the write endpoints (without one they are off: 403); with ``read_key`` set,
``/v1/answer`` needs that key too (header ``Authorization: Bearer <key>``, the scheme in any case, or
``X-API-Key: <key>``).

Hardening: every response carries the headers of :mod:`graphctx.serve.headers` (the page's CSP among
them); FastAPI's ``/docs`` and ``/openapi.json`` are served only with ``docs``.
"""

from __future__ import annotations

import hmac
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import litserve as ls
from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graphctx.serve.headers import DOCS_PAGES, SecurityHeaders, page_policy
from graphctx.serve.requests import (
    Limits,
    RequestError,
    answer_request,
    quoted,
    read_body,
    receive_body,
    write_request,
)

PAGE = Path(__file__).with_name("page.html")


@dataclass(frozen=True)
class ServeSettings:
    """What the server needs to load its recipe: plain values (the worker process gets a copy)."""

    config: Any
    """The parsed command line: ``--config`` and its overrides
    (:func:`graphctx.pipeline.config_file.run_config`)."""
    pool_dir: str | None = None
    variant: str = "GraphContextGen"
    limits: Limits = field(default_factory=Limits)
    api_key: str | None = None
    read_key: str | None = None
    max_batch_size: int | None = None
    """Most requests answered together; None: ``generation.batch_size`` (one decoding batch: with
    ``generation.backend: prefix`` a larger batch costs no pads and reads the weights once for more
    answers)."""
    batch_timeout: float = 0.5
    """Seconds a batch waits to fill. Closed-loop clients otherwise split into cohorts that never merge:
    the clients of the batch just answered ask again while the worker has started on the queued ones
    (``benchmarks/serve_load.py``, 16 clients, SmolLM2: 12.0 requests a batch at 0.05 s, 16.0 at 0.5 s,
    8% more answers/s); a lone request waits that long."""
    docs: bool = False
    """Serve FastAPI's API pages (``/docs``, ``/redoc``, ``/openapi.json``); off by default."""


def load(settings: ServeSettings) -> Any:
    """The run config of ``settings``."""
    from graphctx.pipeline.config_file import run_config

    return run_config(settings.config)


def pool_folder(settings: ServeSettings, config: Any) -> Path:
    """``--pool-dir``, else ``<cache>/serve-pool`` (the cache folder as every stage resolves it:
    ``cache_dir``, else ``$GRAPHCTX_CACHE``, else ``.cache/graphctx``)."""
    from graphctx.cache import cache_root

    return Path(settings.pool_dir) if settings.pool_dir else cache_root(config.cache_dir) / "serve-pool"


def presented_key(request: Request) -> str:
    """The key in ``Authorization: Bearer <key>`` (the scheme in any case: RFC 7235), else in
    ``X-API-Key``."""
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else request.headers.get("x-api-key", "")


def check_key(request: Request, key: str | None) -> None:
    """401 unless ``key`` is None or the request presents it (compared in constant time)."""
    if key is not None and not hmac.compare_digest(presented_key(request).encode(), key.encode()):
        raise HTTPException(401, "missing or wrong API key")


class AnswerAPI(ls.LitAPI):
    """``POST /v1/answer``: ``{question, variant?}`` → the answer and why
    (:mod:`graphctx.serve.answering`)."""

    def __init__(self, settings: ServeSettings, max_batch_size: int) -> None:
        super().__init__(
            max_batch_size=max_batch_size,
            batch_timeout=settings.batch_timeout,
            api_path="/v1/answer",
        )
        self.settings = settings
        self.batched = max_batch_size > 1
        """LitServe calls ``predict`` with one request, not a list, when a batch holds one."""

    def setup(self, device: str) -> None:
        from graphctx.serve.lifetime import in_spawned_child

        in_spawned_child()
        from graphctx.evaluation.attribution.corpus import config_host
        from graphctx.model import load_tokenizer
        from graphctx.pipeline.answerer import Answerer
        from graphctx.prompts import VARIANTS
        from graphctx.serve.answering import ServedAnswerer
        from graphctx.serve.live_pool import LivePool
        from graphctx.stack.model_stack import ModelStack, check_models

        config = load(self.settings)
        check_models(ModelStack(config), "serve", [VARIANTS[self.settings.variant]])
        pool = LivePool(pool_folder(self.settings, config), config.retrieval, config.cache_dir)
        tokenizer = load_tokenizer(config.model.spec)
        answerer = Answerer.from_config(config, pool=pool.snapshot().rows, tokenizer=tokenizer)
        self.served = ServedAnswerer(answerer, pool, config_host(config), config)
        self.count = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])
        self.served.builder()  # the index, retriever and models load now, not at the first request
        answerer.model(VARIANTS[self.settings.variant].model)

    def authorize(self, request: Request) -> None:
        check_key(request, self.settings.read_key)

    def decode_request(self, request) -> tuple[str, str]:  # no annotation: LitServe passes the JSON body
        try:
            return answer_request(dict(request), self.settings.limits, self.count, self.settings.variant)
        except RequestError as error:
            raise HTTPException(error.status, error.message) from None

    def batch(self, inputs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        return list(inputs)

    def predict(self, requests: Any) -> Any:
        if not self.batched:  # one (question, variant) request, answered alone
            return self.served.answer([requests])[0]
        return self.served.answer(requests)

    def unbatch(self, output: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(output)

    def encode_response(self, output):  # no annotation: LitServe sends it as JSON
        return output


class BodyCheck:
    """ASGI middleware: every ``/v1/`` POST or PUT body is received whole and checked before a route sees
    it: JSON (Content-Type, when given, ``application/json``), size (chunked too), time to arrive, UTF-8,
    one JSON object (:func:`~graphctx.serve.requests.receive_body`,
    :func:`~graphctx.serve.requests.read_body`); a refusal is a 4xx with ``{"detail": message}``."""

    def __init__(self, app: ASGIApp, limits: Limits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        checked = scope["type"] == "http" and scope["method"] in ("POST", "PUT")
        if not checked or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        try:
            json_body(headers.get("content-type"))
            body = await receive_body(receive, headers.get("content-length"), self.limits)
            read_body(body, self.limits)
        except RequestError as error:
            # the rest of a refused body is not read: the connection closes after the answer
            refusal = JSONResponse({"detail": error.message}, error.status, {"Connection": "close"})
            await refusal(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)


def json_body(content_type: str | None) -> None:
    """415 unless the Content-Type is missing or ``application/json`` (LitServe reads a form body as a
    form)."""
    if content_type is not None and content_type.split(";")[0].strip().lower() != "application/json":
        raise RequestError(415, f"Content-Type must be application/json, not {quoted(content_type)}")


def replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` with ``body`` (already received) as its first message."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replayed


class Writes:
    """The write endpoints' work in this process: the live pool, one update at a time."""

    def __init__(self, settings: ServeSettings, config: Any) -> None:
        from graphctx.serve.live_pool import LivePool

        self.settings = settings
        self.config = config
        self.pool = LivePool(pool_folder(settings, config), config.retrieval, config.cache_dir)
        self.pool.start(config.load_dataset()["train"])
        self.lock = threading.Lock()
        self._count = None

    def count(self, text: str) -> int:
        if self._count is None:
            from graphctx.model import load_tokenizer

            tokenizer = load_tokenizer(self.config.model.spec)
            self._count = lambda t: len(tokenizer(t, add_special_tokens=False)["input_ids"])
        return self._count(text)

    def apply(self, operation: str, payload: dict[str, Any], qid: Any) -> dict[str, Any]:
        from graphctx.errors import GraphctxError

        with self.lock:
            current = {int(row["id"]): str(row["question"]) for row in self.pool.snapshot().rows}
            update, answers = write_request(
                operation, payload, qid, current, self.settings.limits, self.count
            )
            try:
                return self.pool.apply(update, answers)
            except GraphctxError as error:
                raise RequestError(400, str(error)) from None


class Server(ls.LitServer):
    """A LitServer that calls ``on_listening`` once its port is bound, its worker is ready and its HTTP
    server has started (LitServe binds the port before it starts the worker)."""

    on_listening: Any = None

    def _start_server(self, *args: Any, **kwargs: Any) -> Any:
        workers = super()._start_server(*args, **kwargs)
        if self.on_listening is not None:
            self.on_listening()
        return workers


def build_server(settings: ServeSettings) -> Server:
    """The LitServer: the answer API, the write endpoints, the page at ``/``."""
    config = load(settings)
    writes = Writes(settings, config)
    page_text = PAGE.read_text(encoding="utf-8")
    headers = {"policy": page_policy(page_text), "docs": DOCS_PAGES if settings.docs else ()}
    server = Server(
        AnswerAPI(settings, settings.max_batch_size or config.generation.batch_size),
        accelerator="cpu" if config.generation.device in (None, "cpu") else "auto",
        devices=1,
        timeout=600,
        max_payload_size=None,  # BodyCheck counts the body (LitServe's check answers a chunked one 500)
        disable_openapi_url=not settings.docs,
        middlewares=[(BodyCheck, {"limits": settings.limits}), (SecurityHeaders, headers)],
    )
    app = server.app
    app.router.routes = [route for route in app.router.routes if getattr(route, "path", None) != "/"]

    @app.get("/")
    async def page() -> HTMLResponse:
        return HTMLResponse(page_text)

    async def write(request: Request, operation: str, qid: Any = None) -> JSONResponse:
        if settings.api_key is None:
            return JSONResponse({"detail": "writes are off: start the server with an API key"}, 403)
        check_key(request, settings.api_key)
        try:
            payload = read_body(await request.body(), settings.limits) if operation != "delete" else {}
            result = await run_in_threadpool(writes.apply, operation, payload, qid)
        except RequestError as error:
            return JSONResponse({"detail": error.message}, error.status)
        return JSONResponse(result)

    @app.post("/v1/questions")
    async def add(request: Request) -> JSONResponse:
        return await write(request, "add")

    @app.put("/v1/questions/{qid}")
    async def edit(request: Request, qid: str) -> JSONResponse:
        return await write(request, "edit", qid)

    @app.delete("/v1/questions/{qid}")
    async def delete(request: Request, qid: str) -> JSONResponse:
        return await write(request, "delete", qid)

    return server

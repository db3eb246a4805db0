"""The live Wikidata backend: a careful SPARQL-over-HTTP client.

* configurable endpoint (``knowledge.sparql_endpoint``), POST form requests, JSON results;
* timeout per request, retries with exponential backoff on timeouts, dropped connections, HTTP 429 and
  5xx (honouring ``Retry-After``), a polite minimum interval between request starts and a descriptive
  User-Agent; safe to call from the few threads of :func:`~graphctx.knowledge.batches.run_batches`;
* answers that are not SPARQL JSON results (an HTML maintenance page, a cut-off body) are errors that name
  the request; the per-entity answers are cached by :class:`~graphctx.knowledge.kgcache.KGCache`.
"""

from __future__ import annotations

import http.client
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from itertools import count
from typing import Any

from graphctx.cache import cache_root, fingerprint
from graphctx.knowledge.batches import RequestStats
from graphctx.knowledge.kg import SparqlKnowledgeGraph
from graphctx.knowledge.kgcache import CACHE_FORMAT, KGCache
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.sparql import SparqlError, parse_json_results

__all__ = ["SparqlClient", "SparqlError", "WikidataKnowledgeGraph"]

RETRY_STATUS = {429, 500, 502, 503, 504}
_NETWORK_ERRORS = (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException)


class SparqlClient:
    """POST queries to one endpoint; see the module docstring for timeouts and retries."""

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        min_interval_s: float = 1.0,
        backoff_s: float = 1.0,
        user_agent: str = "graphctx/0.1",
        stats: RequestStats | None = None,
    ) -> None:
        if urllib.parse.urlparse(endpoint).scheme not in {"http", "https"}:
            raise ValueError(f"knowledge.sparql_endpoint: {endpoint!r} is not an http(s) URL")
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.retries = retries
        self.min_interval_s = min_interval_s
        self.backoff_s = backoff_s
        self.user_agent = user_agent
        self.stats = stats if stats is not None else RequestStats()
        self._numbers = count(1)
        self._lock = threading.Lock()
        self._last_request = float("-inf")

    def _wait_politely(self) -> None:
        with self._lock:
            start = max(time.monotonic(), self._last_request + self.min_interval_s)
            self._last_request = start
        pause = start - time.monotonic()
        if pause > 0:
            time.sleep(pause)

    def _post(self, query: str) -> bytes:
        request = urllib.request.Request(
            self.endpoint,
            data=urllib.parse.urlencode({"query": query}).encode(),
            headers={
                "Accept": "application/sparql-results+json",
                "Content-Type": "application/x-www-form-urlencoded",
                "User-Agent": self.user_agent,
            },
            method="POST",
        )
        self._wait_politely()
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return response.read()

    def fetch(self, query: str, name: str = "") -> bytes:
        """The raw response body of ``query`` (``name`` identifies the request in errors)."""
        name = name or f"request {next(self._numbers)}"
        for attempt in range(self.retries + 1):
            delay = self.backoff_s * 2**attempt
            try:
                return self._post(query)
            except urllib.error.HTTPError as error:
                if error.code not in RETRY_STATUS or attempt == self.retries:
                    body = error.read()[:300].decode(errors="replace")
                    raise SparqlError(f"{self.endpoint}: {name}: HTTP {error.code}: {body}") from error
                retry_after = error.headers.get("Retry-After", "")
                delay = max(delay, float(retry_after)) if retry_after.isdigit() else delay
            except _NETWORK_ERRORS as error:
                if attempt == self.retries:
                    raise SparqlError(
                        f"{self.endpoint}: {name}: unreachable after {attempt + 1} tries: "
                        f"{type(error).__name__}: {error}"
                    ) from error
            self.stats.add("retried")
            time.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises

    def select(self, query: str) -> list[dict[str, str]]:
        """Rows of a SELECT query; a body that is not SPARQL JSON results is a :class:`SparqlError`."""
        name = f"request {next(self._numbers)}"
        payload = self.fetch(query, name)
        try:
            return parse_json_results(payload)
        except (SyntaxError, ValueError) as error:
            self.stats.add("malformed_responses")
            raise SparqlError(
                f"{self.endpoint}: {name}: response is not SPARQL JSON results: {error}"
            ) from error


class WikidataKnowledgeGraph(SparqlKnowledgeGraph):
    """Wikidata (or any endpoint with Wikidata's RDF model) through :class:`SparqlClient`."""

    name = "kg:wikidata"

    def __init__(
        self, client: SparqlClient, language: str = "en", max_facts_per_entity: int = 200, **options: Any
    ) -> None:
        """``options``: batching and cache keywords of :class:`SparqlKnowledgeGraph`."""
        super().__init__(language, max_facts_per_entity, **options)
        self.client = client
        client.stats = self.stats

    @property
    def source(self) -> str:
        return self.client.endpoint

    @classmethod
    def from_settings(cls, settings: KnowledgeSettings) -> WikidataKnowledgeGraph:
        client = SparqlClient(
            settings.sparql_endpoint,
            timeout_s=settings.sparql_timeout_s,
            retries=settings.sparql_retries,
            min_interval_s=settings.sparql_min_interval_s,
            user_agent=settings.user_agent,
        )
        key = fingerprint(CACHE_FORMAT, settings.sparql_endpoint, settings.language)
        return cls(
            client,
            settings.language,
            settings.max_facts_per_entity,
            batch_values=settings.sparql_batch_values,
            parallel=settings.sparql_parallel,
            max_failure_share=settings.sparql_max_failure_share,
            cache=KGCache(cache_root(settings.cache_dir or None) / "kg-cache" / f"{key}.sqlite"),
        )

    def select(self, query: str) -> list[dict[str, str]]:
        return self.client.select(query)

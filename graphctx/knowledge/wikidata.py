"""The live Wikidata backend: a careful SPARQL-over-HTTP client.

* configurable endpoint (``knowledge.sparql_endpoint``), POST form requests, JSON results;
* timeout per request, retries with exponential backoff on timeouts, HTTP 429 and 5xx (honouring
  ``Retry-After``), a polite minimum interval between requests and a descriptive User-Agent;
* an on-disk cache of responses keyed by endpoint and query, written atomically.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from graphctx.cache import atomic_path, cache_root, fingerprint
from graphctx.errors import EndpointError
from graphctx.knowledge.kg import SparqlKnowledgeGraph
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.sparql import parse_json_results

RETRY_STATUS = {429, 500, 502, 503, 504}


class SparqlError(EndpointError):
    """The endpoint refused or kept failing a query."""


class SparqlClient:
    """POST queries to one endpoint; see the module docstring for timeouts, retries and caching."""

    def __init__(
        self,
        endpoint: str,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        min_interval_s: float = 1.0,
        backoff_s: float = 1.0,
        user_agent: str = "graphctx/0.1",
        cache_dir: Path | None = None,
    ) -> None:
        if urllib.parse.urlparse(endpoint).scheme not in {"http", "https"}:
            raise ValueError(f"knowledge.sparql_endpoint: {endpoint!r} is not an http(s) URL")
        self.endpoint = endpoint
        self.timeout_s = timeout_s
        self.retries = retries
        self.min_interval_s = min_interval_s
        self.backoff_s = backoff_s
        self.user_agent = user_agent
        self.cache_dir = cache_dir
        self.requests_sent = 0
        self._last_request = float("-inf")

    def _cache_file(self, query: str) -> Path | None:
        return self.cache_dir / f"{fingerprint(self.endpoint, query)}.json" if self.cache_dir else None

    def _wait_politely(self) -> None:
        pause = self._last_request + self.min_interval_s - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        self._last_request = time.monotonic()

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
        self.requests_sent += 1
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            return response.read()

    def fetch(self, query: str) -> bytes:
        """The raw JSON results of ``query`` (from the cache when present)."""
        cache_file = self._cache_file(query)
        if cache_file is not None and cache_file.is_file():
            return cache_file.read_bytes()
        for attempt in range(self.retries + 1):
            delay = self.backoff_s * 2**attempt
            try:
                payload = self._post(query)
                break
            except urllib.error.HTTPError as error:
                if error.code not in RETRY_STATUS or attempt == self.retries:
                    body = error.read()[:300].decode(errors="replace")
                    raise SparqlError(f"{self.endpoint}: HTTP {error.code}: {body}") from error
                retry_after = error.headers.get("Retry-After", "")
                delay = max(delay, float(retry_after)) if retry_after.isdigit() else delay
            except (urllib.error.URLError, TimeoutError) as error:
                if attempt == self.retries:
                    raise SparqlError(
                        f"{self.endpoint}: unreachable after {attempt + 1} tries: {error}"
                    ) from error
            time.sleep(delay)
        if cache_file is not None:
            with atomic_path(cache_file) as tmp:
                tmp.write_bytes(payload)
        return payload

    def select(self, query: str) -> list[dict[str, str]]:
        """Rows of a SELECT query."""
        try:
            return parse_json_results(self.fetch(query))
        except SyntaxError as error:
            raise SparqlError(f"{self.endpoint}: response is not SPARQL JSON results: {error}") from error


class WikidataKnowledgeGraph(SparqlKnowledgeGraph):
    """Wikidata (or any endpoint with Wikidata's RDF model) through :class:`SparqlClient`."""

    name = "kg:wikidata"

    def __init__(self, client: SparqlClient, language: str = "en", max_facts_per_entity: int = 200) -> None:
        super().__init__(language, max_facts_per_entity)
        self.client = client

    @classmethod
    def from_settings(cls, settings: KnowledgeSettings) -> WikidataKnowledgeGraph:
        client = SparqlClient(
            settings.sparql_endpoint,
            timeout_s=settings.sparql_timeout_s,
            retries=settings.sparql_retries,
            min_interval_s=settings.sparql_min_interval_s,
            user_agent=settings.user_agent,
            cache_dir=cache_root(settings.cache_dir or None) / "sparql",
        )
        return cls(client, settings.language, settings.max_facts_per_entity)

    def select(self, query: str) -> list[dict[str, str]]:
        return self.client.select(query)

"""A persistent cache of knowledge-graph answers per (entity, query shape), in one SQLite file.

Shapes: ``label`` (surface → linked ids), ``gazetteer`` (surface → nameable items with labels),
``between`` (head → the tails already asked about, and the edges found to them) and ``one_hop`` (head and
per-entity cap → its edges). A rerun, or a second variant over other pairs, asks the endpoint only for what
is missing. Writes happen in the calling thread, one transaction per answered request, so a killed run
keeps every answer it had; entities whose requests failed are never written, hence retried.

Several processes (the ranks of a multi-process evaluation) may read and write one file at once: SQLite's
file locks keep each transaction whole, and a writer that finds the file locked waits up to
:data:`BUSY_TIMEOUT_S` for the other's transaction to end instead of failing. The default rollback journal
is kept (WAL needs shared memory, which network filesystems of clusters do not give).
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from graphctx.knowledge.sparql import KGFact

CACHE_FORMAT = 1
"""Bump when a query shape's answers change: part of the cache file's name."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS lookups (shape TEXT, surface TEXT, answer TEXT, PRIMARY KEY (shape, surface))
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS checked (head TEXT, tail TEXT, PRIMARY KEY (head, tail)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS edges (shape TEXT, head TEXT, fact TEXT, PRIMARY KEY (shape, head, fact))
    WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS one_hop_done (head TEXT, cap INTEGER, PRIMARY KEY (head, cap)) WITHOUT ROWID;
"""
BUSY_TIMEOUT_S = 300.0
"""How long a write waits for another process's transaction on the same file (SQLite's default: 5 s)."""
_BATCH = 500
"""Parameters per SQL ``IN (...)`` (SQLite allows 32,766)."""


def _fact_json(fact: KGFact) -> str:
    return json.dumps(
        [fact.head_id, fact.head_label, fact.relation_id, fact.relation_label, fact.tail_id, fact.tail_label]
    )


class KGCache:
    """Answers of one endpoint (the file name is keyed by endpoint and language)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S)
        self.db.executescript(SCHEMA)

    def _select(self, sql: str, keys: Sequence[str], *prefix: object) -> list[tuple]:
        rows: list[tuple] = []
        for start in range(0, len(keys), _BATCH):
            part = keys[start : start + _BATCH]
            marks = ",".join("?" * len(part))
            rows += self.db.execute(sql.format(marks=marks), (*prefix, *part)).fetchall()
        return rows

    def lookups(self, shape: str, surfaces: Sequence[str]) -> dict[str, list]:
        """Cached answers of ``shape`` (``label`` or ``gazetteer``) for the surfaces that have one."""
        sql = "SELECT surface, answer FROM lookups WHERE shape = ? AND surface IN ({marks})"
        return {s: json.loads(a) for s, a in self._select(sql, list(surfaces), shape)}

    def put_lookups(self, shape: str, answers: dict[str, list]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO lookups VALUES (?, ?, ?)",
                [(shape, s, json.dumps(a)) for s, a in answers.items()],
            )

    def checked_tails(self, heads: Sequence[str]) -> dict[str, set[str]]:
        """Per head, the tails whose edges from it were already asked for."""
        found: dict[str, set[str]] = defaultdict(set)
        for head, tail in self._select("SELECT head, tail FROM checked WHERE head IN ({marks})", list(heads)):
            found[head].add(tail)
        return found

    def edges(self, shape: str, heads: Sequence[str]) -> list[KGFact]:
        """Cached edges of ``shape`` leaving ``heads``."""
        sql = "SELECT fact FROM edges WHERE shape = ? AND head IN ({marks})"
        return [KGFact(*json.loads(fact)) for (fact,) in self._select(sql, list(heads), shape)]

    def put_between(self, heads: Iterable[str], tails: Iterable[str], facts: Iterable[KGFact]) -> None:
        """Record that every (head, tail) was asked for, and the edges found."""
        tails = list(tails)
        with self.db:
            self.db.executemany(
                "INSERT OR IGNORE INTO checked VALUES (?, ?)", [(h, t) for h in heads for t in tails]
            )
            self.db.executemany(
                "INSERT OR IGNORE INTO edges VALUES ('between', ?, ?)",
                [(f.head_id, _fact_json(f)) for f in facts],
            )

    def one_hop_done(self, heads: Sequence[str], cap: int) -> set[str]:
        sql = "SELECT head FROM one_hop_done WHERE cap = ? AND head IN ({marks})"
        return {head for (head,) in self._select(sql, list(heads), cap)}

    def put_one_hop(self, heads: Iterable[str], cap: int, facts: Iterable[KGFact]) -> None:
        with self.db:
            self.db.executemany(
                "INSERT OR IGNORE INTO edges VALUES (?, ?, ?)",
                [(f"one_hop:{cap}", f.head_id, _fact_json(f)) for f in facts],
            )
            self.db.executemany("INSERT OR IGNORE INTO one_hop_done VALUES (?, ?)", [(h, cap) for h in heads])

    def close(self) -> None:
        self.db.close()

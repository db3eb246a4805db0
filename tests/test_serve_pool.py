"""The live pool of graphctx serve (graphctx.serve.live_pool): updates are committed whole (a refused one
leaves the pool file as it was), a restart finds the last committed pool, and its index is the one a
rebuild of that pool reads."""

import json

import pytest
import torch
from test_retrieval_incremental import ADDED, TEXTS

from graphctx.errors import DataError
from graphctx.retrieval.index import build_index
from graphctx.retrieval.scale.updates import PoolUpdate
from graphctx.retrieval.settings import RetrievalSettings
from graphctx.serve.live_pool import LivePool


def test_updates_commit_whole_and_survive_a_restart(tmp_path):
    settings = RetrievalSettings(device="cpu", threshold=0.4, top_k=3)
    initial = [{"id": n, "question": text, "answer": f"answer {n}"} for n, text in enumerate(TEXTS, start=1)]
    pool = LivePool(tmp_path / "pool", settings, str(tmp_path / "cache"))
    first = pool.start(initial)
    assert [row["id"] for row in first.rows] == [1, 2, 3, 4, 5, 6]
    pool.apply(PoolUpdate(added=((7, ADDED[0]),)), {7: "use Yoroi"})
    pool.apply(PoolUpdate(edited=((3, ADDED[1]),), deleted=(1,)), {})
    before = (tmp_path / "pool" / "pool.jsonl").read_bytes()
    with pytest.raises(DataError, match="question id 9 is not in the pool"):
        pool.apply(PoolUpdate(deleted=(9,)), {})
    assert (tmp_path / "pool" / "pool.jsonl").read_bytes() == before

    restarted = LivePool(tmp_path / "pool", settings, str(tmp_path / "cache")).start(initial)  # not re-seeded
    rows = {row["id"]: row for row in restarted.rows}
    assert list(rows) == [2, 3, 4, 5, 6, 7]
    assert rows[3] == {"id": 3, "question": ADDED[1], "answer": "answer 3"}
    assert rows[7]["answer"] == "use Yoroi"
    assert restarted.version != first.version
    texts = [row["question"] for row in restarted.rows]
    index = pool.index(restarted.rows)
    rebuilt = build_index(list(rows), texts, settings, tmp_path / "fresh")
    assert torch.equal(index.graph.edge_index, rebuilt.graph.edge_index)
    assert torch.allclose(index.embeddings, rebuilt.embeddings, atol=1e-6)
    assert all(json.loads(line) for line in before.decode().splitlines())


def test_keys_are_checked_from_either_header():
    """``check_key``: no key set lets all in; else the Bearer (any case) or X-API-Key header must hold it
    (401)."""
    from fastapi import HTTPException
    from starlette.requests import Request

    from graphctx.serve.server import check_key

    def request(**headers: str) -> Request:
        raw = [(name.replace("_", "-").encode(), value.encode()) for name, value in headers.items()]
        return Request({"type": "http", "headers": raw})

    check_key(request(), None)
    check_key(request(authorization="Bearer k1"), "k1")
    check_key(request(authorization="bearer k1"), "k1")  # RFC 7235: the scheme in any case
    check_key(request(authorization="BEARER k1"), "k1")
    check_key(request(x_api_key="k1"), "k1")
    for wrong in (
        request(),
        request(authorization="Bearer k2"),
        request(x_api_key="k"),
        request(authorization="k1"),
        request(authorization="Basic k1"),
    ):
        with pytest.raises(HTTPException, match="401"):
            check_key(wrong, "k1")


def test_the_pool_folder_follows_the_cache_when_the_config_names_none(tmp_path, monkeypatch):
    """configs/tiny.yaml sets ``cache_dir: null``: the served pool goes where every stage's cache goes
    (``$GRAPHCTX_CACHE``, else ``.cache/graphctx``), not a crash on the missing folder."""
    from types import SimpleNamespace

    from graphctx.serve.server import ServeSettings, pool_folder

    monkeypatch.setenv("GRAPHCTX_CACHE", str(tmp_path / "cache"))
    config = SimpleNamespace(cache_dir=None)
    assert pool_folder(ServeSettings(config="tiny.yaml"), config) == tmp_path / "cache" / "serve-pool"
    named = ServeSettings(config="tiny.yaml", pool_dir=str(tmp_path / "pool"))
    assert pool_folder(named, config) == tmp_path / "pool"

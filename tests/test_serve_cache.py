"""graphctx serve's caches stay bounded: the live pool removes the index entries of the versions it no
longer needs as it commits a write, and the served recipe keeps its query encoder across writes."""

from __future__ import annotations

from pathlib import Path

from test_retrieval_incremental import ADDED, TEXTS

from graphctx.pipeline.config_file import load_config
from graphctx.retrieval.index import build_index, index_key
from graphctx.retrieval.scale.updates import PoolUpdate
from graphctx.retrieval.settings import RetrievalSettings
from graphctx.serve.live_pool import KEPT_VERSIONS, LivePool

ROOT = Path(__file__).resolve().parents[1]


def rows() -> list[dict]:
    return [{"id": n, "question": text, "answer": f"answer {n}"} for n, text in enumerate(TEXTS, start=1)]


def test_writes_leave_a_bounded_number_of_index_entries(tmp_path: Path) -> None:
    settings = RetrievalSettings(device="cpu", threshold=0.4, top_k=3)
    cache = tmp_path / "cache"
    initial = build_index([row["id"] for row in rows()], [row["question"] for row in rows()], settings, cache)
    pool = LivePool(tmp_path / "pool", settings, str(cache))
    pool.start(rows())
    entries = cache / "retrieval-index"
    for n, text in enumerate(ADDED * 3, start=100):
        pool.apply(PoolUpdate(added=((n, f"{text} (take {n})"),)), {n: "answer"})
        pool.apply(PoolUpdate(edited=((2, f"{TEXTS[1]} (edit {n})"),)), {})
        pool.apply(PoolUpdate(deleted=(n,)), {})
    names = {path.name for path in entries.iterdir() if not path.name.startswith(".")}
    committed = pool.snapshot().rows
    current = index_key([r["id"] for r in committed], [r["question"] for r in committed], settings)
    first = index_key(initial.ids.tolist(), TEXTS, settings)
    assert current in names and first in names  # the committed version's and the training split's
    assert len(names) <= KEPT_VERSIONS + 1, sorted(names)  # 27 writes left 19 before


def test_a_write_keeps_the_query_encoder_of_the_served_recipe(tmp_path: Path, smollm2_tokenizer) -> None:
    from graphctx.pipeline.answerer import Answerer
    from graphctx.serve.answering import ServedAnswerer

    overrides = ["--cache_dir", str(tmp_path / "cache"), "--knowledge.enabled", "false"]
    config = load_config(ROOT / "configs" / "tiny.yaml", overrides)
    pool = LivePool(tmp_path / "pool", config.retrieval, config.cache_dir)
    served_rows = pool.start(rows()).rows
    answerer = Answerer.from_config(config, pool=served_rows, tokenizer=smollm2_tokenizer)
    served = ServedAnswerer(answerer, pool, None, config)
    before = served.builder()
    encoder = before.retriever("graph").encoder
    pool.apply(PoolUpdate(added=((50, ADDED[0]),)), {50: "use Yoroi"})
    after = served.builder()
    assert after is not before and 50 in after.pool  # the new version is served
    assert after.retriever("graph").encoder is encoder

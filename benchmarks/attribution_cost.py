"""Cost per answered row of the attribution architectures on the real cardano pool: post-hoc retrieval
(question ⊕ answer embedded by the packaged MiniLM, cosine top-k over the pool) and AutoAIS reranking (the
judge on each of the k passages), beside judging one passage (what every architecture's probability costs).

    python benchmarks/attribution_cost.py --queries 16 --k 10

The judge is a tiny random T5 (2 layers, width 32, the T5 judge's code path with a real SentencePiece
tokenizer): its seconds are the code path's, far below TRUE's T5-XXL. The queries are the last
``--queries`` questions of the dump with their accepted answers as "answers"; the pool is the rest. The
pool index (embedding the pool once, then cached) is timed apart. Progress goes to stderr; the last stdout
line is JSON.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from graphctx.data import DatasetSettings, FilterSettings, load_qa_dataset
from graphctx.evaluation.attribution.architectures import (
    ArchitectureContext,
    AttributionRow,
    AutoAISRerank,
    PostHoc,
)
from graphctx.evaluation.attribution.attributor import JudgeAndRetrievers
from graphctx.evaluation.attribution.corpus import Corpus
from graphctx.metrics.judges import build_judge
from graphctx.metrics.settings import AutoAISSettings
from graphctx.model.loading import packaged_llama_sentencepiece
from graphctx.retrieval.settings import RetrievalSettings

CARDANO = Path(__file__).resolve().parents[2] / "shared" / "data" / "stackexchange" / "cardano"


def log(message: str) -> None:
    print(f"[attribution-bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def tiny_t5(folder: Path) -> Path:
    """A tiny random T5 with the packaged SentencePiece model (as tests/conftest.py's ``tiny_t5``)."""
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    folder.mkdir(parents=True)
    shutil.copy(packaged_llama_sentencepiece(), folder / "spiece.model")
    tokenizer = T5Tokenizer.from_pretrained(folder, model_max_length=512)
    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=32,
        d_kv=8,
        d_ff=64,
        num_layers=2,
        num_heads=4,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(0)
    T5ForConditionalGeneration(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def timed(work) -> tuple[float, object]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source", default=str(CARDANO), help="Stack Exchange dump folder (default: cardano)"
    )
    parser.add_argument("--queries", type=int, default=16, help="answered rows to attribute")
    parser.add_argument("--k", type=int, default=10, help="passages retrieved and reranked per row")
    parser.add_argument("--max-input-tokens", type=int, default=4096, help="the judge's input limit")
    args = parser.parse_args()
    torch.set_num_threads(1)
    work = Path(tempfile.mkdtemp(prefix="attribution-bench-"))
    try:
        settings = DatasetSettings(source=args.source, workers=1, filters=FilterSettings(max_tokens=None))
        dataset = load_qa_dataset(settings, work / "cache")
        rows = sorted((r for split in dataset.values() for r in split), key=lambda r: int(r["id"]))
        pool, queries = rows[: -args.queries], rows[-args.queries :]
        log(f"{len(pool)} pool posts, {len(queries)} rows, k = {args.k}")
        judge_settings = AutoAISSettings(
            model=str(tiny_t5(work / "t5")), max_input_tokens=args.max_input_tokens
        )
        judge = build_judge(judge_settings, device="cpu")
        corpus = Corpus({int(r["id"]): r for r in pool}, "cardano")
        tools = JudgeAndRetrievers(
            corpus, RetrievalSettings(method="dense"), judge_settings, str(work), "cpu", judge
        )
        context = ArchitectureContext(("dense",))
        index_s, _ = timed(lambda: tools.retrieve("dense", args.k, ["warm up"]))
        answered = [AttributionRow(r["question"], r["answer"], [], None, f"row {r['id']}") for r in queries]
        posthoc_s, choices = timed(lambda: PostHoc(context, "dense", args.k).choose(answered, tools))
        passages = [c.passage for c in choices]
        judge_s, _ = timed(lambda: tools.probabilities(answered, passages))
        rerank_s, _ = timed(lambda: AutoAISRerank(context, "dense", args.k).choose(answered, tools))
        n = len(answered)
        result = {
            "pool": len(pool),
            "rows": n,
            "k": args.k,
            "embedder": RetrievalSettings().embedding_model,
            "judge": "tiny random T5 (2 layers, d_model 32)",
            "threads": 1,
            "index_build_s": round(index_s, 2),
            "posthoc_ms_per_row": round(1000 * posthoc_s / n, 1),
            "judge_one_passage_ms_per_row": round(1000 * judge_s / n, 1),
            "rerank_ms_per_row": round(1000 * rerank_s / n, 1),
            "rerank_ms_per_passage": round(1000 * rerank_s / (n * args.k), 1),
        }
        print(json.dumps(result))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

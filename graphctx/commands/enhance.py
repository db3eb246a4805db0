"""Retrieve past Q&A for a question and print the KG-enhanced context C_enc = C ⊕ S."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from graphctx.command_line import add_config
from graphctx.commands import add_question_arguments, read_question
from graphctx.knowledge.sentence_sources import count_label, sourced_lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "YAML config (data, retrieval, knowledge)")
    add_question_arguments(parser, "the new question to build a context for")
    parser.add_argument("--json", action="store_true", help="print the structure (pairs, triplets, sources)")


def execute(args: argparse.Namespace, out: TextIO) -> int:
    question = read_question(args)  # before anything loads
    from graphctx.pipeline.answerer import Answerer
    from graphctx.pipeline.config_file import run_config
    from graphctx.stack.model_stack import ModelStack, check_models

    config = run_config(args)
    check_models(ModelStack(config), "enhance")  # a missing model is named before anything loads
    # the pool as for training; the LLM extractor, if any, is the generation model
    context = Answerer.from_config(config).enhanced([question])[0]
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
        if context.sentences:
            print(f"\nSources of the sentences ({count_label(context.sentences)}):", file=out)
            print("\n".join(sourced_lines(context.sentences)), file=out)
    return 0

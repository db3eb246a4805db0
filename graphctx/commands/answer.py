"""Answer one question: retrieve, enhance, generate, and judge the answer's attribution (AutoAIS, and
every other metric of the config that judges an answer against its context)."""

from __future__ import annotations

import argparse
import json
from typing import TextIO

from graphctx.command_line import add_config
from graphctx.commands import add_question_arguments, read_question
from graphctx.knowledge.sentence_sources import count_label
from graphctx.prompts import VARIANTS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config(parser, "YAML config (model, data, retrieval, knowledge, evaluation)")
    add_question_arguments(parser, "the question (title and body as one text)")
    parser.add_argument(
        "--variant",
        default="GraphContextGen",
        choices=list(VARIANTS),
        help="prompt, model and context (default GraphContextGen: graph retrieval + KG, with the adapter)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--metrics",
        nargs="+",
        help="judge the answer with only these of the config's metrics that judge an answer against its "
        "context, by registry name (autoais, and minicheck when configured; default: all of them)",
    )


def execute(args: argparse.Namespace, out: TextIO) -> int:
    question = read_question(args)  # before anything loads
    from graphctx.evaluation.attribution.attributor import configured
    from graphctx.evaluation.matrix.scorer import Scorer
    from graphctx.metrics.registry import entries_named
    from graphctx.pipeline.answerer import Answerer
    from graphctx.pipeline.config_file import run_config
    from graphctx.stack.model_stack import ModelStack, check_models

    config = run_config(args)
    judges = [entry for entry in config.metric_entries if entry.premise]  # AutoAIS (and MiniCheck when set)
    if args.metrics is not None:
        judges = entries_named(judges, args.metrics, "--metrics")
    variant = VARIANTS[args.variant]
    # a missing model is named before anything loads
    check_models(ModelStack(config), "answer", [variant], [entry.name for entry in judges])
    configured(config)  # so is a bad evaluation.attribution
    cache_dir = config.cache_dir
    answerer = Answerer.from_config(config)
    # the LLM extractor is the base generation model: held after the contexts, it also answers a base variant
    retrieved = answerer.contexts([variant], [question])[variant.name][0]
    prompts = answerer.prompts(variant, [question], [retrieved])
    answer = answerer.answer_prompts(variant, prompts)[0]
    context = answer.prompt.context  # as the model saw it: parts dropped to fit max_prompt_tokens are gone
    answerer.release()  # before the judge loads
    attributions = cited_sources(config, answerer, question, answer, retrieved)

    judgement: dict[str, float | str] = dict.fromkeys(
        (entry.name for entry in judges), "n/a (the prompt had no context to attribute to)"
    )
    if context:
        judgement = Scorer(judges, None, cache_dir).score([question], [answer.text], [""], [context])[0]

    if args.json:
        hits = [{"id": h.id, "score": h.score, "fallback": h.fallback} for h in retrieved.hits]
        payload = {"question": question, "variant": variant.name, "hits": hits, "context": context}
        extra = {"attributions": attributions} if attributions else {}
        print(json.dumps({**payload, "answer": answer.text, **extra, **judgement}, indent=2), file=out)
        return 0
    if variant.retrieval != "none":
        ids = ", ".join(
            f"#{hit.id}" + (" (cosine fallback)" if hit.fallback else "") for hit in retrieved.hits
        )
        shown = [sentence for sentence in retrieved.sentences if sentence.text in context]
        print(f"Context ({variant.label}; retrieved {ids}; {count_label(shown)}):", file=out)
        print(context or "(empty)", file=out)
        print(file=out)
    print(f"Answer ({variant.label}):\n{answer.text}\n", file=out)
    if attributions:
        print("Sources:", file=out)
        for a in attributions:
            print(f"  {source_line(a)}", file=out)
        print(file=out)
    for key, value in judgement.items():
        owner = next(entry for entry in judges if key.startswith(entry.name))
        print(f"{key}: {value if isinstance(value, str) else owner.describe(key, value)}", file=out)
    return 0


def cited_sources(config, answerer, question: str, answer, retrieved) -> list[dict]:
    """The answer's attributions by each architecture of ``evaluation.attribution`` (none: ``[]``)."""
    from graphctx.evaluation.attribution.attributor import Attributor

    attributor = Attributor.from_config(config, answerer.pool)
    if attributor is None:
        return []
    line = {"id": 0, "question": question, "generated": answer.text}
    facts = retrieved.enhanced.facts if retrieved.enhanced else []
    attributor.attach([line], [answer.prompt], [facts], "the answer")
    attributor.release()
    return line["attributions"]


def source_line(attribution: dict) -> str:
    """One attribution for people: architecture, link (else the corpus id and text), judge probability."""
    where = attribution["link"] or (
        f"{attribution['passage']}: {attribution['text']}" if attribution["passage"] else "(no passage)"
    )
    p = attribution["probability"]
    judged = "not judged" if p is None else f"p(entail) = {p:.3f}"
    if attribution["judge_in_system"]:
        judged = (
            "none within the judge's limit: the top-1 retrieved"
            if p is None
            else f"chosen by the judge, {judged}"
        )
    return f"{attribution['architecture']}: {where} ({judged})"

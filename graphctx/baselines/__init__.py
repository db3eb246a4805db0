"""Pre-LLM baselines of the paper's Table 3, and the copy baseline: answers made from the retrieved pairs
without the LLM.

Each module implements one, names its paper and says where it had to choose; :data:`ANSWER_MAKERS` maps a
baseline variant (``graphctx.prompts.BASELINE_VARIANTS``) to its answer function (AnswerBot's is an
:class:`~graphctx.baselines.answerbot.AnswerBot` fitted on the pool, GenQA's its trained model),
:data:`FALLBACKS` says when a baseline gives up on a row, and :data:`STAND_INS` lists, per baseline, what
runs in place of the authors' own models (``graphctx plan`` and results.md show it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from graphctx.baselines import answerbot, retrieved_answer, techsumbot
from graphctx.baselines.candidates import Candidate, candidates_for

AnswerMaker = Callable[[str, Sequence[Candidate]], str]
"""(question, retrieved candidates best first) → answer text."""

ANSWER_MAKERS: dict[str, AnswerMaker] = {
    "RetrievedAnswer": retrieved_answer.answer,
    "RetrievedAnswer-Graph": retrieved_answer.answer,
    "TechSumBot": techsumbot.answer,
}
"""The baselines that need neither a model nor the pool; AnswerBot answers with ``answerbot.AnswerBot``
(its IDF fitted on the pool), GenQA with ``genqa.GenQAAnswerer``."""

FALLBACKS: dict[str, Callable[[str, Sequence[Candidate]], bool]] = {"TechSumBot": techsumbot.falls_back}
"""Per baseline that can give up on a row (and answer with the top retrieved answer instead): whether it
does for this (question, candidates); such rows are counted in the results table."""

STAND_INS: dict[str, dict[str, str]] = {
    "RetrievedAnswer": retrieved_answer.STAND_INS,
    "RetrievedAnswer-Graph": retrieved_answer.STAND_INS,
    "AnswerBot": answerbot.STAND_INS,
    "TechSumBot": techsumbot.STAND_INS,
    "GenQA": {  # graphctx.baselines.genqa (not imported here: it imports the training stack)
        "answer selection": "the authors' AS2 model's top sentences → the retrieved accepted answers",
        "generator": "the authors' fine-tuned T5/BART (not public) → evaluation.genqa_model, trained by "
        "`graphctx genqa`",
        "decoding": "not stated → greedy (num_beams 1, no sampling, no repetition or length rules)",
    },
}
"""Per baseline: the authors' component → what runs here instead."""


def substitutions(name: str) -> str:
    """Baseline ``name``'s :data:`STAND_INS` as one line ('' when it has none)."""
    return "; ".join(f"{component}: {replacement}" for component, replacement in STAND_INS[name].items())


__all__ = [
    "ANSWER_MAKERS",
    "FALLBACKS",
    "STAND_INS",
    "AnswerMaker",
    "Candidate",
    "candidates_for",
    "substitutions",
]

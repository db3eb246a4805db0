"""Pre-LLM baselines of the paper's Table 3, and the copy baseline: answers made from the retrieved pairs
without the LLM.

Each module implements one, names its paper and says where it had to choose; :data:`ANSWER_MAKERS` maps a
baseline variant (``graphctx.prompts.BASELINE_VARIANTS``) to its answer function, and :data:`STAND_INS`
lists, per baseline, what runs in place of the authors' own models (``graphctx plan`` shows it).
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
    "AnswerBot": answerbot.answer,
    "TechSumBot": techsumbot.answer,
}
"""The baselines that need no model of their own; GenQA answers with ``genqa.GenQAAnswerer``."""

STAND_INS: dict[str, dict[str, str]] = {
    "RetrievedAnswer": retrieved_answer.STAND_INS,
    "RetrievedAnswer-Graph": retrieved_answer.STAND_INS,
    "AnswerBot": answerbot.STAND_INS,
    "TechSumBot": techsumbot.STAND_INS,
    "GenQA": {  # graphctx.baselines.genqa (not imported here: it imports the training stack)
        "answer selection": "the authors' AS2 model's top sentences → the retrieved accepted answers",
        "generator": "the authors' fine-tuned T5/BART (not public) → evaluation.genqa_model, trained by "
        "`graphctx genqa`",
    },
}
"""Per baseline: the authors' component → what runs here instead."""

__all__ = ["ANSWER_MAKERS", "STAND_INS", "AnswerMaker", "Candidate", "candidates_for"]

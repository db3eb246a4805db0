"""AutoAIS (Bohnet et al., 2022): is the answer attributable to the passage it was generated from?

Answer mode: premise = the attribution passage, hypothesis =
``The answer to the question '{question}' is '{answer}'``; the row scores 1 when the judge entails it.
Sentence mode (as ALCE's citation recall): each answer sentence is a hypothesis and the row scores the
fraction of its sentences entailed. The judge always sees the whole premise: a row whose judge input
exceeds the judge's limit is never cut, it scores NaN (left out of the mean) and 1 in
``autoais_over_limit`` (0 for judged rows), so coverage = judged rows / rows is known per variant.
"""

from __future__ import annotations

from collections.abc import Sequence

import spacy
import torch

from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.judges import EntailmentJudge
from graphctx.metrics.settings import AutoAISSettings


class AutoAIS(RowScoreMetric):
    """AutoAIS per row: ``autoais`` (hard 0/1, or the entailed-sentence fraction) and ``autoais_soft``
    (P('1'), averaged over sentences in sentence mode), and ``autoais_over_limit`` (1 when the row's
    input was over the judge's limit and so not judged). Keys carry the judge's label when it is not the
    paper's, e.g. ``autoais[causal-lm:smollm2-gguf]``.
    """

    score_states = ("autoais", "autoais_soft", "autoais_over_limit")

    def __init__(self, judge: EntailmentJudge, settings: AutoAISSettings | None = None, **kwargs) -> None:
        super().__init__(label=judge.label, **kwargs)
        self.judge = judge
        self.settings = settings or AutoAISSettings()
        self.sentencizer = spacy.blank("en")
        self.sentencizer.add_pipe("sentencizer")

    def hypotheses(self, question: str, answer: str) -> list[str]:
        """The hypotheses judged for one row: the templated answer, or each answer sentence."""
        if self.settings.mode == "answer":
            return [self.settings.hypothesis_template.format(question=question, answer=answer)]
        return [sent.text.strip() for sent in self.sentencizer(answer).sents if sent.text.strip()]

    def update(self, questions: Sequence[str], answers: Sequence[str], premises: Sequence[str]) -> None:
        """Judge each generated answer against the passage (``premises``) it was generated from."""
        if not len(questions) == len(answers) == len(premises):
            raise ValueError(
                f"AutoAIS: {len(questions)} questions, {len(answers)} answers, {len(premises)} premises"
            )
        rows = [self.hypotheses(q, a) for q, a in zip(questions, answers, strict=True)]
        pair_premises = [p for p, hyps in zip(premises, rows, strict=True) for _ in hyps]
        pair_hypotheses = [h for hyps in rows for h in hyps]
        lengths = iter(self.judge.input_lengths(pair_premises, pair_hypotheses))
        row_lengths = [[next(lengths) for _ in hyps] for hyps in rows]
        too_long = [any(length > self.judge.max_input_tokens for length in row) for row in row_lengths]

        judged_premises = [
            p for p, hyps, long in zip(premises, rows, too_long, strict=True) if not long for _ in hyps
        ]
        judged_hypotheses = [h for hyps, long in zip(rows, too_long, strict=True) if not long for h in hyps]
        entailed, soft = torch.empty(0, dtype=torch.bool), torch.empty(0)
        if judged_hypotheses:  # a batch may hold only over-long rows and empty answers
            entailed, soft = self.judge.judge(judged_premises, judged_hypotheses)

        hard_scores, soft_scores, offset = [], [], 0
        for hyps, long in zip(rows, too_long, strict=True):
            if long:
                hard_scores.append(float("nan"))
                soft_scores.append(float("nan"))
            elif not hyps:  # an empty answer states nothing attributable
                hard_scores.append(0.0)
                soft_scores.append(0.0)
            else:
                count = len(hyps)
                hard_scores.append(entailed[offset : offset + count].double().mean().item())
                soft_scores.append(soft[offset : offset + count].double().mean().item())
                offset += count
        self._append_rows(
            autoais=hard_scores, autoais_soft=soft_scores, autoais_over_limit=[float(t) for t in too_long]
        )

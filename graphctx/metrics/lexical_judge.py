"""A lexical containment judge: an offline AutoAIS stand-in that checks the claim's words, phrases and facts
against the premise, with no inference and no weights.

No entailment model ships in a registry package, and the packaged SmolLM2 prompted for 1/0 accepts every
pair (control-pair AUC 0.415 on the tiny default). This judge reads the whole premise and scores a claim h
against a premise p as

    soft(p, h) = ½·(c₁ + c₂) · f,

c₁ the share of h's word tokens found among p's, c₂ the share of h's word bigrams found among p's (a
neighbour answer shares the topic's words, seldom its phrases), and f the share of h's facts (numbers,
versions, flags, hyphenated names, code spans: :func:`graphctx.metrics.judge_check.fact_tokens`) that p
states verbatim (1 when h states none): a claim whose one version or command is not in the premise is not
supported by it, however much else it shares. Tokens are lower-cased runs of letters and digits.
``entailed`` iff soft ≥ :data:`ACCEPT_AT` (graphctx's choice; stated in every output it labels). In
AutoAIS's answer mode the hypothesis is ``hypothesis_template`` filled with the question and the answer:
the question is given, not claimed, so the claim h is the answer and the question joins the premise. It
cannot see paraphrase, negation or inference: a stand-in, labelled ``lexical:containment`` in every key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise
from typing import TYPE_CHECKING

from graphctx.metrics.judge_check import fact_tokens

if TYPE_CHECKING:
    from torch import Tensor

ACCEPT_AT = 0.75
"""The soft score at and above which a claim is accepted."""
NO_INPUT_LIMIT = 10**9
"""The judge reads any premise whole: its input limit, in word tokens, is never reached."""
WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> list[str]:
    """Lower-cased runs of letters and digits."""
    return WORD.findall(text.lower())


def containment(premise: str, hypothesis: str) -> float:
    """soft(p, h) of the module docstring."""
    hyp, prem = words(hypothesis), words(premise)
    if not hyp:
        return 0.0
    prem_words, prem_bigrams = set(prem), set(pairwise(prem))
    unigram = sum(w in prem_words for w in hyp) / len(hyp)
    bigrams = list(pairwise(hyp))
    bigram = sum(b in prem_bigrams for b in bigrams) / len(bigrams) if bigrams else unigram
    facts = [token for _, token in fact_tokens(hypothesis)]
    stated = sum(token in premise for token in facts) / len(facts) if facts else 1.0
    return 0.5 * (unigram + bigram) * stated


class LexicalJudge:
    """:class:`~graphctx.metrics.judges.EntailmentJudge` by :func:`containment`."""

    max_input_tokens = NO_INPUT_LIMIT

    def __init__(self, hypothesis_template: str, label: str = "lexical:containment") -> None:
        self.label = label
        pattern = re.escape(hypothesis_template)
        for name in ("question", "answer"):
            pattern = pattern.replace(re.escape("{" + name + "}"), f"(?P<{name}>.*)", 1)
        self.template = re.compile(pattern, re.DOTALL)

    def claim(self, premise: str, hypothesis: str) -> tuple[str, str]:
        """(premise, claim): a templated hypothesis claims its answer, its question joins the premise."""
        match = self.template.fullmatch(hypothesis)
        if match is None or "answer" not in match.groupdict():
            return premise, hypothesis
        question = match.groupdict().get("question") or ""
        return f"{premise}\n{question}", match.group("answer")

    def input_lengths(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[int]:
        return [len(words(p)) + len(words(h)) for p, h in zip(premises, hypotheses, strict=True)]

    def judge(self, premises: Sequence[str], hypotheses: Sequence[str]) -> tuple[Tensor, Tensor]:
        import torch  # not at import: graphctx plan reads this module's limit without torch

        pairs = [self.claim(p, h) for p, h in zip(premises, hypotheses, strict=True)]
        soft = torch.tensor([containment(p, h) for p, h in pairs], dtype=torch.float64)
        return soft >= ACCEPT_AT, soft

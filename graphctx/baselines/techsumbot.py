"""TechSumBot (Yang et al. 2023, "Answer Summarization for Technical Queries: Benchmark and New
Approach", ASE 2022), as the paper's Table 3 runs it (Banerjee et al. 2024, Sec. 5, "Baselines").

Its stages (Yang et al., Sec. 4), over the sentences of the retrieved answers:

1. **Answer retrieval.** The authors search Stack Overflow for the query. *Choice:* the configured
   retriever (``retrieval.embedding_model``, dense top-k), the pairs the LLM variants see.
2. **Useful answer identification.** The authors score each sentence's usefulness to the query with a
   BERT model trained on their benchmark. *Choice:* that model is not public; usefulness here is the
   TF-IDF cosine of the sentence and the query (TF-IDF fitted on the sentences), a named stand-in.
3. **Centrality estimation.** A sentence central to the answers is one the others agree with: centrality
   is the mean cosine of a sentence with every other sentence (degree centrality of the similarity graph;
   the authors' similarities come from a contrastively trained encoder, here TF-IDF cosine).
4. **Redundancy removal.** Sentences are taken by ``usefulness * centrality``, best first, each dropped
   when its cosine with a sentence already taken exceeds :data:`REDUNDANCY` = 0.5, until
   :data:`MAX_SENTENCES` = 5 (the authors' summaries are five sentences). *Choice:* the threshold is not in
   the text. The summary keeps the chosen sentences in their score order. A sentence of zero usefulness
   (no word shared with the query) is never taken: the authors keep only sentences their classifier
   calls useful, so a summary may be shorter than five.

*Choice:* answers of code only (no prose sentence, or none useful) leave nothing to summarise; the top
answer is returned verbatim (RetrievedAnswer's text), and such rows are counted in results.md
(:func:`falls_back`, ``baseline fallbacks``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from graphctx.baselines.candidates import Candidate
from graphctx.baselines.text import sentences, tfidf

REDUNDANCY = 0.5
MAX_SENTENCES = 5

STAND_INS = {
    "answer retrieval": "Stack Overflow search (Yang et al.) → retrieval.embedding_model, dense top-k",
    "usefulness": "TechSumBot's trained BERT classifier → TF-IDF cosine with the query",
    "centrality": "contrastive sentence encoder → TF-IDF cosine",
    "code-only answers": "no useful prose sentence → the top answer verbatim (RetrievedAnswer), counted",
}


def sentence_scores(
    question: str, candidates: Sequence[Candidate]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(the sentences, their usefulness * centrality, their TF-IDF cosine matrix)."""
    texts = [s for candidate in candidates for s in sentences(candidate.answer)]
    if not texts:  # answers of code only: no sentence, no vocabulary to fit
        return [], np.zeros(0), np.zeros((0, 0))
    vectors, (query,) = tfidf(texts, [question])
    usefulness = vectors @ query
    similarity = vectors @ vectors.T
    others = len(texts) - 1
    centrality = (similarity.sum(axis=1) - np.diag(similarity)) / others if others else np.ones(len(texts))
    return texts, usefulness * centrality, similarity


def useful_sentences(question: str, candidates: Sequence[Candidate]) -> list[int]:
    """Positions of the sentences with nonzero usefulness, best ``usefulness * centrality`` first."""
    texts, score, _ = sentence_scores(question, candidates)
    return [i for i in sorted(range(len(texts)), key=lambda i: (-score[i], i)) if score[i] > 0]


def falls_back(question: str, candidates: Sequence[Candidate]) -> bool:
    """Whether no useful prose sentence exists, so :func:`answer` returns the top answer verbatim."""
    return not useful_sentences(question, candidates)


def answer(question: str, candidates: Sequence[Candidate]) -> str:
    """The top useful, non-redundant sentences, joined by spaces (the top answer when there is none)."""
    texts, _, similarity = sentence_scores(question, candidates)
    order = useful_sentences(question, candidates)
    if not order:
        return candidates[0].answer
    chosen: list[int] = []
    for i in order:
        if all(similarity[i, j] <= REDUNDANCY for j in chosen):
            chosen.append(i)
        if len(chosen) == MAX_SENTENCES:
            break
    return " ".join(texts[i] for i in chosen)

"""AnswerBot (Xu et al., ASE 2017, "AnswerBot: Automated Generation of Answer Summary to Developers'
Technical Questions"), as the paper's Table 3 runs it (Banerjee et al. 2024, Sec. 5, "Baselines").

Its three stages (Xu et al., Sec. 3):

1. **Relevant question retrieval.** The authors rank Stack Overflow questions by word2vec similarity with
   IDF weights. *Choice:* the configured retriever does it (``retrieval.embedding_model``, dense top-k):
   a stand-in, named in ``graphctx plan``. The candidates are the accepted answers of the
   ``retrieval.top_k`` retrieved questions, the pairs the LLM variants see.
2. **Useful answer paragraph selection.** Every paragraph of every candidate answer gets
   ``score = relevance * (1 + entity) * entropy * (1 + semantic) * (1 + format) * position * vote`` with
   - relevance: cosine of the paragraph and the query. *Choice:* TF-IDF vectors (the authors: word2vec),
     no model to stand in, with the IDF fitted on the paragraphs of the pool's accepted answers (the
     authors' IDF comes from their Stack Overflow corpus; :class:`AnswerBot`);
   - entity overlap: the share of the query's entities the paragraph mentions, the entities being the
     Stack Exchange tags of the retrieved questions (the authors' entities are SO tags) found in the text;
   - information entropy: the sum of the pool IDF of the paragraph's distinct words (words the pool never
     uses left out), divided by the largest;
   - semantic patterns: 1 when the paragraph has one of :data:`SEMANTIC_PATTERNS` (the authors' list:
     "please check", "I would recommend", "the best way", ...), else 0;
   - format patterns: 1 when it carries emphasis or code (Markdown ``**``, ``` ` ```, a code block: the
     HTML ``<strong>``/``<code>`` of the authors' dumps after graphctx's Markdown cleaning), else 0;
   - position: ``1 / p`` for the p-th paragraph of its answer;
   - vote: the answer's score, min-max scaled over the candidates to [0.5, 1] (1 when all are equal).
   *Choice:* the authors combine the features by multiplication; the ``1 +`` keeps a binary or zero
   feature from zeroing a paragraph that is otherwise best.
3. **Diverse answer summary.** Maximal marginal relevance over the paragraphs (scores divided by the
   largest, TF-IDF cosine as the redundancy), :data:`LAMBDA` = 0.5, up to :data:`MAX_WORDS` words, the
   chosen paragraphs in choice order. *Choice:* the authors' summary-length limit is not in the text;
   200 words is about the length of an accepted answer in the paper's sites.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from graphctx.baselines.candidates import Candidate
from graphctx.baselines.text import fit_idf, mmr, paragraphs, tfidf

SEMANTIC_PATTERNS = (
    "please check",
    "pls check",
    "you should",
    "you can try",
    "you could try",
    "check out",
    "in short",
    "the most important",
    "i'd recommend",
    "i would recommend",
    "i recommend",
    "the best way",
    "the easiest way",
    "the simplest way",
    "the solution is",
    "the problem is",
)
"""Phrases that mark a paragraph that answers (after Xu et al.'s semantic patterns)."""
FORMAT_PATTERN = re.compile(r"\*\*[^*]+\*\*|`[^`]+`|^```", re.MULTILINE)
LAMBDA = 0.5
MAX_WORDS = 200

STAND_INS = {
    "question retrieval": "word2vec + IDF (Xu et al.) → retrieval.embedding_model, dense top-k",
    "query relevance": "word2vec similarity → TF-IDF cosine",
}


class AnswerBot:
    """AnswerBot's answer maker, its IDF fitted once on the paragraphs of ``pool_answers`` (the training
    split's accepted answers, the corpus the retriever draws from)."""

    def __init__(self, pool_answers: Sequence[str]) -> None:
        self.idf = fit_idf([p for answer in pool_answers for p in paragraphs(answer)])

    def paragraph_scores(
        self, question: str, candidates: Sequence[Candidate]
    ) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(the paragraphs, their scores, their TF-IDF cosine matrix)."""
        units: list[tuple[str, int, int]] = []  # (paragraph, position in its answer, candidate)
        for number, candidate in enumerate(candidates):
            units += [(p, i, number) for i, p in enumerate(paragraphs(candidate.answer), start=1)]
        texts = [text for text, _, _ in units]
        vectors, (query,) = tfidf(texts, [question], self.idf)
        relevance = vectors @ query
        tags = {tag.lower() for c in candidates for tag in c.tags}
        wanted = {tag for tag in tags if _mentions(question, tag)}
        entity = np.array(
            [
                len({tag for tag in wanted if _mentions(text, tag)}) / len(wanted) if wanted else 0.0
                for text in texts
            ]
        )
        entropy = self.idf_sums(texts)
        semantic = np.array([float(any(p in text.lower() for p in SEMANTIC_PATTERNS)) for text in texts])
        formatted = np.array([float(bool(FORMAT_PATTERN.search(text))) for text in texts])
        position = np.array([1.0 / p for _, p, _ in units])
        votes = np.array([candidates[c].votes for _, _, c in units], dtype=float)
        spread = votes.max() - votes.min()
        vote = 0.5 + 0.5 * (votes - votes.min()) / spread if spread else np.ones_like(votes)
        score = relevance * (1 + entity) * entropy * (1 + semantic) * (1 + formatted) * position * vote
        return texts, score, vectors @ vectors.T

    def idf_sums(self, texts: Sequence[str]) -> np.ndarray:
        """Per text, the sum of the pool IDF over its distinct known words, divided by the largest sum."""
        present = (self.idf.transform(list(texts)) > 0).astype(float)
        sums = np.asarray(present @ self.idf.idf_).ravel()
        return sums / sums.max() if sums.max() > 0 else sums

    def __call__(self, question: str, candidates: Sequence[Candidate]) -> str:
        """The MMR summary of the best paragraphs, joined by blank lines."""
        texts, score, similarity = self.paragraph_scores(question, candidates)
        scaled = score / score.max() if score.max() > 0 else score
        chosen = mmr(scaled, similarity, LAMBDA, [len(t.split()) for t in texts], MAX_WORDS)
        return "\n\n".join(texts[i] for i in chosen)


def _mentions(text: str, tag: str) -> bool:
    """Whether ``text`` names ``tag`` as a word (tags' dashes read as dashes or spaces)."""
    words = r"[\s-]".join(re.escape(part) for part in tag.split("-"))
    return re.search(rf"(?<![\w-]){words}(?![\w-])", text, re.IGNORECASE) is not None

r"""BM25 over the pool's question texts (the ``bm25s`` package), ranked by graphctx's ranking rule.

Okapi BM25 (``bm25s``'s default Lucene variant) scores pool question :math:`d` for query :math:`q` as

.. math::
    \mathrm{BM25}(q, d) = \sum_{t \in q} \mathrm{idf}(t)\,
    \frac{f(t, d)\,(k_1 + 1)}{f(t, d) + k_1\,(1 - b + b\,|d| / \overline{|d|})},
    \qquad \mathrm{idf}(t) = \ln\Bigl(1 + \frac{N - n_t + 0.5}{n_t + 0.5}\Bigr),

with :math:`f(t, d)` the count of term :math:`t` in :math:`d`, :math:`n_t` the pool questions holding it.
Texts are lower-cased, split into word tokens of two or more characters, stripped of Lucene's 33
English stop words and Snowball-stemmed (nltk). A pool question sharing no term with the query (score 0)
is not retrieved: its place in the ranking would be arbitrary.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import bm25s
import numpy as np
import torch
from nltk.stem.snowball import SnowballStemmer
from torch import Tensor

from graphctx.retrieval.ranking import top_k_with_ties

_STEMMER = SnowballStemmer("english")


@lru_cache(maxsize=1 << 18)
def _stem(word: str) -> str:
    return _STEMMER.stem(word)


def _stem_words(words: Sequence[str]) -> list[str]:
    return [_stem(word) for word in words]


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased, stop-word-free, stemmed word tokens of each text (bm25s's tokenizer).

    Examples:
        >>> tokenize(["Is the ADA staked?", "Staking pools"])
        [['ada', 'stake'], ['stake', 'pool']]
    """
    return bm25s.tokenize(
        list(texts), stopwords="en", stemmer=_stem_words, return_ids=False, show_progress=False
    )


class BM25Index:
    """A BM25 index of pool texts; :meth:`search` ranks them for queries.

    Args:
        texts: the pool's texts, one per pool node.
        k1: term-frequency saturation (bm25s's default 1.5).
        b: length normalisation (0.75).

    Examples:
        >>> index = BM25Index(["restart the cardano node", "stake ada in a pool", "node sync is slow"])
        >>> scores, nodes = index.search(["why is my node slow to sync"], k=3)
        >>> nodes.tolist()
        [[2, 0, -1]]
    """

    def __init__(self, texts: Sequence[str], k1: float = 1.5, b: float = 0.75) -> None:
        self.size = len(texts)
        self.model = bm25s.BM25(k1=k1, b=b)
        corpus = bm25s.tokenize(list(texts), stopwords="en", stemmer=_stem_words, show_progress=False)
        self.model.index(corpus, show_progress=False)

    def search(self, queries: Sequence[str], k: int, tolerance: float = 1e-6) -> tuple[Tensor, Tensor]:
        """The ``k`` best pool nodes per query by BM25 (scores [B, k], nodes [B, k]); near-ties within
        ``tolerance`` in pool order (:func:`~graphctx.retrieval.ranking.top_k_with_ties`); node -1 (score
        0) where fewer than ``k`` pool questions share a term with the query."""
        tokens = tokenize(queries)
        k = min(k, self.size)

        def search(n: int) -> tuple[Tensor, Tensor]:
            if n == 0 or not tokens:
                return torch.zeros(len(tokens), n), torch.zeros(len(tokens), n, dtype=torch.long)
            nodes, scores = self.model.retrieve(tokens, k=n, show_progress=False, n_threads=1)
            return torch.from_numpy(np.asarray(scores, np.float32)), torch.from_numpy(
                np.asarray(nodes)
            ).long()

        scores, nodes = top_k_with_ties(search, k, self.size, tolerance)
        return scores, torch.where(scores > 0, nodes, -1)

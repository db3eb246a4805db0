"""The labelled alternatives to the paper's scorers: a triplet fact score (the knowledge stage's extractors,
stemmed matching, FactSumm's filter) and entity Jaccard (over UniversalNER's or spaCy's entity sets).

FactSumm's own fact score is :mod:`graphctx.metrics.factsumm`; UniversalNER's entity sets
:mod:`graphctx.metrics.uniner`."""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import spacy
from nltk.stem.porter import PorterStemmer

from graphctx.knowledge.spacy_load import load_spacy
from graphctx.knowledge.text import strip_code_blocks
from graphctx.knowledge.triplets import Triplet, TripletExtractor
from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.gold import GoldSide
from graphctx.metrics.settings import FactSettings
from graphctx.metrics.squad import normalize_answer

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans(dict.fromkeys(string.punctuation, " "))
_STEMMER = PorterStemmer()  # pure code, as in rouge_score: no nltk data
AUXILIARY_LEMMAS = dict.fromkeys(("am", "is", "are", "was", "were", "be", "been", "being"), "be") | {
    "has": "have",
    "had": "have",
    "having": "have",
    "does": "do",
    "did": "do",
}
"""Inflections of the auxiliary verbs, which Porter's stemmer leaves apart (``is``, ``are``, ``wa``; ``ha``,
``have``), mapped to their lemma: ``X is Y`` and ``X are Y`` state one relation."""
VALUE_TYPES = frozenset(("CARDINAL", "ORDINAL", "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY"))
"""spaCy's (OntoNotes) entity types of values, not named things: ``first``, ``two``, ``1`` are in most
answers, whatever they are about."""

Fact = tuple[str, str, str]


def normalise(text: str) -> str:
    """Matching form of a phrase: NFKC, lower case, punctuation and articles dropped, auxiliary verbs
    lemmatised (:data:`AUXILIARY_LEMMAS`), each word Porter-stemmed (``stores`` / ``stored`` → ``store``),
    spaces collapsed."""
    text = unicodedata.normalize("NFKC", text).lower().translate(_PUNCTUATION)
    words = _ARTICLES.sub(" ", text).split()
    return " ".join(_STEMMER.stem(AUXILIARY_LEMMAS.get(word, word)) for word in words)


def fact_set(triplets: Iterable[Triplet]) -> set[Fact]:
    """Normalised (head, relation, tail) facts; triplets that normalise to an empty part are dropped."""
    facts = {(normalise(t.head), normalise(t.relation), normalise(t.tail)) for t in triplets}
    return {fact for fact in facts if all(fact)}


def comparable(facts: set[Fact], other: set[Fact]) -> set[Fact]:
    """FactSumm's filter: the facts whose (head, relation) pair also occurs in ``other``."""
    pairs = {(head, relation) for head, relation, _ in other}
    return {fact for fact in facts if (fact[0], fact[1]) in pairs}


class FactScore(RowScoreMetric):
    """Share of generated facts found among the gold facts, and the raw triplet overlap counts.

    With G the generated and R the gold answer's normalised facts (after FactSumm's comparability filter
    when ``comparable_only``): fact_score = |G ∩ R| / |G|, and 0 when G is empty (as FactSumm), counted in
    ``answers_without_facts``. ``triplets_generated``, ``triplets_gold`` and ``triplets_shared`` count facts
    before the filter.
    """

    score_states = ("fact_score", "triplets_generated", "triplets_gold", "triplets_shared")
    count_states = ("answers_without_facts",)

    def __init__(
        self,
        extractor: TripletExtractor,
        settings: FactSettings | None = None,
        gold: GoldSide | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.extractor = extractor
        self.settings = settings or FactSettings()
        self.gold = gold or GoldSide(self.gold_value)

    def gold_value(self, text: str) -> list[list[str]]:
        """One gold answer's normalised facts, extracted alone (:mod:`graphctx.metrics.gold`)."""
        return sorted(list(fact) for fact in fact_set(self.extractor.extract([text])[0]))

    def update(self, preds: Sequence[str], targets: Sequence[str]) -> None:
        """Extract triplets from each generated answer (``preds``) and its gold answer (``targets``)."""
        if len(preds) != len(targets):
            raise ValueError(f"FactScore: {len(preds)} predictions but {len(targets)} targets")
        generated = [fact_set(t) for t in self.extractor.extract(list(preds))]
        gold = [{tuple(fact) for fact in value} for value in self.gold(targets)]
        scores, uncompared = [], 0
        for gen, ref in zip(generated, gold, strict=True):
            if self.settings.comparable_only:
                gen, ref = comparable(gen, ref), comparable(ref, gen)
            scores.append(len(gen & ref) / len(gen) if gen else 0.0)
            uncompared += not gen
        self._append_rows(
            fact_score=scores,
            triplets_generated=[len(gen) for gen in generated],
            triplets_gold=[len(ref) for ref in gold],
            triplets_shared=[len(gen & ref) for gen, ref in zip(generated, gold, strict=True)],
        )
        self._add_counts(answers_without_facts=uncompared)


EntityFinder = Callable[[Sequence[str], int | None], tuple[list[set[str]], int]]
"""(Texts, batch size or None for the finder's own) → (each text's normalised entity strings, answers that
could not be read): UniversalNER's (:class:`graphctx.metrics.uniner.UniNEREntities`) or spaCy's
(:class:`SpacyEntities`)."""


class SpacyEntities:
    """Entity sets by a spaCy pipeline's NER (the offline alternative to UniversalNER): the named entities of
    the text's prose (fenced code removed, as the spaCy triplet extractor reads it: its NER reads log lines
    and JSON as names), less the value types (:data:`VALUE_TYPES`), each normalised as UniversalNER's
    evaluation matches entities (:func:`~graphctx.metrics.squad.normalize_answer`)."""

    def __init__(self, nlp: spacy.Language) -> None:
        self.nlp = nlp

    @classmethod
    def load(cls, name: str) -> SpacyEntities:
        """The named pipeline, parser and lemmatizer off."""
        return cls(load_spacy(name, "evaluation.metrics.facts.spacy_model", disable=["parser", "lemmatizer"]))

    def __call__(self, texts: Sequence[str], batch_size: int | None = None) -> tuple[list[set[str]], int]:
        """The normalised entity strings of each text (spaCy never fails to answer: 0 unread; each doc is
        processed on its own, so ``batch_size`` changes nothing)."""
        docs = self.nlp.pipe(strip_code_blocks(text) for text in texts)
        return [
            {normalize_answer(e.text) for e in doc.ents if e.label_ not in VALUE_TYPES} - {""} for doc in docs
        ], 0


class EntityJaccard(RowScoreMetric):
    """Jaccard overlap |A ∩ B| / |A ∪ B| of the entity sets (``entities``: UniversalNER, the paper's, or
    spaCy) of the generated and gold answers. Rows where neither side has an entity are left out of the
    mean and counted in ``entity_rows_without_entities``; ``entity_answers_unparsed`` counts UniversalNER
    answers that were not a JSON list of strings.
    """

    score_states = ("entity_jaccard",)
    count_states = ("entity_rows_without_entities", "entity_answers_unparsed")

    def __init__(self, entities: EntityFinder, gold: GoldSide | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.entities = entities
        self.gold = gold or GoldSide(self.gold_value)

    def gold_value(self, text: str) -> dict[str, Any]:
        """One gold answer's entities and unread answers, found alone and unpadded (batch size 1), so the
        same gold gives the same entities in every variant (:mod:`graphctx.metrics.gold`)."""
        (entities,), unparsed = self.entities([text], 1)
        return {"entities": sorted(entities), "unparsed": unparsed}

    def update(self, preds: Sequence[str], targets: Sequence[str]) -> None:
        """Compare the entities of each generated answer (``preds``) with its gold answer's (``targets``)."""
        if len(preds) != len(targets):
            raise ValueError(f"EntityJaccard: {len(preds)} predictions but {len(targets)} targets")
        generated, unparsed = self.entities(list(preds), None)
        gold = self.gold(targets)
        unparsed += sum(value["unparsed"] for value in gold)
        pairs = zip(generated, (set(value["entities"]) for value in gold), strict=True)
        scores = [len(a & b) / len(a | b) if a | b else float("nan") for a, b in pairs]
        self._append_rows(entity_jaccard=scores)
        self._add_counts(
            entity_rows_without_entities=sum(math.isnan(score) for score in scores),
            entity_answers_unparsed=unparsed,
        )

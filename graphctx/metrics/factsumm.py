"""FactSumm's fact score (Heo, 2021; github.com/Huffon/factsumm, release 0.1.5), computed as FactSumm does.

For each text: split it into sentences (pysbd, English, ``clean=False``); find each sentence's named entities
with the NER model (transformers token classification, ``aggregation_strategy="simple"``, ``O`` spans
dropped); for every ordered pair of two entities of one sentence, classify their relation with the LUKE
entity-pair classifier and keep (head text, relation, tail text) unless it is ``no_relation``. Facts whose
head equals its tail are dropped, and so are type clashes: a PERSON head with a non-``per:`` relation, a
non-PERSON head with a ``per:`` relation, a non-PERSON tail of a ``…members…`` relation.

With S the source's facts and Y the summary's, both first kept to the facts whose (head, relation) pair
occurs on the other side (FactSumm's ``_filter_out``):

    fact_score = |Y ∩ S| / |Y|,  and 0 when Y is empty.

Here the summary is the generated answer and the source its gold answer. Facts are compared as exact
strings, as FactSumm compares them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations

import pysbd
import torch
from transformers import (
    AutoModelForTokenClassification,
    AutoTokenizer,
    LukeForEntityPairClassification,
    LukeTokenizer,
    pipeline,
)

from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.settings import FactSettings

Fact = tuple[str, str, str]
NO_RELATION = "no_relation"


@dataclass(frozen=True)
class Entity:
    """One NER span of a sentence: its text as the NER pipeline decodes it, its type, character offsets."""

    word: str
    group: str
    start: int
    end: int


def comparable(source: set[Fact], summary: set[Fact]) -> tuple[set[Fact], set[Fact]]:
    """FactSumm's ``_filter_out``: each side kept to the facts whose (head, relation) the other side has."""
    source_pairs = {(head, relation) for head, relation, _ in source}
    summary_pairs = {(head, relation) for head, relation, _ in summary}
    return (
        {fact for fact in source if fact[:2] in summary_pairs},
        {fact for fact in summary if fact[:2] in source_pairs},
    )


def fact_score(source: set[Fact], summary: set[Fact]) -> tuple[float, set[Fact], set[Fact]]:
    """FactSumm's score of ``summary`` against ``source`` and the compared fact sets (after the filter)."""
    source, summary = comparable(source, summary)
    return (len(summary & source) / len(summary) if summary else 0.0), source, summary


def keep(fact: Fact, types: dict[str, str]) -> bool:
    """FactSumm's filter of one classified fact, with ``types`` mapping entity words to their NER type."""
    head, relation, tail = fact
    if head == tail:
        return False
    head_type, tail_type = types.get(head), types.get(tail)
    if head_type is not None and (head_type == "PERSON") != relation.startswith("per:"):
        return False
    return not (tail_type is not None and tail_type != "PERSON" and "members" in relation)


def resolve_device(device: str | None) -> torch.device:
    """``device``, or CUDA when available, else CPU."""
    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


class FactSummExtractor:
    """FactSumm's NER + relation-classification fact extractor, batched (``settings.batch_size``)."""

    def __init__(self, settings: FactSettings, device: str | None = None) -> None:
        self.settings = settings
        self.device = resolve_device(device or settings.device)
        self.segmenter = pysbd.Segmenter(language="en", clean=False)
        self.ner = pipeline(
            task="token-classification",
            model=AutoModelForTokenClassification.from_pretrained(settings.ner_model),
            tokenizer=AutoTokenizer.from_pretrained(settings.ner_model),
            aggregation_strategy="simple",
            device=self.device,
        )
        self.tokenizer = LukeTokenizer.from_pretrained(
            settings.relation_model, task="entity_pair_classification"
        )
        self.relation = LukeForEntityPairClassification.from_pretrained(settings.relation_model)
        self.relation.to(self.device).eval()

    def sentences(self, text: str) -> list[str]:
        """FactSumm's sentence split (pysbd), each sentence stripped; empty ones dropped."""
        return [line.strip() for line in self.segmenter.segment(text) if line.strip()]

    def entities(self, sentences: Sequence[str]) -> list[list[Entity]]:
        """Each sentence's named entities (spans typed ``O`` dropped, as FactSumm)."""
        if not sentences:
            return []
        found = self.ner(list(sentences), batch_size=self.settings.batch_size)
        return [
            [
                Entity(item["word"], item["entity_group"], int(item["start"]), int(item["end"]))
                for item in line
                if item["entity_group"] != "O"
            ]
            for line in found
        ]

    @torch.inference_mode()
    def relations(self, pairs: Sequence[tuple[str, Entity, Entity]]) -> list[str]:
        """The relation label of each (sentence, head, tail) pair, by the LUKE classifier."""
        labels: list[str] = []
        id2label = self.relation.config.id2label
        for start in range(0, len(pairs), self.settings.batch_size):
            batch = pairs[start : start + self.settings.batch_size]
            encoded = self.tokenizer(
                [sentence for sentence, _, _ in batch],
                entity_spans=[[(h.start, h.end), (t.start, t.end)] for _, h, t in batch],
                padding=True,
                return_tensors="pt",
            ).to(self.device)
            logits = self.relation(**encoded).logits
            labels += [id2label[int(i)] for i in logits.argmax(dim=-1)]
        return labels

    def facts(self, texts: Sequence[str]) -> list[set[Fact]]:
        """FactSumm's fact set of each text."""
        sentences = [self.sentences(text) for text in texts]
        flat = [line for lines in sentences for line in lines]
        entities = iter(self.entities(flat))
        pairs: list[tuple[int, str, Entity, Entity, dict[str, str]]] = []
        for position, lines in enumerate(sentences):
            for line in lines:
                line_entities = next(entities)
                types = {entity.word: entity.group for entity in line_entities}
                pairs += [(position, line, h, t, types) for h, t in permutations(line_entities, 2)]
        labels = self.relations([(line, h, t) for _, line, h, t, _ in pairs])
        result: list[set[Fact]] = [set() for _ in texts]
        for (position, line, head, tail, types), relation in zip(pairs, labels, strict=True):
            if relation == NO_RELATION:
                continue
            fact = (line[head.start : head.end].strip(), relation, line[tail.start : tail.end].strip())
            if keep(fact, types):
                result[position].add(fact)
        return result


class FactSummScore(RowScoreMetric):
    """FactSumm's fact score of each generated answer against its gold answer (module docstring), with the
    compared fact counts: ``facts_generated`` |Y|, ``facts_gold`` |S| and ``facts_shared`` |Y ∩ S|, after
    FactSumm's filter. ``answers_without_facts`` counts answers with Y empty (score 0, as FactSumm)."""

    score_states = ("fact_score", "facts_generated", "facts_gold", "facts_shared")
    count_states = ("answers_without_facts",)

    def __init__(self, extractor: FactSummExtractor, **kwargs) -> None:
        super().__init__(**kwargs)
        self.extractor = extractor

    def update(self, preds: Sequence[str], targets: Sequence[str]) -> None:
        """Score each generated answer (``preds``, FactSumm's summary) against its gold (``targets``)."""
        if len(preds) != len(targets):
            raise ValueError(f"FactSummScore: {len(preds)} predictions but {len(targets)} targets")
        facts = self.extractor.facts([*preds, *targets])
        results = [
            fact_score(gold, generated)
            for generated, gold in zip(facts[: len(preds)], facts[len(preds) :], strict=True)
        ]
        self._append_rows(
            fact_score=[score for score, _, _ in results],
            facts_generated=[len(summary) for _, _, summary in results],
            facts_gold=[len(source) for _, source, _ in results],
            facts_shared=[len(summary & source) for _, source, summary in results],
        )
        self._add_counts(answers_without_facts=sum(not summary for _, _, summary in results))

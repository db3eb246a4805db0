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

Length (graphctx's choice: FactSumm calls both models on whole sentences and crashes past their position
limits, which code blocks and logs in these answers reach). A sentence is **truncated**, never windowed:
the NER model reads its first ``L_ner`` tokens (the token-classification pipeline's truncation at the
model's limit), and the relation model reads the sentence's longest word-boundary prefix that fits
``L_rel`` tokens with the four entity markers; a pair with an entity past that cut is not classified (no
fact). ``L`` is the model's absolute position limit (RoBERTa-style models such as LUKE number positions
from ``pad_token_id + 1``), capped by its tokenizer's ``model_max_length``. Each row counts its sentences
so cut (``fact_sentences_cut``), and the results table shows the count beside the score.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

import pysbd
import torch
from transformers import (
    AutoModelForTokenClassification,
    AutoTokenizer,
    LukeForEntityPairClassification,
    LukeTokenizer,
    PretrainedConfig,
    PreTrainedTokenizerBase,
    pipeline,
)

from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.gold import GoldSide
from graphctx.metrics.settings import FactSettings

Fact = tuple[str, str, str]
NO_RELATION = "no_relation"
ROBERTA_POSITIONS = ("roberta", "luke", "xlm-roberta", "camembert")
"""Model types whose position ids start at ``pad_token_id + 1``."""
PAIR_TOKENS = 10
"""Tokens a LUKE entity-pair input adds to a sentence's own: ``<s>``, ``</s>``, the four entity markers,
and at most one more per entity boundary where the text is split into separately tokenised pieces."""


def token_limit(config: PretrainedConfig, tokenizer: PreTrainedTokenizerBase) -> int:
    """Most tokens ``config``'s model reads: its absolute position embeddings (none: unbounded), capped
    by the tokenizer's ``model_max_length`` (its 'unset' value of ~1e30 means no cap)."""
    limit = tokenizer.model_max_length if tokenizer.model_max_length < 1e9 else sys.maxsize
    positions = getattr(config, "max_position_embeddings", None)
    if positions and getattr(config, "position_biased_input", True):
        offset = (config.pad_token_id or 0) + 1 if config.model_type in ROBERTA_POSITIONS else 0
        limit = min(limit, positions - offset)
    return limit


@dataclass
class TextFacts:
    """FactSumm's facts of one text and how many of its sentences were cut to a model's limit."""

    facts: set[Fact] = field(default_factory=set)
    sentences_cut: int = 0


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
    """FactSumm's NER + relation-classification fact extractor, batched (``settings.batch_size``, or the
    ``batch_size`` of a call: 1 runs every input alone, unpadded)."""

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
        self.ner_limit = token_limit(self.ner.model.config, self.ner.tokenizer)
        self.ner.tokenizer.model_max_length = self.ner_limit  # the pipeline truncates to it
        self.relation_limit = token_limit(self.relation.config, self.tokenizer)

    def sentences(self, text: str) -> list[str]:
        """FactSumm's sentence split (pysbd), each sentence stripped; empty ones dropped."""
        return [line.strip() for line in self.segmenter.segment(text) if line.strip()]

    def ner_cut(self, sentence: str) -> bool:
        """Whether the NER model reads only the first ``ner_limit`` tokens of ``sentence``."""
        return len(self.ner.tokenizer(sentence)["input_ids"]) > self.ner_limit

    def relation_tokens(self, text: str) -> int:
        """Tokens of ``text`` alone in the relation model's tokenizer (no entity markers or specials)."""
        return len(self.tokenizer.backend_tokenizer.encode(text, add_special_tokens=False).ids)

    def relation_cut(self, sentence: str) -> int:
        """Characters of ``sentence`` the relation model reads: all of it, or its longest prefix ending at a
        word boundary whose tokens plus :data:`PAIR_TOKENS` fit ``relation_limit`` (binary search)."""
        budget = self.relation_limit - PAIR_TOKENS

        def fits(end: int) -> bool:
            return self.relation_tokens(sentence[:end]) <= budget

        if fits(len(sentence)):
            return len(sentence)
        ends = [0] + [i for i, char in enumerate(sentence) if char.isspace()]
        return ends[bisect.bisect_left(ends, True, key=lambda end: not fits(end)) - 1]

    def entities(self, sentences: Sequence[str], batch_size: int | None = None) -> list[list[Entity]]:
        """Each sentence's named entities (spans typed ``O`` dropped, as FactSumm)."""
        if not sentences:
            return []
        found = self.ner(list(sentences), batch_size=batch_size or self.settings.batch_size)
        return [
            [
                Entity(item["word"], item["entity_group"], int(item["start"]), int(item["end"]))
                for item in line
                if item["entity_group"] != "O"
            ]
            for line in found
        ]

    @torch.inference_mode()
    def relations(
        self, pairs: Sequence[tuple[str, Entity, Entity]], batch_size: int | None = None
    ) -> list[str]:
        """The relation label of each (sentence, head, tail) pair, by the LUKE classifier."""
        labels: list[str] = []
        id2label = self.relation.config.id2label
        size = batch_size or self.settings.batch_size
        for start in range(0, len(pairs), size):
            batch = pairs[start : start + size]
            encoded = self.tokenizer(
                [sentence for sentence, _, _ in batch],
                entity_spans=[[(h.start, h.end), (t.start, t.end)] for _, h, t in batch],
                padding=True,
                return_tensors="pt",
            ).to(self.device)
            logits = self.relation(**encoded).logits
            labels += [id2label[int(i)] for i in logits.argmax(dim=-1)]
        return labels

    def facts(self, texts: Sequence[str], batch_size: int | None = None) -> list[TextFacts]:
        """FactSumm's fact set of each text, with its sentences cut to a model's limit (module docstring)."""
        sentences = [self.sentences(text) for text in texts]
        flat = [line for lines in sentences for line in lines]
        entities = iter(self.entities(flat, batch_size))
        result = [TextFacts() for _ in texts]
        pairs: list[tuple[int, str, Entity, Entity, dict[str, str]]] = []
        for position, lines in enumerate(sentences):
            for line in lines:
                line_entities = next(entities)
                types = {entity.word: entity.group for entity in line_entities}
                cut = self.relation_cut(line)
                result[position].sentences_cut += cut < len(line) or self.ner_cut(line)
                pairs += [
                    (position, line[:cut], h, t, types)
                    for h, t in permutations(line_entities, 2)
                    if max(h.end, t.end) <= cut
                ]
        labels = self.relations([(line, h, t) for _, line, h, t, _ in pairs], batch_size)
        for (position, line, head, tail, types), relation in zip(pairs, labels, strict=True):
            if relation == NO_RELATION:
                continue
            fact = (line[head.start : head.end].strip(), relation, line[tail.start : tail.end].strip())
            if keep(fact, types):
                result[position].facts.add(fact)
        return result


class FactSummScore(RowScoreMetric):
    """FactSumm's fact score of each generated answer against its gold answer (module docstring), with the
    compared fact counts: ``facts_generated`` |Y|, ``facts_gold`` |S| and ``facts_shared`` |Y ∩ S|, after
    FactSumm's filter, and ``fact_sentences_cut``, the row's sentences (answer and gold) cut to a model's
    limit. ``answers_without_facts`` counts answers with Y empty (score 0, as FactSumm)."""

    score_states = ("fact_score", "facts_generated", "facts_gold", "facts_shared", "fact_sentences_cut")
    count_states = ("answers_without_facts",)

    def __init__(self, extractor: FactSummExtractor, gold: GoldSide | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.extractor = extractor
        self.gold = gold or GoldSide(self.gold_value)

    def gold_value(self, text: str) -> dict[str, Any]:
        """One gold answer's facts and cut sentences, extracted alone and unpadded (batch size 1), so the
        same gold gives the same facts in every variant (:mod:`graphctx.metrics.gold`)."""
        (found,) = self.extractor.facts([text], batch_size=1)
        return {"facts": sorted(list(fact) for fact in found.facts), "sentences_cut": found.sentences_cut}

    def update(self, preds: Sequence[str], targets: Sequence[str]) -> None:
        """Score each generated answer (``preds``, FactSumm's summary) against its gold (``targets``, each
        extracted once and alone)."""
        if len(preds) != len(targets):
            raise ValueError(f"FactSummScore: {len(preds)} predictions but {len(targets)} targets")
        golds = [TextFacts({tuple(f) for f in v["facts"]}, v["sentences_cut"]) for v in self.gold(targets)]
        pairs = list(zip(self.extractor.facts(preds), golds, strict=True))
        results = [fact_score(gold.facts, generated.facts) for generated, gold in pairs]
        self._append_rows(
            fact_score=[score for score, _, _ in results],
            facts_generated=[len(summary) for _, _, summary in results],
            facts_gold=[len(source) for _, source, _ in results],
            facts_shared=[len(summary & source) for _, source, summary in results],
            fact_sentences_cut=[generated.sentences_cut + gold.sentences_cut for generated, gold in pairs],
        )
        self._add_counts(answers_without_facts=sum(not summary for _, _, summary in results))

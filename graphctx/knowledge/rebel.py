"""REBEL (Huguet Cabot & Navigli, 2021): seq2seq relation extraction with a linearised output.

REBEL writes the triplets of a text as one string::

    <s><triplet> head <subj> tail <obj> relation <subj> tail2 <obj> relation2 <triplet> head2 ...</s>

Every ``<triplet>`` opens a head; each following ``<subj> tail <obj> relation`` adds one triplet with that
head. The markers are added special tokens, so the output must be decoded *keeping* special tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import torch

from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.text import sentence_windows, strip_code_blocks
from graphctx.knowledge.triplets import Triplet

REBEL_MARKERS = ("<triplet>", "<subj>", "<obj>")
_MARKER_SPLIT = re.compile(r"(<triplet>|<subj>|<obj>)")
_DEFAULT_NOISE = ("<s>", "</s>", "<pad>")


def parse_rebel_output(text: str, noise_tokens: Iterable[str] = _DEFAULT_NOISE) -> list[tuple[str, str, str]]:
    """The (head, relation, tail) triplets of one decoded REBEL string, in order, without duplicates.

    Malformed pieces are dropped rather than guessed: a ``<subj>`` before any ``<triplet>`` (no head), an
    empty head/tail/relation, or a tail that never gets its ``<obj> relation``.
    """
    for token in noise_tokens:
        text = text.replace(token, " ")
    found: list[tuple[str, str, str]] = []
    head = tail = relation = None
    state = None

    def flush() -> None:
        if head and tail and relation:
            parts = (" ".join(head.split()), " ".join(relation.split()), " ".join(tail.split()))
            if all(parts) and parts not in found:
                found.append(parts)

    for piece in _MARKER_SPLIT.split(text):
        if piece == "<triplet>":
            flush()
            head, tail, relation, state = "", None, None, "head"
        elif piece == "<subj>":
            flush()
            tail, relation, state = "", None, "tail"
        elif piece == "<obj>":
            relation, state = "", "relation"
        elif state == "head":
            head += piece
        elif state == "tail":
            tail += piece
        elif state == "relation":
            relation += piece
    flush()
    return found


class RebelExtractor:
    """Batched REBEL inference: texts → sentence windows → beam search → parsed triplets."""

    name = "rebel"

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_source_tokens: int = 256,
        max_new_tokens: int = 256,
        num_beams: int = 3,
        batch_size: int = 8,
        generate_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_source_tokens = max_source_tokens
        self.max_new_tokens = max_new_tokens
        self.num_beams = num_beams
        self.batch_size = batch_size
        self.generate_kwargs = dict(generate_kwargs or {})
        self.noise_tokens = (
            tuple(t for t in (tokenizer.bos_token, tokenizer.eos_token, tokenizer.pad_token) if t)
            or _DEFAULT_NOISE
        )

    @classmethod
    def from_pretrained(cls, settings: KnowledgeSettings) -> RebelExtractor:
        """Load ``settings.rebel_model`` (e.g. ``Babelscape/rebel-large``) onto ``settings.device``."""
        from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(settings.rebel_model)
        model = AutoModelForSeq2SeqLM.from_pretrained(settings.rebel_model).to(settings.device)
        return cls(
            model,
            tokenizer,
            max_source_tokens=settings.rebel_max_source_tokens,
            max_new_tokens=settings.rebel_max_new_tokens,
            num_beams=settings.rebel_num_beams,
            batch_size=settings.batch_size,
        )

    def _count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    @torch.inference_mode()
    def generate(self, windows: Sequence[str]) -> list[str]:
        """The decoded REBEL strings (special tokens kept) of each input window."""
        decoded: list[str] = []
        device = next(self.model.parameters()).device
        for start in range(0, len(windows), self.batch_size):
            batch = list(windows[start : start + self.batch_size])
            inputs = self.tokenizer(
                batch, max_length=self.max_source_tokens, truncation=True, padding=True, return_tensors="pt"
            ).to(device)
            output = self.model.generate(
                **inputs,
                max_new_tokens=self.max_new_tokens,
                num_beams=self.num_beams,
                **self.generate_kwargs,
            )
            decoded.extend(self.tokenizer.batch_decode(output, skip_special_tokens=False))
        return decoded

    def extract(self, texts: Sequence[str]) -> list[list[Triplet]]:
        """One list of triplets per text; each text is read in windows of ``max_source_tokens``."""
        windows: list[str] = []
        owners: list[int] = []
        for index, text in enumerate(texts):
            for window in sentence_windows(
                strip_code_blocks(text), self.max_source_tokens, self._count_tokens
            ):
                windows.append(window)
                owners.append(index)
        results: list[list[Triplet]] = [[] for _ in texts]
        for owner, decoded in zip(owners, self.generate(windows), strict=True):
            for head, relation, tail in parse_rebel_output(decoded, self.noise_tokens):
                triplet = Triplet(head, relation, tail, self.name)
                if triplet not in results[owner]:
                    results[owner].append(triplet)
        return results

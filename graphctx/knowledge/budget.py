"""C_enc = C ⊕ S under a token budget: sentences S are trimmed first, then the lowest-ranked pairs.

The budget counts tokens of the generation model's tokenizer (``knowledge.tokenizer: ""``: the entry points
load it from ``model.spec`` and pass it in, the knowledge stage never loads a model) or of the tokenizer that
``knowledge.tokenizer`` names.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from graphctx.knowledge.verbalise import Sentence

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


@dataclass(frozen=True)
class TokenCounter:
    """Counts the tokens of a text (special tokens left out) with one tokenizer."""

    name: str
    """The tokenizer's identity, part of cache keys: contexts fitted with another tokenizer differ."""
    encode: Callable[[str], Sequence[int]]

    def __call__(self, text: str) -> int:
        return len(self.encode(text))


@dataclass(frozen=True)
class QAPair:
    """One retrieved past question with its accepted answer (``id``: the post id, when known)."""

    question: str
    answer: str
    id: int | None = None

    def text(self) -> str:
        return f"Question: {self.question.strip()}\nAnswer: {self.answer.strip()}"


KNOWLEDGE_HEADER = "Knowledge:"


def build_token_counter(tokenizer: str | PreTrainedTokenizerBase) -> TokenCounter:
    """The budget's counter: a loaded tokenizer (the generation model's), or the one named by a
    ``knowledge.tokenizer`` value: a SentencePiece ``.model`` file, else a Hugging Face id or folder."""
    if not isinstance(tokenizer, str):
        name = f"{type(tokenizer).__name__}:{Path(tokenizer.name_or_path).name}:{len(tokenizer)}"
        return TokenCounter(name, lambda text: tokenizer(text, add_special_tokens=False)["input_ids"])
    if not tokenizer:
        raise ValueError("knowledge.tokenizer is empty: pass the generation model's tokenizer instead")
    if tokenizer.endswith(".model") and Path(tokenizer).is_file():
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=tokenizer)
        return TokenCounter(tokenizer, processor.encode)
    from transformers import AutoTokenizer

    return build_token_counter(AutoTokenizer.from_pretrained(tokenizer))


def render(pairs: Sequence[QAPair], sentences: Sequence[Sentence]) -> str:
    """The context text: one block per pair, then the knowledge sentences (if any)."""
    blocks = [pair.text() for pair in pairs]
    if sentences:
        blocks.append("\n".join([KNOWLEDGE_HEADER, *(s.text for s in sentences)]))
    return "\n\n".join(blocks)


def most_kept(available: int, least: int, fits: Callable[[int], bool]) -> int:
    """The largest ``k`` in ``[least, available]`` with ``fits(k)``, else ``least``; ``fits`` must be
    monotone (true up to some ``k``, false above), as keeping more lines never makes a text shorter.
    Binary search: a few tokenisations instead of one per line."""
    low, high = least, available
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def fit_budget(
    pairs: Sequence[QAPair], sentences: Sequence[Sentence], budget: int, count: Callable[[str], int]
) -> tuple[list[QAPair], list[Sentence]]:
    """The pairs and sentences kept so that ``render`` fits ``budget`` tokens.

    Sentences are dropped from the end first; then pairs from the end (the retriever ranks best first). The
    top pair is never dropped nor cut: alone over the budget, it is kept whole.
    """
    pairs, sentences = list(pairs), list(sentences)
    kept = most_kept(len(sentences), 0, lambda k: count(render(pairs, sentences[:k])) <= budget)
    if kept == 0:
        top = min(len(pairs), 1)
        pairs = pairs[: most_kept(len(pairs), top, lambda k: count(render(pairs[:k], [])) <= budget)]
    return pairs, sentences[:kept]

"""C_enc = C ⊕ S under a token budget: sentences S are trimmed first, then the lowest-ranked pairs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from graphctx.knowledge.verbalise import Sentence

TokenCounter = Callable[[str], int]


@dataclass(frozen=True)
class QAPair:
    """One retrieved past question with its accepted answer (``id``: the post id, when known)."""

    question: str
    answer: str
    id: int | None = None

    def text(self) -> str:
        return f"Question: {self.question.strip()}\nAnswer: {self.answer.strip()}"


KNOWLEDGE_HEADER = "Knowledge:"


def build_token_counter(tokenizer: str) -> TokenCounter:
    """Token counter for the budget: ``""`` counts words, ``*.model`` a SentencePiece file, else HF."""
    if not tokenizer:
        return lambda text: len(text.split())
    if tokenizer.endswith(".model") and Path(tokenizer).is_file():
        import sentencepiece

        processor = sentencepiece.SentencePieceProcessor(model_file=tokenizer)
        return lambda text: len(processor.encode(text))
    from transformers import AutoTokenizer

    hf_tokenizer = AutoTokenizer.from_pretrained(tokenizer)
    return lambda text: len(hf_tokenizer(text, add_special_tokens=False)["input_ids"])


def render(pairs: Sequence[QAPair], sentences: Sequence[Sentence]) -> str:
    """The context text: one block per pair, then the knowledge sentences (if any)."""
    blocks = [pair.text() for pair in pairs]
    if sentences:
        blocks.append("\n".join([KNOWLEDGE_HEADER, *(s.text for s in sentences)]))
    return "\n\n".join(blocks)


def _truncate_words(text: str, budget: int, count: TokenCounter) -> str:
    """The longest word prefix of ``text`` within ``budget`` tokens (binary search)."""
    words = text.split()
    low, high = 0, len(words)
    while low < high:
        middle = (low + high + 1) // 2
        if count(" ".join(words[:middle])) <= budget:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low])


def fit_budget(
    pairs: Sequence[QAPair], sentences: Sequence[Sentence], budget: int, count: TokenCounter
) -> tuple[list[QAPair], list[Sentence]]:
    """The pairs and sentences kept so that ``render`` fits ``budget`` tokens.

    Sentences are dropped from the end first; then pairs from the end (the retriever ranks best first),
    keeping at least one; a lone pair that is still too long has its answer cut to fit.
    """
    pairs, sentences = list(pairs), list(sentences)
    while sentences and count(render(pairs, sentences)) > budget:
        sentences.pop()
    while len(pairs) > 1 and count(render(pairs, sentences)) > budget:
        pairs.pop()
    if pairs and count(render(pairs, sentences)) > budget:
        first = pairs[0]
        overhead = count(render([QAPair(first.question, "", first.id)], []))
        answer = _truncate_words(first.answer, max(budget - overhead, 0), count)
        pairs[0] = QAPair(first.question, answer, first.id)
    return pairs, sentences

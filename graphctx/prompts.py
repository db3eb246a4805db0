"""The prompt of every variant in the paper's evaluation matrix, in one place.

A variant is four choices: which model answers (the ``base`` model or ``base+adapter``), which retriever
picks past Q&A pairs (``none``, ``dense`` cosine top-k, ``graph`` personalized PageRank), whether the
verbalised knowledge-graph sentences S are added, and whether the retrieved pairs themselves are shown.

Prompts of the base model (zero-shot and the ``w/o INST`` rows) are plain few-shot text, the retrieved pairs
being the shots::

    Question: {retrieved question 1}
    Answer: {retrieved answer 1}

    Knowledge:
    {sentence 1}

    Question: {question}
    Answer:

Prompts of the fine-tuned model use the training format (``graphctx.data.instruct``, template ``paper``),
with the context before the question exactly as ``with_context`` places it in training::

    [INST]{context}

    {question}[\\INST]Answer:
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from transformers import PreTrainedTokenizerBase

from graphctx.data.instruct import InstructionTemplate, get_template, leading_bos
from graphctx.knowledge.budget import KNOWLEDGE_HEADER, QAPair, render
from graphctx.knowledge.verbalise import Sentence

ModelKind = Literal["base", "adapter"]
RetrievalKind = Literal["none", "dense", "graph"]

BASE_STOP_STRINGS = ("\nQuestion:", f"\n{KNOWLEDGE_HEADER}")
"""Where a base model's answer ends: a base model that goes on writing starts the next few-shot block."""


@dataclass(frozen=True)
class Variant:
    """One row of the results table."""

    name: str
    """Identifier used on the command line, in file names and in W&B keys."""
    label: str
    """Row name in the results table (the paper's name)."""
    model: ModelKind
    """``base``: the model without training; ``adapter``: the base with the trained LoRA adapter."""
    retrieval: RetrievalKind
    """Which retriever picks the past Q&A pairs (``none``: no context at all)."""
    knowledge: bool
    """Add the verbalised knowledge-graph sentences S to the context."""
    pairs: bool
    """Show the retrieved Q&A pairs in the context."""
    baseline: bool
    """A baseline of the paper (no graph retrieval, no KG): the paired test compares against the best one."""

    @property
    def has_context(self) -> bool:
        """Whether the prompt carries a context (and so an attribution passage for AutoAIS)."""
        return self.pairs or self.knowledge

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """Text that ends an answer before EOS: :data:`BASE_STOP_STRINGS` for the base model's few-shot
        prompts; none for the fine-tuned model, which was trained to end its answers with EOS."""
        return BASE_STOP_STRINGS if self.model == "base" else ()


def _variant(name: str, label: str, model: ModelKind, retrieval: RetrievalKind, knowledge: bool, pairs: bool):
    baseline = retrieval != "graph" and not knowledge
    return Variant(name, label, model, retrieval, knowledge, pairs, baseline)


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        _variant("ZeroShot", "Zero-shot", "base", "none", knowledge=False, pairs=False),
        _variant("Base-TextGen", "w/o INST TextGen", "base", "dense", knowledge=False, pairs=True),
        _variant(
            "Base-TextContextGen", "w/o INST TextContextGen", "base", "dense", knowledge=True, pairs=True
        ),
        _variant("Base-GraphGen", "w/o INST GraphGen", "base", "graph", knowledge=False, pairs=True),
        _variant(
            "Base-GraphContextGen", "w/o INST GraphContextGen", "base", "graph", knowledge=True, pairs=True
        ),
        _variant("FineTuned", "FineTuned", "adapter", "none", knowledge=False, pairs=False),
        _variant("TextGen", "TextGen", "adapter", "dense", knowledge=False, pairs=True),
        _variant("TextContextGen", "TextContextGen", "adapter", "dense", knowledge=True, pairs=True),
        _variant("GraphGen", "GraphGen", "adapter", "graph", knowledge=False, pairs=True),
        _variant("GraphContextGen", "GraphContextGen", "adapter", "graph", knowledge=True, pairs=True),
        _variant(
            "OnlyContextGen-Text", "OnlyContextGen (text)", "adapter", "dense", knowledge=True, pairs=False
        ),
        _variant(
            "OnlyContextGen-Graph", "OnlyContextGen (graph)", "adapter", "graph", knowledge=True, pairs=False
        ),
    )
}
"""The paper's matrix: zero-shot, the base model with retrieved pairs as few-shot context (``w/o INST``),
the fine-tuned model without and with context, and the KG-sentences-only ablations."""


def get_variants(names: Sequence[str] | None) -> list[Variant]:
    """The named variants in matrix order (all for ``None``); unknown names fail naming the valid ones."""
    if names is None:
        return list(VARIANTS.values())
    unknown = [name for name in names if name not in VARIANTS]
    if unknown:
        raise ValueError(f"unknown variant(s) {unknown}; choose from {list(VARIANTS)}")
    return [variant for variant in VARIANTS.values() if variant.name in set(names)]


def variant_context(variant: Variant, pairs: Sequence[QAPair], sentences: Sequence[Sentence]) -> str:
    """The context text of ``variant``: the pairs and/or the knowledge sentences it shows ('' for none).

    ``pairs`` and ``sentences`` are already fitted to the token budget by the knowledge stage.
    """
    shown_pairs = list(pairs) if variant.pairs else []
    shown_sentences = list(sentences) if variant.knowledge else []
    if not shown_pairs:
        return "\n".join([KNOWLEDGE_HEADER, *(s.text for s in shown_sentences)]) if shown_sentences else ""
    return render(shown_pairs, shown_sentences)


@dataclass(frozen=True)
class Prompt:
    """A prompt in parts, tokenised like the training examples and cut without touching the question."""

    head: str
    """Text before the context (the template prefix)."""
    context: str
    """The retrieved context ('' for none); cut from the left when the prompt is over budget."""
    question: str
    """The question line, with the blank line that separates it from a context."""
    cue: str
    """Text after the question that opens the answer (the template suffix)."""

    @property
    def text(self) -> str:
        return f"{self.head}{self.context}{self.question}{self.cue}"


def build_prompt(
    variant: Variant, question: str, context: str, template: InstructionTemplate | str = "paper"
) -> Prompt:
    """The prompt of ``variant`` for ``question`` with its ``context`` ('' when the variant has none).

    Fine-tuned variants: the training template (``template``) around ``with_context(question, context)``.
    Base variants: ``{context}\\n\\nQuestion: {question}\\nAnswer:`` (just the question lines when zero-shot).
    """
    separator = "\n\n" if context else ""
    if variant.model == "adapter":
        instruction = get_template(template) if isinstance(template, str) else template
        return Prompt(instruction.prefix, context, f"{separator}{question}", instruction.suffix)
    return Prompt("", context, f"{separator}Question: {question.strip()}", "\nAnswer:")


def _ids(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return tokenizer(text, add_special_tokens=False)["input_ids"] if text else []


def encode_prompt(
    tokenizer: PreTrainedTokenizerBase, prompt: Prompt, max_tokens: int
) -> tuple[list[int], bool]:
    """Token ids of ``prompt`` (at most ``max_tokens``) and whether anything had to be cut.

    Pieces are tokenised as ``graphctx.data.instruct.encode_example`` does in training: BOS (when the
    tokenizer adds one), the head, context + question as one text, the cue. Over budget, the context loses
    tokens from its left; if the question alone is still too long, it loses its first tokens too.
    """
    bos = leading_bos(tokenizer)
    head, cue = _ids(tokenizer, prompt.head), _ids(tokenizer, prompt.cue)
    body = _ids(tokenizer, prompt.context + prompt.question)
    room = max_tokens - len(bos) - len(head) - len(cue)
    if room <= 0:
        raise ValueError(
            f"evaluation.generation.max_prompt_tokens={max_tokens} leaves no room for the question"
        )
    if len(body) <= room:
        return bos + head + body + cue, False
    context, question = _ids(tokenizer, prompt.context), _ids(tokenizer, prompt.question)
    body = (context + question)[-room:]
    return bos + head + body + cue, True

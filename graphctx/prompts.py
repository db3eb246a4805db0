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

A prompt is kept in parts (:class:`Prompt`) and tokenised as one text exactly as training tokenises its
prompts (:func:`encode_prompt`); over ``max_prompt_tokens`` it drops whole context parts in the order of the
knowledge budget, never the question or the top pair.

With ``generation.citations`` (ALCE, :mod:`graphctx.citations`) a prompt with a context numbers its passages,
the pairs 1..p then the knowledge sentences p+1.., as ``Document [n](Title: …): …`` lines under ALCE's
instruction to cite them as ``[n]``. A base-model prompt is then ALCE's own (no demonstrations)::

    {instruction}

    Question: {question}

    Document [1](Title: {retrieved question 1}): {retrieved answer 1}
    Document [2](Title: {triplet head}): {sentence 1}

    Answer:

and a fine-tuned one is the training template with ``{instruction}\\n\\n{documents}`` as its context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from graphctx.citations import CITATION_INSTRUCTION, Passage, numbered_documents
from graphctx.data.instruct import InstructionTemplate, get_template, prompt_ids, with_context
from graphctx.knowledge.budget import KNOWLEDGE_HEADER, QAPair, most_kept, render
from graphctx.knowledge.verbalise import Sentence

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

ModelKind = Literal["base", "adapter", "none"]
RetrievalKind = str
"""``none`` (no context) or a retriever's name (:mod:`graphctx.retrieval.registry`: ``graph``, ``dense``,
``bm25``, ``hybrid``, a plug-in's)."""

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
    """``base``: the model without training; ``adapter``: the base with the trained LoRA adapter; ``none``:
    no LLM, a pre-LLM baseline of ``graphctx.baselines`` makes the answer from the retrieved pairs."""
    retrieval: RetrievalKind
    """Which retriever picks the past Q&A pairs (``none``: no context at all)."""
    knowledge: bool
    """Add the verbalised knowledge-graph sentences S to the context."""
    pairs: bool
    """Show the retrieved Q&A pairs in the context."""

    @property
    def has_context(self) -> bool:
        """Whether the prompt carries a context (and so an attribution passage for AutoAIS)."""
        return self.pairs or self.knowledge

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """Text that ends an answer before EOS: :data:`BASE_STOP_STRINGS` for the base model's few-shot
        prompts; none for the fine-tuned model, which was trained to end its answers with EOS."""
        return BASE_STOP_STRINGS if self.model == "base" else ()


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("ZeroShot", "Zero-shot", "base", "none", knowledge=False, pairs=False),
        Variant("Base-TextGen", "w/o INST TextGen", "base", "dense", knowledge=False, pairs=True),
        Variant(
            "Base-TextContextGen", "w/o INST TextContextGen", "base", "dense", knowledge=True, pairs=True
        ),
        Variant("Base-GraphGen", "w/o INST GraphGen", "base", "graph", knowledge=False, pairs=True),
        Variant(
            "Base-GraphContextGen", "w/o INST GraphContextGen", "base", "graph", knowledge=True, pairs=True
        ),
        Variant("FineTuned", "FineTuned", "adapter", "none", knowledge=False, pairs=False),
        Variant("TextGen", "TextGen", "adapter", "dense", knowledge=False, pairs=True),
        Variant("TextContextGen", "TextContextGen", "adapter", "dense", knowledge=True, pairs=True),
        Variant("GraphGen", "GraphGen", "adapter", "graph", knowledge=False, pairs=True),
        Variant("GraphContextGen", "GraphContextGen", "adapter", "graph", knowledge=True, pairs=True),
        Variant(
            "OnlyContextGen-Text", "OnlyContextGen (text)", "adapter", "dense", knowledge=True, pairs=False
        ),
        Variant(
            "OnlyContextGen-Graph", "OnlyContextGen (graph)", "adapter", "graph", knowledge=True, pairs=False
        ),
    )
}
"""The paper's matrix: zero-shot, the base model with retrieved pairs as few-shot context (``w/o INST``),
the fine-tuned model without and with context, and the KG-sentences-only ablations."""


BASELINE_VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant("RetrievedAnswer", "RetrievedAnswer", "none", "dense", False, True),
        Variant("RetrievedAnswer-Graph", "RetrievedAnswer (graph)", "none", "graph", False, True),
        Variant("AnswerBot", "AnswerBot", "none", "dense", False, True),
        Variant("TechSumBot", "TechSumBot", "none", "dense", False, True),
        Variant("GenQA", "GenQA", "none", "dense", False, True),
    )
}
"""Answers made without the LLM (``graphctx.baselines``), from the retrieved pairs (shown as the context,
which AutoAIS attributes the answer to): chosen by name, never in the default set."""


def retriever_variant(name: str) -> Variant:
    """``<variant>@<retriever>``: the matrix variant's prompt with another retriever's pairs (e.g.
    ``TextGen@bm25``, ``GraphGen@hybrid``); the retriever's name is checked against the config's
    registry where the variants are used."""
    base, _, retriever = name.partition("@")
    variant = VARIANTS.get(base)
    if variant is None or variant.retrieval == "none" or not retriever:
        with_retrieval = [v.name for v in VARIANTS.values() if v.retrieval != "none"]
        raise ValueError(
            f"variant {name!r}: <variant>@<retriever> needs a variant with retrieval {with_retrieval}"
        )
    label = f"{variant.label} ({retriever})"
    return Variant(name, label, variant.model, retriever, variant.knowledge, variant.pairs)


def retriever_twin(variant: Variant) -> str | None:
    """The matrix variant a ``<variant>@<retriever>`` variant is compared with by default: itself with its
    own retriever."""
    base, at, _ = variant.name.partition("@")
    return base if at else None


def get_variants(names: Sequence[str] | None) -> list[Variant]:
    """The named variants in matrix order, then the ``<variant>@<retriever>`` ones in the order given, then
    the baselines (``None``: the paper's LLM matrix, :data:`VARIANTS`); unknown names fail naming the
    valid ones."""
    if names is None:
        return list(VARIANTS.values())
    known = VARIANTS | BASELINE_VARIANTS
    unknown = [name for name in names if name not in known and "@" not in name]
    if unknown:
        raise ValueError(
            f"unknown variant(s) {unknown}; choose from {list(known)} or <variant>@<retriever> (TextGen@bm25)"
        )
    chosen = set(names)
    retrievers = [retriever_variant(name) for name in dict.fromkeys(names) if "@" in name]
    matrix = [variant for variant in VARIANTS.values() if variant.name in chosen]
    return matrix + retrievers + [variant for variant in BASELINE_VARIANTS.values() if variant.name in chosen]


@dataclass(frozen=True)
class Prompt:
    """A prompt in parts: the question, the context parts it shows and the template around them.

    :func:`encode_prompt` fits it to ``max_prompt_tokens`` by dropping whole context parts, never the
    question and never the top pair.
    """

    question: str
    pairs: tuple[QAPair, ...] = ()
    """Retrieved pairs shown as context, best first."""
    sentences: tuple[Sentence, ...] = ()
    """Knowledge-graph sentences S shown after the pairs."""
    template: InstructionTemplate | None = None
    """The fine-tuned model's training template; ``None``: the base model's plain few-shot text."""
    citations: bool = False
    """Number the passages and ask for ``[n]`` citations (ALCE; ``generation.citations``)."""

    @property
    def passages(self) -> list[Passage]:
        """The context parts as numbered passages: the pairs (best first), then the knowledge sentences."""
        pairs = [Passage(pair.question.strip(), pair.answer.strip()) for pair in self.pairs]
        return pairs + [Passage(sentence.triplet.head, sentence.text) for sentence in self.sentences]

    @property
    def context(self) -> str:
        """The context text ('' for none): one block per pair, then the knowledge sentences; with
        :attr:`citations`, the numbered passages."""
        if self.citations:
            return numbered_documents(self.passages)
        return render(self.pairs, self.sentences)

    @property
    def text(self) -> str:
        """The prompt as the model reads it."""
        context = self.context
        if self.citations and context:
            if self.template is None:
                return f"{CITATION_INSTRUCTION}\n\nQuestion: {self.question.strip()}\n\n{context}\n\nAnswer:"
            context = f"{CITATION_INSTRUCTION}\n\n{context}"
        if self.template is not None:
            return self.template.prompt(with_context(self.question, context))
        shots = f"{context}\n\n" if context else ""
        return f"{shots}Question: {self.question.strip()}\nAnswer:"

    @property
    def droppable(self) -> int:
        """How many context parts may go: every knowledge sentence and every pair but the top one."""
        return len(self.sentences) + max(len(self.pairs) - 1, 0)

    def without(self, count: int) -> Prompt:
        """This prompt less ``count`` context parts: knowledge sentences from the end first, then pairs from
        the lowest rank (at most :attr:`droppable`)."""
        sentences = max(len(self.sentences) - count, 0)
        pairs = max(len(self.pairs) - max(count - len(self.sentences), 0), min(len(self.pairs), 1))
        return replace(self, pairs=self.pairs[:pairs], sentences=self.sentences[:sentences])


def build_prompt(
    variant: Variant,
    question: str,
    pairs: Sequence[QAPair] = (),
    sentences: Sequence[Sentence] = (),
    template: InstructionTemplate | str = "paper",
    citations: bool = False,
) -> Prompt:
    """The prompt of ``variant`` for ``question``: of the retrieved ``pairs`` (best first) and their
    knowledge ``sentences`` (both fitted to ``knowledge.token_budget``), the parts the variant shows.

    Fine-tuned variants: the training template (``template``) around ``with_context(question, context)``.
    Base variants: ``{context}\\n\\nQuestion: {question}\\nAnswer:`` (just the question lines when zero-shot).
    ``citations``: the passages numbered, under ALCE's instruction (module docstring).
    """
    instruction = None
    if variant.model == "adapter":
        instruction = get_template(template) if isinstance(template, str) else template
    shown_pairs = tuple(pairs) if variant.pairs else ()
    shown_sentences = tuple(sentences) if variant.knowledge else ()
    return Prompt(question, shown_pairs, shown_sentences, instruction, citations)


@dataclass(frozen=True)
class EncodedPrompt:
    """Token ids of a prompt fitted to ``max_prompt_tokens``, and the prompt they encode."""

    ids: list[int]
    prompt: Prompt
    """The prompt as encoded: the given one less the context parts dropped to fit."""
    truncated: bool
    """Context parts were dropped to fit."""
    over_limit: bool
    """The question and the top pair alone exceed the limit: they are kept whole, over it."""


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, max_tokens: int) -> EncodedPrompt:
    """Token ids of ``prompt`` as training makes them (:func:`graphctx.data.instruct.prompt_ids`: the prompt
    text tokenised as one string), at most ``max_tokens`` when that can be done without cutting the question
    or the top pair.

    Over the limit, the fewest context parts are dropped that make it fit: knowledge sentences from the end
    first, then pairs from the lowest rank (the order of ``knowledge.token_budget``). When the question and
    the top pair alone exceed the limit, they are kept whole and the prompt is flagged ``over_limit``.
    """
    encoded: dict[int, list[int]] = {}

    def ids(dropped: int) -> list[int]:
        if dropped not in encoded:
            encoded[dropped] = prompt_ids(tokenizer, prompt.without(dropped).text)
        return encoded[dropped]

    if len(ids(0)) <= max_tokens:
        return EncodedPrompt(ids(0), prompt, truncated=False, over_limit=False)
    # the fewest drops that fit = the most parts kept that fit
    kept = most_kept(prompt.droppable, 0, lambda k: len(ids(prompt.droppable - k)) <= max_tokens)
    dropped = prompt.droppable - kept
    over_limit = len(ids(dropped)) > max_tokens
    return EncodedPrompt(ids(dropped), prompt.without(dropped), dropped > 0, over_limit)

"""The answering recipe every entry point shares: pool → contexts → prompts → answers.

    answerer = Answerer.from_config(config)
    contexts = answerer.contexts([variant], questions)[variant.name]  # retrieval (+ KG sentences)
    prompts = answerer.prompts(variant, questions, contexts)          # what the variant shows
    answers = answerer.answer_prompts(variant, prompts)               # greedy, in length-sorted batches
    answerer.release()                                                # the held model goes

``graphctx answer``, ``enhance``, evaluate.py (:mod:`graphctx.evaluation.matrix.runner`), the validation
callback
and the benchmarks all answer through it. Models: the Answerer holds at most one generation model, loaded
the first time it is needed (:meth:`Answerer.model`) and kept until :meth:`Answerer.release` or until a
model of the other kind is asked for, which is loaded only after the held one is freed. The base model is
also the one lent to the LLM triplet extractor when ``knowledge.llm_model`` is ``""``
(:func:`~graphctx.knowledge.extractors.uses_generation_model`). Where models come from is a
:class:`ModelSource`: :class:`LoadedModels` loads them from a run config; the validation callback lends the
training model itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from graphctx.baselines import ANSWER_MAKERS, AnswerMaker, Candidate, candidates_for
from graphctx.baselines.answerbot import AnswerBot
from graphctx.data.instruct import InstructionTemplate
from graphctx.generation.decoder import Answer, Generated, Generator
from graphctx.generation.loading import BaseWeights, load_generation_model
from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.enhance import EnhancedContext, Enhancer
from graphctx.knowledge.extractors import build_extractor, uses_generation_model
from graphctx.knowledge.llm import GenerationModel
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.model.loading import release_memory
from graphctx.model_use import model_identity
from graphctx.pipeline.contexts import (
    ContextBuilder,
    RetrievedContext,
    SilentSourceWarning,
    knowledge_with_cache,
)
from graphctx.pipeline.processes import Processes
from graphctx.progress import Progress
from graphctx.prompts import EncodedPrompt, ModelKind, Prompt, Variant, build_prompt, encode_prompt
from graphctx.retrieval.settings import RetrievalSettings

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from graphctx.knowledge.extractors import TripletExtractor
    from graphctx.pipeline.run_config import RunConfig
    from graphctx.retrieval.encoder import SentenceEncoder

Log = Callable[[str], None]


def _silent(message: str) -> None:
    """The default log: progress lines are the evaluation's (evaluate.py), not a command's."""


def decoded_weights(kind: str, generation: GenerationSettings) -> BaseWeights:
    """The weights the model of ``kind`` decodes: ``generation.base_weights`` for the base rows (and the
    LLM extractor), the trained ones (+ the adapter) for the fine-tuned rows."""
    return generation.base_weights if kind == "base" else "trained"


class ModelSource(Protocol):
    """Where the generation model of a kind (``base`` or ``adapter``) comes from."""

    def load(self, kind: ModelKind) -> GenerationModel: ...


@dataclass
class LoadedModels:
    """Loads the generation models of a run config: ``base`` (:func:`decoded_weights`) or ``adapter`` (the
    trained base with the adapter in ``config.adapter_dir``), on ``device`` (None: ``generation.device``)."""

    config: RunConfig
    tokenizer: PreTrainedTokenizerBase
    device: str | None = None
    log: Log = _silent

    def load(self, kind: ModelKind) -> GenerationModel:
        adapter = self.config.adapter_dir if kind == "adapter" else None
        generation = self.config.generation
        weights = decoded_weights(kind, generation)
        self.log(
            f"loading the {kind} model ({weights} weights)"
            + (f" with the adapter {adapter}" if adapter else "")
        )
        model = load_generation_model(self.config.model.spec, adapter, generation, self.device, weights)
        identity = model_identity(self.config.model.spec.source)
        return GenerationModel(model, self.tokenizer, backend=generation.backend, source_identity=identity)


@dataclass(frozen=True)
class AnswerSettings:
    """What an answer depends on beyond the question: one setting per stage of the recipe."""

    retrieval: RetrievalSettings
    knowledge: KnowledgeSettings
    generation: GenerationSettings
    template: InstructionTemplate | str
    cache_dir: str | None = None
    genqa_dir: Path | None = None
    """The trained GenQA baseline's folder (``evaluation.genqa_model``)."""

    @classmethod
    def of(cls, config: RunConfig) -> AnswerSettings:
        return cls(
            config.retrieval,
            config.knowledge,
            config.generation,
            config.template,
            config.cache_dir,
            config.genqa_dir,
        )


class Answerer:
    """Contexts, prompts and answers of questions, for any variant (see the module docstring).

    ``pool``: the retrieval pool (the training split's rows); ``tokenizer``: the generation model's;
    ``processes``: the processes sharing the contexts' work (:class:`ContextBuilder`); ``log``: progress
    lines.
    """

    def __init__(
        self,
        settings: AnswerSettings,
        pool: Iterable[Mapping[str, Any]],
        tokenizer: PreTrainedTokenizerBase,
        models: ModelSource,
        *,
        processes: Processes | None = None,
        log: Log | None = None,
    ) -> None:
        self.settings = settings
        self.pool = {int(row["id"]): row for row in pool}
        """The retrieval pool by id."""
        self.tokenizer = tokenizer
        self.models = models
        self.processes = processes or Processes()
        self.log = log or _silent
        self._held: tuple[str, GenerationModel, Generator] | None = None
        self.silent_warning = SilentSourceWarning()
        """Given once by all this Answerer's builders (:class:`SilentSourceWarning`)."""

    @classmethod
    def from_config(
        cls,
        config: RunConfig,
        *,
        pool: Iterable[Mapping[str, Any]] | None = None,
        tokenizer: PreTrainedTokenizerBase | None = None,
        processes: Processes | None = None,
        log: Log | None = None,
    ) -> Answerer:
        """The Answerer of a run config: its models loaded by :class:`LoadedModels` (on this process's device
        when launched on GPUs); ``pool``: default the config's training split."""
        from graphctx.model import load_tokenizer

        processes = processes or Processes()
        tokenizer = tokenizer if tokenizer is not None else load_tokenizer(config.model.spec)
        models = LoadedModels(config, tokenizer, processes.device, log or _silent)
        pool = pool if pool is not None else config.load_dataset()["train"]
        return cls(AnswerSettings.of(config), pool, tokenizer, models, processes=processes, log=log)

    # ---- models --------------------------------------------------------------------------------------
    def model(self, kind: ModelKind) -> GenerationModel:
        """The generation model of ``kind``: the held one, else loaded (the other kind freed first)."""
        return self._hold(kind)[0]

    def _hold(self, kind: ModelKind) -> tuple[GenerationModel, Generator]:
        if self._held is None or self._held[0] != kind:
            self.release()
            lent = self.models.load(kind)
            self._held = (kind, lent, Generator(lent.model, self.tokenizer, self.settings.generation))
        return self._held[1], self._held[2]

    def release(self) -> None:
        """Let go of the held model, and return its memory (its last reference gone with the caller's)."""
        self._held = None
        release_memory()

    def lent_base(self) -> GenerationModel | None:
        """The base model, when the LLM extractor is the generation model (else None, nothing loaded)."""
        return self.model("base") if uses_generation_model(self.settings.knowledge) else None

    # ---- contexts ------------------------------------------------------------------------------------
    def context_builder(
        self, enhancer: Enhancer | None = None, encoder: SentenceEncoder | None = None
    ) -> ContextBuilder:
        """A :class:`ContextBuilder` over the pool, the base model lent to its LLM extractor if needed;
        ``enhancer``, ``encoder``: a knowledge stage and a query encoder already loaded (``graphctx serve``
        keeps both when the pool changes)."""
        settings = self.settings
        return ContextBuilder(
            list(self.pool.values()),
            settings.retrieval,
            settings.knowledge,
            settings.cache_dir,
            enhancer,
            generation_model=self.lent_base(),
            tokenizer=self.tokenizer,
            processes=self.processes,
            encoder=encoder,
            silent_warning=self.silent_warning,
        )

    def contexts(
        self, variants: Sequence[Variant], questions: Sequence[str], progress: Progress | None = None
    ) -> dict[str, list[RetrievedContext]]:
        """Per variant name, per question: what the variant's retrieval gives (retrieval and enhancement
        once, shared by the processes; each ends with every context). The stage's models (the embedder,
        REBEL, spaCy) go on return; the lent base model stays held until :meth:`release`. ``progress``:
        advanced by the :func:`~graphctx.pipeline.contexts.context_steps` of ``variants``."""
        builder = self.context_builder()
        contexts = builder.for_variants(variants, questions, progress)
        summary = builder.knowledge_summary()  # every rank's KG requests (a collective)
        self.log(
            f"contexts ready: retrieved {builder.queries_retrieved} and enhanced "
            f"{builder.queries_enhanced} queries here{summary if self.processes.is_zero else ''}"
        )
        return contexts

    def enhanced(self, questions: Sequence[str]) -> list[EnhancedContext]:
        """Each question's context C ⊕ S: the pairs ``retrieval.method`` retrieves and their KG sentences."""
        return self.context_builder().enhanced_contexts(questions)

    def triplet_extractor(self) -> TripletExtractor:
        """The triplet extractors of ``knowledge.extractors`` alone (the fact score's), the LLM extractor
        being the base model (:meth:`lent_base`)."""
        knowledge = knowledge_with_cache(self.settings.knowledge, self.settings.cache_dir)
        return build_extractor(knowledge, self.lent_base())

    # ---- prompts and answers -------------------------------------------------------------------------
    def prompts(
        self, variant: Variant, questions: Sequence[str], contexts: Sequence[RetrievedContext]
    ) -> list[Prompt]:
        """Each question's prompt for ``variant``, of its context (the parts the variant shows)."""
        template, citations = self.settings.template, self.settings.generation.citations
        return [
            build_prompt(variant, question, retrieved.pairs, retrieved.sentences, template, citations)
            for question, retrieved in zip(questions, contexts, strict=True)
        ]

    def encode(self, prompts: Sequence[Prompt]) -> list[EncodedPrompt]:
        """Each prompt's token ids, fitted to ``generation.max_prompt_tokens``."""
        limit = self.settings.generation.max_prompt_tokens
        return [encode_prompt(self.tokenizer, prompt, limit) for prompt in prompts]

    def answer(self, variant: Variant, batch: Sequence[EncodedPrompt]) -> list[Answer]:
        """Greedy answers to one batch of encoded prompts of ``variant``, decoded together."""
        lent, generator = self._hold(variant.model)
        with lent.session():
            return generator.generate_ids([e.ids for e in batch], stop_strings=variant.stop_strings)

    def answer_prompts(self, variant: Variant, prompts: Sequence[Prompt]) -> list[Generated]:
        """Greedy answers to ``prompts`` of ``variant``, in their order (encoded, then decoded in
        length-sorted batches of ``generation.batch_size``)."""
        lent, generator = self._hold(variant.model)
        with lent.session():
            return generator.generate(prompts, stop_strings=variant.stop_strings)

    # ---- the baselines (no LLM) ----------------------------------------------------------------------
    def baseline(self, name: str) -> AnswerMaker:
        """The answer function of baseline ``name``; AnswerBot's is fitted on the pool's answers, GenQA's is
        its trained model, loaded here."""
        if name == "AnswerBot":
            return AnswerBot([str(row["answer"]) for row in self.pool.values()])
        if name != "GenQA":
            return ANSWER_MAKERS[name]
        from graphctx.baselines.genqa import GenQAAnswerer

        max_new_tokens = self.settings.generation.max_new_tokens
        return GenQAAnswerer(self.settings.genqa_dir, max_new_tokens, self.processes.device or "cpu")

    def candidates(self, name: str, context: RetrievedContext) -> list[Candidate]:
        """What baseline ``name`` answers from: the pool's answers to the context's retrieved questions."""
        return candidates_for(name, context.pairs, self.pool)

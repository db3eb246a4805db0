"""The run config: a parsed config as every stage receives it, with its paths resolved in one place.

:func:`graphctx.pipeline.config_file.load_config` builds it from a YAML file, train.py from its command
line. It holds plain settings (no Lightning module: train.py builds those from it). Every output and input
path a stage needs is a property here (the cache folder, the run root, the adapter, the GenQA model, the
evaluation folder), and :meth:`RunConfig.load_dataset` loads the config's Q&A
dataset exactly as training filtered it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from graphctx.cache import cap_cache
from graphctx.data.instruct import InstructionTemplate, get_template
from graphctx.errors import ConfigError
from graphctx.metrics.registry import MetricContext, MetricEntry, metric_entries
from graphctx.retrieval.registry import RetrieverEntry, retriever_entries

if TYPE_CHECKING:
    import datasets

    from graphctx.data.settings import DataModuleSettings
    from graphctx.evaluation_settings import EvaluationSettings
    from graphctx.generation.settings import GenerationSettings
    from graphctx.knowledge.settings import KnowledgeSettings
    from graphctx.model.settings import ModelSpec, TunerSettings
    from graphctx.retrieval.settings import RetrievalSettings


@dataclass
class RunConfig:
    """A parsed config: the settings of each section.

    ``cache``: the config's top-level ``cache_dir`` (on the command line ``--cache_dir``). The folder it
    gives (:attr:`cache_dir`) is put into ``model.spec.cache_dir`` and ``knowledge.cache_dir``, which carry
    it to the model loaders and the knowledge stage."""

    path: Path
    seed_everything: int | bool
    trainer: dict[str, Any]
    model: TunerSettings
    data: DataModuleSettings
    retrieval: RetrievalSettings
    knowledge: KnowledgeSettings
    generation: GenerationSettings
    evaluation: EvaluationSettings
    cache: str | None = None
    cache_max_bytes: int | None = None
    """The cache folder's size cap (:func:`graphctx.cache.cap_cache`); None: none."""
    filter_models: tuple[ModelSpec, ...] = ()
    """The models in whose tokenizers ``data.dataset.filters.max_tokens`` counts (a question is kept only
    when it fits every one); empty: this config's own model. A model sweep sets every swept model, so all
    of them answer the same questions from the same pool."""

    @cached_property
    def metric_entries(self) -> list[MetricEntry]:
        """Every metric this config scores with, built-ins then ``evaluation.metrics.extra``
        (:func:`graphctx.metrics.registry.metric_entries`); one that scores ``[n]`` citations needs the
        prompts that ask for them (``generation.citations``)."""
        context = MetricContext(
            self.evaluation.metrics, self.knowledge, self.model.spec, self.generation.backend
        )
        entries = metric_entries(context)
        citing = [entry.name for entry in entries if entry.passages]
        if citing and not self.generation.citations:
            raise ConfigError(
                f"evaluation.metrics.extra: {citing} score [n] citations, which only prompts with "
                "generation.citations: true ask for; set it"
            )
        return entries

    @cached_property
    def retriever_entries(self) -> dict[str, RetrieverEntry]:
        """Every retriever this config can answer with, by name (:mod:`graphctx.retrieval.registry`)."""
        return retriever_entries(self.retrieval)

    def __post_init__(self) -> None:
        folder = self.cache_dir
        spec = dataclasses.replace(self.model.spec, cache_dir=folder)
        self.model = dataclasses.replace(self.model, spec=spec)
        self.knowledge = dataclasses.replace(self.knowledge, cache_dir=folder or "")  # "": the default
        if self.cache_max_bytes is not None and self.cache_max_bytes < 0:
            raise ConfigError(f"cache_max_bytes: must be at least 0 or null, got {self.cache_max_bytes}")
        cap_cache(folder, self.cache_max_bytes)

    @property
    def root_dir(self) -> Path:
        """``trainer.default_root_dir`` (where checkpoints, logs and the adapter go)."""
        return Path(self.trainer.get("default_root_dir") or ".")

    @property
    def cache_dir(self) -> str | None:
        """The graphctx cache folder, the config's ``cache_dir``; None: the default, ``$GRAPHCTX_CACHE``, else
        ``.cache/graphctx`` (:func:`graphctx.cache.cache_root` picks it)."""
        return self.cache

    @property
    def template(self) -> InstructionTemplate:
        """The instruction template that ``data.template`` names."""
        return get_template(self.data.template)

    @property
    def adapter_dir(self) -> Path:
        """``evaluation.adapter``, else ``model.export.adapter_dir``, else ``<default_root_dir>/adapter``."""
        chosen = self.evaluation.adapter or self.model.export.adapter_dir
        return Path(chosen) if chosen else self.root_dir / "adapter"

    @property
    def genqa_dir(self) -> Path:
        """``evaluation.genqa_model``, else ``<default_root_dir>/genqa``."""
        chosen = self.evaluation.genqa_model
        return Path(chosen) if chosen else self.root_dir / "genqa"

    @property
    def output_dir(self) -> Path:
        """``evaluation.output_dir``, else ``<default_root_dir>/eval``."""
        chosen = self.evaluation.output_dir
        return Path(chosen) if chosen else self.root_dir / "eval"

    @property
    def retrieval_eval_dir(self) -> Path:
        """``evaluation.retrieval_eval_dir``, else ``<default_root_dir>/retrieval_eval``."""
        chosen = self.evaluation.retrieval_eval_dir
        return Path(chosen) if chosen else self.root_dir / "retrieval_eval"

    def load_dataset(self) -> datasets.DatasetDict:
        """The config's Q&A dataset, filtered exactly as for training (the token limit counted in the
        tokenizers of :attr:`filter_specs`), from the data cache."""
        from graphctx.data import load_qa_dataset

        settings = self.data.dataset
        tokenizers = []
        if settings.filters.max_tokens is not None:
            from graphctx.model import load_tokenizer

            tokenizers = [load_tokenizer(spec) for spec in self.filter_specs]
        return load_qa_dataset(settings, self.cache_dir, tokenizers)

    @property
    def filter_specs(self) -> tuple[ModelSpec, ...]:
        """:attr:`filter_models` (each with this config's cache folder), else this config's model."""
        specs = self.filter_models or (self.model.spec,)
        return tuple(dataclasses.replace(spec, cache_dir=self.cache_dir) for spec in specs)

"""The run config: a parsed config as every stage receives it, with its paths resolved in one place.

:func:`graphctx.pipeline.config_file.load_config` builds it from a YAML file, train.py from its command
line. Every output and input path a stage needs is a property here (the cache folder, the run root, the
adapter, the GenQA model, the evaluation folder), and :meth:`RunConfig.load_dataset` loads the config's Q&A
dataset exactly as training filtered it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import datasets

    from graphctx.data.datamodule import InstructionDataModule
    from graphctx.evaluation_settings import EvaluationSettings
    from graphctx.generation.settings import GenerationSettings
    from graphctx.knowledge.settings import KnowledgeSettings
    from graphctx.model.module import InstructionTuner
    from graphctx.retrieval.settings import RetrievalSettings


@dataclass
class RunConfig:
    """A parsed config: the model and data modules (not yet set up) and the settings of each stage.

    ``cache_override``: a cache folder given on the command line (``--cache-dir``), which wins over the
    config's."""

    path: Path
    seed_everything: int | bool
    trainer: dict[str, Any]
    model: InstructionTuner
    data: InstructionDataModule
    retrieval: RetrievalSettings
    knowledge: KnowledgeSettings
    generation: GenerationSettings
    evaluation: EvaluationSettings
    cache_override: str | os.PathLike[str] | None = None

    @property
    def root_dir(self) -> Path:
        """``trainer.default_root_dir`` (where checkpoints, logs and the adapter go)."""
        return Path(self.trainer.get("default_root_dir") or ".")

    @property
    def cache_dir(self) -> str | None:
        """The graphctx cache folder: ``--cache-dir``, else ``data.cache_dir`` (None: ``$GRAPHCTX_CACHE``,
        else ``.cache/graphctx``)."""
        return str(self.cache_override) if self.cache_override else self.data.cache_dir

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

    def load_dataset(self) -> datasets.DatasetDict:
        """The config's Q&A dataset, filtered exactly as for training (the model's tokenizer for the token
        limit), from the data cache."""
        from graphctx.data import load_qa_dataset

        settings = self.data.dataset
        tokenizer = None
        if settings.filters.max_tokens is not None:
            from graphctx.model import load_tokenizer

            tokenizer = load_tokenizer(self.model.spec)
        return load_qa_dataset(settings, self.cache_dir, tokenizer)

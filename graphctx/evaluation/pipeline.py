"""A parsed config, as the stages receive it (:func:`graphctx.config.load_config` builds it)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from graphctx.data.datamodule import InstructionDataModule
    from graphctx.evaluation.settings import EvaluationSettings
    from graphctx.knowledge.settings import KnowledgeSettings
    from graphctx.model.module import InstructionTuner
    from graphctx.retrieval.settings import RetrievalSettings


@dataclass
class PipelineConfig:
    """A parsed config: the model and data modules (not yet set up) and the settings of each stage."""

    path: Path
    seed_everything: int | bool
    trainer: dict[str, Any]
    model: InstructionTuner
    data: InstructionDataModule
    retrieval: RetrievalSettings
    knowledge: KnowledgeSettings
    evaluation: EvaluationSettings

    @property
    def root_dir(self) -> Path:
        """``trainer.default_root_dir`` (where checkpoints, logs and the adapter go)."""
        return Path(self.trainer.get("default_root_dir") or ".")

"""Stack Exchange dumps and tabular Q&A -> cleaned, filtered, temporally split datasets and batches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from graphctx.data.settings import DataModuleSettings, DatasetSettings, FilterSettings, SplitSettings

if TYPE_CHECKING:
    from graphctx.data.build import load_qa_dataset, prepare_qa_dataset

__all__ = [
    "DataModuleSettings",
    "DatasetSettings",
    "FilterSettings",
    "SplitSettings",
    "load_qa_dataset",
    "prepare_qa_dataset",
]


def __getattr__(name: str) -> Any:
    """Import the builder (``datasets``, ``transformers``) on first use, so that HTML cleaning workers,
    which import ``graphctx.data.cleaning`` only, stay small and start fast."""
    if name in ("load_qa_dataset", "prepare_qa_dataset"):
        from graphctx.data import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

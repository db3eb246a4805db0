"""Stack Exchange dumps and tabular Q&A -> cleaned, filtered, temporally split datasets and batches."""

from graphctx.data.build import load_qa_dataset, prepare_qa_dataset
from graphctx.data.settings import DatasetSettings, FilterSettings, SplitSettings

__all__ = ["DatasetSettings", "FilterSettings", "SplitSettings", "load_qa_dataset", "prepare_qa_dataset"]

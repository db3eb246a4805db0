"""ROUGE-1 and ROUGE-L F1 (the paper's ``evaluate`` ROUGE: rouge_score, unstemmed) as a registry entry."""

from __future__ import annotations

from typing import Any, ClassVar

from graphctx.metrics.entry_defaults import library_versions
from graphctx.metrics.registry import MetricEntry, RowScorer, per_row_scores


class Rouge(MetricEntry):
    """ROUGE-1/L F1 of each answer against its gold answer; CPU only."""

    name = "rouge"
    columns: ClassVar[dict[str, str]] = {"rouge1": "ROUGE-1", "rougeL": "ROUGE-L"}
    column_rank = 20
    plan_rank = 10
    title = "ROUGE-1/L"
    sections = ("rouge",)
    libraries = ("rouge-score", "nltk")
    paper_metric = True
    paper_columns: ClassVar[dict[str, tuple[str, str]]] = {
        "rouge1": ("rouge1", "ROUGE-1"),
        "rougeL": ("rougeL", "ROUGE-L"),
    }

    def fingerprint(self) -> dict[str, Any]:
        return {"libraries": library_versions(self.libraries)}

    def plan_json(self) -> dict[str, bool]:
        return {"use_stemmer": self.settings.rouge.use_stemmer}

    def description(self) -> str:
        stemmer = "on (not the paper's)" if self.settings.rouge.use_stemmer else "off, the paper's"
        return f"rouge_score F1, Porter stemmer {stemmer}"

    def memory_stage(self) -> str | None:
        return None  # rouge_score runs on the CPU, beside BERTScore's stage

    def scorer(self, device, cache_dir, extractor, gold_store) -> RowScorer:
        from graphctx.metrics.rouge import RougeF1

        def score(questions, generated, gold, premises):
            metric = RougeF1(self.settings.rouge, sync_on_compute=False)
            metric.update(generated, gold)
            return per_row_scores(metric)

        return score

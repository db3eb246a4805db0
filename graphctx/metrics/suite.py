"""All answer metrics behind one update / compute, as evaluate.py and the validation callback use them."""

from __future__ import annotations

from collections.abc import Sequence

import spacy
import torch
from bert_score import BERTScorer

from graphctx.knowledge.triplets import TripletExtractor
from graphctx.metrics.autoais import AutoAIS
from graphctx.metrics.base import RowScoreMetric
from graphctx.metrics.bertscore import BertScoreF1
from graphctx.metrics.facts import EntityJaccard, FactScore
from graphctx.metrics.judges import EntailmentJudge, build_judge
from graphctx.metrics.rouge import RougeF1
from graphctx.metrics.settings import METRIC_NAMES, MetricSettings


class AnswerMetrics(torch.nn.Module):
    """The metrics named in ``settings.names``, each a DDP-safe torchmetrics ``Metric``.

    Models are loaded once here (or passed in to share them): the BERTScore encoder, the AutoAIS judge
    (``build_judge(settings.autoais)`` when none is given), and the spaCy NER pipeline. The fact score
    needs a triplet extractor (``graphctx.knowledge.triplets.build_extractor``).
    """

    def __init__(
        self,
        settings: MetricSettings | None = None,
        extractor: TripletExtractor | None = None,
        judge: EntailmentJudge | None = None,
        scorer: BERTScorer | None = None,
        nlp: spacy.Language | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or MetricSettings()
        unknown = sorted(set(self.settings.names) - set(METRIC_NAMES))
        if unknown:
            raise ValueError(f"evaluation.metrics.names: unknown {unknown}; choose from {list(METRIC_NAMES)}")
        if "facts" in self.settings.names and extractor is None:
            raise ValueError(
                "evaluation.metrics.names has 'facts': pass a TripletExtractor (build_extractor)"
            )
        builders = {
            "rouge": lambda: RougeF1(self.settings.rouge),
            "bertscore": lambda: BertScoreF1(self.settings.bertscore, scorer=scorer),
            "facts": lambda: FactScore(extractor, self.settings.facts),
            "entities": lambda: EntityJaccard(self.settings.facts, nlp=nlp),
            "autoais": lambda: AutoAIS(judge or build_judge(self.settings.autoais), self.settings.autoais),
        }
        self.metrics = torch.nn.ModuleDict({name: builders[name]() for name in self.settings.names})

    def update(
        self,
        questions: Sequence[str],
        premises: Sequence[str],
        preds: Sequence[str],
        golds: Sequence[str],
    ) -> None:
        """Score one batch: generated answers ``preds`` against ``golds``; AutoAIS judges each generated
        answer against its ``premises`` (the context it was generated from) for its ``questions``."""
        for name, metric in self.metrics.items():
            if name == "autoais":
                metric.update(questions, preds, premises)
            else:
                metric.update(preds, golds)

    def compute(self) -> dict[str, float]:
        """Macro means and counts of every metric (synced across processes under DDP)."""
        return {key: value.item() for metric in self._all() for key, value in metric.compute().items()}

    def per_row(self) -> dict[str, list[float]]:
        """Each row's scores per key, NaN where a metric could not score the row."""
        return {key: rows.tolist() for metric in self._all() for key, rows in metric.per_row().items()}

    def reset(self) -> None:
        """Forget all rows (the loaded models stay)."""
        for metric in self._all():
            metric.reset()

    def _all(self) -> list[RowScoreMetric]:
        return list(self.metrics.values())

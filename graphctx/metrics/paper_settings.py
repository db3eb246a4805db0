"""Metric settings the paper fixes, and which of a run's settings differ from them.

The paper scores with Hugging Face ``evaluate``'s metrics at their defaults; where a graphctx setting can
change what such a metric computes, the paper's value is listed here. A run whose setting differs gets its
"beside the paper" cells and rows marked ``not like for like: <setting>``. Scorer substitutions (another
BERTScore encoder, a stand-in fact scorer) are not settings: they label the score key itself.
"""

from __future__ import annotations

from graphctx.metrics.settings import MetricSettings

PAPER_SETTINGS: dict[str, dict[str, object]] = {
    "rouge1": {"rouge.use_stemmer": False},
    "rougeL": {"rouge.use_stemmer": False},
}
"""Score key (before any ``[label]``) → ``evaluation.metrics`` setting → the paper's value.
``evaluate``'s ROUGE calls ``rouge_score.RougeScorer(rouge_types, use_stemmer=False)`` by default."""


def _setting(metrics: MetricSettings, path: str) -> object:
    section, _, name = path.partition(".")
    return getattr(getattr(metrics, section), name)


def unlike_paper(metrics: MetricSettings) -> dict[str, list[str]]:
    """Score key → the settings that differ from the paper's (``rouge.use_stemmer=True (paper: False)``);
    keys whose settings all match are left out.

    Examples:
        >>> unlike_paper(MetricSettings())
        {}
        >>> from graphctx.metrics.settings import RougeSettings
        >>> unlike_paper(MetricSettings(rouge=RougeSettings(use_stemmer=True)))["rouge1"]
        ['evaluation.metrics.rouge.use_stemmer=True (paper: False)']
    """
    found: dict[str, list[str]] = {}
    for key, settings in PAPER_SETTINGS.items():
        for path, paper in settings.items():
            value = _setting(metrics, path)
            if value != paper:
                found.setdefault(key, []).append(f"evaluation.metrics.{path}={value} (paper: {paper})")
    return found

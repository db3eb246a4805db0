"""The paper's published figures, for comparing a run with them (``results.md``'s "Beside the paper").

Source: Banerjee et al., "Context Matters: Pushing the Boundaries of Open-Ended Answer Generation with
Graph-Structured Knowledge Context", arXiv 2401.12671v3 (2024):

- Table 3 (``paper_table3.csv``, shipped inside the package): BERTScore, ROUGE-1, ROUGE-L (macro F1) and
  FactSumm per method and site. Its LLM rows answer with Llama-2-13B, the best zero-shot model of Table 2;
  "FineTuned Gen Zero-Shot" is the fine-tuned model without context; AnswerBot, GenQA and TechSumBot are
  the pre-LLM baselines.
- Table 2 (zero-shot), as far as the text gives it: the best model per site and metric.
- Figure 2A: the mean Jaccard similarity of the UniversalNER entity sets of gold and generated answers.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

SITES = ("askubuntu", "unix", "serverfault")
"""The paper's sites (Stack Exchange dumps of June 2023)."""
METRICS = ("bertscore", "rouge1", "rougeL", "factsumm")
"""Table 3's columns, in its order."""
TABLE3_MODEL = "meta-llama/Llama-2-13b-hf"
"""The model behind Table 3's LLM rows."""


@dataclass(frozen=True)
class Figure:
    """One published number: what it is, where it is, and the model it was measured with."""

    value: float
    source: str
    """Where in the paper: ``Table 3``, ``Table 2`` or ``Figure 2A``."""
    model: str | None = None
    """The answering model (None: a pre-LLM baseline, no LLM)."""


@cache
def table3() -> dict[tuple[str, str], dict[str, float]]:
    """Table 3 as ``{(method, site): {metric: value}}``, read from the packaged ``paper_table3.csv``."""
    text = resources.files("graphctx").joinpath("paper_table3.csv").read_text()
    return {
        (row["method"], row["site"]): {metric: float(row[metric]) for metric in METRICS}
        for row in csv.DictReader(text.splitlines())
    }


TABLE3_PRE_LLM = ("AnswerBot", "GenQA", "TechSumBot")
"""Table 3's rows made without an LLM."""

TABLE2_ZERO_SHOT: dict[str, dict[str, tuple[float, str]]] = {
    "askubuntu": {
        "bertscore": (0.810, "Llama-2-13B"),
        "rouge1": (0.227, "Llama-2-13B"),
        "rougeL": (0.211, "Llama-2-13B"),
    },
    "unix": {
        "bertscore": (0.806, "Llama-2-13B"),
        "rouge1": (0.181, "Vicuna-13B"),
        "rougeL": (0.175, "Llama-2-13B"),
    },
    "serverfault": {
        "bertscore": (0.819, "Llama-2-13B"),
        "rouge1": (0.185, "Vicuna-13B"),
        "rougeL": (0.176, "Llama-2-13B"),
    },
}
"""Table 2 as the text reports it: per site and metric, the best zero-shot value and the model that made it
(the text gives no other cell)."""

FIGURE_2A_ENTITY_JACCARD = {"askubuntu": 0.85, "unix": 0.75, "serverfault": 0.79}
"""Figure 2A: mean UniversalNER entity-set Jaccard of gold and generated answers (GraphContextGen)."""


def paper_site(name: str | None) -> str | None:
    """The paper's name of a site (``askubuntu.com``, ``unix.stackexchange.com``, ``Unix`` → ``unix``), or
    None when the paper has no figures for it."""
    if not name:
        return None
    short = name.strip().lower().removesuffix(".com").removesuffix(".stackexchange")
    return short if short in SITES else None


def published(method: str, site: str, metric: str) -> Figure | None:
    """Table 3's value of ``method`` (its row name) on ``site`` for ``metric``; the zero-shot row
    (``method`` ``"Zero-shot"``) comes from Table 2, and only where Llama-2-13B made it."""
    if method == "Zero-shot":
        value, model = TABLE2_ZERO_SHOT.get(site, {}).get(metric, (None, None))
        return (
            Figure(value, "Table 2", TABLE3_MODEL) if value is not None and model == "Llama-2-13B" else None
        )
    row = table3().get((method, site))
    if row is None:
        return None
    return Figure(row[metric], "Table 3", None if method in TABLE3_PRE_LLM else TABLE3_MODEL)

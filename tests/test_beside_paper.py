"""The paper's figures ship in the package, and results.md sets a run beside them (Table 3's layout)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from graphctx.evaluation.matrix.beside_paper import PAPER_ROWS, paper_section
from graphctx.evaluation.matrix.table import VariantScores, build_table, write_table
from graphctx.metrics.paper_settings import unlike_paper
from graphctx.metrics.settings import MetricSettings, RougeSettings
from graphctx.paper_figures import SITES, paper_site, published, table3
from graphctx.prompts import BASELINE_VARIANTS, VARIANTS

SHARED_TABLE3 = Path(__file__).resolve().parents[1] / ".." / "shared" / "paper" / "table3.csv"


def test_the_packaged_table3_is_the_papers_and_every_row_of_it_has_a_variant():
    rows = table3()
    assert len(rows) == 36 and {site for _, site in rows} == set(SITES)
    assert rows[("GraphContextGen", "askubuntu")]["bertscore"] == 0.840
    assert rows[("AnswerBot", "askubuntu")]["rouge1"] == 0.236
    if SHARED_TABLE3.is_file():  # the copy carried into the package is the shared source, cell for cell
        shared = list(csv.DictReader(SHARED_TABLE3.read_text().splitlines()))
        assert {(r["method"], r["site"]): {k: float(v) for k, v in r.items() if k not in ("method", "site")}
                for r in shared} == rows  # fmt: skip
    assert {method for method, _ in rows} <= set(PAPER_ROWS.values())
    assert set(PAPER_ROWS) - {"AnswerBot", "GenQA", "TechSumBot"} <= set(VARIANTS)


@pytest.mark.parametrize(
    ("name", "site"),
    [("askubuntu.com", "askubuntu"), ("unix.stackexchange.com", "unix"), ("ServerFault", "serverfault"),
     ("cardano", None), (None, None)],
)  # fmt: skip
def test_site_names_map_to_the_papers(name, site):
    assert paper_site(name) == site


def test_zero_shot_compares_with_table2_only_where_llama2_13b_made_the_figure():
    assert published("Zero-shot", "askubuntu", "rouge1").value == 0.227
    assert published("Zero-shot", "unix", "rouge1") is None  # Vicuna-13B's figure, another model
    assert published("Zero-shot", "unix", "factsumm") is None  # Table 2 gives no FactSumm
    assert published("FineTuned Gen Zero-Shot", "unix", "rougeL").value == 0.167


def _scores(name, values, key="rouge1"):
    variant = (VARIANTS | BASELINE_VARIANTS)[name]
    return VariantScores(variant, list(range(len(values))), {key: np.array(values, dtype=float)})


def test_results_md_sets_each_variant_beside_the_paper_and_says_when_it_is_not_like_for_like(tmp_path):
    around = [0.20, 0.22, 0.21, 0.23, 0.19, 0.22, 0.21, 0.20]  # mean 0.21: [~0.20, ~0.22] contains 0.214
    far = [0.5] * 8
    results = [
        _scores("FineTuned", far),
        _scores("GraphContextGen", around),
        _scores("OnlyContextGen-Graph", around),
    ]
    results[1].scores["bertscore_f1[tiny-roberta@L2]"] = np.full(8, 0.9)
    table = build_table(results, n_resamples=200, seed=0)
    section = paper_section(table, "askubuntu", "tiny-random")
    assert "## Beside the paper (Table 3, askubuntu)" in section
    assert "Not like for like: the LLM rows here answer with tiny-random" in section
    finetuned = next(line for line in section.splitlines() if line.startswith("| FineTuned Gen"))
    assert "(not like for like: model) | FineTuned |" in finetuned
    assert "0.500 [0.500, 0.500] · paper 0.203 · in interval: no" in finetuned
    graph = next(line for line in section.splitlines() if line.startswith("| GraphContextGen"))
    low, high = table.rows[1].intervals["rouge1"].low, table.rows[1].intervals["rouge1"].high
    assert f"[{low:.3f}, {high:.3f}] · paper 0.214 · in interval: yes" in graph
    assert "0.900 [0.900, 0.900] · paper 0.840 · in interval: no · stand-in scorer [tiny-roberta@L2]" in graph
    assert "No published figures for: OnlyContextGen (graph)." in section
    paths = write_table(table, tmp_path, appendix=section)
    assert paths["markdown"].read_text().endswith(section)
    assert paper_section(table, "cardano", "tiny-random") == ""  # no figures for the site: no section


def test_a_llama2_13b_run_is_like_for_like():
    table = build_table([_scores("GraphGen", [0.18, 0.19, 0.17])], n_resamples=50)
    section = paper_section(table, "unix", "meta-llama/Llama-2-13b-hf")
    assert "Not like for like" not in section and "(not like for like: model)" not in section
    assert "paper 0.183" in section


def test_a_metric_setting_unlike_the_papers_marks_its_cells_and_rows():
    table = build_table([_scores("GraphGen", [0.18, 0.19, 0.17])], n_resamples=50)
    stemmed = unlike_paper(MetricSettings(rouge=RougeSettings(use_stemmer=True)))
    section = paper_section(table, "unix", "meta-llama/Llama-2-13b-hf", stemmed)
    setting = "evaluation.metrics.rouge.use_stemmer=True (paper: False)"
    assert f"Not like for like: ROUGE-1, ROUGE-L computed with {setting}." in section
    row = next(line for line in section.splitlines() if line.startswith("| GraphGen"))
    assert row.startswith("| GraphGen (not like for like: evaluation.metrics.rouge.use_stemmer) |")
    assert f"paper 0.183 · in interval: yes · not like for like: {setting}" in row
    # the defaults are the paper's (evaluate's ROUGE does not stem): nothing is marked
    assert "not like for like" not in paper_section(table, "unix", "meta-llama/Llama-2-13b-hf").lower()


def test_a_baseline_running_stand_ins_is_marked_with_what_it_substitutes():
    table = build_table([_scores("AnswerBot", [0.1, 0.2, 0.15]), _scores("GraphGen", [0.2, 0.2])], 50)
    section = paper_section(table, "askubuntu", "meta-llama/Llama-2-13b-hf")
    row = next(line for line in section.splitlines() if line.startswith("| AnswerBot"))
    assert row.startswith(
        "| AnswerBot (not like for like: stand-ins for question retrieval, query relevance) |"
    )
    assert (
        "Not like for like: AnswerBot runs in place of its authors' question retrieval: word2vec" in section
    )
    graph = next(line for line in section.splitlines() if line.startswith("| GraphGen"))
    assert "not like for like" not in graph

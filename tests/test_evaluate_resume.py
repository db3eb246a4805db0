"""evaluate.py end to end on the real cardano dump with tiny random models: every variant is written, and a
run killed with SIGKILL resumes to exactly the table of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from evaluation_workspace import write_workspace

from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.pipeline.config_file import load_config
from graphctx.prompts import VARIANTS

REPO_ROOT = Path(__file__).resolve().parents[1]
LIMIT = 3

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cardano_dir, tiny_bert) -> Path:
    """A cache, a random LoRA adapter, a tiny BERT for BERTScore, and a config writing to ``out``."""
    root = tmp_path_factory.mktemp("evaluate")
    evaluation = {
        "output_dir": str(root / "out"),
        "limit": LIMIT,
        "bootstrap_samples": 100,
    }
    write_workspace(
        root,
        cardano_dir,
        tiny_bert,
        "tiny.yaml",
        evaluation,
        generation={"max_new_tokens": 4, "batch_size": 2, "max_prompt_tokens": 320},
    )
    return root


def ids_of(path: Path) -> list[int]:
    return [record["id"] for record in read_records(path)]


def test_killed_run_resumes_to_the_uninterrupted_table(workspace):
    config_file = workspace / "tiny.yaml"
    uninterrupted, resumed = workspace / "uninterrupted", workspace / "resumed"
    table = MatrixEvaluation(load_config(config_file), output_dir=uninterrupted).evaluate()
    assert [row.variant.name for row in table.rows] == list(VARIANTS)
    for name in VARIANTS:
        predictions = read_records(uninterrupted / "predictions" / f"{name}.jsonl")
        assert len(predictions) == LIMIT and all(r["new_tokens"] >= 1 for r in predictions)
        assert len(read_records(uninterrupted / "scores" / f"{name}.jsonl")) == LIMIT

    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "evaluate.py", "--config", str(config_file)]
    command += ["--evaluation.output_dir", str(resumed)]
    process = subprocess.Popen(
        command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    first = resumed / "predictions" / "ZeroShot.jsonl"
    deadline = time.monotonic() + 300
    while not (first.is_file() and first.stat().st_size > 0):
        assert process.poll() is None, process.stderr.read().decode()[-2000:]
        assert time.monotonic() < deadline, "evaluate.py wrote no prediction in 300 s"
        time.sleep(0.02)
    process.send_signal(signal.SIGKILL)
    process.wait()
    process.stderr.close()
    written = {name: ids_of(resumed / "predictions" / f"{name}.jsonl") for name in VARIANTS}
    assert 0 < sum(map(len, written.values())) < LIMIT * len(VARIANTS)  # killed mid-run
    assert not (resumed / "results.csv").exists()
    with open(first, "ab") as handle:  # and a write torn by the kill, as a crash could leave it
        handle.write(b'{"id": 4242, "variant": "ZeroShot", "gener')

    MatrixEvaluation(load_config(config_file), output_dir=resumed).evaluate()
    for name in VARIANTS:
        for folder in ("predictions", "scores"):
            path = resumed / folder / f"{name}.jsonl"
            raw = path.read_bytes()
            assert raw.endswith(b"\n") and all(json.loads(line) for line in raw.splitlines())
            ids = ids_of(path)
            assert len(ids) == len(set(ids)) == LIMIT  # no duplicate, no torn line
            assert sorted(ids) == sorted(ids_of(uninterrupted / folder / f"{name}.jsonl"))
        answers = {r["id"]: r["generated"] for r in read_records(resumed / "predictions" / f"{name}.jsonl")}
        reference = {
            r["id"]: r["generated"] for r in read_records(uninterrupted / "predictions" / f"{name}.jsonl")
        }
        assert answers == reference
    assert (resumed / "results.csv").read_text() == (uninterrupted / "results.csv").read_text()
    assert (resumed / "results.md").read_text() == (uninterrupted / "results.md").read_text()


def test_answer_command_prints_the_answer_its_context_and_autoais(workspace, capsys):
    from graphctx.cli import main

    question = "How do I register my stake pool certificate with cardano-cli?"
    status = main(["answer", "--config", str(workspace / "tiny.yaml"), "--question", question, "--json"])
    assert status == 0
    result = json.loads(capsys.readouterr().out)
    assert result["variant"] == "GraphContextGen" and result["question"] == question
    assert len(result["hits"]) == 2 and result["context"].startswith("Question: ")
    assert isinstance(result["answer"], str)
    assert result["autoais[causal-lm:tiny-random]"] in (0.0, 1.0)
    assert 0.0 <= result["autoais_soft[causal-lm:tiny-random]"] <= 1.0

    main(
        ["answer", "--config", str(workspace / "tiny.yaml"), "--question", question, "--variant", "ZeroShot"]
    )
    printed = capsys.readouterr().out
    assert printed.startswith("Answer (Zero-shot):") and "no context to attribute to" in printed


def test_metrics_scores_only_the_chosen_ones_as_a_full_run_scores_them(workspace):
    """``--metrics rouge``: only ROUGE is scored, with the predictions, scores and fingerprints a run of
    every metric writes for it."""
    config = load_config(workspace / "tiny.yaml", ["--evaluation.variants", "[ZeroShot]"])
    full, chosen = workspace / "all_metrics", workspace / "rouge_only"
    MatrixEvaluation(config, output_dir=full).evaluate()
    table = MatrixEvaluation(config, output_dir=chosen, metrics=["rouge"]).evaluate()
    assert table.columns == {"rouge1": "ROUGE-1", "rougeL": "ROUGE-L"}
    scores = chosen / "scores" / "ZeroShot"
    assert sorted(path.name for path in scores.iterdir()) == ["rouge.jsonl", "rouge.meta.json"]
    for name in ("rouge.jsonl", "rouge.meta.json"):
        assert (scores / name).read_text() == (full / "scores" / "ZeroShot" / name).read_text()
    meta = Path("predictions") / "ZeroShot.meta.json"
    assert (chosen / meta).read_text() == (full / meta).read_text()

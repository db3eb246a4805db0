"""`graphctx answer` and evaluate.py share one answering recipe (graphctx.pipeline.answerer): the same
question and variant get the same retrieved pairs, context and answer from both."""

from __future__ import annotations

import json

import pytest
from evaluation_workspace import write_workspace

from graphctx.cli import main as cli_main
from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.pipeline.config_file import load_config

pytestmark = pytest.mark.slow


def test_graphctx_answer_gives_the_answer_evaluate_py_gives(tmp_path, cardano_dir, tiny_bert, capsys):
    """GraphContextGen (the adapter on graph retrieval + KG sentences), 3 new tokens: the evaluation's
    answer steps (contexts, prompts, answers; the scores are not the recipe's) against the command."""
    variant = "GraphContextGen"
    evaluation = {"output_dir": str(tmp_path / "out"), "limit": 1}
    generation = {"max_new_tokens": 3, "batch_size": 1, "max_prompt_tokens": 320}
    path = write_workspace(tmp_path, cardano_dir, tiny_bert, "eval.yaml", evaluation, generation=generation)
    evaluation = MatrixEvaluation(load_config(path), [variant])
    evaluation.guard.check_settings(evaluation.variants[0], overwrite=False)
    rows = evaluation.load_rows()
    evaluation.generate(rows, evaluation.build_contexts(rows))
    (evaluated,) = read_records(tmp_path / "out" / "predictions" / f"{variant}.jsonl")

    capsys.readouterr()
    argv = ["answer", "--config", str(path), "--question", evaluated["question"], "--variant", variant]
    assert cli_main([*argv, "--json"]) == 0
    answered = json.loads(capsys.readouterr().out)
    assert [hit["id"] for hit in answered["hits"]] == evaluated["retrieved_ids"]
    assert answered["context"] == evaluated["context"]
    assert answered["answer"] == evaluated["generated"] and evaluated["new_tokens"] > 0


def test_a_prompt_two_variants_share_is_decoded_once(tmp_path, cardano_dir, tiny_bert, capfd):
    """GraphGen's prompt is TextGen's wherever the graph links nothing (its hits are the dense ones): such
    a row gets the answer already decoded for TextGen's, so identical prompts get identical answers
    whatever batch they fell in, and the run says how many rows it did not decode again."""
    evaluation = {"output_dir": str(tmp_path / "out"), "limit": 6}
    generation = {"max_new_tokens": 3, "batch_size": 4, "max_prompt_tokens": 320}
    path = write_workspace(tmp_path, cardano_dir, tiny_bert, "eval.yaml", evaluation, generation=generation)
    evaluation = MatrixEvaluation(load_config(path), ["TextGen", "GraphGen"])
    for variant in evaluation.variants:
        evaluation.guard.check_settings(variant, overwrite=False)
    rows = evaluation.load_rows()
    evaluation.generate(rows, evaluation.build_contexts(rows))
    lines = {
        name: {r["id"]: r for r in read_records(tmp_path / "out" / "predictions" / f"{name}.jsonl")}
        for name in ("TextGen", "GraphGen")
    }
    same = [i for i, row in lines["GraphGen"].items() if row["prompt"] == lines["TextGen"][i]["prompt"]]
    assert same  # the tiny pool links few of these queries
    assert all(lines["GraphGen"][i]["generated"] == lines["TextGen"][i]["generated"] for i in same)
    assert f"{len(same)} rows (adapter model) had a prompt answered before" in capfd.readouterr().err

"""``graphctx plan --cost``: the GPU-hours arithmetic of the tiny config by hand, throughputs read from a GPU
suite report, and bad input in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphctx.cli import main
from graphctx.errors import ConfigError
from graphctx.pipeline.config_file import load_config
from graphctx.stack.cost import Throughputs, cost_json, parse_counts, read_throughputs
from graphctx.stack.memory import MemoryEstimate
from graphctx.stack.model_stack import ModelStack

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"


def test_the_tiny_configs_cost_matches_a_hand_count():
    config = load_config(TINY)
    cost = cost_json(
        ModelStack(config), {"train": 351, "test": 45}, Throughputs(1000.0, 100.0, "a hand count")
    )
    # tiny.yaml: max_epochs 1, max_steps 24 of batch_size 1 × accumulate 1, max_length 512; limit 20 of the
    # 45 test rows, 12 LLM variants (the paper's matrix), max_new_tokens 96
    assert cost["stages"]["train"]["rows"] == min(1 * 351, 24 * 1 * 1) == 24
    assert cost["stages"]["train"]["tokens"] == 24 * 512
    assert cost["stages"]["answers"]["rows"] == 20 and len(cost["stages"]["answers"]["variants"]) == 12
    assert cost["stages"]["answers"]["new_tokens"] == 20 * 12 * 96
    params = MemoryEstimate(config).shape("smollm2-gguf").params  # SmolLM2-135M, against the 7B measured
    scale = params / 6_738_415_616
    train_h, answers_h = 24 * 512 / 1000 * scale / 3600, 20 * 12 * 96 / 100 * scale / 3600
    assert cost["stages"]["train"]["gpu_hours"] == pytest.approx(train_h, abs=1e-6)
    assert cost["stages"]["answers"]["gpu_hours"] == pytest.approx(answers_h, abs=1e-6)
    assert cost["gpu_hours"] == pytest.approx(train_h + answers_h, abs=1e-6)
    assert cost["stages"]["answers"]["peak_gib"] == ModelStack(config).memory["evaluate"]["peak_gib"]


def test_throughputs_come_from_a_gpu_suite_report(tmp_path, capsys):
    report = tmp_path / "gpu_suite.json"
    targets = {
        "training": {"value": {"tokens_per_s": 9000.0}},
        "generation": {"value": {"new_tokens_per_s": 3000}},
    }
    report.write_text(json.dumps({"targets": targets}))
    assert read_throughputs(report) == Throughputs(9000.0, 3000.0, f"the GPU suite report {report}")
    config = TINY.parent / "llama2-7b-askubuntu.yaml"
    args = [
        "plan",
        "--config",
        str(config),
        "--cost",
        "--counts",
        "train=1000,test=100",
        "--throughput",
        str(report),
    ]
    assert main([*args, "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)["cost"]
    assert cost["throughputs"]["scaled_by_params"] == 1.0  # the 7B config is the measured shape
    assert cost["stages"]["train"]["gpu_hours"] == pytest.approx(1000 * 1024 / 9000 / 3600, abs=1e-6)


@pytest.mark.parametrize(
    ("counts", "message"),
    [("train=10,test=x", "expected split=rows pairs"), ("train10", "expected split=rows")],
)
def test_bad_counts_are_one_line(counts, message):
    with pytest.raises(ConfigError, match=message):
        parse_counts(counts)


def test_a_report_without_figures_and_a_missing_split_are_one_line(tmp_path):
    report = tmp_path / "gpu_suite.json"
    report.write_text("{}")
    with pytest.raises(ConfigError, match=r"--throughput: .* is not a gpu_suite.json"):
        read_throughputs(report)
    with pytest.raises(ConfigError, match=r"--counts: no row count for split\(s\) \['test'\]"):
        cost_json(ModelStack(load_config(TINY)), {"train": 3}, Throughputs(1.0, 1.0, "x"))

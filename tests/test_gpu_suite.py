"""benchmarks/gpu_suite.py at toy sizes on the CPU, as CI and CPU-only sessions keep it working.

A subset, to stay near a minute on 2 cores: retrieval (both runs), training (the baseline, eager, and the
liger variant, which must be refused on the CPU) and generation (plain ``generate`` without adapter,
graphctx's path, the static cache reported as CUDA-only). Left out here, and run by
``python benchmarks/gpu_suite.py --device cpu --quick``: the ``pytest -m gpu`` step (collecting every test
module takes ~45 s and all its tests skip without CUDA), the compiled and checkpoint-fraction variants
(compiling costs about a minute) and continuous batching (``generate_batch`` takes about two minutes on the
CPU for 32 tokens).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import REPO_ROOT


@pytest.mark.slow
def test_quick_suite_prints_every_figure_and_verdict(tmp_path, cardano_dir) -> None:
    report_dir = tmp_path / "report"
    command = [sys.executable, "benchmarks/gpu_suite.py", "--device", "cpu", "--quick"]
    command += ["--only", "retrieval", "training", "generation", "--workdir", str(tmp_path / "work")]
    command += ["--report-dir", str(report_dir), "--data", str(cardano_dir)]
    command += ["--train-variants", "eager", "liger", "--generation-paths", "baseline_plain", "graphctx"]
    command += ["static_cache"]
    done = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == json.loads((report_dir / "gpu_suite.json").read_text())
    assert (report["device"], report["quick"], report["targets_apply"]) == ("cpu", True, False)
    environment = report["environment"]
    assert all(environment[name] for name in ("torch", "transformers", "bitsandbytes", "peft"))

    peers, scale = report["steps"]["retrieval"]["peers"], report["steps"]["retrieval"]["scale"]
    knn_push = report["steps"]["retrieval"]["knn_push"]
    for step in (peers, scale, knn_push, report["steps"]["training"], report["steps"]["generation"]):
        assert "error" not in step, step.get("error")
    assert [row["size"] for row in knn_push["sizes"]] == [3000] and knn_push["sizes"][0]["push"]["p50_ms"] > 0
    assert peers["topk_agreement"] == 1.0 and 0 < peers["linked_queries"] < peers["queries"]
    # the all-query figure flatters graphctx: unlinked queries cost it nothing
    assert peers["speedup_all_queries"] > peers["speedup"] > 0
    assert peers["igraph_ms_per_query"] > 0 and peers["speedup_same_queries"] > 0
    assert scale["mean_degree"] >= 50 and scale["build_plus_queries_s"] > 0

    training = report["steps"]["training"]
    assert training["variants"]["eager"]["tokens_per_s"] > 0 and training["baseline_tokens_per_s"] > 0
    assert "needs CUDA" in training["variants"]["liger"]["error"]
    assert training["fastest_within_memory"] == "eager"

    generation = report["steps"]["generation"]
    assert set(generation["new_tokens_per_s"]) == {"baseline_plain", "graphctx"}
    assert generation["graphctx_speedup_over"]["baseline_plain"] > 0
    assert generation["same_tokens_as_graphctx"]["baseline_plain"] == 1.0  # greedy, float32: same tokens
    assert "CUDA only" in generation["errors"]["static_cache"]

    targets = report["targets"]
    assert set(targets) == {"retrieval", "training", "generation"}
    assert all(isinstance(t["pass"], bool) and t["target"] for t in targets.values())
    assert targets["retrieval"]["pass"] == (scale["build_plus_queries_s"] <= 60)
    assert targets["training"]["value"]["tokens_per_s"] == training["variants"]["eager"]["tokens_per_s"]
    ours = generation["new_tokens_per_s"]["graphctx"]
    assert targets["generation"]["value"]["new_tokens_per_s"] == ours  # graphctx's own path, nothing else
    assert targets["generation"]["pass"] == (ours >= 4000)
    assert report["all_pass"] == all(t["pass"] for t in targets.values())
    assert {p.name for p in (report_dir / "logs").iterdir()} >= {"training.log", "generation.log"}

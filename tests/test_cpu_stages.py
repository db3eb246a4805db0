"""CPU stages of a GPU config run on a machine without a GPU: ``graphctx data`` does not look at
``trainer.accelerator`` or any device; ``graphctx index`` only at ``retrieval.device``, and reproduce gives
the index stage a GPU when that asks for CUDA."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from reproduce_workspace import reproduce_config

from graphctx.cli import main

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny.yaml"
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")


def gpu_config(path: Path, source: Path, retrieval_device: str) -> Path:
    config = yaml.safe_load(TINY.read_text())
    config["trainer"]["accelerator"] = "gpu"
    config["generation"]["device"] = "cuda"
    config["retrieval"]["device"] = retrieval_device
    config["model"]["spec"]["source"] = "tiny-random"
    config["data"]["dataset"]["source"] = str(source)
    config["cache_dir"] = str(path.parent / "cache")
    path.write_text(yaml.safe_dump(config))
    return path


def test_data_runs_a_gpu_config_without_a_gpu_and_index_names_only_its_own_device(
    tmp_path, cardano_dir, capsys
) -> None:
    config = gpu_config(tmp_path / "gpu.yaml", cardano_dir, "cuda")
    argv = ["data", str(cardano_dir), "--config", str(config), "--no-token-limit"]
    assert main(argv) == 0, capsys.readouterr().err  # failed on trainer.accelerator: 'gpu'
    assert "train" in capsys.readouterr().out
    assert main(["index", "--config", str(config)]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        f"error: {config}: retrieval.device: 'cuda' asks for a GPU, but torch finds no CUDA device on this "
        "machine; use cpu (or auto)"
    ]


def test_reproduce_gives_the_index_stage_a_gpu_only_when_retrieval_device_asks_for_cuda(
    tmp_path, cardano_dir, tiny_bert, reproduce_cache, capsys
) -> None:
    config = reproduce_config(tmp_path, cardano_dir, tiny_bert, reproduce_cache)
    for device, gpus in (("cuda", 1), ("cpu", 0)):
        settings = yaml.safe_load(config.read_text())
        settings["retrieval"]["device"] = device
        config.write_text(yaml.safe_dump(settings))
        argv = ["reproduce", "--config", str(config), "--state", str(tmp_path / "s"), "--dry-run"]
        assert main([*argv, "--counts", "train=351,test=45"]) == 0
        block = capsys.readouterr().out.split("\ncardano/index")[1].split("\ncardano/")[0]
        assert f", {gpus} GPU/node, " in block, block

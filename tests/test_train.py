"""train.py: config errors name the key; a tiny run trains, logs to W&B offline + CSV, resumes, exports."""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import lightning as L
import pytest
import torch
import yaml

from graphctx.data.datamodule import InstructionDataModule
from graphctx.errors import ConfigError
from graphctx.model import InstructionTuner
from train import TrainCLI, main, stable_wandb_id

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny.yaml"


class BatchRecorder(L.Callback):
    """Appends ``<global step> <hash of the batch's token ids>`` to a file for every training batch."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        digest = hashlib.sha256(batch["input_ids"].cpu().numpy().tobytes()).hexdigest()[:12]
        with self.path.open("a") as handle:
            handle.write(f"{trainer.global_step} {digest}\n")


def run_config(tmp_path: Path, cardano_dir: Path, name: str = "run") -> Path:
    """configs/tiny.yaml pointed at a tiny random Llama, the real cardano dump and, through
    ``trainer.default_root_dir`` alone, every output under tmp_path/name."""
    config = yaml.safe_load(TINY.read_text())
    root = tmp_path / name
    trainer = config["trainer"]
    trainer.update(default_root_dir=str(root), max_steps=2, val_check_interval=2, limit_val_batches=1)
    trainer["enable_progress_bar"] = False
    trainer["callbacks"][0]["init_args"].update(every_n_train_steps=1)
    recorder = {"class_path": "test_train.BatchRecorder", "init_args": {"path": str(root / "batches.txt")}}
    trainer["callbacks"].append(recorder)
    config["cache_dir"] = str(tmp_path / "cache")
    config["model"]["spec"].update(source="tiny-random")
    config["data"]["dataset"]["source"] = str(cardano_dir)
    config["data"].update(max_length=256)
    config["knowledge"]["kg_dir"] = str(cardano_dir.parents[1] / "kg")
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--model.lora.rank", "8"], "--model.lora.rank"),
        (["--trainer.max_step", "3"], "--trainer.max_step"),
        (["--model.spec.quantization", "int3"], "int3"),
    ],
)
def test_mistyped_keys_and_values_fail_naming_them(argv, expected, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--config", str(TINY), *argv])
    assert exit_info.value.code != 0
    assert expected in capsys.readouterr().err


def test_every_out_of_range_setting_is_named_before_anything_is_built(tmp_path, capsys) -> None:
    root = tmp_path / "run"
    overrides = [
        "--retrieval.alpha",
        "1.5",
        "--model.optimizer.lr",
        "-1",
        "--trainer.default_root_dir",
        str(root),
    ]
    assert main(["--config", str(TINY), *overrides]) == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert f"{TINY}: 2 invalid setting(s)" in line
    assert "retrieval.alpha: must be in (0, 1), got 1.5" in line and "model.optimizer.lr: must be > 0" in line
    assert not root.exists()


def test_unknown_key_inside_the_yaml_is_named(tmp_path, capsys) -> None:
    config = yaml.safe_load(TINY.read_text())
    config["model"]["lora"]["rnak"] = 8
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(SystemExit):
        main(["--config", str(path)])
    assert "rnak" in capsys.readouterr().err


def test_missing_model_path_is_reported(tmp_path, capsys) -> None:
    assert main(["--config", str(TINY), "--model.spec.source", str(tmp_path / "absent.gguf")]) == 1
    assert "model.spec.source: GGUF file" in capsys.readouterr().err


def test_wandb_id_is_stable_per_run_and_differs_between_runs(tmp_path) -> None:
    same = stable_wandb_id("graphctx", "tiny", str(tmp_path))
    assert same == stable_wandb_id("graphctx", "tiny", str(tmp_path))
    assert same != stable_wandb_id("graphctx", "other", str(tmp_path))


def output_paths(*args: str) -> dict[str, str]:
    """Where the instantiated trainer of ``train.py --config tiny.yaml *args`` writes (nothing is run)."""
    cli = TrainCLI(
        InstructionTuner, InstructionDataModule, run=False, args=["--config", str(TINY), *args],
        save_config_callback=None,
    )  # fmt: skip
    checkpoint = next(c for c in cli.trainer.callbacks if isinstance(c, L.pytorch.callbacks.ModelCheckpoint))
    paths = {type(logger).__name__: str(logger.save_dir) for logger in cli.trainer.loggers}
    return {**paths, "checkpoints": str(checkpoint.dirpath)}


def test_default_root_dir_moves_every_output_unless_a_path_is_set(tmp_path) -> None:
    root = tmp_path / "elsewhere"
    assert output_paths("--trainer.default_root_dir", str(root)) == {
        "WandbLogger": str(root),
        "CSVLogger": str(root),
        "checkpoints": str(root / "checkpoints"),
    }
    # a path set explicitly stays where it was set
    config = yaml.safe_load(TINY.read_text())
    config["trainer"]["logger"][1]["init_args"] = {"save_dir": str(tmp_path / "csv")}
    (tmp_path / "explicit.yaml").write_text(yaml.safe_dump(config))
    cli = TrainCLI(
        InstructionTuner, InstructionDataModule, run=False, save_config_callback=None,
        args=["--config", str(tmp_path / "explicit.yaml"), "--trainer.default_root_dir", str(root)],
    )  # fmt: skip
    assert [str(logger.save_dir) for logger in cli.trainer.loggers] == [str(root), str(tmp_path / "csv")]


@pytest.mark.parametrize("config", sorted((REPO / "configs").glob("*.yaml")), ids=lambda path: path.name)
def test_shipped_configs_pin_no_output_sub_path(config: Path) -> None:
    """Only trainer.default_root_dir names where a run writes, so that overriding it moves the whole run."""
    settings = yaml.safe_load(config.read_text())
    for item in settings["trainer"].get("logger", []) + settings["trainer"].get("callbacks", []):
        assert not {"save_dir", "dirpath"} & set(item.get("init_args") or {}), item
    export = settings["model"].get("export", {})
    assert export.get("adapter_dir") is None and export.get("merged_dir") is None
    assert settings["evaluation"].get("output_dir") is None


@pytest.mark.slow
def test_tiny_run_trains_logs_resumes_and_exports(tmp_path, cardano_dir, monkeypatch) -> None:
    monkeypatch.setenv("WANDB_MODE", "offline")
    config = run_config(tmp_path, cardano_dir)
    root = tmp_path / "run"
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")  # a path that did not follow default_root_dir would land here
    assert main(["--config", str(config)]) == 0
    assert torch.load(root / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2
    assert (root / "adapter" / "adapter_model.safetensors").is_file()
    # everything under trainer.default_root_dir: checkpoints, W&B, CSV, adapter, validation answers
    assert sorted(path.name for path in root.iterdir() if path.is_dir()) == [
        "adapter",
        "checkpoints",
        "lightning_logs",
        "val_generation",
        "wandb",
    ]
    assert list((root / "val_generation").glob("step-*.csv"))
    assert not any((tmp_path / "cwd").iterdir())

    assert main(["--config", str(config), "--ckpt_path", "last", "--trainer.max_steps", "4"]) == 0
    assert torch.load(root / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 4
    wandb_runs = sorted((root / "wandb").glob("offline-run-*"))
    assert len(wandb_runs) == 2 and len({run.name.rsplit("-", 1)[1] for run in wandb_runs}) == 1  # same id
    rows = [
        row
        for metrics in sorted(root.glob("lightning_logs/version_*/metrics.csv"))
        for row in csv.DictReader(metrics.open())
    ]
    steps = sorted({int(row["step"]) for row in rows if row.get("train/loss")})
    assert steps == [0, 1, 2, 3]  # the resumed run continued at step 2
    assert any(row.get("train/tokens_per_s") for row in rows) and any(row.get("val/loss") for row in rows)
    hparams = yaml.safe_load(next(root.glob("lightning_logs/version_*/hparams.yaml")).read_text())
    assert hparams["model"]["spec"]["source"] == "tiny-random" and "retrieval" in hparams

    # the resumed run saw the same batches, in the same order, as one uninterrupted run
    straight = run_config(tmp_path, cardano_dir, name="straight")
    assert main(["--config", str(straight), "--trainer.max_steps", "4"]) == 0
    resumed_batches = (root / "batches.txt").read_text().splitlines()
    assert resumed_batches == (tmp_path / "straight" / "batches.txt").read_text().splitlines()
    assert [line.split()[0] for line in resumed_batches] == ["0", "1", "2", "3"]


def rank_tails(stderr: str, chars: int = 2500) -> str:
    """The end of each rank's part of a DDP run's stderr (rank 1's lines carry ``[rank1]:``; the rest is
    rank 0's, the launching process), so that a failure shows the rank that failed first."""
    lines = stderr.splitlines()
    others = "\n".join(line for line in lines if not line.startswith("[rank1]"))
    rank1 = "\n".join(line for line in lines if line.startswith("[rank1]"))
    return f"rank 0:\n{others[-chars:]}\n\nrank 1:\n{rank1[-chars:]}"


@pytest.mark.slow
def test_ddp_on_two_cpu_processes_trains_and_exports(tmp_path, cardano_dir) -> None:
    """QLoRA under DDP (gloo on CPU): both ranks step together, rank 0 writes the checkpoint and adapter."""
    config = run_config(tmp_path, cardano_dir)
    tests = str(Path(__file__).parent)  # BatchRecorder is imported by class path in the child processes
    env = {**os.environ, "WANDB_MODE": "offline", "OMP_NUM_THREADS": "1", "PYTHONPATH": tests}
    command = [sys.executable, str(REPO / "train.py"), "--config", str(config)]
    ddp = ["--trainer.devices", "2", "--trainer.strategy", "ddp", "--trainer.max_steps", "2"]
    finished = subprocess.run(command + ddp, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, rank_tails(finished.stderr)
    root = tmp_path / "run"
    assert torch.load(root / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 2
    assert (root / "adapter" / "adapter_model.safetensors").is_file()
    # each rank recorded its own (different) shard of the batches at the same global steps
    steps = [line.split()[0] for line in (root / "batches.txt").read_text().splitlines()]
    assert sorted(steps) == ["0", "0", "1", "1"]


def end_of_run_checkpoint_config(tmp_path: Path, cardano_dir: Path) -> Path:
    """run_config, saving ``last.ckpt`` only when training ends (no validation, no loggers: cheap), with
    plain progress lines every step."""
    path = run_config(tmp_path, cardano_dir, name="ended")
    config = yaml.safe_load(path.read_text())
    trainer = config["trainer"]
    trainer.update(val_check_interval=None, limit_val_batches=0, logger=False, enable_progress_bar=True)
    trainer["callbacks"][0]["init_args"].update(every_n_train_steps=100)
    progress = {"class_path": "graphctx.model.progress.PlainProgress", "init_args": {"every_n_steps": 1}}
    trainer["callbacks"].append(progress)
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_resume_from_the_end_of_run_checkpoint_trains_to_the_new_max_steps_with_plain_progress_lines(
    tmp_path, cardano_dir, capfd
) -> None:
    """Lightning closes the epoch of a run that ``max_steps`` stopped, and the checkpoint saved at its end
    said so: resumed with a larger ``max_steps`` (``max_epochs: 1``), it trained 0 steps. stderr here is
    pytest's capture file, not a terminal: the progress shows as plain lines."""
    config = end_of_run_checkpoint_config(tmp_path, cardano_dir)
    root = tmp_path / "ended"
    assert main(["--config", str(config)]) == 0
    err = capfd.readouterr().err
    assert re.search(r"^progress: step 1/2 \(50%\), epoch 0, train/loss \d+\.\d{4}, ", err, re.M), err[-3000:]
    assert re.search(r"^progress: training ended at step 2/2 \(100%\), elapsed \d+:\d\d:\d\d$", err, re.M)
    assert main(["--config", str(config), "--ckpt_path", "last", "--trainer.max_steps", "3"]) == 0
    err = capfd.readouterr().err
    assert "warning: no training step ran" not in err
    assert torch.load(root / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 3
    steps = [line.split()[0] for line in (root / "batches.txt").read_text().splitlines()]
    assert steps == ["0", "1", "2"]
    assert re.search(r"^progress: training ended at step 3/3 \(100%\), elapsed ", err, re.M)

    adapter = root / "adapter"  # names the configured base (not its cache folder) and how it was trained
    assert (
        json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == "tiny-random"
    )
    card = (adapter / "README.md").read_text()
    assert "# LoRA adapter of `tiny-random`, trained by graphctx" in card and "## Model Details" not in card
    assert "- Trained: 3 optimiser steps (trainer.max_steps 3, max_epochs 1)" in card
    assert f"- Data: `{cardano_dir}`, train split [2021-04-01, 2021-09-15); template paper" in card
    assert "- Method: QLoRA: base quantised to 4-bit NF4 (double quantisation on)" in card
    assert "- LoRA: r 16, alpha 16, dropout 0.05" in card

    checkpoint = root / "checkpoints" / "last.ckpt"  # loads outside a Trainer (it needed a `settings`)
    tuner = InstructionTuner.load_from_checkpoint(checkpoint, map_location="cpu", weights_only=True)
    assert tuner.settings.spec.source == "tiny-random" and tuner.settings.optimizer.betas == (0.9, 0.999)
    saved = torch.load(checkpoint, weights_only=True)["state_dict"]
    loaded = tuner.state_dict()
    assert saved and all(torch.equal(loaded[name], weights) for name, weights in saved.items())


def test_plain_progress_is_added_when_stderr_is_not_a_terminal_unless_listed(capfd) -> None:
    from graphctx.model.progress import EVERY_N_STEPS, EVERY_S, PlainProgress
    from train import add_run_callbacks

    trainer = L.Trainer(enable_progress_bar=True, logger=False, enable_checkpointing=False)
    add_run_callbacks(trainer)  # pytest captures stderr: not a terminal
    (added,) = [c for c in trainer.callbacks if isinstance(c, PlainProgress)]
    assert (added.every_n_steps, added.every_s) == (EVERY_N_STEPS, EVERY_S) == (10, 60.0)
    listed = PlainProgress(every_n_steps=3)
    trainer = L.Trainer(
        enable_progress_bar=True, logger=False, enable_checkpointing=False, callbacks=[listed]
    )
    add_run_callbacks(trainer)
    assert [c for c in trainer.callbacks if isinstance(c, PlainProgress)] == [listed]
    with pytest.raises(ConfigError, match="every_n_steps 0 must be at least 1"):
        PlainProgress(every_n_steps=0)


def test_the_adapter_names_a_packaged_base_by_its_hub_id() -> None:
    from graphctx.model.card import base_model_id
    from graphctx.model.settings import ModelSpec

    assert base_model_id(ModelSpec(source="smollm2-gguf")) == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert base_model_id(ModelSpec(source="meta-llama/Llama-2-7b-hf", revision="abc")) == (
        "meta-llama/Llama-2-7b-hf@abc"
    )

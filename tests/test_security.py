"""Security: no remote code, no unpickling of untrusted checkpoints, no secret in any output.

SPARQL injection: queries are built from escaped literals and checked IRIs only, never by pasting user text
(tests/test_knowledge_sparql.py::test_hostile_strings_stay_one_literal and
tests/test_bad_input.py::test_hostile_text_reaches_the_local_kg_only_as_a_literal).
"""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
import torch
import yaml

from graphctx.model import ModelSpec, load_base_model, load_tokenizer

REPO_ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(
    [
        *(REPO_ROOT / "graphctx").rglob("*.py"),
        *(REPO_ROOT / "benchmarks").glob("*.py"),
        REPO_ROOT / "train.py",
        REPO_ROOT / "evaluate.py",
    ]
)
FAKE_KEY = "0123456789abcdef0123456789abcdef5ec2e7ab"  # 40 hex characters, like a real W&B key


def calls(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Call):
            yield node


def keyword(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def test_no_code_path_turns_on_trust_remote_code() -> None:
    """There is no setting for it, so remote code is never trusted: no call passes anything but False."""
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{call.lineno}"
        for path in SOURCES
        for call in calls(path)
        if (value := keyword(call, "trust_remote_code")) is not None
        and not (isinstance(value, ast.Constant) and value.value is False)
    ]
    assert offenders == []


def test_every_torch_load_and_checkpoint_resume_is_weights_only() -> None:
    offenders = []
    for path in SOURCES:
        for call in calls(path):
            func = call.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = getattr(func.value, "id", "") if isinstance(func, ast.Attribute) else ""
            loads = (owner == "torch" and name == "load") or (owner == "pickle" and name in ("load", "loads"))
            resumes = name == "fit" and keyword(call, "ckpt_path") is not None
            value = keyword(call, "weights_only")
            if (loads or resumes) and not (isinstance(value, ast.Constant) and value.value is True):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{call.lineno}")
    assert offenders == []


def test_a_model_folder_with_custom_code_is_refused_and_its_code_never_runs(tmp_path: Path) -> None:
    marker = tmp_path / "remote-code-ran"
    folder = tmp_path / "custom-model"
    folder.mkdir()
    (folder / "custom.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    config = {
        "model_type": "custom-llama",
        "architectures": ["CustomForCausalLM"],
        "auto_map": {
            "AutoConfig": "custom.CustomConfig",
            "AutoModelForCausalLM": "custom.CustomForCausalLM",
            "AutoTokenizer": ["custom.CustomTokenizer", None],
        },
    }
    (folder / "config.json").write_text(json.dumps(config))
    tokenizer = {"tokenizer_class": "CustomTokenizer", "auto_map": config["auto_map"]}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_base_model(ModelSpec(source=str(folder), quantization="none"))
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_tokenizer(ModelSpec(source=str(folder)))
    assert not marker.exists()


class _Payload:
    """Unpickling this creates ``path``: a stand-in for arbitrary code in a checkpoint from a stranger."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.fixture(scope="module")
def secret_run(tmp_path_factory, cardano_dir):
    """A real 2-step tiny training run with WANDB_API_KEY set; returns its output folder and config."""
    from train import main as train_main

    tmp = tmp_path_factory.mktemp("secret-run")
    config = yaml.safe_load((REPO_ROOT / "configs" / "tiny.yaml").read_text())
    root = tmp / "run"
    trainer = config["trainer"]
    trainer.update(default_root_dir=str(root), max_steps=2, limit_val_batches=1, val_check_interval=2)
    trainer["enable_progress_bar"] = False
    trainer["callbacks"][0]["init_args"].update(every_n_train_steps=1)
    config["cache_dir"] = str(tmp / "cache")
    config["model"]["spec"].update(source="tiny-random", quantization="none")
    config["data"]["dataset"]["source"] = str(cardano_dir)
    config["data"].update(max_length=128)
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(config))
    patch = pytest.MonkeyPatch()
    patch.setenv("WANDB_API_KEY", FAKE_KEY)
    patch.setenv("WANDB_MODE", "offline")
    try:
        assert train_main(["--config", str(path)]) == 0
    finally:
        patch.undo()
    return root, path


@pytest.mark.slow
def test_wandb_api_key_is_in_no_log_config_dump_checkpoint_or_wandb_file(secret_run, capfd) -> None:
    root, _ = secret_run
    files = [p for p in root.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"config.yaml", "hparams.yaml", "metrics.csv", "last.ckpt", "adapter_model.safetensors"} <= names
    assert any(p.suffix == ".wandb" for p in files) and any(p.name == "debug.log" for p in files)
    leaking = [str(p.relative_to(root)) for p in files if FAKE_KEY.encode() in p.read_bytes()]
    assert leaking == []
    assert FAKE_KEY not in "".join(capfd.readouterr())


@pytest.mark.slow
def test_resuming_from_a_malicious_checkpoint_fails_without_running_it(secret_run, tmp_path, capfd) -> None:
    from train import main as train_main

    _, config = secret_run
    marker = tmp_path / "checkpoint-code-ran"
    evil = tmp_path / "evil.ckpt"
    torch.save({"state_dict": {}, "payload": _Payload(marker)}, evil)
    assert train_main(["--config", str(config), "--ckpt_path", str(evil), "--trainer.max_steps", "3"]) == 1
    assert "is not a readable checkpoint (Weights only load failed" in capfd.readouterr().err
    assert not marker.exists()
    assert os.path.getsize(evil) > 0


# ---- paths built from configuration or input stay in their folder (issue 42) ---------------------------
HOSTILE = ["/some/dir", "../../x", "..", "a/../../b", "a/b", "-rf", "x..y", "a b"]
"""Values that are not a site's name: absolute, climbing, nested, flag-like, spaced."""


@pytest.mark.parametrize(
    "site", ["askubuntu", "askubuntu.com", "unix.stackexchange.com", "cardano", "my_site-2"]
)
def test_a_host_like_site_name_is_accepted(site: str) -> None:
    from graphctx.paths import check_site

    assert check_site(site, "data.dataset.site") == site


@pytest.mark.parametrize("site", HOSTILE)
def test_a_site_that_is_not_a_sites_name_is_refused_at_config_load_in_one_line(site: str) -> None:
    from graphctx.errors import ConfigError
    from graphctx.pipeline.config_file import load_config

    with pytest.raises(ConfigError) as error:
        load_config(REPO_ROOT / "configs" / "tiny.yaml", [f"--data.dataset.site={site}"])
    assert "\n" not in str(error.value) and f"data.dataset.site: {site!r} is not a site's name" in str(
        error.value
    )


def test_a_dump_whose_name_is_not_a_sites_name_is_refused_as_a_reproduce_site() -> None:
    from graphctx.errors import ConfigError
    from graphctx.pipeline.config_file import load_config
    from graphctx.reproduce.sites import site_of

    config = load_config(REPO_ROOT / "configs" / "tiny.yaml", ["--data.dataset.source", "hf:owner/.."])
    with pytest.raises(
        ConfigError, match=r"data.dataset.source hf:owner/.. \(data.dataset.site unset\): '..' is"
    ):
        site_of(config)


@pytest.mark.parametrize("name", ["/some/dir", "../../x", "a/../../../x", "."])
def test_inside_refuses_a_name_that_leaves_its_folder(tmp_path: Path, name: str) -> None:
    from graphctx.errors import ConfigError
    from graphctx.paths import inside

    with pytest.raises(ConfigError, match="would write outside"):
        inside(tmp_path, name, where="setting")
    (tmp_path / "link").symlink_to(tmp_path.parent)
    with pytest.raises(ConfigError, match="would write outside"):
        inside(tmp_path, "link", "x.json")  # a link out of the folder
    assert inside(tmp_path, "a", "b.json") == tmp_path / "a" / "b.json"


@pytest.mark.parametrize("stage", ["../../x/data", "/some/dir/data"])
def test_reproduce_records_plans_and_logs_stay_in_the_state_folder(
    tmp_path: Path, capsys, stage: str
) -> None:
    from graphctx.errors import ConfigError
    from graphctx.reproduce.record import main as record
    from graphctx.reproduce.state import State

    state = State(tmp_path / "state")
    for path_of in (state.record_path, state.plan_path):
        with pytest.raises(ConfigError, match=f"stage {stage}: .* would write outside"):
            path_of(stage)
    assert record([str(tmp_path / "state"), stage]) == 1  # the SLURM record job
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"error: stage {stage}: ") and "would write outside" in line
    assert sorted(p.name for p in tmp_path.rglob("*")) == []


def test_evaluation_run_files_stay_in_the_output_folder(tmp_path: Path) -> None:
    from graphctx.errors import ConfigError
    from graphctx.evaluation.matrix.run_files import RunFiles
    from graphctx.prompts import VARIANTS, Variant

    files = RunFiles(tmp_path, ("rouge",))
    hostile = Variant("../../x", "x", "base", "none", knowledge=False, pairs=False)
    for path_of in (files.predictions_file, files.scores_file):
        with pytest.raises(ConfigError, match=r"evaluation\.variants: .* would write outside"):
            path_of(hostile)
    with pytest.raises(ConfigError, match=r"metric \.\./x: .* would write outside"):
        files.metric_file(VARIANTS["TextGen"], "../x")
    assert files.metric_file(VARIANTS["TextGen"], "rouge") == tmp_path / "scores" / "TextGen" / "rouge.jsonl"


def test_a_sweep_model_whose_folder_would_leave_models_is_refused() -> None:
    from graphctx.errors import ConfigError
    from graphctx.evaluation.matrix.sweep import model_folders

    assert model_folders(["meta-llama/Llama-2-7b-hf"]) == {"meta-llama/Llama-2-7b-hf": "Llama-2-7b-hf"}
    for model in ("/models/llama/..", "/", "."):
        with pytest.raises(ConfigError, match=f"--models {model}: .* would write outside models"):
            model_folders([model])

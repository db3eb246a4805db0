"""Every shipped config loads; its comments state the code's defaults; bad values are all named at once."""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from lightning.pytorch import Trainer

from evaluate import main as evaluate_main
from graphctx.checks import field_defaults, nested_settings
from graphctx.cli import main as cli_main
from graphctx.errors import ConfigError
from graphctx.model import InstructionTuner
from graphctx.pipeline.config_file import SETTINGS_SECTIONS, config_parser, load_config
from graphctx.retrieval.settings import RetrievalSettings
from train import main as train_main

REPO = Path(__file__).resolve().parents[1]
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))
LINE = re.compile(r"^(?P<indent> *)(?P<dash>- )?(?P<key>\w+):[^#]*?(?:\s#\s*(?P<comment>.*))?$")


def stated_defaults(text: str) -> list[tuple[int, tuple[str | int, ...], str]]:
    """``(line, key path, stated default)`` for each ``key: value  # TYPE, DEFAULT — note`` line.

    The default is the last top-level comma-separated part before `` — ``; a comment with one part
    (``# str — ...``) states none. List items put their index in the path.
    """
    found, stack, items = [], [], {}
    for number, line in enumerate(text.splitlines(), 1):
        match = LINE.match(line)
        if match is None:
            continue
        indent = len(match["indent"])
        column = indent + (2 if match["dash"] else 0)
        if match["dash"]:
            stack = [entry for entry in stack if entry[0] < indent]
            parent = tuple(segment for _, segment in stack)
            items[parent] = items.get(parent, -1) + 1
            stack.append((indent, items[parent]))
        stack = [entry for entry in stack if entry[0] < column]
        stack.append((column, match["key"]))
        comment = match["comment"] or ""
        if " — " not in comment:
            continue
        parts = top_level_split(comment.split(" — ")[0])
        if len(parts) > 1:
            found.append((number, tuple(segment for _, segment in stack), parts[-1]))
    return found


def top_level_split(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (``[float, float], [0.9, 0.999]`` is two parts)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"[": 1, "{": 1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    return [*parts, current.strip()]


def code_default(path: tuple[str | int, ...], document: dict[str, Any]) -> Any:
    """The default the code gives the setting at ``path`` (raises KeyError for a setting it lacks)."""
    head, *rest = path
    if head == "seed_everything":
        return True  # LightningCLI's
    if not rest:  # a top-level key (cache_dir)
        return config_parser().get_defaults()[head]
    owner = Trainer if head == "trainer" else SETTINGS_SECTIONS[head]
    written = document[head]
    while True:
        name = rest.pop(0)
        defaults = field_defaults(owner)
        if name not in defaults:
            raise KeyError(f"{owner.__name__} has no setting {name!r}")
        if not rest:
            return defaults[name]
        written = written[name]
        if owner is not Trainer and name in nested_settings(owner):
            owner = nested_settings(owner)[name]
            continue
        item = written[rest.pop(0)]  # a list of class_path / init_args items (loggers, callbacks)
        assert rest.pop(0) == "init_args", path
        module, _, attribute = item["class_path"].rpartition(".")
        owner, written = getattr(importlib.import_module(module), attribute), item["init_args"]


def plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@pytest.mark.parametrize("path", CONFIGS, ids=[path.stem for path in CONFIGS])
def test_shipped_config_loads_and_its_comments_state_the_code_defaults(path: Path) -> None:
    config = load_config(path, devices=torch.cuda.is_available())  # devices checked where CUDA exists
    assert config.model.lora.r >= 1 and config.retrieval.top_k >= 1

    text = path.read_text()
    document = yaml.safe_load(text)
    stated = stated_defaults(text)
    assert len(stated) > 20, "the comment format `# TYPE, DEFAULT — note` is not being read"
    wrong = []
    for line, key, default in stated:
        dotted = ".".join(str(segment) for segment in key)
        expected = plain(code_default(key, document))
        # "required": no default (``field_defaults`` gives None); null(=32-true): the meaning of null
        written = None if default == "required" else yaml.safe_load(re.sub(r"\(=.*\)$", "", default))
        if written != expected:
            wrong.append(f"{path.name}:{line} {dotted}: comment says {default}, code default is {expected!r}")
    assert not wrong, "\n".join(wrong)


def test_every_invalid_value_is_named_in_one_error_before_anything_loads(tmp_path: Path) -> None:
    bad = {
        "model": {"lora": {"r": 0}, "optimizer": {"lr": -1.0, "betas": [0.9, 1.5]}},
        "data": {"batch_size": 0, "dataset": {"source": "dump", "split": {"train_end": "2021-03-01"}}},
        "retrieval": {"alpha": 1.5, "tol": 0.0, "top_k": 0, "threshold": 2.0},
        "knowledge": {"extractors": ["foo"]},
        "generation": {"batch_size": 0},
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    with pytest.raises(ConfigError) as error:
        load_config(path, devices=False)
    message = str(error.value)
    assert message.startswith(f"{path}: 11 invalid setting(s): ") and "\n" not in message
    for key in (
        "model.lora.r: must be >= 1, got 0",
        "model.optimizer.lr: must be > 0",
        "model.optimizer.betas",
        "data.batch_size",
        "data.dataset.split.train_start",
        "retrieval.alpha: must be in (0, 1), got 1.5",
        "retrieval.tol: must be > 0",
        "retrieval.top_k",
        "retrieval.threshold: must be in [0, 1)",
        "knowledge.extractors",
        "generation.batch_size",
    ):
        assert key in message


def test_settings_built_in_code_check_themselves() -> None:
    with pytest.raises(ConfigError, match=r"alpha: must be in \(0, 1\), got 1.5; .*tol: must be > 0"):
        RetrievalSettings(alpha=1.5, tol=0.0)


@pytest.mark.parametrize("command", ["train.py", "evaluate.py", "graphctx plan"])
def test_help_documents_every_setting_with_its_docstring(command: str, capsys) -> None:
    main = {"train.py": train_main, "evaluate.py": evaluate_main, "graphctx plan": cli_main}[command]
    with pytest.raises(SystemExit) as exit_info:
        main(["plan", "--help"] if command == "graphctx plan" else ["--help"])
    assert exit_info.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--retrieval.alpha ALPHA PageRank damping factor" in text
    assert "--model.lora.r R Rank of each update" in text
    assert "Unvalidated" not in text  # jsonargparse resolved every field type (it checks them all)


TINY = REPO / "configs" / "tiny.yaml"
HEAVY = ("lightning", "torch", "transformers", "datasets", "bert_score", "torchmetrics")


def imported_by(code: str) -> list[str]:
    """The heavy packages (:data:`HEAVY`) a fresh interpreter has imported after running ``code``."""
    probe = f"{code}\nimport sys\nprint(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, check=True)
    return json.loads(done.stderr.strip().splitlines()[-1].replace("'", '"'))


def test_reading_a_config_or_a_commands_help_imports_no_heavy_library() -> None:
    load = f"from graphctx.pipeline.config_file import load_config\nload_config({str(TINY)!r})"
    assert imported_by(load) == []  # parsed, range-checked, split dates checked, devices checked
    help_ = "from graphctx.cli import main\ntry:\n    main(['index', '--help'])\nexcept SystemExit:\n    pass"
    assert imported_by(help_) == []


def test_planning_a_paper_config_imports_no_heavy_library() -> None:
    """The model stack and memory of a paper config come from ids, config.json files and the shape table."""
    paper = REPO / "configs" / "llama2-7b-askubuntu.yaml"
    plan = f"from graphctx.cli import main\ntry:\n    main(['plan', '--config', {str(paper)!r}, '--json'])\n"
    assert imported_by(plan + "except SystemExit:\n    pass") == []


def test_train_py_reads_the_same_settings_as_every_other_entry_point(capsys) -> None:
    with pytest.raises(SystemExit):
        train_main(["--config", str(TINY), "--print_config"])
    printed = yaml.safe_load(capsys.readouterr().out)
    parser = config_parser()
    parsed = yaml.safe_load(parser.dump(parser.parse_args(["--config", str(TINY)]), skip_none=False))
    for key in ("cache_dir", *SETTINGS_SECTIONS):
        assert printed[key] == parsed[key], key
    # and the module keeps them as its hyper-parameters, key for key
    config = load_config(TINY)
    assert InstructionTuner(config.model).hparams == json.loads(json.dumps(dataclasses.asdict(config.model)))


@pytest.mark.parametrize("key", ["data.cache_dir", "model.spec.cache_dir", "knowledge.cache_dir"])
def test_an_old_cache_key_is_refused_naming_the_top_level_cache_dir(key: str, tmp_path: Path, capsys) -> None:
    document = yaml.safe_load(TINY.read_text())
    section = document
    *parents, name = key.split(".")
    for part in parents:
        section = section[part]
    section[name] = str(tmp_path / "cache")
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(document))
    moved = f"{key}: moved to the top-level cache_dir"
    with pytest.raises(ConfigError, match=f"^{re.escape(str(path))}: {re.escape(moved)}"):
        load_config(path)
    with pytest.raises(ConfigError, match=re.escape(moved)):
        load_config(TINY, [f"--{key}", "elsewhere"])
    assert train_main(["--config", str(path)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and moved in line


def test_the_cache_folder_is_one_setting_that_the_command_line_overrides(tmp_path: Path) -> None:
    def folders(config) -> tuple:
        return config.cache_dir, config.model.spec.cache_dir, config.knowledge.cache_dir

    assert folders(load_config(TINY, ["--cache_dir", str(tmp_path / "a")])) == (str(tmp_path / "a"),) * 3
    # null: $GRAPHCTX_CACHE, else .cache/graphctx, picked where the folder is made ("" in the KG's settings)
    assert folders(load_config(TINY)) == (None, None, "")


def test_a_dotted_trainer_override_is_typed_as_yaml_types_it():
    """``--trainer.num_nodes 1`` (the sbatch scripts pass SLURM's counts so) is the integer 1, as in a YAML
    file; a plain string would make Lightning refuse it (``num_nodes must be a positive integer``)."""
    tiny = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"
    overrides = ["--trainer.num_nodes", "1", "--trainer.devices", "2", "--trainer.gradient_clip_val", "0.5"]
    trainer = load_config(tiny, overrides).trainer
    assert (trainer["num_nodes"], trainer["devices"], trainer["gradient_clip_val"]) == (1, 2, 0.5)
    assert trainer["precision"] == "32-true" and trainer["logger"][0]["class_path"].endswith("WandbLogger")

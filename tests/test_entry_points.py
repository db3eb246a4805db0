"""Bad input, round three: every entry point (``graphctx *``, train.py, evaluate.py) walked with a table of
bad inputs, each answered by exit status 1, no traceback, one ``error:`` line (plus at most one ``hint:``)
and nothing created (cache entries aside); duplicate YAML keys; the threshold range and the graph warnings;
questions from stdin or a file; train.py's stdout."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from test_bad_input import good_pair, row, settings_for, write_dump

from graphctx.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "configs" / "tiny.yaml"
ADAPTER = "adapter_model.safetensors"
MORE_TRAIN = (
    good_pair(40, "2021-02-10", "How do I delegate ada to a stake pool?")
    + good_pair(50, "2021-03-10", "Why is my wallet not syncing with the node?")
    + good_pair(60, "2021-04-10", "Which port does cardano-node listen on?")
)


@dataclass
class Workspace:
    """A folder with a small dump, a questions-only dump, a config of tiny models on them and the odd
    files the cases point at; ``cache`` is the one place a failing run may write."""

    root: Path
    cache: Path
    config: dict[str, Any]

    def write_config(self, edit: Callable[[dict[str, Any]], None] | None = None, name: str = "c") -> Path:
        config = json.loads(json.dumps(self.config))
        if edit is not None:
            edit(config)
        path = self.root / f"{name}.yaml"
        path.write_text(yaml.safe_dump(config))
        return path

    def files(self) -> set[str]:
        """Every path under ``root`` but the cache's."""
        paths = self.root.rglob("*")
        return {str(p.relative_to(self.root)) for p in paths if self.cache not in (p, *p.parents)}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory, tiny_bert: Path) -> Workspace:
    root = tmp_path_factory.mktemp("entry-points")
    cache = root / "cache"
    (root / "dump").mkdir()
    write_dump(root / "dump", MORE_TRAIN)
    (root / "questions-only").mkdir()
    questions = "".join(
        row(i, 1, CreationDate=f"2021-0{i}-10T00:00:00", Title=f"Question {i} about nginx?", Body="x")
        for i in range(1, 9)
    )
    (root / "questions-only" / "Posts.xml").write_text(f"<posts>\n{questions}</posts>\n")
    (root / "empty-kg").mkdir()
    (root / "a-file").write_text("not a folder\n")
    for name, files in {"pickled": ["adapter_model.bin"], "both": ["adapter_model.bin", ADAPTER]}.items():
        (root / name).mkdir()
        (root / name / "adapter_config.json").write_text('{"peft_type": "LORA"}')
        for file in files:
            torch.save({"w": torch.zeros(1)}, root / name / file)  # the .safetensors: a stale copy's bytes
    (root / "empty-model").mkdir()
    (root / "empty-model" / "config.json").write_text("{}")
    (root / "latin1.txt").write_bytes("Caf\xe9 wallet does not sync".encode("latin-1"))
    config = yaml.safe_load(TINY.read_text())
    config["trainer"].update(default_root_dir=str(root / "run"), max_steps=1, enable_progress_bar=False)
    config["trainer"].update(val_check_interval=None, limit_val_batches=0)
    config["cache_dir"] = str(cache)
    config["model"]["spec"].update(source="tiny-random", quantization="none")
    config["data"].update(max_length=128)
    config["data"]["dataset"].update(source=str(root / "dump"), filters={"max_tokens": None})
    config["data"]["dataset"]["split"] = asdict(settings_for(root).split)
    config["retrieval"].update(embedding_model=str(tiny_bert), threshold=0.5)
    config["knowledge"].update(kg_dir=str(REPO.parent / "shared" / "data" / "kg"))
    evaluation = config["evaluation"]
    evaluation.update(variants=["ZeroShot", "Base-GraphContextGen"], output_dir=str(root / "run" / "eval"))
    evaluation.update(wandb_project=None, callback_every_n_validations=0, limit=None)
    config["generation"] = {"max_new_tokens": 2, "batch_size": 1, "max_prompt_tokens": 64}
    evaluation["metrics"] = {"bertscore": {"model": str(tiny_bert)}, "autoais": {"model": "tiny-random"}}
    evaluation["metrics"]["facts"] = {"fact_method": "triplets", "entity_method": "spacy"}  # models present
    return Workspace(root, cache, config)


@pytest.fixture
def in_workspace(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """Runs from ``workspace.root`` with the graphctx cache in ``workspace.cache`` (a relative output path
    would land in the root, where the cases look)."""
    monkeypatch.chdir(workspace.root)
    monkeypatch.setenv("GRAPHCTX_CACHE", str(workspace.cache))
    monkeypatch.setenv("WANDB_MODE", "offline")
    return workspace


def entry_point(name: str) -> Callable[[list[str]], int]:
    if name == "graphctx":
        from graphctx.cli import main
    elif name == "train.py":
        from train import main
    else:
        from evaluate import main
    return main


def set_key(dotted: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(config: dict[str, Any]) -> None:
        *parents, key = dotted.split(".")
        section = config
        for parent in parents:
            section = section.setdefault(parent, {})
        section[key] = value

    return edit


DUPLICATE_KEY = ("\nretrieval:\n", "  top_k: 7\n")
"""A second ``retrieval.top_k`` (the config's own comes later in its section)."""
DUPLICATE_SECTION = ("", "retrieval:\n  top_k: 3\n")
"""A second ``retrieval:`` section holding one key, at the end."""


@dataclass(frozen=True)
class Case:
    entry: str
    argv: tuple[str, ...]
    """``{config}``: the config file; ``{root}``: the workspace."""
    error: str
    """A regular expression the ``error:`` line matches."""
    edit: Callable[[dict[str, Any]], None] | None = None
    insert: tuple[str, str] = ("", "")
    """``(after, text)``: YAML text put after the first ``after`` of the config, or at its end (a key
    given twice)."""
    stdin: bytes = b""


QUESTION = ("--question", "How do I stake ada?")
FINETUNED = ("--variants", "FineTuned", "--evaluation.adapter")
CASES = {
    "graphctx retrieve: non-UTF-8 bytes in --question": Case(
        "graphctx", ("retrieve", "--config", "{config}", "--question", "Caf\udce9 wallet"),
        r"--question: not UTF-8 text \(byte 0xe9 at character 3\); pass it in UTF-8",
    ),
    "graphctx answer: --question-file in Latin-1": Case(
        "graphctx", ("answer", "--config", "{config}", "--question-file", "{root}/latin1.txt"),
        r"--question-file .*latin1\.txt: not UTF-8 text \(byte 0xe9 at offset 3: invalid continuation",
    ),
    "graphctx enhance: --question - with empty stdin": Case(
        "graphctx", ("enhance", "--config", "{config}", "--question", "-"),
        r"--question - \(stdin\): the question is empty", stdin=b"\n",
    ),
    "graphctx retrieve: --question-file that does not exist": Case(
        "graphctx", ("retrieve", "--config", "{config}", "--question-file", "{root}/absent.txt"),
        r"--question-file .*absent\.txt: no such file",
    ),
    "graphctx index: a key given twice in a section": Case(
        "graphctx", ("index", "--config", "{config}"),
        r"c\.yaml: key retrieval\.top_k is given twice \(lines \d+ and \d+\)", insert=DUPLICATE_KEY,
    ),
    "graphctx plan: a section given twice": Case(
        "graphctx", ("plan", "--config", "{config}"),
        r"c\.yaml: key retrieval is given twice \(lines \d+ and \d+\)", insert=DUPLICATE_SECTION,
    ),
    "graphctx data: a key given twice": Case(
        "graphctx", ("data", "{root}/dump", "--config", "{config}"),
        r"key retrieval\.top_k is given twice", insert=DUPLICATE_KEY,
    ),
    "graphctx retrieve: negative retrieval.threshold": Case(
        "graphctx", ("retrieve", "--config", "{config}", *QUESTION),
        r"c\.yaml: 1 invalid setting\(s\): retrieval\.threshold: must be in \[0, 1\), got -1",
        edit=set_key("retrieval.threshold", -1.0),
    ),
    "graphctx index: retrieval.threshold 1 (no edge can exist)": Case(
        "graphctx", ("index", "--config", "{config}"),
        r"retrieval\.threshold: must be in \[0, 1\), got 1\.0", edit=set_key("retrieval.threshold", 1.0),
    ),
    "graphctx enhance: empty knowledge.kg_dir": Case(
        "graphctx", ("enhance", "--config", "{config}", *QUESTION),
        r"knowledge\.kg_dir: .*empty-kg lacks software_entities\.sql and debian_bookworm_packages",
        edit=set_key("knowledge.kg_dir", "{root}/empty-kg"),
    ),
    "evaluate.py: unknown variant in evaluation.variants": Case(
        "evaluate.py", ("--config", "{config}"),
        r"c\.yaml: 1 invalid setting\(s\): evaluation\.variants: unknown variant\(s\) GraphGenn; choose",
        edit=set_key("evaluation.variants", ["ZeroShot", "GraphGenn"]),
    ),
    "evaluate.py: --evaluation.output_dir pointing at a file": Case(
        "evaluate.py", ("--config", "{config}", "--evaluation.output_dir", "{root}/a-file"),
        r"evaluation.output_dir: .*a-file is a file, not a folder",
    ),
    "evaluate.py: evaluation.output_dir inside a file": Case(
        "evaluate.py", ("--config", "{config}"),
        r"evaluation\.output_dir: .*a-file/eval lies in .*a-file, which is a file, not a folder",
        edit=set_key("evaluation.output_dir", "{root}/a-file/eval"),
    ),
    "evaluate.py: empty test split": Case(
        "evaluate.py", ("--config", "{config}"), r"split 'test' is empty",
        edit=set_key("data.dataset.split.test_end", "2021-07-02"),
    ),
    "evaluate.py: empty knowledge.kg_dir": Case(
        "evaluate.py", ("--config", "{config}"), r"knowledge\.kg_dir: .*empty-kg lacks",
        edit=set_key("knowledge.kg_dir", "{root}/empty-kg"),
    ),
    "evaluate.py: a key given twice": Case(
        "evaluate.py", ("--config", "{config}"), r"key retrieval\.top_k is given twice",
        insert=DUPLICATE_KEY,
    ),
    "graphctx index: two YAML documents in the config": Case(
        "graphctx", ("index", "--config", "{config}"),
        r"c\.yaml: holds a second YAML document \('---' at line \d+\); a config is one document",
        insert=("", "---\nretrieval:\n  top_k: 3\n"),
    ),
    "evaluate.py: a tab indenting a key": Case(
        "evaluate.py", ("--config", "{config}"),
        r"c\.yaml: not valid YAML: a tab at line \d+, column 1; YAML indents with spaces only",
        insert=("\nretrieval:\n", "\ttop_k: 7\n"),
    ),
    "evaluate.py: an adapter folder holding only a pickled adapter_model.bin": Case(
        "evaluate.py", ("--config", "{config}", *FINETUNED, "{root}/pickled"),
        r"evaluation\.adapter: .*pickled holds only a pickled adapter_model\.bin, which graphctx does not",
    ),
    "evaluate.py: an adapter folder holding both adapter_model files": Case(
        "evaluate.py", ("--config", "{config}", *FINETUNED, "{root}/both"),
        r"evaluation\.adapter: .*both holds both adapter_model\.safetensors and adapter_model\.bin",
    ),
    "evaluate.py: a model folder whose config.json is {}": Case(
        "evaluate.py", ("--config", "{config}", "--model.spec.source", "{root}/empty-model"),
        r"model\.spec\.source: .*empty-model/config\.json names no model_type",
    ),
    "evaluate.py --models: --evaluation.output_dir pointing at a file": Case(
        "evaluate.py", (
            "--config", "{config}", "--models", "tiny-random", "--evaluation.output_dir", "{root}/a-file"
        ),
        r"evaluation.output_dir: .*a-file is a file, not a folder",
    ),
    "evaluate.py --models: empty test split": Case(
        "evaluate.py", ("--config", "{config}", "--models", "tiny-random"), r"split 'test' is empty",
        edit=set_key("data.dataset.split.test_end", "2021-07-02"),
    ),
    "graphctx genqa: a dotted override out of range": Case(
        "graphctx", ("genqa", "--config", "{config}", "--retrieval.threshold", "-1"),
        r"c\.yaml: 1 invalid setting\(s\): retrieval\.threshold: must be in \[0, 1\), got -1",
    ),
    "graphctx genqa: a dotted override of an unknown key": Case(
        "graphctx", ("genqa", "--config", "{config}", "--retrieval.top_kk=3"),
        r"c\.yaml: .*retrieval\.top_kk",
    ),
    "evaluate.py --overwrite on a folder evaluate.py did not make": Case(
        "evaluate.py", ("--config", "{config}", "--evaluation.output_dir", "{root}/dump", "--overwrite"),
        r"evaluation.output_dir: --overwrite moves files aside only in a folder evaluate\.py made \(it holds "
        r"\.graphctx-evaluation\); .*dump is not one: choose another folder",
    ),
    "train.py: --data.max_length 8": Case(
        "train.py", ("--config", "{config}", "--data.max_length", "8"),
        r"data\.max_length: 8 tokens leave no room for the answer: the prompt alone takes \d+",
    ),
    "train.py: a dump with questions only": Case(
        "train.py", ("--config", "{config}"), r"questions-only: split 'train' is empty",
        edit=set_key("data.dataset.source", "{root}/questions-only"),
    ),
    "train.py: a key given twice": Case(
        "train.py", ("--config", "{config}"),
        r"c\.yaml: key retrieval is given twice \(lines \d+ and \d+\)", insert=DUPLICATE_SECTION,
    ),
    "train.py: negative retrieval.threshold": Case(
        "train.py", ("--config", "{config}", "--retrieval.threshold", "-0.2"),
        r"retrieval\.threshold: must be in \[0, 1\), got -0\.2",
    ),
    "train.py: unknown evaluation.callback_variant": Case(
        "train.py", ("--config", "{config}", "--evaluation.callback_variant", "Finetuned"),
        r"evaluation\.callback_variant: unknown variant Finetuned; choose from ZeroShot",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_at_every_entry_point_gives_one_error_line_and_creates_nothing(
    name: str, in_workspace: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case, workspace = CASES[name], in_workspace
    root = str(workspace.root)

    config = workspace.write_config(case.edit)
    text = config.read_text().replace("{root}", root)
    after, inserted = case.insert
    at = text.index(after) + len(after) if after else len(text)
    config.write_text(text[:at] + inserted + text[at:])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(case.stdin)))
    before = workspace.files()
    argv = [arg.replace("{config}", str(config)).replace("{root}", root) for arg in case.argv]
    status = entry_point(case.entry)(argv)  # any other exception fails the test with its traceback
    err = capsys.readouterr().err
    assert status == 1, err[-3000:]
    assert "Traceback" not in err
    lines = err.rstrip("\n").splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert len(errors) == 1, err[-3000:]
    assert lines[errors[0] + 1 :] in ([], [lines[-1]] if lines[-1].startswith("hint:") else []), err[-3000:]
    assert re.search(case.error, lines[errors[0]]), lines[errors[0]]
    assert workspace.files() == before  # no run folder, log, meta file or score file
    config.unlink()


# ---- duplicate keys --------------------------------------------------------------------------------------
def test_duplicate_keys_are_named_by_their_path_anywhere_in_a_document() -> None:
    from graphctx.pipeline.config_file import load_unique_yaml

    text = "trainer:\n  logger:\n    - class_path: a\n      init_args:\n        name: x\n        name: y\n"
    path = r"^key trainer\.logger\[0\]\.init_args\.name is given twice \(lines 5 and 6\)"
    with pytest.raises(yaml.YAMLError, match=path):
        load_unique_yaml(text)
    merged = "base: &b {top_k: 1, alpha: 0.5}\nretrieval:\n  <<: *b\n  top_k: 2\n"  # YAML's own override
    assert load_unique_yaml(merged)["retrieval"] == {"top_k": 2, "alpha": 0.5}
    assert load_unique_yaml("split:\n  train_start: 2021-04-01\n")["split"]["train_start"] == "2021-04-01"
    # a key twice inside a merged mapping, and two merges into one mapping: the last would win silently
    inside = "retrieval:\n  <<: {top_k: 5, top_k: 7}\n"
    with pytest.raises(yaml.YAMLError, match=r"^key retrieval\.top_k is given twice \(lines 2 and 2\)"):
        load_unique_yaml(inside)
    twice = "a: &a {top_k: 5}\nb: &b {top_k: 7}\nretrieval:\n  <<: *a\n  <<: *b\n"
    with pytest.raises(yaml.YAMLError, match=r"^key retrieval\.<< is given twice \(lines 4 and 5\)"):
        load_unique_yaml(twice)
    listed = "a: &a {top_k: 5}\nb: &b {alpha: 0.5}\nretrieval:\n  <<: [*a, *b]\n"  # one merge of two maps
    assert load_unique_yaml(listed)["retrieval"] == {"top_k": 5, "alpha": 0.5}


def test_duplicate_keys_in_a_yaml_value_on_the_command_line_are_refused() -> None:
    from graphctx.pipeline.config_file import config_parser

    with pytest.raises(Exception, match=r"key top_k is given twice \(lines 1 and 1\)"):
        config_parser().parse_args(["--config", str(TINY), "--retrieval", "{top_k: 1, top_k: 2}"])


# ---- graphs without an edge, or dense ones ---------------------------------------------------------------
def graph_retriever_warning(embeddings: torch.Tensor, capsys: pytest.CaptureFixture[str]) -> str:
    from graphctx.retrieval.builders import build_graph
    from graphctx.retrieval.graph import degree_stats
    from graphctx.retrieval.index import RetrievalIndex
    from graphctx.retrieval.retriever import build_retriever
    from graphctx.retrieval.settings import RetrievalSettings

    settings = RetrievalSettings(threshold=0.5, device="cpu", similarity_dtype="float32")
    graph = build_graph(embeddings, settings)
    index = RetrievalIndex(torch.arange(len(embeddings)), embeddings, graph, degree_stats(graph))
    build_retriever(index, settings)
    return capsys.readouterr().err


def test_graph_retrieval_on_a_graph_without_edges_or_a_dense_one_warns(capsys) -> None:
    orthogonal = torch.eye(8)
    warning = graph_retriever_warning(orthogonal, capsys)
    assert warning.startswith("warning: the question graph has no edge: no two of its 8 questions have")
    assert warning.count("\n") == 1
    noise = torch.randn(60, 4, generator=torch.Generator().manual_seed(0))
    alike = torch.nn.functional.normalize(torch.ones(60, 4) + 0.01 * noise, dim=1)  # every pair linked
    assert "warning: the question graph is dense (mean degree 59.0 > 50" in graph_retriever_warning(
        alike, capsys
    )
    spread = torch.nn.functional.normalize(torch.eye(8) + 0.3, dim=1)  # each pair's cosine is 0.57
    assert graph_retriever_warning(spread, capsys) == ""  # mean degree 7: neither


# ---- questions from stdin or a file ----------------------------------------------------------------------
LONG_QUESTION = ("How do I stake ada with a hardware wallet? " * 4700)[:200_000]


def retrieve_json(argv: list[str], config: Path, capsys) -> dict[str, Any]:
    from graphctx.cli import main

    assert main(["retrieve", "--config", str(config), "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_200k_character_question_from_stdin_or_a_file(in_workspace, capsys, monkeypatch) -> None:
    config = in_workspace.write_config(name="question")
    path = in_workspace.root / "long.txt"
    path.write_bytes(b"\xef\xbb\xbf" + LONG_QUESTION.encode() + b"\n")  # with a byte-order mark, as Notepad
    from_file = retrieve_json(["--question-file", str(path)], config, capsys)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(LONG_QUESTION.encode() + b"\r\n")))
    from_stdin = retrieve_json(["--question", "-"], config, capsys)
    assert from_file["question"] == from_stdin["question"] == LONG_QUESTION
    assert len(from_file["question"]) == 200_000 and from_file["hits"] == from_stdin["hits"]
    assert len(from_file["hits"]) == 2


def test_non_utf8_argv_bytes_are_named_by_the_console_script(workspace) -> None:
    """Real argv bytes (Python decodes them with surrogate escapes): one line, exit 1, before any load."""
    done = subprocess.run(
        [sys.executable, "-m", "graphctx.cli", "retrieve", "--config", str(TINY), "--question", b"caf\xe9"],
        cwd=REPO, capture_output=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == b""
    assert done.stderr.decode().splitlines() == [
        "error: --question: not UTF-8 text (byte 0xe9 at character 3); pass it in UTF-8, or in a UTF-8 "
        "file with --question-file"
    ]


def test_either_question_option_is_required_and_not_both(capsys) -> None:
    from graphctx.cli import main

    for argv in ([], ["--question", "a", "--question-file", "b"]):
        with pytest.raises(SystemExit) as exited:
            main(["retrieve", "--config", str(TINY), *argv])
        assert exited.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


# ---- train.py: stdout and a run that exports nothing -----------------------------------------------------
@pytest.mark.slow
def test_train_prints_only_the_adapter_on_stdout_and_warns_when_nothing_was_exported(
    in_workspace, capfd
) -> None:
    from train import main

    config = in_workspace.write_config(name="train")
    adapter = in_workspace.root / "run" / "adapter"
    assert main(["--config", str(config), "--trainer.max_steps", "0"]) == 0
    out, err = capfd.readouterr()
    assert out == ""  # Lightning's model summary went to stderr
    assert "Trainable params" in err
    warning = "warning: no training step ran (trainer.max_steps 0, global step 0), so no adapter was exported"
    assert f"{warning}; {adapter} does not exist" in err
    assert main(["--config", str(config)]) == 0
    out, err = capfd.readouterr()
    assert out == f"{adapter}\n" and (adapter / "adapter_model.safetensors").is_file()
    assert "warning: no training step ran" not in err
    assert main(["--config", str(config), "--ckpt_path", "last"]) == 0  # already at max_steps 1
    out, err = capfd.readouterr()
    assert out == "" and f"{adapter} holds an adapter of an earlier run" in err


def test_train_on_a_root_another_live_run_holds_is_one_error_line(in_workspace, capfd) -> None:
    from test_folder_lock import held

    from train import main

    config = in_workspace.write_config(name="locked")
    root = in_workspace.root / "run"
    with held(root) as holder:
        assert main(["--config", str(config), "--trainer.max_steps", "0"]) == 1
        err = capfd.readouterr().err.strip().splitlines()
        assert err[-1] == (
            f"error: {root}: another train.py run is already using this folder (pid {holder.pid}); wait for "
            "it to end or choose another folder (a lock left by a process that died is taken over by itself)"
        )


def test_load_config_names_the_file_the_key_and_both_lines(tmp_path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("data:\n  dataset: {source: x}\nretrieval:\n  top_k: 2\n  threshold: 0.5\n  top_k: 3\n")
    from graphctx.pipeline.config_file import load_config

    with pytest.raises(ConfigError, match=rf"^{path}: key retrieval\.top_k is given twice \(lines 4 and 6\)"):
        load_config(path)

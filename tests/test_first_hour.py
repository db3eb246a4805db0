"""Issue 46, the first hour round two: what `graphctx enhance` and `answer` say about their sentences, and a
missing adapter refused before any model loads (the recent cardano questions and tiny models of
tests/evaluation_workspace.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from evaluation_workspace import write_workspace
from reproduce_workspace import REPO_ROOT, reproduce_config
from tiny_config import tiny_split

from graphctx.cli import main
from graphctx.knowledge.sentence_sources import KG_PREFIX

QUESTION = ["--question", "How do I register my stake pool certificate with cardano-cli?"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, cardano_dir, tiny_bert):
    root = tmp_path_factory.mktemp("first-hour")
    evaluation = {"output_dir": str(root / "eval")}
    generation = {"max_new_tokens": 3, "batch_size": 1, "max_prompt_tokens": 1024}
    knowledge = {"token_budget": 600}
    return write_workspace(
        root, cardano_dir, tiny_bert, "c.yaml", evaluation, generation=generation, knowledge=knowledge
    )


@pytest.mark.slow
def test_enhance_names_each_sentences_source_and_answer_counts_kg_facts_apart(workspace, capsys):
    """`enhance`'s text lists each sentence of S under its source; `answer` counts the KG facts and the
    triplets read from the retrieved pairs under their own names (it called all of them "KG sentences")."""
    config = str(workspace)
    assert main(["enhance", "--config", config, *QUESTION, "--json"]) == 0
    sentences = json.loads(capsys.readouterr().out)["sentences"]
    assert sentences  # the spaCy triplets of the retrieved pairs, at least
    assert main(["enhance", "--config", config, *QUESTION]) == 0
    text = capsys.readouterr().out
    for sentence in sentences:
        assert f"[{sentence['triplet']['source']}] {sentence['text']}" in text.splitlines()

    argv = ["answer", "--config", config, *QUESTION, "--variant", "Base-GraphContextGen"]
    assert main(argv) == 0
    context = capsys.readouterr().out.split("\nAnswer (")[0]  # the header and the context shown
    shown = [s for s in sentences if s["text"] in context]
    facts = sum(s["triplet"]["source"].startswith(KG_PREFIX) for s in shown)
    header = context.splitlines()[0]
    counts = re.search(r"; (\d+) KG facts, (\d+) triplets from the retrieved pairs\):$", header)
    assert counts, header
    assert (int(counts[1]), int(counts[2])) == (facts, len(shown) - facts)


def test_answer_refuses_a_missing_adapter_before_any_model_loads(workspace, capsys, monkeypatch):
    """A fine-tuned variant with no trained adapter: one error line naming evaluation.adapter and how to
    get one, before the Answerer loads anything (it used to convert and load the base model first)."""
    from graphctx.pipeline import answerer

    def loads(*args, **kwargs):
        raise AssertionError("a model loads before the missing adapter is refused")

    monkeypatch.setattr(answerer.Answerer, "from_config", classmethod(loads))
    config = workspace
    config.with_name("no-adapter.yaml").write_text(config.read_text().replace("/adapter", "/absent"))
    config = str(config.with_name("no-adapter.yaml"))
    assert main(["answer", "--config", config, *QUESTION, "--variant", "GraphContextGen"]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert re.match(r"error: evaluation\.adapter: no trained adapter in .*/absent .*python train\.py", line)


def test_cost_before_the_download_is_refused_at_once_naming_counts_and_the_dump(
    tmp_path, cardano_dir, tiny_bert, reproduce_cache, capsys, monkeypatch
):
    """`plan --cost` and `reproduce --dry-run` count rows by building the dataset: without the dump, or
    without the generation model whose tokenizer counts them, they refuse before anything loads and name
    `--counts` (plan used to fail after 55 s on the missing model); the missing dump says where to get it."""
    from graphctx.pipeline.run_config import RunConfig

    def builds(*args, **kwargs):
        raise AssertionError("the dataset is built before the missing input is refused")

    monkeypatch.setattr(RunConfig, "load_dataset", builds)
    monkeypatch.chdir(REPO_ROOT)
    config = yaml.safe_load(reproduce_config(tmp_path, cardano_dir, tiny_bert, reproduce_cache).read_text())
    no_dump = tmp_path / "no-dump.yaml"
    no_dump.write_text(
        yaml.safe_dump({**config, "data": {"dataset": {"source": str(tmp_path / "askubuntu")}}})
    )
    config["model"]["spec"]["source"] = "meta-llama/Llama-2-7b-hf"  # not in the HF cache here, nor in CI
    no_model = tmp_path / "no-model.yaml"
    no_model.write_text(yaml.safe_dump(config))
    state = ["--state", str(tmp_path / "state")]
    for path, named in ((no_dump, "archive.org/details/stackexchange"), (no_model, "model.spec.source")):
        for argv in (["plan", "--cost"], ["reproduce", "--dry-run", *state]):
            assert main([*argv, "--config", str(path)]) == 1
            (line,) = capsys.readouterr().err.strip().splitlines()
            assert line.startswith("error: ") and named in line, line
            assert line.endswith("--counts train=N,test=M (the rows per split)"), line
    counts = ["--counts", "train=40000,test=2000"]
    assert main(["reproduce", "--dry-run", *state, "--config", str(no_dump), *counts]) == 0
    assert "total: " in capsys.readouterr().out


def written(text: str, verb: str = "wrote") -> list[Path]:
    """The paths of a command's last line, ``wrote: a, b and c``."""
    last = text.strip().splitlines()[-1]
    assert last.startswith(f"{verb}: "), text[-2000:]
    return [Path(name) for name in re.split(r", | and ", last.removeprefix(f"{verb}: "))]


@pytest.mark.slow
def test_every_command_that_writes_ends_with_one_line_naming_what_it_wrote(
    local_run, tmp_path, capsys, monkeypatch
):
    """reproduce, index, retrieval-eval and export end with ``wrote: <paths>`` on stdout (on stderr with
    --json, whose stdout stays one JSON document), each path there; the tiny protocol's run is reused."""
    config, run = str(local_run.config), local_run.config.parent / "run"
    paths = written(local_run.stdout)  # graphctx reproduce, run locally
    assert {path.name for path in paths} == {"results.csv", "results.md", "beside_the_paper.md"}
    settings = yaml.safe_load(local_run.config.read_text())
    settings["data"]["dataset"]["split"] = tiny_split()  # the whole pool: 43 questions leave 1 linked query
    whole = tmp_path / "whole-pool.yaml"
    whole.write_text(yaml.safe_dump(settings))
    index = ["index", "--config", str(whole)]
    assert main(index) == 0
    text = capsys.readouterr().out
    assert text.startswith("question graph: ")  # the readable summary is its result
    paths += written(text)
    links = [
        "retrieval-eval",
        "--config",
        str(whole),
        "--evaluation.retrieval_eval_dir",
        str(tmp_path / "links"),
    ]
    for argv in ([*index, "--json"], [*links, "--thresholds", "0.5,0.6", "--json"]):
        assert main(argv) == 0
        printed = capsys.readouterr()
        json.loads(printed.out)  # nothing else on stdout
        paths += written(printed.err)
    assert main(["export", "--run", str(run / "eval"), "--to", str(tmp_path / "dataset")]) == 0
    paths += written(capsys.readouterr().out)
    assert all(path.exists() for path in paths), paths
    monkeypatch.chdir(REPO_ROOT)
    state = ["--state", str(tmp_path / "state")]
    assert main(["reproduce", "--config", config, *state, "--dry-run", "--counts", "train=9,test=3"]) == 0
    assert written(capsys.readouterr().out, "wrote (--dry-run)") == [Path("nothing")]

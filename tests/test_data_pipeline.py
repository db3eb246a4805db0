"""The Stack Exchange pipeline on the real cardano dump: counts, cleaning, filters, split, cache, errors."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest

from graphctx.data import DatasetSettings, FilterSettings, SplitSettings, prepare_qa_dataset
from graphctx.data.build import split_ranges
from graphctx.data.html import html_to_text, text_outside_links
from graphctx.data.stackexchange import parse_tags
from graphctx.errors import ConfigError, DataError


def _settings(source: Path | str, **filters) -> DatasetSettings:
    return DatasetSettings(source=str(source), filters=FilterSettings(max_tokens=None, **filters))


@pytest.fixture(scope="module")
def cardano(cardano_dir, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    return (*prepare_qa_dataset(_settings(cardano_dir), cache), cache)


def test_counts_match_the_real_dump(cardano):
    _, summary, _ = cardano
    assert summary["questions"] == 1042
    assert summary["with_accepted_answer"] == 459
    assert summary["removed_no_accepted_answer"] == 1042 - 459
    after_kept = ("removed_fabricated", "removed_answer_after_split")  # posts, and train rows after the cut
    removed = sum(v for k, v in summary.items() if k.startswith("removed_") and k not in after_kept)
    assert summary["kept"] == summary["questions"] - removed
    assert summary["removed_answer_after_split"] == 11  # train questions whose answer is from after the cut
    assert (
        summary["train"] + summary["validation"] + summary["test"] + summary.get("outside_split_ranges", 0)
        == summary["kept"] - summary["removed_answer_after_split"]
    )


def test_code_blocks_survive_cleaning(cardano):
    data, _, _ = cardano
    fenced = [row for split in data.values() for row in split if "```" in row["answer"]]
    assert len(fenced) > 20
    # Every fence opens and closes, and shell commands inside stay verbatim.
    assert all(row["answer"].count("```") % 2 == 0 for row in fenced)
    assert any("cardano-cli" in row["answer"].split("```")[1] for row in fenced)


def test_linked_duplicates_are_dropped_and_recorded(cardano):
    data, summary, _ = cardano
    rows = {row["id"]: row for split in data.values() for row in split}
    # PostLinks.xml: post 329 was closed as a duplicate (LinkTypeId=3) of post 330.
    assert 329 not in rows
    assert summary["removed_linked_duplicate"] >= 1
    assert all(329 not in row["duplicate_ids"] or row["id"] == 330 for row in rows.values())


CARDANO_DATES = SplitSettings(
    train_start="2021-04-01",
    train_end="2021-09-15",
    validation_start="2021-09-15",
    validation_end="2021-10-15",
    test_start="2021-10-15",
    test_end="2022-01-01",
)
"""configs/tiny.yaml's split of the cardano sample."""


def test_split_by_fractions_is_temporal_and_reports_its_dates(cardano):
    data, summary, _ = cardano
    assert summary["split_by"] == "fractions"
    kept = summary["kept"]
    # 80/10/10 of the kept questions, oldest first (a cut never separates questions of the same moment);
    # train then loses the pairs whose answer is from after its end
    train = summary["train"] + summary["removed_answer_after_split"]
    assert abs(train - round(0.8 * kept)) <= 1 and abs(summary["validation"] - 0.1 * kept) <= 1
    assert train + summary["validation"] + summary["test"] == kept
    assert max(data["train"]["created"]) < min(data["validation"]["created"])
    assert max(data["validation"]["created"]) < min(data["test"]["created"])
    for name in ("train", "validation", "test"):
        assert summary[f"{name}_first"] == min(data[name]["created"])
        assert summary[f"{name}_last"] == max(data[name]["created"])
    assert summary["kept_first"] == summary["train_first"] and summary["kept_last"] == summary["test_last"]
    assert summary["dump_first"] <= summary["kept_first"] and summary["dump_last"] >= summary["kept_last"]


def test_split_respects_dates(cardano_dir, cache_dir):
    settings = _settings(cardano_dir)
    settings.split = CARDANO_DATES
    data, summary = prepare_qa_dataset(settings, cache_dir)
    assert summary["split_by"] == "dates"
    ranges = split_ranges(CARDANO_DATES)
    for name, (start, end) in ranges.items():
        assert len(data[name]) > 0
        assert all(start <= datetime.fromisoformat(created) < end for created in data[name]["created"])
    assert max(data["train"]["created"]) < min(data["test"]["created"])  # the stored form sorts as time


@pytest.mark.parametrize(
    ("fractions", "message"),
    [
        ((0.8, 0.1, 0.2), r"train_fraction/validation_fraction/test_fraction: 0.8/0.1/0.2 sum to 1.1"),
        ((1.0, 0.0, 0.0), r"data\.dataset\.split\.validation_fraction: 0.0: must be a number in \(0, 1\]"),
        ((-0.2, 0.6, 0.6), r"data\.dataset\.split\.train_fraction: -0.2"),
    ],
)
def test_bad_fractions_name_the_setting(cardano_dir, cache_dir, fractions, message):
    settings = _settings(cardano_dir)
    settings.split = SplitSettings(*fractions)
    with pytest.raises(ConfigError, match=message):
        prepare_qa_dataset(settings, cache_dir)


def test_dates_must_be_all_six_or_none(cardano_dir, cache_dir):
    settings = _settings(cardano_dir)
    settings.split = replace(CARDANO_DATES, test_start=None, test_end=None)
    with pytest.raises(ConfigError, match=r"split\.test_start, data\.dataset\.split\.test_end: not set"):
        prepare_qa_dataset(settings, cache_dir)


def test_rows_have_the_documented_fields(cardano):
    data, _, _ = cardano
    row = data["train"][0]
    assert row["question"].startswith(row["title"])
    assert row["answer"] and row["answer_created"] >= row["created"]
    assert isinstance(row["tags"], list) and row["tags"]
    assert row["site"] == "cardano"


def test_second_run_reads_the_cache_and_a_changed_setting_rebuilds(cardano, cardano_dir):
    _, _, cache = cardano
    before = sorted(p.name for p in (cache / "datasets").iterdir())
    prepare_qa_dataset(_settings(cardano_dir), cache)
    assert sorted(p.name for p in (cache / "datasets").iterdir()) == before
    prepare_qa_dataset(_settings(cardano_dir, min_answer_chars=200), cache)
    assert len(list((cache / "datasets").iterdir())) == len(before) + 1


def test_sampling_the_test_split_is_seeded(cardano_dir, cache_dir):
    settings = _settings(cardano_dir)
    settings.split = replace(settings.split, test_size=20, seed=3)
    first, _ = prepare_qa_dataset(settings, cache_dir)
    second, _ = prepare_qa_dataset(settings, cache_dir / "other")
    assert len(first["test"]) == 20
    assert first["test"]["id"] == second["test"]["id"]


def test_tags_in_both_dump_forms():
    assert parse_tags("<ubuntu><networking>") == ["ubuntu", "networking"]
    assert parse_tags("|ubuntu|networking|") == ["ubuntu", "networking"]
    assert parse_tags(None) == []


def test_html_cleaning_keeps_what_matters():
    html = (
        "<p>Run <code>apt</code> &amp; then:</p><pre><code>sudo systemctl restart nginx\n</code></pre>"
        '<ul><li>first</li><li>see <a href="https://x.org">the docs</a></li></ul>'
        '<img src="a.png" alt="pool diagram"><script>alert(1)</script>'
    )
    text = html_to_text(html)
    assert "Run `apt` & then:" in text
    assert "```\nsudo systemctl restart nginx\n```" in text
    assert "* first" in text and "* see the docs" in text
    assert "[image: pool diagram]" in text
    assert "alert" not in text
    assert text_outside_links('<p><a href="https://x.org">https://x.org</a></p>') == ""


def test_missing_file_is_named(tmp_path, cache_dir):
    with pytest.raises(DataError, match=f"{tmp_path / 'nowhere'}: not found"):
        prepare_qa_dataset(_settings(tmp_path / "nowhere"), cache_dir)


def test_malformed_xml_reports_line_and_leaves_no_cache(cardano_dir, tmp_path, cache_dir):
    lines = (cardano_dir / "Posts.xml").read_text(encoding="utf-8-sig").splitlines()
    (tmp_path / "Posts.xml").write_text("\n".join(lines[:40]) + '\n  <row Id="99" Body="unterminated\n')
    with pytest.raises(DataError, match=r"Posts\.xml: malformed XML at line \d+, column \d+"):
        prepare_qa_dataset(_settings(tmp_path), cache_dir)
    assert not any((cache_dir / "datasets").iterdir())


def test_rows_missing_fields_are_skipped_and_counted(tmp_path, cache_dir):
    (tmp_path / "Posts.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<posts>\n'
        '  <row Id="1" PostTypeId="1" AcceptedAnswerId="3" CreationDate="2021-05-01T00:00:00" Score="1"'
        ' Title="How do I restart nginx on Ubuntu?" Body="&lt;p&gt;It hangs.&lt;/p&gt;" Tags="|nginx|" />\n'
        '  <row Id="2" PostTypeId="1" CreationDate="2021-05-02T00:00:00" Title="No body here" />\n'
        '  <row Id="3" PostTypeId="2" ParentId="1" CreationDate="2021-05-01T01:00:00" Score="2"'
        ' Body="&lt;p&gt;Run &lt;code&gt;sudo systemctl restart nginx&lt;/code&gt;'
        ' and check the journal.&lt;/p&gt;" />\n'
        "</posts>\n"
    )
    settings = _settings(tmp_path)
    settings.split = SplitSettings(
        train_start="2021-01-01",
        train_end="2021-06-01",
        validation_start="2021-06-01",
        validation_end="2021-07-01",
        test_start="2021-07-01",
        test_end="2021-08-01",
    )
    with pytest.raises(
        DataError, match=r"split 'validation' is empty.*\[2021-06-01, 2021-07-01\).*skipped_rows=1"
    ):
        prepare_qa_dataset(settings, cache_dir)


def test_bad_split_date_names_the_setting(cardano_dir, cache_dir):
    settings = _settings(cardano_dir)
    settings.split = replace(CARDANO_DATES, test_end="next year")
    with pytest.raises(ConfigError, match=r"data\.dataset\.split\.test_end"):
        prepare_qa_dataset(settings, cache_dir)


def test_tabular_source_with_column_mapping(tmp_path, cache_dir):
    rows = [
        {
            "qid": i,
            "title": f"How to configure service {i}?",
            "text": "It fails on boot.",
            "best": f"Edit /etc/service{i}.conf and restart the unit; check journalctl -u service{i}.",
            "date": f"2021-{month:02d}-10T00:00:00",
        }
        for i, month in enumerate([5, 6, 7, 10, 11, 12, 9, 9])
    ]
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(row) for row in rows))
    settings = _settings(path)
    settings.split = CARDANO_DATES
    settings.column_mapping = {"id": "qid", "body": "text", "answer": "best", "created": "date"}
    data, summary = prepare_qa_dataset(settings, cache_dir)
    assert summary["questions"] == 8
    assert sorted(data["train"]["id"]) == [0, 1, 2, 6, 7]
    assert data["test"][0]["question"].startswith("How to configure service")

    settings.column_mapping = {"answer": "best"}
    with pytest.raises(DataError, match=r"missing columns created \(column 'created'\)"):
        prepare_qa_dataset(settings, cache_dir)

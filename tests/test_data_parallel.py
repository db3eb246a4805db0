"""HTML cleaning in worker processes: the same dataset for any ``workers``, bounded work, clear errors."""

from __future__ import annotations

from html import escape
from pathlib import Path

import pytest

from graphctx.data import DatasetSettings, FilterSettings, prepare_qa_dataset
from graphctx.data.parallel import CHUNKS_PER_WORKER, ordered_map
from graphctx.errors import ConfigError, DataError


def _settings(source: Path, workers: int | None) -> DatasetSettings:
    return DatasetSettings(source=str(source), workers=workers, filters=FilterSettings(max_tokens=None))


def _built_folder(cache: Path) -> Path:
    (folder,) = (cache / "datasets").iterdir()
    return folder


def test_two_workers_build_the_same_bytes_as_one(cardano_dir, tmp_path):
    serial, serial_summary = prepare_qa_dataset(_settings(cardano_dir, 1), tmp_path / "one")
    pooled, pooled_summary = prepare_qa_dataset(_settings(cardano_dir, 2), tmp_path / "two")
    assert pooled_summary == serial_summary
    assert pooled_summary["kept"] == 452
    for split in ("train", "validation", "test"):
        assert pooled[split]["id"] == serial[split]["id"]
        assert pooled[split].to_list() == serial[split].to_list()
    one, two = _built_folder(tmp_path / "one"), _built_folder(tmp_path / "two")
    assert one.name == two.name, "workers must not enter the cache key"
    for name in ("summary.json", "train.arrow", "validation.arrow", "test.arrow"):
        assert (one / name).read_bytes() == (two / name).read_bytes(), name


def test_a_cleaning_error_in_a_worker_names_the_file_and_question(tmp_path, cache_dir):
    nested = escape("<b>" * 5000 + "deep" + "</b>" * 5000)  # markdownify recurses per tag: RecursionError
    (tmp_path / "Posts.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<posts>\n'
        '  <row Id="7" PostTypeId="1" AcceptedAnswerId="8" CreationDate="2021-05-01T00:00:00" Score="1"'
        f' Title="Why does my markup nest so deeply?" Body="{nested}" Tags="|html|" />\n'
        '  <row Id="8" PostTypeId="2" ParentId="7" CreationDate="2021-05-01T01:00:00" Score="2"'
        ' Body="&lt;p&gt;Close your tags; every open tag needs a matching close tag.&lt;/p&gt;" />\n'
        "</posts>\n"
    )
    with pytest.raises(DataError, match=r"Posts\.xml: question 7 .*cannot clean its HTML: RecursionError"):
        prepare_qa_dataset(_settings(tmp_path, 2), cache_dir)
    assert not any((cache_dir / "datasets").iterdir()), "a failed build publishes nothing"


def test_workers_below_one_name_the_setting(cardano_dir):
    with pytest.raises(ConfigError, match=r"DatasetSettings: workers: must be >= 1, got 0"):
        _settings(cardano_dir, 0)  # the settings check themselves when built


def test_ordered_map_keeps_order_and_reads_ahead_a_bounded_number_of_chunks():
    pulled = 0

    def numbers():
        nonlocal pulled
        for number in range(-500, 500):
            pulled += 1
            yield number

    results = ordered_map(abs, numbers(), workers=2, chunk_items=10)
    assert next(results) == 500
    # The first result waits for the pool to fill: at most CHUNKS_PER_WORKER chunks per worker in flight.
    assert pulled <= CHUNKS_PER_WORKER * 2 * 10
    assert [500, *results] == [abs(number) for number in range(-500, 500)]

"""Bad input, round four: a rerun never trusts an input that changed in place. The resume guard's
fingerprint holds the SHA-256s of the dataset's source files, so a dump whose gold answer was rewritten is
refused naming ``source`` (or, with ``--overwrite``, answered and scored again); and it hashes the adapter
file peft loads (issue 34)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from test_bad_input import settings_for
from test_retrieval_eval import TINY, write_site

from graphctx.errors import ConfigError
from graphctx.evaluation.matrix.resume_guard import ResumeGuard
from graphctx.evaluation.matrix.run_files import RunFiles
from graphctx.evaluation.matrix.stale import StaleArea
from graphctx.pipeline.config_file import load_config
from graphctx.prompts import VARIANTS


def guard_for(tmp_path: Path, site: Path) -> ResumeGuard:
    config = yaml.safe_load(TINY.read_text())
    config["cache_dir"] = str(tmp_path / "cache")
    split = dict(vars(settings_for(site).split))
    config["data"]["dataset"].update(source=str(site), filters={"max_tokens": None}, split=split)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    out, run_config = tmp_path / "eval", load_config(path)
    metrics = tuple(entry.name for entry in run_config.metric_entries)
    return ResumeGuard(run_config, RunFiles(out, metrics), StaleArea(out))


def test_a_dump_changed_in_place_is_refused_naming_the_source(tmp_path):
    site = write_site(tmp_path / "site")
    variant = VARIANTS["ZeroShot"]
    before = guard_for(tmp_path, site)
    predictions = before.run_files.predictions_file(variant)
    predictions.parent.mkdir(parents=True)
    predictions.write_text(json.dumps({"id": 30, "prediction": "old"}) + "\n")
    parts = before.prediction_fingerprint(variant)
    meta = {"fingerprint": before.fingerprint(variant), "settings": json.loads(json.dumps(parts))}
    predictions.with_suffix(".meta.json").write_text(json.dumps(meta))

    posts = site / "Posts.xml"  # the gold answer rewritten, the same path and settings
    posts.write_text(posts.read_text().replace("check the journal", "read the journal"))
    after = guard_for(tmp_path, site)
    assert after.fingerprint(variant) != before.fingerprint(variant)
    with pytest.raises(
        ConfigError, match=r"ZeroShot were made with other settings \(source\.Posts\.xml changed\)"
    ):
        after.check_settings(variant, overwrite=False)
    assert json.loads(predictions.with_suffix(".meta.json").read_text()) == meta  # nothing rewritten
    assert set(parts["source"]) == {"Posts.xml", "PostLinks.xml"}


def test_a_folder_two_runs_wrote_into_names_its_way_out_and_overwrite_takes_it(tmp_path):
    site = write_site(tmp_path / "site")
    variant = VARIANTS["ZeroShot"]
    guard = guard_for(tmp_path, site)
    predictions = guard.run_files.predictions_file(variant)
    predictions.parent.mkdir(parents=True)
    row = json.dumps({"id": 30, "prediction": "twice"}) + "\n"
    predictions.write_text(row + row)  # each of two runs answered every row
    with pytest.raises(ConfigError, match=r"id 30 is on 2 rows .*rerun with --overwrite to move ZeroShot's"):
        guard.check_settings(variant, overwrite=False)
    assert predictions.read_text() == row + row

    guard.check_settings(variant, overwrite=True)  # the way out the error names
    assert not predictions.exists()
    (moved,) = (guard.run_files.output_dir / "stale").rglob("ZeroShot.jsonl")
    assert moved.read_text() == row + row
    assert (guard.run_files.output_dir / ".graphctx-evaluation").is_file()  # --overwrite may act here again

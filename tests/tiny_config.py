"""configs/tiny.yaml's settings, for tests that build their own configs around them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TINY = Path(__file__).resolve().parents[1] / "configs" / "tiny.yaml"


def tiny_split(**changes: str) -> dict[str, Any]:
    """The tiny config's split of the cardano sample (its dates), with ``changes``."""
    return {**yaml.safe_load(TINY.read_text())["data"]["dataset"]["split"], **changes}


def tiny_scorers(bertscore_model: str) -> dict[str, Any]:
    """``evaluation.metrics`` for tests that score on the CPU: BERTScore with ``bertscore_model``, AutoAIS
    with the tiny random Llama, the fact score by triplets and the entity overlap by spaCy."""
    return {
        "bertscore": {"model": bertscore_model},
        "autoais": {"model": "tiny-random"},
        "facts": {"fact_method": "triplets", "entity_method": "spacy"},
    }


def recent_pool_config(folder: Path, model_folder: Path) -> Path:
    """configs/tiny.yaml with a pool of the recent training questions only (``train_start`` 2021-08-20, as
    the evaluation tests use), its relative data paths made absolute and its model the already converted
    SmolLM2 ``model_folder`` (the ``smollm2_folder`` fixture: a fresh cache then skips the GGUF conversion),
    written to ``folder/recent.yaml``: for tests that build the index in fresh caches and subprocesses."""
    settings = yaml.safe_load(TINY.read_text())
    settings["model"]["spec"]["source"] = str(model_folder)
    dataset = settings["data"]["dataset"]
    dataset["source"] = str((TINY.parents[1] / dataset["source"]).resolve())
    dataset["split"] = tiny_split(train_start="2021-08-20")
    knowledge = settings["knowledge"]
    knowledge["kg_dir"] = str((TINY.parents[1] / knowledge["kg_dir"]).resolve())
    path = folder / "recent.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path

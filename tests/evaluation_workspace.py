"""The workspace of the end-to-end evaluation tests: a random LoRA adapter on the tiny random Llama, and a
config evaluating it on the recent cardano questions with tiny scorers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import yaml
from peft import LoraConfig, get_peft_model
from tiny_config import tiny_scorers, tiny_split
from transformers import AutoModelForCausalLM

from graphctx.model import ModelSpec, load_tokenizer, resolve_source


def write_workspace(
    root: Path,
    cardano_dir: Path,
    tiny_bert: Path,
    config_name: str,
    evaluation: dict[str, Any],
    **sections: dict[str, Any],
) -> Path:
    """``root/adapter`` (random LoRA weights, seed 0), ``root/cache``, and the config ``root/<config_name>``
    with ``evaluation`` over the shared evaluation settings, and further ``sections`` (``trainer``,
    ``retrieval``, ...); returns its path."""
    cache = root / "cache"
    spec = ModelSpec(source="tiny-random", cache_dir=str(cache))
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(resolve_source(spec))
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(base, lora).save_pretrained(root / "adapter")
    load_tokenizer(spec).save_pretrained(root / "adapter")
    settings: dict[str, Any] = {
        "cache_dir": str(cache),
        "model": {"spec": {"source": "tiny-random"}},
        "data": {  # a pool of recent questions only: the tests embed it on the CPU
            "dataset": {"source": str(cardano_dir), "split": tiny_split(train_start="2021-08-20")},
        },
        "knowledge": {"token_budget": 160},
        "evaluation": {
            "adapter": str(root / "adapter"),
            "wandb_project": None,
            "metrics": tiny_scorers(str(tiny_bert)),
            **evaluation,
        },
    }
    settings |= sections
    path = root / config_name
    path.write_text(yaml.safe_dump(settings))
    return path

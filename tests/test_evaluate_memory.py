"""evaluate.py holds one stage's models at a time (contexts, answers, each scorer), and decodes the base rows
and the LLM extractor with the released weights, the fine-tuned rows with the trained (NF4) ones."""

from __future__ import annotations

import gc
import weakref

import pytest
from evaluation_workspace import write_workspace
from transformers import PreTrainedModel

import graphctx.pipeline.answerer as answerer
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.pipeline.config_file import load_config
from graphctx.prompts import VARIANTS

pytestmark = pytest.mark.slow


def test_each_stage_loads_after_the_previous_stages_models_are_freed(
    tmp_path, cardano_dir, tiny_bert, monkeypatch
):
    evaluation = {
        "output_dir": str(tmp_path / "out"),
        "variants": ["ZeroShot", "Base-TextContextGen", "TextContextGen"],
        "limit": 2,
        "bootstrap_samples": 20,
    }
    knowledge = {
        "extractors": ["llm"],
        "llm_model": "",
        "llm_max_new_tokens": 4,
        "token_budget": 160,
    }
    path = write_workspace(
        tmp_path,
        cardano_dir,
        tiny_bert,
        "tiny.yaml",
        evaluation,
        knowledge=knowledge,
        generation={"max_new_tokens": 4, "batch_size": 2, "max_prompt_tokens": 320},
    )
    config = load_config(path)
    assert config.model.spec.quantization == "nf4"

    created: list[weakref.ref] = []  # every transformers model built in the run
    real_post_init = PreTrainedModel.post_init

    def post_init(self) -> None:
        real_post_init(self)
        created.append(weakref.ref(self))

    monkeypatch.setattr(PreTrainedModel, "post_init", post_init)
    loads: list[tuple[str, list[str]]] = []  # (what loads, the models still alive when it does)

    def log(message: str) -> None:
        if message.startswith("loading the "):
            gc.collect()
            loads.append((message, [type(m).__name__ for ref in created if (m := ref()) is not None]))

    weights = []  # (adapter, the weights of layer 0's gate projection) of every generation model

    def load_generation_model(spec, adapter_dir, generation, device, kind="trained"):
        model = real_load_generator(spec, adapter_dir, generation, device, kind)
        weights.append((adapter_dir, kind, model.get_decoder().layers[0].mlp.gate_proj.weight.clone()))
        return model

    real_load_generator = answerer.load_generation_model
    monkeypatch.setattr(answerer, "load_generation_model", load_generation_model)
    evaluation = MatrixEvaluation(config, log=log)
    evaluation.evaluate()
    assert [message.split(" (")[0].split(" with ")[0] for message, _ in loads] == [
        "loading the base model",  # the LLM extractor, for the contexts
        "loading the base model",  # the base rows
        "loading the adapter model",  # the fine-tuned rows
        "loading the rouge metric",
        "loading the bertscore metric",
        "loading the fact_score metric",
        "loading the base model",  # the LLM extractor again, for the fact score
        "loading the entity_jaccard metric",
        "loading the autoais metric",
    ]
    for message, alive in loads:
        assert alive == [], f"{message}: still alive {alive}"
    # released weights for the base rows and the extractor, the NF4-dequantised base under the adapter
    kinds = [(adapter is not None, kind) for adapter, kind, _ in weights]
    assert kinds == [(False, "released"), (False, "released"), (True, "trained"), (False, "released")]
    released, trained = weights[0][2], weights[2][2]  # gate_proj: not an adapter target here
    assert (released - trained).abs().max() > 1e-3  # the NF4 rounding the base rows no longer see
    base_rows = evaluation.guard.prediction_fingerprint(VARIANTS["ZeroShot"])
    assert base_rows["weights"] == "released"
    assert evaluation.guard.prediction_fingerprint(VARIANTS["TextContextGen"])["weights"] == "trained"

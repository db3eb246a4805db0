"""graphctx.model: loading, QLoRA on CPU, answer-only loss, padding-free batches, checkpoints, export."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import lightning as L
import pytest
import torch
from peft import PeftModel
from torch.utils.data import DataLoader
from transformers import AutoModelForCausalLM

from graphctx.data.instruct import encode_example, get_template
from graphctx.data.packing import collate_rows
from graphctx.errors import ConfigError
from graphctx.model import (
    InstructionTuner,
    LoraSettings,
    ModelSpec,
    TunerSettings,
    load_base_model,
    load_tokenizer,
)
from graphctx.model.export import export_adapter, export_merged
from graphctx.model.loading import decoder_blocks
from graphctx.model.loss import answer_cross_entropy_sum
from graphctx.model.module import real_token_mask, remove_padding
from graphctx.model.optim import build_optimizer, build_scheduler
from graphctx.model.settings import ExportSettings, OptimizerSettings

PAIRS = [
    (
        "How do I delegate my ADA to a stake pool?",
        "Open your wallet, pick a pool and confirm the delegation.",
    ),
    ("What is a UTXO?", "An unspent transaction output: a coin you can spend exactly once."),
    ("Which port does cardano-node listen on?", "3001 by default; set it with --port."),
]


@pytest.fixture(scope="module")
def spec(tmp_path_factory: pytest.TempPathFactory) -> ModelSpec:
    """A tiny random Llama, 4-bit NF4 on CPU (float32 compute so logits compare exactly)."""
    cache = tmp_path_factory.mktemp("model-cache")
    return ModelSpec(source="tiny-random", compute_dtype="float32", cache_dir=str(cache))


@pytest.fixture(scope="module")
def examples(spec: ModelSpec) -> list[dict[str, list[int]]]:
    tokenizer = load_tokenizer(spec)
    template = get_template("paper")
    return [encode_example(tokenizer, template, q, a, max_length=128) for q, a in PAIRS]


def padded_batch(examples: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    return collate_rows([[ex] for ex in examples], pad_id=0, packed=False)


def packed_batch(examples: list[dict[str, list[int]]]) -> dict[str, torch.Tensor]:
    return collate_rows([examples], pad_id=0, packed=True)


def tuner(spec: ModelSpec, root: Path | None = None, **lora: float) -> InstructionTuner:
    settings = LoraSettings(r=8, alpha=16, dropout=0.0, **lora)
    export = ExportSettings(adapter_dir=str(root / "adapter") if root else None)
    optimizer = OptimizerSettings(lr=1e-2)
    return InstructionTuner(TunerSettings(spec=spec, lora=settings, optimizer=optimizer, export=export))


def trainer(root: Path, max_steps: int) -> L.Trainer:
    return L.Trainer(
        accelerator="cpu",
        max_steps=max_steps,
        default_root_dir=root,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[L.pytorch.callbacks.ModelCheckpoint(dirpath=root / "checkpoints", save_last=True)],
    )


def test_qlora_base_is_4bit_and_only_lora_weights_train(spec: ModelSpec, examples) -> None:
    module = tuner(spec)
    module.configure_model()
    module.train()
    q_proj = module.model.get_base_model().model.layers[0].self_attn.q_proj
    assert q_proj.base_layer.weight.dtype == torch.uint8  # packed NF4
    trainable = module.trainable_parameter_names()
    assert trainable and all("lora_" in name for name in trainable)
    batch = padded_batch(examples)
    ids = batch["input_ids"][:1]

    def base_logits() -> torch.Tensor:
        with torch.no_grad(), module.model.disable_adapter():
            return module.model(input_ids=ids).logits

    base_before = base_logits()
    lora_before = {n: p.detach().clone() for n, p in module.named_parameters() if p.requires_grad}
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-2)
    losses = []
    for _ in range(8):
        loss = module(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.5, losses
    after = dict(module.named_parameters())
    assert all(p.grad is None for p in module.parameters() if not p.requires_grad)
    torch.testing.assert_close(base_logits(), base_before, rtol=0, atol=0)  # the frozen base is untouched
    assert any(not torch.equal(lora_before[n], after[n]) for n in lora_before)


def test_gradients_through_the_4bit_base_survive_an_eval_pass(spec: ModelSpec, examples) -> None:
    """bitsandbytes must not switch a trained CPU model to its inference-only (no backward) kernel."""
    module = tuner(spec)
    module.configure_model()
    batch = padded_batch(examples)
    first_layer_lora = next(p for n, p in module.named_parameters() if "layers.0" in n and "lora_A" in n)

    def first_layer_grad() -> torch.Tensor:
        module.train()
        module.zero_grad()
        module(batch).backward()
        return first_layer_lora.grad.clone()

    before = first_layer_grad()
    module.eval()
    with torch.no_grad():
        module.model(input_ids=batch["input_ids"])
    torch.testing.assert_close(first_layer_grad(), before)


def test_packed_padded_and_flattened_batches_give_the_same_loss(spec: ModelSpec, examples) -> None:
    module = tuner(spec)
    module.configure_model()
    module.eval()
    with torch.no_grad():
        packed = module(packed_batch(examples))
        padded = module(padded_batch(examples))
        flattened = module(remove_padding(padded_batch(examples), pad_token_id=0))  # what varlen runs on
        # reference: each example alone, answer-token losses pooled
        single = [module(padded_batch([ex])) for ex in examples]
    weights = torch.tensor([sum(label != -100 for label in ex["labels"][1:]) for ex in examples])
    pooled = (torch.stack(single) * weights).sum() / weights.sum()
    for loss in (packed, padded, flattened):
        torch.testing.assert_close(loss, pooled, rtol=1e-4, atol=1e-4)


PACKED_LOGITS_ATOL = 1e-5
"""float32 on CPU: a packed example's logits equal its logits alone to rounding (measured ~4e-7); attention
leaking across the boundaries moves them by ~1 (random tiny Llama, logits of magnitude ~1)."""


def packed_logit_gaps(module: InstructionTuner, examples) -> list[float]:
    """Per example: max |logit| difference between the example inside one packed row and the same example
    run alone (both through ``InstructionTuner.hidden_states``, the training path)."""
    lm_head = module.model.get_base_model().get_output_embeddings()
    with torch.no_grad():
        hidden, _ = module.hidden_states(collate_rows([examples], pad_id=0, packed=True))
        packed, gaps, offset = lm_head(hidden[0]), [], 0
        for example in examples:
            alone, _ = module.hidden_states(collate_rows([[example]], pad_id=0, packed=True))
            length = len(example["input_ids"])
            gaps.append(float((packed[offset : offset + length] - lm_head(alone[0])).abs().max()))
            offset += length
    return gaps


def test_packed_examples_do_not_attend_across_boundaries(spec: ModelSpec, examples, monkeypatch) -> None:
    """Per-example logits of a packed row equal each example alone; without the boundaries they do not.

    On CPU the model runs SDPA on packed rows; transformers reads the example boundaries from the restarts
    of ``position_ids`` (``masking_utils.find_packed_sequence_indices``) and builds a block-diagonal causal
    mask. Removing that (plain causal mask over the whole row) is the leak this test must catch.
    """
    import transformers.masking_utils

    module = tuner(spec)
    module.configure_model()
    module.eval()
    assert module.model.get_base_model().config._attn_implementation == "sdpa"
    gaps = packed_logit_gaps(module, examples)
    assert max(gaps) < PACKED_LOGITS_ATOL, gaps
    monkeypatch.setattr(transformers.masking_utils, "find_packed_sequence_indices", lambda positions: None)
    leaked = packed_logit_gaps(module, examples)
    assert leaked[0] < PACKED_LOGITS_ATOL  # the first example has nothing before it to leak from
    assert min(leaked[1:]) > 1000 * PACKED_LOGITS_ATOL, leaked


def test_liger_is_refused_on_cpu_before_loading(spec: ModelSpec) -> None:
    module = tuner(replace(spec, liger=True))
    with pytest.raises(ConfigError, match=r"model\.spec\.liger=true needs CUDA.*device is cpu"):
        module.configure_model()
    assert module.model is None


def test_real_tokens_of_a_packed_batch_exclude_the_tail_padding(examples) -> None:
    rows = [[examples[0], examples[1]], [examples[2]]]  # the second row is shorter: padded at its end
    batch = collate_rows(rows, pad_id=0, packed=True)
    lengths = [len(ex["input_ids"]) for ex in examples]
    assert batch["input_ids"].numel() > sum(lengths)
    assert int(real_token_mask(batch, pad_token_id=0).sum()) == sum(lengths)
    flat = remove_padding(batch, pad_token_id=0)
    expected = examples[0]["input_ids"] + examples[1]["input_ids"] + examples[2]["input_ids"]
    assert flat["input_ids"][0].tolist() == expected
    assert (flat["position_ids"][0] == 0).sum() == 3  # three examples, no pad segment


def test_chunked_answer_loss_matches_full_cross_entropy() -> None:
    torch.manual_seed(0)
    head = torch.nn.Linear(16, 50, bias=False)
    hidden = torch.randn(2, 9, 16, requires_grad=True)
    targets = torch.randint(0, 50, (2, 9))
    targets[0, :4] = -100
    total, count = answer_cross_entropy_sum(hidden, targets, head, chunk_tokens=3)
    assert count == int((targets != -100).sum())
    chunked = total / count
    (grad_chunked,) = torch.autograd.grad(chunked, hidden)
    full = torch.nn.functional.cross_entropy(head(hidden).reshape(-1, 50), targets.reshape(-1))
    (grad_full,) = torch.autograd.grad(full, hidden)
    torch.testing.assert_close(chunked, full)
    torch.testing.assert_close(grad_chunked, grad_full)


def test_checkpoint_holds_only_the_adapter_and_resume_continues(spec: ModelSpec, examples, tmp_path) -> None:
    loader = DataLoader([padded_batch(examples)] * 10, batch_size=None)
    first = tuner(spec, tmp_path)
    trainer(tmp_path, max_steps=3).fit(first, loader)
    last = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=False)
    assert set(checkpoint["state_dict"]) == first.trainable_parameter_names()
    assert checkpoint["global_step"] == 3
    base_bytes = sum(p.stat().st_size for p in Path(spec.cache_dir).rglob("*.safetensors"))
    assert last.stat().st_size < 0.1 * base_bytes

    class FirstStep(L.Callback):
        seen: int | None = None

        def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
            self.seen = trainer.global_step if self.seen is None else self.seen

    resumed, first_step = tuner(spec, tmp_path), FirstStep()
    run = trainer(tmp_path, max_steps=5)
    run.callbacks.append(first_step)
    run.fit(resumed, loader, ckpt_path="last")
    assert first_step.seen == 3 and run.global_step == 5
    saved = {k: v for k, v in checkpoint["state_dict"].items()}
    restored = {k: v for k, v in resumed.state_dict().items() if k in saved}
    assert any(not torch.equal(saved[k], restored[k]) for k in saved)  # kept training from the saved weights


def test_resume_rejects_a_checkpoint_of_another_adapter(spec: ModelSpec, examples, tmp_path) -> None:
    loader = DataLoader([padded_batch(examples)] * 4, batch_size=None)
    trainer(tmp_path, max_steps=1).fit(tuner(spec, tmp_path), loader)
    other = tuner(spec, tmp_path, target_modules=["q_proj", "v_proj"])
    with pytest.raises(ValueError, match="checkpoint adapter does not match"):
        trainer(tmp_path, max_steps=2).fit(other, loader, ckpt_path="last")


def test_exported_adapter_reloads_with_the_same_logits(spec: ModelSpec, examples, tmp_path) -> None:
    loader = DataLoader([packed_batch(examples)] * 4, batch_size=None)
    module = tuner(spec, tmp_path)
    trainer(tmp_path, max_steps=4).fit(module, loader)
    adapter = tmp_path / "adapter"
    assert (adapter / "adapter_config.json").is_file() and (adapter / "adapter_model.safetensors").is_file()
    ids = torch.tensor([examples[0]["input_ids"]])
    module.model.eval()
    with torch.no_grad():
        trained = module.model(input_ids=ids).logits
        reloaded_model = PeftModel.from_pretrained(load_base_model(spec), str(adapter)).eval()
        reloaded = reloaded_model(input_ids=ids).logits
        base_only = load_base_model(spec)(input_ids=ids).logits
    torch.testing.assert_close(reloaded, trained)
    assert not torch.allclose(base_only, trained, atol=1e-3)  # the adapter changed the model


def test_optimizer_and_schedule() -> None:
    parameters = [torch.nn.Parameter(torch.zeros(3))]
    settings = OptimizerSettings(lr=1e-3, schedule="cosine", warmup_ratio=0.1)
    optimizer = build_optimizer(parameters, settings, torch.device("cpu"))
    assert isinstance(optimizer, torch.optim.AdamW)
    scheduler = build_scheduler(optimizer, settings, total_steps=100)
    lrs = []
    for _ in range(100):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[0] == 0.0 and lrs[10] == pytest.approx(1e-3) and lrs[-1] < 1e-5
    with pytest.raises(ConfigError, match="paged_adamw_8bit needs CUDA"):
        build_optimizer(parameters, OptimizerSettings(name="paged_adamw_8bit"), torch.device("cpu"))


def test_missing_model_paths_name_the_setting(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"model.spec.source: GGUF file .*missing.gguf does not exist"):
        load_tokenizer(ModelSpec(source=str(tmp_path / "missing.gguf")))
    with pytest.raises(ConfigError, match=r"has no config\.json"):
        load_tokenizer(ModelSpec(source=str(tmp_path)))


@pytest.mark.slow
def test_packaged_gguf_is_converted_once_and_answers(tmp_path) -> None:
    spec = ModelSpec(cache_dir=str(tmp_path), quantization="none")
    tokenizer = load_tokenizer(spec)
    (converted,) = (tmp_path / "models").iterdir()
    stamp = (converted / "model.safetensors").stat().st_mtime_ns
    model = load_base_model(spec)
    assert (converted / "model.safetensors").stat().st_mtime_ns == stamp  # reused, not converted again
    prompt = tokenizer("The capital of France is", return_tensors="pt")
    output = model.generate(**prompt, max_new_tokens=4, do_sample=False)
    assert "Paris" in tokenizer.decode(output[0])


def test_merged_export_matches_base_plus_adapter(spec: ModelSpec, examples, tmp_path) -> None:
    """Plain LoRA (no quantisation), so merging is exact up to the bf16 the merged model is saved in."""
    plain = ModelSpec(
        source="tiny-random", quantization="none", compute_dtype="float32", cache_dir=spec.cache_dir
    )
    module = InstructionTuner(TunerSettings(spec=plain, lora=LoraSettings(r=8, alpha=16, dropout=0.0)))
    module.configure_model()
    optimizer = torch.optim.AdamW([p for p in module.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        module(padded_batch(examples)).backward()
        optimizer.step()
        optimizer.zero_grad()
    adapter = export_adapter(module.model, load_tokenizer(plain), tmp_path / "adapter")
    merged_dir = export_merged(plain, adapter, tmp_path / "merged")
    assert json.loads((merged_dir / "config.json").read_text())["dtype"] == "bfloat16"
    ids = torch.tensor([examples[0]["input_ids"]])
    merged = AutoModelForCausalLM.from_pretrained(merged_dir, dtype=torch.float32).eval()
    module.model.eval()
    with torch.no_grad():
        expected = module.model(input_ids=ids).logits
        torch.testing.assert_close(merged(input_ids=ids).logits, expected, rtol=0.05, atol=0.05)
        with module.model.disable_adapter():
            assert not torch.allclose(module.model(input_ids=ids).logits, expected, atol=1e-3)


def _adapter_gradients(module: InstructionTuner, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    module.train()
    module.zero_grad()
    loss = module(batch)
    loss.backward()
    return {"loss": loss.detach()} | {
        name: parameter.grad.clone()
        for name, parameter in module.named_parameters()
        if parameter.requires_grad
    }


def _seeded_tuner(spec: ModelSpec) -> InstructionTuner:
    torch.manual_seed(0)  # same adapter initialisation for every variant compared
    module = InstructionTuner(TunerSettings(spec=spec, lora=LoraSettings(r=8, alpha=16, dropout=0.0)))
    module.configure_model()
    with torch.no_grad():  # a non-zero B, so the gradients reach every adapter matrix
        for name, parameter in module.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.02)
    return module


def test_partial_checkpointing_recomputes_only_the_first_blocks(spec: ModelSpec, examples) -> None:
    batch = padded_batch(examples)
    reference = _adapter_gradients(_seeded_tuner(spec), batch)
    partial = _seeded_tuner(replace(spec, gradient_checkpointing=True, checkpoint_fraction=0.5))
    blocks = decoder_blocks(partial.model)
    assert [block.gradient_checkpointing for block in blocks] == [True, False]
    calls = [0] * len(blocks)
    for index, block in enumerate(blocks):
        block.mlp.register_forward_pre_hook(
            lambda *_, index=index: calls.__setitem__(index, calls[index] + 1)
        )
    gradients = _adapter_gradients(partial, batch)
    assert calls == [2, 1]  # the first block ran again in the backward pass, the second did not
    assert gradients.keys() == reference.keys()
    for name, value in reference.items():
        torch.testing.assert_close(gradients[name], value, msg=name)


def test_checkpoint_fraction_that_cannot_apply_names_the_setting(spec: ModelSpec) -> None:
    # the settings check themselves when built, before any model loads
    with pytest.raises(ConfigError, match=r"ModelSpec: checkpoint_fraction: must be in \(0, 1\], got 0.0"):
        replace(spec, gradient_checkpointing=True, checkpoint_fraction=0.0)
    with pytest.raises(ConfigError, match=r"checkpoint_fraction: 0.5 needs gradient_checkpointing: true"):
        replace(spec, checkpoint_fraction=0.5)


@pytest.mark.slow
def test_compiled_blocks_give_the_eager_loss_and_gradients(spec: ModelSpec, examples) -> None:
    """Regional torch.compile (inductor on CPU) of the 4-bit + LoRA blocks, checkpointed, packed rows."""
    checkpointed = replace(spec, gradient_checkpointing=True)
    batches = [packed_batch(examples), packed_batch(examples[:2])]  # two lengths: no retrace per length
    eager = _seeded_tuner(checkpointed)
    compiled = _seeded_tuner(replace(checkpointed, compile=True))
    assert compiled.state_dict().keys() == eager.state_dict().keys()  # checkpoints stay interchangeable
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    with torch._dynamo.config.patch(error_on_recompile=True):
        for batch in batches:
            expected, got = _adapter_gradients(eager, batch), _adapter_gradients(compiled, batch)
            for name, value in expected.items():
                torch.testing.assert_close(got[name], value, rtol=1e-4, atol=1e-5, msg=name)
    assert counters["stats"]["unique_graphs"] == 1  # one graph for both blocks and both lengths
    assert not counters["graph_break"]  # the 4-bit matmuls, LoRA and checkpointing trace whole

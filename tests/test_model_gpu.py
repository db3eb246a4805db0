"""CUDA-only checks of the fast path: varlen attention (packing boundaries), compiled blocks, paged AdamW,
liger-kernel (skipped on CPU)."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from peft import get_peft_model_state_dict, set_peft_model_state_dict

import graphctx.model.module
from graphctx.data.instruct import encode_example, get_template
from graphctx.data.packing import collate_rows
from graphctx.model import InstructionTuner, LoraSettings, ModelSpec, TunerSettings, load_tokenizer
from graphctx.model.attention import VARLEN, varlen_available, varlen_keyword_arguments
from graphctx.model.optim import build_optimizer
from graphctx.model.settings import OptimizerSettings

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

PAIRS = [
    ("How do I delegate my ADA to a stake pool?", "Open your wallet, pick a pool, confirm the delegation."),
    ("What is a UTXO?", "An unspent transaction output: a coin you can spend exactly once."),
    ("Which port does cardano-node listen on?", "3001 by default; set it with --port."),
]


def packed_cuda_batch(spec: ModelSpec) -> dict[str, torch.Tensor]:
    tokenizer, template = load_tokenizer(spec), get_template("paper")
    examples = [encode_example(tokenizer, template, q, a, max_length=128) for q, a in PAIRS]
    return {k: v.cuda() for k, v in collate_rows([examples], pad_id=0, packed=True).items()}


def tuner(spec: ModelSpec) -> InstructionTuner:
    settings = TunerSettings(spec=spec, lora=LoraSettings(r=8, dropout=0.0))
    module = InstructionTuner(settings).to(torch.device("cuda", 0))
    module.configure_model()
    return module


@pytest.mark.skipif(not varlen_available(), reason="torch has no varlen_attn")
def test_varlen_attention_matches_sdpa_on_a_packed_batch(tmp_path) -> None:
    base = {"source": "tiny-random", "cache_dir": str(tmp_path)}
    varlen, sdpa = tuner(ModelSpec(attention="auto", **base)), tuner(ModelSpec(attention="sdpa", **base))
    assert varlen.model.get_base_model().config._attn_implementation == VARLEN
    # Same cached random base on both sides; give them the same adapter too (4-bit base weights can't be
    # copied through load_state_dict: their quantisation state is not a plain tensor).
    set_peft_model_state_dict(sdpa.model, get_peft_model_state_dict(varlen.model))
    batch = packed_cuda_batch(varlen.spec)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        torch.testing.assert_close(varlen(batch), sdpa(batch), rtol=2e-2, atol=2e-2)


VARLEN_LOGITS_ATOL = 5e-2
"""bf16 compute: a packed example's logits (magnitude ~1 for the random tiny Llama) equal its logits run
alone within a few bf16 ulps (matmuls of other shapes round differently); leaking attention moves them by
~1 (float32 on the CPU: 1.2 and 1.4 for the second and third example)."""


def packed_logit_gaps_cuda(module: InstructionTuner) -> list[float]:
    """Per example: max |logit| difference between the example inside one packed row and run alone."""
    tokenizer, template = load_tokenizer(module.spec), get_template("paper")
    examples = [encode_example(tokenizer, template, q, a, max_length=128) for q, a in PAIRS]
    lm_head = module.model.get_base_model().get_output_embeddings()

    def logits(rows: list[dict[str, list[int]]]) -> torch.Tensor:
        batch = {k: v.cuda() for k, v in collate_rows([rows], pad_id=0, packed=True).items()}
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            hidden, _ = module.hidden_states(batch)
            return lm_head(hidden[0]).float()

    packed, gaps, offset = logits(examples), [], 0
    for example in examples:
        length = len(example["input_ids"])
        gaps.append(float((packed[offset : offset + length] - logits([example])).abs().max()))
        offset += length
    return gaps


@pytest.mark.skipif(not varlen_available(), reason="torch has no varlen_attn")
def test_varlen_packed_examples_do_not_attend_across_boundaries(
    tmp_path, monkeypatch, record_property
) -> None:
    """Per-example logits of a packed varlen row equal each example alone; with the boundaries removed
    (``cu_seqlens`` = one sequence over the whole row) they must not, or the test could not catch a leak."""
    module = tuner(ModelSpec(source="tiny-random", cache_dir=str(tmp_path)))
    module.eval()
    assert module.model.get_base_model().config._attn_implementation == VARLEN
    gaps = packed_logit_gaps_cuda(module)
    record_property("max_logit_gap_with_boundaries", max(gaps))
    whole_row = lambda positions: varlen_keyword_arguments(  # noqa: E731
        torch.arange(positions.numel(), device=positions.device).view_as(positions)
    )
    monkeypatch.setattr(graphctx.model.module, "varlen_keyword_arguments", whole_row)
    leaked = packed_logit_gaps_cuda(module)
    record_property("max_logit_gap_without_boundaries", max(leaked))
    assert max(gaps) < VARLEN_LOGITS_ATOL, gaps
    assert min(leaked[1:]) > 4 * VARLEN_LOGITS_ATOL, leaked


def test_qlora_step_with_paged_adamw_lowers_the_loss(tmp_path) -> None:
    module = tuner(ModelSpec(source="tiny-random", cache_dir=str(tmp_path), gradient_checkpointing=True))
    optimizer = build_optimizer(
        [p for p in module.parameters() if p.requires_grad], OptimizerSettings(lr=1e-2), module.device
    )
    assert type(optimizer).__name__ == "PagedAdamW32bit"
    batch = packed_cuda_batch(module.spec)
    losses = []
    for _ in range(6):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = module(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses


@pytest.mark.skipif(not varlen_available(), reason="torch has no varlen_attn")
def test_compiled_blocks_with_varlen_attention_match_eager(tmp_path) -> None:
    base = {"source": "tiny-random", "cache_dir": str(tmp_path), "gradient_checkpointing": True}
    eager, compiled = tuner(ModelSpec(**base)), tuner(ModelSpec(compile=True, **base))
    set_peft_model_state_dict(compiled.model, get_peft_model_state_dict(eager.model))
    batch = packed_cuda_batch(eager.spec)
    for module in (eager, compiled):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            module(batch).backward()
    gradients = [
        {name: p.grad for name, p in module.named_parameters() if p.requires_grad}
        for module in (eager, compiled)
    ]
    assert gradients[0].keys() == gradients[1].keys()
    for name, grad in gradients[0].items():
        torch.testing.assert_close(gradients[1][name], grad, rtol=5e-2, atol=5e-3, msg=name)


@pytest.mark.skipif(importlib.util.find_spec("liger_kernel") is None, reason="liger-kernel not installed")
@pytest.mark.skipif(not varlen_available(), reason="torch has no varlen_attn")
def test_liger_kernels_give_the_eager_loss_and_gradients(tmp_path) -> None:
    """liger's RMSNorm/SwiGLU/RoPE/fused linear cross-entropy on the 4-bit base + LoRA, packed varlen rows.

    Last in this file: liger's RoPE replaces transformers' Llama function for the rest of the process, so
    the reference runs before the liger model is built.
    """
    base = {"source": "tiny-random", "cache_dir": str(tmp_path), "gradient_checkpointing": True}
    eager = tuner(ModelSpec(**base))
    batch = packed_cuda_batch(eager.spec)
    results = []
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = eager(batch)
    loss.backward()
    results.append((loss.detach(), {n: p.grad for n, p in eager.named_parameters() if p.requires_grad}))
    liger = tuner(ModelSpec(liger=True, **base))
    set_peft_model_state_dict(liger.model, get_peft_model_state_dict(eager.model))
    block = liger.model.get_base_model().model.layers[0]
    assert (block.mlp._get_name(), block.input_layernorm._get_name()) == ("LigerSwiGLUMLP", "LigerRMSNorm")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = liger(batch)
    loss.backward()
    results.append((loss.detach(), {n: p.grad for n, p in liger.named_parameters() if p.requires_grad}))
    torch.testing.assert_close(results[1][0], results[0][0], rtol=2e-2, atol=2e-2)
    assert results[0][1].keys() == results[1][1].keys()
    for name, grad in results[0][1].items():
        torch.testing.assert_close(results[1][1][name], grad, rtol=5e-2, atol=5e-3, msg=name)

"""Answer generation throughput: graphctx's generation path vs plain ``model.generate`` on the 4-bit model.

Both generate greedily for random prompts (lengths uniform in ``--min-prompt``..``--max-prompt`` tokens)
with the same LoRA adapter (r=64 on every linear layer, as trained by QLoRA):

* baseline: the NF4 base with the adapter applied on the fly (what training leaves), one left-padded batch
  of ``--baseline-batch`` prompts, plain ``model.generate``;
* graphctx: ``graphctx.generation`` as ``evaluate.py`` runs it: the NF4 base dequantised to bf16 (CUDA) /
  fp32 (CPU) with the adapter merged into it, ``--prompts`` prompts sorted by length in batches of
  ``--batch-size``, optionally the static KV cache with CUDA graphs (``--static-cache``).

Throughput = generated tokens (through EOS) / wall time of the generation calls (model loading excluded,
compilation included). CPU: the tiny random Llama. CUDA: a randomly initialised model of Llama-2-7B's shape
(random weights decode as fast as real ones), written once to ``--workdir``.

    python benchmarks/generate_throughput.py --device cpu
    python benchmarks/generate_throughput.py --device cuda --workdir /tmp/gen-bench

Prints progress to stderr and one JSON object as the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

from graphctx.evaluation.settings import GenerationSettings
from graphctx.generation import Generator, length_sorted_batches, load_generator
from graphctx.model import ModelSpec, load_base_model, resolve_source
from graphctx.model.loading import packaged_llama_sentencepiece
from graphctx.model.settings import LLAMA_LINEAR_MODULES

LLAMA2_7B = LlamaConfig(
    vocab_size=32000,
    hidden_size=4096,
    intermediate_size=11008,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=32,
    max_position_embeddings=4096,
    rms_norm_eps=1e-5,
    bos_token_id=1,
    eos_token_id=2,
    pad_token_id=0,
)

DEFAULTS = {
    "cpu": {"prompts": 64, "batch_size": 32, "min_prompt": 32, "max_prompt": 256, "new_tokens": 32},
    "cuda": {"prompts": 512, "batch_size": 128, "min_prompt": 64, "max_prompt": 768, "new_tokens": 64},
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def lora_config() -> LoraConfig:
    """QLoRA's adapter: r=64, alpha=16 on every linear layer of the blocks (B = 0: speed needs no values)."""
    return LoraConfig(r=64, lora_alpha=16, target_modules=list(LLAMA_LINEAR_MODULES))


def build_model_and_adapter(device: torch.device, workdir: Path) -> tuple[Path, Path]:
    """Saved folders of the base model and of a LoRA adapter for it, made once in ``workdir``.

    CPU: the tiny random Llama. CUDA: a random Llama-2-7B-shaped model, initialised in bf16 on the GPU.
    """
    adapter = workdir / "adapter"
    if device.type == "cpu":
        folder = Path(resolve_source(ModelSpec(source="tiny-random", cache_dir=str(workdir / "cache"))))
    else:
        folder = workdir / "llama2-7b-random"
    if (adapter / "adapter_config.json").is_file():
        return folder, adapter
    if device.type == "cpu":
        model = LlamaForCausalLM.from_pretrained(folder)
    else:
        log("initialising a random Llama-2-7B-shaped model on the GPU and saving it")
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)
        with torch.device(device):
            model = LlamaForCausalLM(LLAMA2_7B)
        torch.set_default_dtype(torch.float32)
        model.save_pretrained(folder)
        tokenizer_dir = workdir / "tokenizer"
        tokenizer_dir.mkdir(parents=True, exist_ok=True)
        (tokenizer_dir / "tokenizer.model").write_bytes(packaged_llama_sentencepiece().read_bytes())
        AutoTokenizer.from_pretrained(tokenizer_dir, tokenizer_class="LlamaTokenizer").save_pretrained(folder)
    log("saving a LoRA adapter (r=64 on every linear layer)")
    get_peft_model(model, lora_config()).save_pretrained(adapter)
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return folder, adapter


def random_prompts(count: int, low: int, high: int, seed: int = 0) -> list[list[int]]:
    """Prompts of random ordinary tokens (ids above the special ones), lengths uniform in [low, high]."""
    rng = random.Random(seed)
    return [[1] + [rng.randrange(3, 32000) for _ in range(rng.randint(low, high) - 1)] for _ in range(count)]


def until_eos(ids: list[int], eos: int) -> int:
    """Tokens generated through the first EOS (all of them when there is none)."""
    return ids.index(eos) + 1 if eos in ids else len(ids)


def baseline_throughput(
    spec: ModelSpec, adapter: Path, prompts: list[list[int]], new_tokens: int, device: torch.device
) -> float:
    """Plain ``generate`` on the NF4 base + unmerged adapter, one left-padded batch: new tokens per second."""
    model = PeftModel.from_pretrained(load_base_model(replace(spec, attention="sdpa"), device), str(adapter))
    model.eval()
    model.config.use_cache = True
    width = max(map(len, prompts))
    input_ids = torch.tensor([[0] * (width - len(p)) + p for p in prompts], device=device)
    attention_mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=device)
    config = GenerationConfig(max_new_tokens=new_tokens, do_sample=False, pad_token_id=0, eos_token_id=2)
    with torch.inference_mode():
        warm_up = GenerationConfig.from_dict({**config.to_dict(), "max_new_tokens": 2})
        model.generate(  # warm-up: kernels and allocator
            input_ids=input_ids[:2, -16:], attention_mask=attention_mask[:2, -16:], generation_config=warm_up
        )
        synchronize(device)
        start = time.perf_counter()
        output = model.generate(input_ids=input_ids, attention_mask=attention_mask, generation_config=config)
        synchronize(device)
        elapsed = time.perf_counter() - start
    generated = sum(until_eos(row, 2) for row in output[:, width:].tolist())
    del model
    if device.type == "cuda":
        torch.cuda.empty_cache()
    log(f"baseline: {generated} tokens in {elapsed:.1f} s")
    return generated / elapsed


def graphctx_throughput(
    spec: ModelSpec,
    adapter: Path,
    prompts: list[list[int]],
    settings: GenerationSettings,
    device: torch.device,
) -> float:
    """``graphctx.generation`` over all prompts (merged adapter, sorted batches): new tokens per second."""
    model = load_generator(spec, adapter, settings, device)
    tokenizer = AutoTokenizer.from_pretrained(spec.source)
    generator = Generator(model, tokenizer, settings)
    with torch.inference_mode():
        generator.generate_ids([prompts[0][:16], prompts[1][:16]], stop_strings=())  # warm-up: kernels
    synchronize(device)
    start = time.perf_counter()
    generated = 0
    batches = length_sorted_batches([len(p) for p in prompts], settings.batch_size)
    for number, batch in enumerate(batches, start=1):
        answers = generator.generate_ids([prompts[i] for i in batch], stop_strings=())
        generated += sum(len(answer.token_ids) for answer in answers)
        log(f"graphctx: batch {number}/{len(batches)}")
    synchronize(device)
    elapsed = time.perf_counter() - start
    log(f"graphctx: {generated} tokens in {elapsed:.1f} s")
    del model, generator
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return generated / elapsed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--workdir", default=".cache/generate-throughput", help="model and adapter folders")
    parser.add_argument("--prompts", type=int, help="prompts answered by the graphctx path")
    parser.add_argument("--batch-size", type=int, help="graphctx batch size")
    parser.add_argument("--baseline-batch", type=int, default=16, help="prompts in the baseline's one batch")
    parser.add_argument("--new-tokens", type=int, help="max new tokens per answer (both paths)")
    parser.add_argument("--min-prompt", type=int)
    parser.add_argument("--max-prompt", type=int)
    parser.add_argument("--static-cache", action="store_true", help="graphctx: static KV cache + CUDA graphs")
    parser.add_argument(
        "--cache-bucket",
        type=int,
        default=1024,
        help="static cache: prompt widths round up to this (one graph)",
    )
    args = parser.parse_args(argv)
    for name, value in DEFAULTS[args.device].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    workdir = Path(args.workdir)

    folder, adapter = build_model_and_adapter(device, workdir)
    compute_dtype = "bfloat16" if device.type == "cuda" else "float32"
    spec = ModelSpec(source=str(folder), quantization="nf4", compute_dtype=compute_dtype)
    prompts = random_prompts(args.prompts, args.min_prompt, args.max_prompt)

    log(
        f"baseline: NF4 + adapter, plain generate, batch {args.baseline_batch} x {args.new_tokens} new tokens"
    )
    baseline = baseline_throughput(spec, adapter, prompts[: args.baseline_batch], args.new_tokens, device)
    settings = GenerationSettings(
        max_new_tokens=args.new_tokens,
        batch_size=args.batch_size,
        max_prompt_tokens=args.max_prompt + 1,
        merge_adapter=True,
        static_cache=args.static_cache,
        cache_bucket_tokens=args.cache_bucket,
        device=args.device,
    )
    log(f"graphctx: merged adapter, {args.prompts} prompts in length-sorted batches of {args.batch_size}")
    ours = graphctx_throughput(spec, adapter, prompts, settings, device)
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "model": "random Llama-2-7B shape" if device.type == "cuda" else "tiny random Llama",
        "prompts": args.prompts,
        "prompt_tokens": [args.min_prompt, args.max_prompt],
        "new_tokens": args.new_tokens,
        "baseline_batch": args.baseline_batch,
        "graphctx_batch": args.batch_size,
        "static_cache": args.static_cache,
        "graphctx_new_tokens_per_s": round(ours, 1),
        "baseline_new_tokens_per_s": round(baseline, 1),
        "speedup": round(ours / baseline, 2),
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())

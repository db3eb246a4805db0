"""Answer generation throughput: graphctx's generation paths vs plain ``model.generate`` on the 4-bit model.

Every path generates greedily for the same prompts with the same LoRA adapter (r=64 on every linear layer,
as trained by QLoRA). Prompts are random tokens (lengths uniform in ``--min-prompt``..``--max-prompt``), or
with ``--real DUMP_DIR`` real GraphGen-shaped prompts: a cardano question with two other real Q&A pairs as
its context, in the paper's template, fitted to ``--max-prompt`` tokens as evaluate.py fits them.
``--paths`` picks among:

* ``baseline_adapter``: plain ``model.generate`` on the NF4 base with the adapter applied on the fly (what
  training leaves), one left-padded batch of ``--baseline-batch`` prompts;
* ``baseline_plain``: the same on the NF4 base without any adapter (the reference recipe's figure);
* ``graphctx``: ``graphctx.generation`` as ``evaluate.py`` runs it: the NF4 base dequantised to bf16 (CUDA)
  / fp32 (CPU) with the adapter merged into it, ``--prompts`` prompts sorted by length in batches of
  ``--batch-size``, dynamic KV cache;
* ``static_cache``: the same with the static KV cache and CUDA graphs (``generation.static_cache``; CUDA
  only, reported as skipped on the CPU);
* ``continuous_batching``: transformers' ``generate_batch`` (continuous batching with a paged KV cache) on
  the same merged model and all ``--prompts`` prompts.

Throughput = generated tokens (through EOS) / wall time of the generation calls (model loading excluded,
compilation included). CPU: the tiny random Llama. CUDA: a randomly initialised model of Llama-2-7B's shape
(random weights decode as fast as real ones), written once to ``--workdir``.

    python benchmarks/generate_throughput.py --device cpu
    python benchmarks/generate_throughput.py --device cuda --workdir /tmp/gen-bench

Prints progress to stderr and one JSON object as the last line of stdout: each path's new tokens/s, each
graphctx path's speedup over both baselines, and the fastest path.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict
from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

from graphctx.generation.decoder import Generator, length_sorted_batches
from graphctx.generation.loading import load_generation_model
from graphctx.generation.settings import GenerationSettings
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
    "cuda": {"prompts": 512, "batch_size": 128, "min_prompt": 64, "max_prompt": 768, "new_tokens": 128},
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def lora_config() -> LoraConfig:
    """QLoRA's adapter: r=64, alpha=16 on every linear layer of the blocks (B = 0: speed needs no values)."""
    return LoraConfig(r=64, lora_alpha=16, target_modules=list(LLAMA_LINEAR_MODULES))


def build_model_and_adapter(
    device: torch.device, workdir: Path, base_model: Path | None = None
) -> tuple[Path, Path]:
    """Saved folders of the base model and of a LoRA adapter for it, made once in ``workdir``.

    CPU: the tiny random Llama. CUDA: a random Llama-2-7B-shaped model, initialised in bf16 on the GPU.
    ``base_model``: that saved Llama folder instead (e.g. the one train_throughput.py built).
    """
    adapter = workdir / "adapter"
    if base_model is not None:
        folder = base_model
        if not (adapter / "adapter_config.json").is_file():
            log("saving a LoRA adapter (r=64 on every linear layer)")
            with torch.device("meta"):  # shapes only: no memory for the 7B base
                peft_model = get_peft_model(
                    LlamaForCausalLM(LlamaConfig.from_pretrained(folder)), lora_config()
                )
            generator = torch.Generator().manual_seed(0)
            weights = {  # A random, B = 0 (as peft initialises them)
                name: torch.randn(tensor.shape, generator=generator) * 0.02
                if "lora_A" in name
                else torch.zeros(tensor.shape)
                for name, tensor in get_peft_model_state_dict(peft_model).items()
            }
            peft_model.save_pretrained(adapter, state_dict=weights)
        return folder, adapter
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


def real_prompts(
    data_dir: str, tokenizer_dir: Path, count: int, max_tokens: int, cache_dir: Path, seed: int = 0
) -> list[list[int]]:
    """``count`` GraphGen-shaped prompts from real Q&A pairs: question i with pairs i+1 and i+2 as its
    retrieved context (stand-ins of the same lengths), the paper's template, at most ``max_tokens``."""
    from graphctx.data import DatasetSettings, load_qa_dataset
    from graphctx.data.settings import FilterSettings
    from graphctx.knowledge.budget import QAPair
    from graphctx.prompts import Prompt, encode_prompt, get_template

    settings = DatasetSettings(source=data_dir, filters=FilterSettings(max_tokens=None))
    qa = load_qa_dataset(settings, cache_dir)
    rows = [row for split in qa.values() for row in split]
    random.Random(seed).shuffle(rows)
    tokenizer, template = AutoTokenizer.from_pretrained(tokenizer_dir), get_template("paper")
    prompts = []
    for index in range(count):
        question, *context = (rows[(index + k) % len(rows)] for k in range(3))
        pairs = tuple(QAPair(row["question"], row["answer"]) for row in context)
        prompt = Prompt(question["question"], pairs, template=template)
        prompts.append(encode_prompt(tokenizer, prompt, max_tokens).ids[:max_tokens])
    return prompts


def until_eos(ids: list[int], eos: int) -> int:
    """Tokens generated through the first EOS (all of them when there is none)."""
    return ids.index(eos) + 1 if eos in ids else len(ids)


PATHS = ["baseline_plain", "static_cache", "continuous_batching", "baseline_adapter", "graphctx"]
"""Default order: the likeliest to matter first, so a time budget cuts the known ones."""
BASELINES = ("baseline_adapter", "baseline_plain")


def free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def baseline_throughput(
    spec: ModelSpec, adapter: Path | None, prompts: list[list[int]], new_tokens: int, device: torch.device
) -> float:
    """Plain ``generate`` on the NF4 base (+ the unmerged adapter when given), one left-padded batch: new
    tokens per second."""
    model = load_base_model(replace(spec, attention="sdpa"), device)
    if adapter is not None:
        model = PeftModel.from_pretrained(model, str(adapter))
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
    free(device)
    log(f"baseline ({'with' if adapter else 'no'} adapter): {generated} tokens in {elapsed:.1f} s")
    return generated / elapsed


def graphctx_throughput(
    spec: ModelSpec,
    adapter: Path,
    prompts: list[list[int]],
    settings: GenerationSettings,
    device: torch.device,
) -> float:
    """``graphctx.generation`` over all prompts (merged adapter, sorted batches): new tokens per second."""
    model = load_generation_model(spec, adapter, settings, device)
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
        log(f"graphctx (static cache {settings.static_cache}): batch {number}/{len(batches)}")
    synchronize(device)
    elapsed = time.perf_counter() - start
    log(f"graphctx: {generated} tokens in {elapsed:.1f} s")
    del model, generator
    free(device)
    return generated / elapsed


def continuous_batching_throughput(
    spec: ModelSpec,
    adapter: Path,
    prompts: list[list[int]],
    settings: GenerationSettings,
    device: torch.device,
) -> float:
    """transformers' ``generate_batch`` (continuous batching, paged KV cache) on the merged model."""
    model = load_generation_model(spec, adapter, settings, device)
    config = GenerationConfig(
        max_new_tokens=settings.max_new_tokens, do_sample=False, pad_token_id=0, eos_token_id=2
    )
    with torch.inference_mode():
        model.generate_batch(inputs=[p[:16] for p in prompts[:2]], generation_config=config)  # warm-up
        synchronize(device)
        start = time.perf_counter()
        outputs = model.generate_batch(inputs=prompts, generation_config=config)
        synchronize(device)
        elapsed = time.perf_counter() - start
    failed = [output.error for output in outputs.values() if output.error]
    if len(outputs) != len(prompts) or failed:
        raise RuntimeError(f"generate_batch answered {len(outputs)} of {len(prompts)} prompts: {failed[:1]}")
    generated = sum(until_eos(list(output.generated_tokens), 2) for output in outputs.values())
    log(f"continuous batching: {generated} tokens in {elapsed:.1f} s")
    del model
    free(device)
    return generated / elapsed


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--workdir", default=".cache/generate-throughput", help="model and adapter folders")
    parser.add_argument(
        "--base-model", type=Path, help="a saved random Llama folder to use (default: build one)"
    )
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=PATHS, help="what to measure (above)")
    parser.add_argument("--prompts", type=int, help="prompts answered by the graphctx paths")
    parser.add_argument("--batch-size", type=int, help="graphctx batch size")
    parser.add_argument("--baseline-batch", type=int, default=16, help="prompts in the baselines' one batch")
    parser.add_argument("--new-tokens", type=int, help="max new tokens per answer (every path)")
    parser.add_argument("--real", metavar="DUMP_DIR", help="real GraphGen-shaped prompts from this dump")
    parser.add_argument("--min-prompt", type=int)
    parser.add_argument("--max-prompt", type=int)
    parser.add_argument(
        "--cache-bucket",
        type=int,
        default=1024,
        help="static cache: prompt widths round up to this (one graph)",
    )
    parser.add_argument(
        "--time-budget-s", type=float, help="start no further path after this many seconds (reported)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    for name, value in DEFAULTS[args.device].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    workdir = Path(args.workdir)

    folder, adapter = build_model_and_adapter(device, workdir, args.base_model)
    compute_dtype = "bfloat16" if device.type == "cuda" else "float32"
    spec = ModelSpec(source=str(folder), quantization="nf4", compute_dtype=compute_dtype)
    if args.real:
        prompts = real_prompts(args.real, folder, args.prompts, args.max_prompt, workdir / "cache")
    else:
        prompts = random_prompts(args.prompts, args.min_prompt, args.max_prompt)
    lengths = [len(p) for p in prompts]
    mean = sum(lengths) / len(lengths)
    log(f"{len(prompts)} prompts of {min(lengths)}..{max(lengths)} tokens, mean {mean:.0f}")
    settings = GenerationSettings(
        max_new_tokens=args.new_tokens,
        batch_size=args.batch_size,
        max_prompt_tokens=args.max_prompt + 1,
        merge_adapter=True,
        static_cache=False,
        cache_bucket_tokens=args.cache_bucket,
        device=args.device,
    )
    runs = {
        "baseline_adapter": lambda: baseline_throughput(
            spec, adapter, prompts[: args.baseline_batch], args.new_tokens, device
        ),
        "baseline_plain": lambda: baseline_throughput(
            spec, None, prompts[: args.baseline_batch], args.new_tokens, device
        ),
        "graphctx": lambda: graphctx_throughput(spec, adapter, prompts, settings, device),
        "static_cache": lambda: graphctx_throughput(
            spec, adapter, prompts, replace(settings, static_cache=True), device
        ),
        "continuous_batching": lambda: continuous_batching_throughput(
            spec, adapter, prompts, settings, device
        ),
    }
    figures: dict[str, float] = {}
    errors: dict[str, str] = {}

    def summary() -> dict[str, object]:
        """Figures so far (printed after every path, so a run stopped midway still reports them)."""
        speedups = {
            f"{path}_vs_{baseline}": round(figures[path] / figures[baseline], 2)
            for path in figures
            if path not in BASELINES
            for baseline in BASELINES
            if baseline in figures
        }
        ours = {path: value for path, value in figures.items() if path not in BASELINES}
        return {
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "model": "random Llama-2-7B shape" if device.type == "cuda" else "tiny random Llama",
            "prompts": args.prompts,
            "prompts_kind": "real GraphGen-shaped" if args.real else "random tokens",
            "prompt_tokens": [min(lengths), max(lengths), round(mean)],
            "new_tokens": args.new_tokens,
            "baseline_batch": args.baseline_batch,
            "graphctx_batch": args.batch_size,
            "new_tokens_per_s": figures,
            "speedups": speedups,
            "fastest": max(ours, key=ours.get) if ours else None,
            "fastest_new_tokens_per_s": max(ours.values()) if ours else None,
            "errors": errors,
            "complete": len(figures) + len(errors) == len(args.paths),
        }

    for path in args.paths:
        if path == "static_cache" and device.type != "cuda":
            errors[path] = "skipped: the static cache with CUDA graphs runs on CUDA only"
            continue
        if args.time_budget_s and time.perf_counter() - started > args.time_budget_s:
            errors[path] = f"skipped: --time-budget-s {args.time_budget_s:g} spent"
            continue
        log(f"{path}: {args.new_tokens} new tokens per prompt")
        try:
            figures[path] = round(runs[path](), 1)
        except Exception as error:  # one path failing must not hide the others' figures
            errors[path] = f"{type(error).__name__}: {error}"[:500]
            log(f"{path} failed: {errors[path]}")
            free(device)
        print(json.dumps(summary()), flush=True)
    result = summary()
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()

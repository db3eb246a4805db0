"""Training throughput: graphctx's QLoRA step against the plain tutorial recipe, same model and data.

Both sides train the same NF4 base (double quantisation, bf16 compute on CUDA) with the same LoRA settings
(QLoRA recipe: r=64, alpha=16, dropout 0.1, every linear layer) and paged AdamW, on the same stream of real
cardano.stackexchange.com question+answer pairs in the paper's template, capped at ``--max-length`` tokens.

- baseline (tutorial): ``prepare_model_for_kbit_training`` + ``get_peft_model``, batches of
  ``--baseline-batch-size`` examples padded to the longest, SDPA attention, ``model(..., labels=...).loss``
  (full-vocabulary logits for every position).
- graphctx: ``InstructionTuner`` as train.py builds it: about ``--token-budget`` tokens of examples packed
  back to back, as one row with varlen flash attention on CUDA (rows of ``--max-length`` with SDPA on CPU),
  cross-entropy on answer positions only, in chunks. ``--compile``, ``--checkpoint-fraction`` and
  ``--liger`` set ``model.spec.compile`` / ``checkpoint_fraction`` / ``liger``; ``--profile FILE`` adds an
  op table of extra steps.
- ``--variants eager liger compile liger+compile ckpt0.5 ...``: several graphctx settings against one
  baseline run, in one process, in that order (transformers' Llama module is restored after each, since
  liger patches it). A variant that cannot run (liger on the CPU, out of memory) is reported with its
  error. ``fastest_within_memory`` names the fastest variant whose peak stays within
  ``--memory-limit-gib``. The figures so far are printed after every variant (``complete`` false until
  the last), so a run stopped midway still reports them.

Tokens/s count real tokens only (no pads), timed after ``--warmup-steps`` steps per side. On CPU the model
is a tiny random Llama; with ``--device cuda`` a randomly initialised model of Llama-2-7B's shape (random
weights cost the same time as real ones).

MFU = model FLOPs per real token x tokens/s / peak bf16 FLOP/s. Model FLOPs per token = 4 N (forward 2N,
backward 2N for input gradients: the frozen base needs no weight gradients; N counts the blocks and the LM
head) + 6 L d c (attention scores and values, forward and backward; c = mean causal context of a token).

The last stdout line is one JSON object; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import shutil
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from torch.profiler import ProfilerActivity, profile
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM
from transformers.models.llama import modeling_llama

from graphctx.cache import cache_root, fingerprint
from graphctx.data import DatasetSettings, load_qa_dataset
from graphctx.data.instruct import encode_example, get_template
from graphctx.data.packing import collate_rows, pack_rows
from graphctx.data.settings import FilterSettings
from graphctx.model import InstructionTuner, LoraSettings, ModelSpec, TunerSettings
from graphctx.model.attention import VARLEN
from graphctx.model.loading import packaged_llama_sentencepiece, quantization_config
from graphctx.model.module import peak_memory_gib
from graphctx.model.optim import build_optimizer
from graphctx.model.settings import OptimizerSettings

SHAPES = {
    "tiny": {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4},
    "llama2-7b": {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
    },
}
PEAK_BF16_FLOPS = {"H100": 989e12, "H200": 989e12, "A100": 312e12}
LORA = LoraSettings()  # QLoRA recipe, the same for both sides


def log(message: str) -> None:
    print(f"[train_throughput] {message}", file=sys.stderr, flush=True)


def random_llama(shape: str, device: torch.device, cache_dir: str | None) -> Path:
    """A random Llama of ``shape``, saved once as bf16 safetensors with the Llama SentencePiece tokenizer."""
    target = cache_root(cache_dir) / "models" / f"bench-llama-{shape}-{fingerprint(SHAPES[shape])}"
    if (target / "config.json").is_file():
        return target
    log(f"building a random {shape} Llama in {target}")
    tmp = target.with_name(target.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    shutil.copy(packaged_llama_sentencepiece(), tmp / "tokenizer.model")
    tokenizer = AutoTokenizer.from_pretrained(tmp, tokenizer_class="LlamaTokenizer")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=4096,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.unk_token_id,
        **SHAPES[shape],
    )
    torch.manual_seed(0)
    default_dtype = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default_dtype)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    tmp.rename(target)
    return target


def real_examples(
    data_dir: str, tokenizer, max_length: int, cache_dir: str | None
) -> list[dict[str, list[int]]]:
    """Every cardano Q&A pair (all splits) in the paper's template, truncated to ``max_length`` tokens."""
    settings = DatasetSettings(source=data_dir, filters=FilterSettings(max_tokens=None))
    qa = load_qa_dataset(settings, cache_dir)
    template = get_template("paper")
    return [
        encode_example(tokenizer, template, row["question"], row["answer"], max_length)
        for split in qa.values()
        for row in split
    ]


def baseline_batches(stream, pad_id: int, batch_size: int):
    """Tutorial batches: ``batch_size`` consecutive examples padded to the longest; (batch, real tokens)."""
    for start in range(0, len(stream) - batch_size + 1, batch_size):
        batch = collate_rows([[ex] for ex in stream[start : start + batch_size]], pad_id, packed=False)
        yield batch, int(batch["attention_mask"].sum())


def packed_batches(stream, pad_id: int, token_budget: int, row_capacity: int):
    """graphctx batches of about ``token_budget`` tokens of consecutive examples, packed best-fit into rows
    of at most ``row_capacity`` tokens (one row for varlen attention; rows of ``max_length`` for SDPA, whose
    attention cost grows with the square of the row); (batch, real tokens)."""
    chosen: list[dict[str, list[int]]] = []
    for example in stream:
        if chosen and sum(len(ex["input_ids"]) for ex in chosen) + len(example["input_ids"]) > token_budget:
            rows = pack_rows([len(ex["input_ids"]) for ex in chosen], row_capacity)
            batch = collate_rows([[chosen[i] for i in row] for row in rows], pad_id, packed=True)
            yield batch, sum(len(ex["input_ids"]) for ex in chosen)
            chosen = []
        chosen.append(example)


def timed_training(
    step, batches, device: torch.device, warmup: int, steps: int, label: str
) -> dict[str, float]:
    """Run ``warmup`` untimed then ``steps`` timed calls of ``step(batch)``; real tokens/s and peak memory."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    tokens, started = 0, None
    for index, (batch, real) in enumerate(batches):
        if index == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            started = time.perf_counter()
        batch = {name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()}
        loss = step(batch)
        if index >= warmup:
            tokens += real
        slots = batch["input_ids"].numel()
        log(f"{label} step {index}: {real} real tokens of {slots} slots, loss {loss:.3f}")
        if index + 1 == warmup + steps:
            break
    else:
        raise SystemExit(f"not enough data for {warmup}+{steps} {label} steps: lower --steps")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - started
    return {"tokens_per_s": tokens / seconds, "peak_mem_gib": peak_memory_gib(device), "tokens": tokens}


def profile_steps(step, batches, device: torch.device, count: int, path: Path) -> None:
    """Run ``count`` more steps under ``torch.profiler``; write the ops with the most self time to ``path``.

    Runs after the timed steps, so profiling overhead never enters the reported figures.
    """
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=activities) as profiler:
        for _, (batch, _) in zip(range(count), batches, strict=False):
            step({name: tensor.to(device, non_blocking=True) for name, tensor in batch.items()})
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    path.write_text(profiler.key_averages().table(sort_by=sort, row_limit=40))
    log(f"profile of {count} graphctx steps written to {path}")


def run_baseline(folder: Path, stream, args, device: torch.device, pad_id: int) -> dict[str, float]:
    spec = ModelSpec(source=str(folder), compute_dtype=args.compute_dtype)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        quantization_config=quantization_config(spec),
        dtype=getattr(torch, args.compute_dtype),
        device_map={"": device},
    )
    model = prepare_model_for_kbit_training(model, use_gradient_checkpointing=False)
    lora = LoraConfig(
        r=LORA.r, lora_alpha=LORA.alpha, lora_dropout=LORA.dropout, target_modules=LORA.target_modules,
        task_type="CAUSAL_LM",
    )  # fmt: skip
    model = get_peft_model(model, lora)
    model.train()
    optimizer = build_optimizer(
        [p for p in model.parameters() if p.requires_grad], OptimizerSettings(), device
    )
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()

    def step(batch: dict[str, torch.Tensor]) -> float:
        with autocast:
            loss = model(
                input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]
            ).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    batches = baseline_batches(stream, pad_id, args.baseline_batch_size)
    return timed_training(step, batches, device, args.warmup_steps, args.steps, "baseline")


def parse_variant(name: str, args) -> dict[str, object]:
    """``model.spec`` fields of a variant name: ``eager`` or ``+``-joined ``compile``, ``liger``,
    ``ckptF`` (checkpoint fraction F), ``nockpt`` (no gradient checkpointing)."""
    fields: dict[str, object] = {
        "compile": False,
        "liger": False,
        "gradient_checkpointing": args.gradient_checkpointing,
        "checkpoint_fraction": 1.0,
    }
    for part in name.split("+"):
        if part in ("compile", "liger"):
            fields[part] = True
        elif part.startswith("ckpt"):
            fields["gradient_checkpointing"], fields["checkpoint_fraction"] = True, float(part[4:])
        elif part == "nockpt":
            fields["gradient_checkpointing"] = False
        elif part != "eager":
            raise SystemExit(
                f"--variants: unknown part {part!r} in {name!r} (eager, compile, liger, ckptF, nockpt)"
            )
    return fields


def run_graphctx(
    folder: Path, stream, args, device: torch.device, pad_id: int, fields: dict[str, object]
) -> dict[str, float]:
    spec = ModelSpec(
        source=str(folder),
        compute_dtype=args.compute_dtype,
        loss_chunk_tokens=args.loss_chunk_tokens,
        **fields,
    )
    module = InstructionTuner(TunerSettings(spec=spec, lora=LORA)).to(device)
    module.configure_model()
    log(f"graphctx attention: {module.model.get_base_model().config._attn_implementation}")
    optimizer = build_optimizer(
        [p for p in module.parameters() if p.requires_grad], OptimizerSettings(), device
    )
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()

    def step(batch: dict[str, torch.Tensor]) -> float:
        with autocast:
            loss = module(batch)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    varlen = module.model.get_base_model().config._attn_implementation == VARLEN
    row_capacity = args.token_budget if varlen else args.max_length
    batches = packed_batches(stream, pad_id, args.token_budget, row_capacity)
    timed = timed_training(step, batches, device, args.warmup_steps, args.steps, "graphctx")
    if args.profile:
        profile_steps(step, batches, device, args.profile_steps, Path(args.profile))
    return timed


def model_flops_per_token(config: LlamaConfig, stream) -> float:
    """4 N (blocks + LM head) + 6 L d c; c = mean causal context length of a token in the stream."""
    d, layers, inter, vocab = (
        config.hidden_size,
        config.num_hidden_layers,
        config.intermediate_size,
        config.vocab_size,
    )
    kv = d * config.num_key_value_heads // config.num_attention_heads
    block = 2 * d * d + 2 * d * kv + 3 * d * inter
    lengths = [len(ex["input_ids"]) for ex in stream]
    context = sum(n * (n + 1) / 2 for n in lengths) / sum(lengths)
    return 4 * (layers * block + d * vocab) + 6 * layers * d * context


def peak_flops(device: torch.device, override_tflops: float | None) -> float | None:
    if override_tflops:
        return override_tflops * 1e12
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((flops for key, flops in PEAK_BF16_FLOPS.items() if key in name), None)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument(
        "--data", default="../shared/data/stackexchange/cardano", help="Stack Exchange dump folder"
    )
    parser.add_argument("--shape", choices=sorted(SHAPES), help="default: tiny on cpu, llama2-7b on cuda")
    parser.add_argument("--max-length", type=int, default=1024, help="cap on tokens per example")
    parser.add_argument("--baseline-batch-size", type=int, default=8)
    parser.add_argument(
        "--token-budget", type=int, help="graphctx tokens per step (default: 16384 cuda, 4096 cpu)"
    )
    parser.add_argument("--steps", type=int, help="timed steps per side (default: 8 cuda, 3 cpu)")
    parser.add_argument("--warmup-steps", type=int, default=2)
    parser.add_argument(
        "--gradient-checkpointing",
        action=argparse.BooleanOptionalAction,
        help="graphctx side only (default: on for cuda, where it lets big token batches fit; off on cpu)",
    )
    parser.add_argument(
        "--checkpoint-fraction", type=float, default=1.0, help="share of blocks that recompute (graphctx)"
    )
    parser.add_argument(
        "--compile",
        action="store_true",
        help="graphctx side: torch.compile each decoder block (compiles during the warm-up steps)",
    )
    parser.add_argument(
        "--liger", action="store_true", help="graphctx side: liger-kernel's fused kernels (CUDA)"
    )
    parser.add_argument(
        "--variants", nargs="+", help="graphctx settings to run against one baseline (see above)"
    )
    parser.add_argument(
        "--memory-limit-gib", type=float, default=40.0, help="bound for fastest_within_memory"
    )
    parser.add_argument("--loss-chunk-tokens", type=int, default=4096)
    parser.add_argument(
        "--profile", help="after the timed steps, profile more graphctx steps; op table to this file"
    )
    parser.add_argument("--profile-steps", type=int, default=2)
    parser.add_argument("--peak-tflops", type=float, help="peak bf16 TFLOP/s for MFU (default: known GPUs)")
    parser.add_argument("--cache-dir", help="graphctx cache (random model, dataset)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--prepare-only", action="store_true", help="build the random model, print its folder as JSON, stop"
    )
    parser.add_argument(
        "--time-budget-s", type=float, help="start no further variant after this many seconds (reported)"
    )
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device visible")
    device = torch.device("cpu")
    if args.device == "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    args.shape = args.shape or ("llama2-7b" if device.type == "cuda" else "tiny")
    args.token_budget = args.token_budget or (16384 if device.type == "cuda" else 4096)
    if args.gradient_checkpointing is None:
        args.gradient_checkpointing = device.type == "cuda"
    args.steps = args.steps or (8 if device.type == "cuda" else 3)
    args.compute_dtype = "bfloat16" if device.type == "cuda" else "float32"
    started = time.perf_counter()

    folder = random_llama(args.shape, device, args.cache_dir)
    if args.prepare_only:
        print(json.dumps({"model": str(folder), "shape": args.shape}))
        return {"model": str(folder)}
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    examples = real_examples(args.data, tokenizer, args.max_length, args.cache_dir)
    # one stream of randomly drawn real examples: the baseline batches its start, graphctx
    # packs as far as its (larger) steps need
    rng = random.Random(args.seed)
    mean_length = sum(len(e["input_ids"]) for e in examples) / len(examples)
    baseline_needed = args.baseline_batch_size * (args.warmup_steps + args.steps)
    graphctx_steps = args.warmup_steps + args.steps + (args.profile_steps if args.profile else 0)
    graphctx_needed = int(1.3 * graphctx_steps * args.token_budget / mean_length) + 1
    stream = [examples[rng.randrange(len(examples))] for _ in range(max(baseline_needed, graphctx_needed))]
    log(f"{len(examples)} real examples; mean length {mean_length:.0f} tokens")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    baseline = run_baseline(folder, stream[:baseline_needed], args, device, pad_id)
    config = LlamaConfig.from_pretrained(folder)
    peak = peak_flops(device, args.peak_tflops)
    flops = model_flops_per_token(config, stream[:baseline_needed])

    def mfu(tokens_per_s: float) -> float | None:
        return round(tokens_per_s * flops / peak, 4) if peak else None

    single = {
        "compile": args.compile,
        "liger": args.liger,
        "gradient_checkpointing": args.gradient_checkpointing,
        "checkpoint_fraction": args.checkpoint_fraction,
    }
    names = args.variants or ["flags"]
    variants: dict[str, dict[str, object]] = {}

    def summary() -> dict[str, object]:
        """Figures so far (printed after every variant, so a run stopped midway still reports them)."""
        within = {
            name: v["tokens_per_s"]
            for name, v in variants.items()
            if "tokens_per_s" in v and v["peak_mem_gib"] <= args.memory_limit_gib
        }
        first = variants.get(names[0], {})
        return {
            "graphctx_tokens_per_s": first.get("tokens_per_s"),
            "baseline_tokens_per_s": round(baseline["tokens_per_s"], 1),
            "speedup": first.get("speedup"),
            "peak_mem_gib": first.get("peak_mem_gib"),
            "baseline_peak_mem_gib": round(baseline["peak_mem_gib"], 2),
            "mfu": first.get("mfu"),
            "baseline_mfu": mfu(baseline["tokens_per_s"]),
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "shape": args.shape,
            "token_budget": args.token_budget,
            "baseline_batch_size": args.baseline_batch_size,
            "max_length": args.max_length,
            **{key: first.get(key) for key in single},
            "variants": variants,
            "memory_limit_gib": args.memory_limit_gib,
            "fastest_within_memory": max(within, key=within.get) if within else None,
            "complete": len(variants) == len(names),
        }

    llama_module = vars(modeling_llama)
    for name in names:
        fields = single if name == "flags" else parse_variant(name, args)
        if args.time_budget_s and time.perf_counter() - started > args.time_budget_s:
            variants[name] = {**fields, "error": f"skipped: --time-budget-s {args.time_budget_s:g} spent"}
            continue
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        log(f"variant {name}: {fields}")
        plain_llama = dict(llama_module)  # liger replaces RoPE, RMSNorm and the MLP in this module
        try:
            ours = run_graphctx(folder, stream, args, device, pad_id, fields)
        except Exception as error:  # liger on the CPU, out of memory, a compile failure: reported
            variants[name] = {**fields, "error": f"{type(error).__name__}: {error}"[:500]}
            log(f"variant {name}: {variants[name]['error']}")
        else:
            variants[name] = {
                **fields,
                "tokens_per_s": round(ours["tokens_per_s"], 1),
                "peak_mem_gib": round(ours["peak_mem_gib"], 2),
                "speedup": round(ours["tokens_per_s"] / baseline["tokens_per_s"], 2),
                "mfu": mfu(ours["tokens_per_s"]),
            }
        finally:
            llama_module.update(plain_llama)  # the next variant runs transformers' own Llama code
        print(json.dumps(summary()), flush=True)
    result = summary()
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()

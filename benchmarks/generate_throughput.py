"""Answer generation throughput: graphctx's path against plain ``model.generate`` and transformers' continuous
batching, every path on the same prompts, batch size and token limit.

Every path decodes greedily the same ``--prompts`` prompts, at most ``--new-tokens`` each, with at most
``--batch-size`` answers in flight, with the same LoRA adapter (r=64 on every linear layer, as QLoRA trains
it). Prompts are random tokens (lengths uniform in ``--min-prompt``..``--max-prompt``), or with ``--real
DUMP_DIR`` real GraphGen-shaped prompts: a cardano question with two other real Q&A pairs as its context, in
the paper's template, fitted to ``--max-prompt`` tokens as evaluate.py fits them. ``--paths`` picks among:

* ``graphctx``: graphctx's own path, :class:`graphctx.generation.decoder.Generator` as ``evaluate.py`` runs
  it with ``generation.backend: --backend``: the NF4 base dequantised to bf16 (CUDA) / fp32 (CPU) with the
  adapter merged into it, prompts sorted by length in batches of ``--batch-size``. The only path that counts
  toward graphctx's target and feeds ``graphctx plan --cost`` (through the GPU suite's report);
* ``graphctx_continuous``: the same with the other backend (``continuous`` when ``--backend`` is
  ``generate``): how ``generation.backend`` should be set;
* ``static_cache``: ``graphctx`` with the static KV cache and CUDA graphs (``generation.static_cache``;
  CUDA only, reported as skipped on the CPU);
* ``continuous_batching``: transformers' continuous batching on the same merged model (the competitor):
  ``init_continuous_batching`` with at most ``--batch-size`` requests per step, all prompts submitted at once;
* ``baseline_adapter``: plain ``model.generate`` on the NF4 base with the adapter applied on the fly (what
  training leaves), the same length-sorted left-padded batches;
* ``baseline_plain``: the same on the NF4 base without any adapter (the reference recipe's figure).

Decoding throughput = generated tokens (through EOS) / wall time of the decoding alone. Set-up is timed
apart (``setup_s``): loading, dequantising and merging the model, and for continuous batching creating the
manager, allocating its paged cache and its warm-up; one small warm-up call per path is not timed. Each
path's answers are compared with ``graphctx``'s: the share of prompts with the very same tokens
(``same_tokens_as_graphctx``; greedy, so 1.0 up to floating-point rounding). CPU: the tiny random Llama.
CUDA: a randomly initialised model of Llama-2-7B's shape (random weights decode as fast as real ones),
written once to ``--workdir``.

    python benchmarks/generate_throughput.py --device cpu
    python benchmarks/generate_throughput.py --device cuda --workdir /tmp/gen-bench

Prints progress to stderr and, after every path, one JSON object on stdout (the last line is final): each
path's new tokens/s and set-up seconds, graphctx's speedup over every other path, and graphctx's figure.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
import transformers
from peft import LoraConfig, PeftModel, get_peft_model, get_peft_model_state_dict
from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

from graphctx.decoding import continuous_config, padded_greedy, until_eos
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
    "cuda": {"prompts": 256, "batch_size": 128, "min_prompt": 64, "max_prompt": 768, "new_tokens": 128},
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


PATHS = [
    "graphctx",
    "continuous_batching",
    "graphctx_continuous",
    "baseline_adapter",
    "static_cache",
    "baseline_plain",
]
"""Default order: graphctx's figure and its competitor first, so a time budget cuts the others."""

EOS, PAD = 2, 0


@dataclass
class Measured:
    """One path's answers (new token ids per prompt, through EOS) and its timings."""

    answers: list[list[int]]
    decode_s: float
    setup_s: float

    @property
    def tokens(self) -> int:
        return sum(map(len, self.answers))


def free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def timed(device: torch.device, work: Callable[[], object]) -> tuple[object, float]:
    """``work()`` and its wall time, the device synchronised before and after."""
    synchronize(device)
    start = time.perf_counter()
    result = work()
    synchronize(device)
    return result, time.perf_counter() - start


def in_batches(
    prompts: list[list[int]], batch_size: int, decode: Callable[[list[list[int]]], list[list[int]]]
) -> list[list[int]]:
    """``decode`` over length-sorted batches (longest first), the answers back in the prompts' order."""
    answers: list[list[int]] = [[] for _ in prompts]
    for batch in length_sorted_batches([len(p) for p in prompts], batch_size):
        for index, ids in zip(batch, decode([prompts[i] for i in batch]), strict=True):
            answers[index] = ids
    return answers


def baseline(
    spec: ModelSpec,
    adapter: Path | None,
    prompts: list[list[int]],
    settings: GenerationSettings,
    device: torch.device,
) -> Measured:
    """Plain ``generate`` on the NF4 base (+ the unmerged adapter when given), left-padded length-sorted
    batches of ``settings.batch_size``."""

    def load() -> PeftModel:
        model = load_base_model(replace(spec, attention="sdpa"), device)
        if adapter is not None:
            model = PeftModel.from_pretrained(model, str(adapter))
        model.config.use_cache = True
        return model.eval()

    model, setup = timed(device, load)

    def decode(batch: list[list[int]]) -> list[list[int]]:
        return padded_greedy(model, batch, settings.max_new_tokens, [EOS], PAD)

    with torch.inference_mode():
        decode([p[-16:] for p in prompts[:2]])  # warm-up: kernels and allocator
        answers, seconds = timed(device, lambda: in_batches(prompts, settings.batch_size, decode))
    return Measured(answers, seconds, setup)


def graphctx_path(
    spec: ModelSpec,
    adapter: Path,
    prompts: list[list[int]],
    settings: GenerationSettings,
    device: torch.device,
) -> Measured:
    """``graphctx.generation`` over all prompts (merged adapter, sorted batches, ``settings.backend``)."""
    model, setup = timed(device, lambda: load_generation_model(spec, adapter, settings, device))
    generator = Generator(model, AutoTokenizer.from_pretrained(spec.source), settings)

    def decode(batch: list[list[int]]) -> list[list[int]]:
        return [answer.token_ids for answer in generator.generate_ids(batch, stop_strings=())]

    with torch.inference_mode():
        decode([prompts[0][:16], prompts[1][:16]])  # warm-up: kernels
        answers, seconds = timed(device, lambda: in_batches(prompts, settings.batch_size, decode))
    return Measured(answers, seconds, setup)


def continuous_batching(
    spec: ModelSpec,
    adapter: Path,
    prompts: list[list[int]],
    settings: GenerationSettings,
    device: torch.device,
) -> Measured:
    """transformers' continuous batching on the merged model: one manager, at most ``batch_size`` requests
    per step, every prompt submitted at once. Its creation, cache allocation and warm-up count as set-up."""
    from transformers.generation.continuous_batching.utils import WorkloadHints

    model, setup = timed(device, lambda: load_generation_model(spec, adapter, settings, device))
    cache = replace(
        continuous_config(model, prompts, settings.max_new_tokens),
        max_requests_per_batch=settings.batch_size,
    )
    config = GenerationConfig(
        max_new_tokens=settings.max_new_tokens, do_sample=False, pad_token_id=PAD, eos_token_id=EOS
    )
    hints = WorkloadHints(max(map(len, prompts)), settings.max_new_tokens, len(prompts))

    def start() -> Any:
        manager = model.init_continuous_batching(config, cache, hints)
        manager.warmup()
        manager.start()
        return manager

    def decode() -> list[list[int]]:
        ids = manager.add_requests(inputs=prompts, max_new_tokens=settings.max_new_tokens)
        finished: dict[str, list[int]] = {}
        while len(finished) < len(prompts):
            output = manager.get_result(timeout=1)
            if output is None and not manager.is_running():
                raise RuntimeError(f"the manager stopped after {len(finished)} of {len(prompts)} answers")
            if output is not None and output.is_finished():
                if output.error:
                    raise RuntimeError(f"request {output.request_id}: {output.error}")
                finished[output.request_id] = until_eos(output.generated_tokens, [EOS])
        return [finished[i] for i in ids]

    with torch.inference_mode():
        manager, setup_manager = timed(device, start)
        try:
            answers, seconds = timed(device, decode)
        finally:
            manager.stop(block=True)
            manager.destroy()
    return Measured(answers, seconds, setup + setup_manager)


def same_tokens(answers: list[list[int]], reference: list[list[int]]) -> float:
    """Share of prompts whose answers are token for token the same."""
    return round(sum(a == b for a, b in zip(answers, reference, strict=True)) / len(reference), 4)


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
    parser.add_argument("--prompts", type=int, help="prompts every path answers")
    parser.add_argument("--batch-size", type=int, help="answers in flight at most, every path")
    parser.add_argument("--new-tokens", type=int, help="max new tokens per answer, every path")
    parser.add_argument(
        "--backend", choices=["generate", "continuous"], default="generate", help="graphctx's backend"
    )
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
        backend=args.backend,
    )
    other = "continuous" if args.backend == "generate" else "generate"
    runs: dict[str, Callable[[], Measured]] = {
        "graphctx": lambda: graphctx_path(spec, adapter, prompts, settings, device),
        "graphctx_continuous": lambda: graphctx_path(
            spec, adapter, prompts, replace(settings, backend=other), device
        ),
        "static_cache": lambda: graphctx_path(
            spec, adapter, prompts, replace(settings, static_cache=True, backend="generate"), device
        ),
        "continuous_batching": lambda: continuous_batching(spec, adapter, prompts, settings, device),
        "baseline_adapter": lambda: baseline(spec, adapter, prompts, settings, device),
        "baseline_plain": lambda: baseline(spec, None, prompts, settings, device),
    }
    measured: dict[str, Measured] = {}
    errors: dict[str, str] = {}

    def summary() -> dict[str, object]:
        """Figures so far (printed after every path, so a run stopped midway still reports them)."""
        rates = {path: round(m.tokens / m.decode_s, 1) for path, m in measured.items()}
        ours = rates.get("graphctx")
        reference = measured.get("graphctx")
        return {
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "model": "random Llama-2-7B shape" if device.type == "cuda" else "tiny random Llama",
            "transformers": transformers.__version__,
            "prompts": args.prompts,
            "prompts_kind": "real GraphGen-shaped" if args.real else "random tokens",
            "prompt_tokens": [min(lengths), max(lengths), round(mean)],
            "new_tokens": args.new_tokens,
            "batch_size": args.batch_size,
            "graphctx_backend": args.backend,
            "new_tokens_per_s": rates,
            "setup_s": {path: round(m.setup_s, 2) for path, m in measured.items()},
            "generated_tokens": {path: m.tokens for path, m in measured.items()},
            "same_tokens_as_graphctx": {
                path: same_tokens(m.answers, reference.answers)
                for path, m in measured.items()
                if reference is not None and path != "graphctx"
            },
            "graphctx_speedup_over": {
                path: round(ours / rate, 2) for path, rate in rates.items() if ours and path != "graphctx"
            },
            "graphctx_new_tokens_per_s": ours,
            "errors": errors,
            "complete": len(measured) + len(errors) == len(args.paths),
        }

    for path in args.paths:
        if path == "static_cache" and device.type != "cuda":
            errors[path] = "skipped: the static cache with CUDA graphs runs on CUDA only"
            continue
        if args.time_budget_s and time.perf_counter() - started > args.time_budget_s:
            errors[path] = f"skipped: --time-budget-s {args.time_budget_s:g} spent"
            continue
        log(f"{path}: {len(prompts)} prompts, batch {args.batch_size}, {args.new_tokens} new tokens")
        try:
            measured[path] = runs[path]()  # its model is freed on return
            free(device)
            m = measured[path]
            log(f"{path}: {m.tokens} tokens in {m.decode_s:.1f} s (set-up {m.setup_s:.1f} s)")
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

"""Answer decoding on the CPU: ``generation.batch_size`` and ``generation.backend`` for the offline config.

tiny.yaml's model (the packaged SmolLM2-135M-Instruct, released weights in float32, as its base rows decode)
answers ``--prompts`` real GraphGen-shaped cardano prompts (a question with two other real Q&A pairs as its
context, the paper's template: ``generate_throughput.real_prompts``) greedily, ``--new-tokens`` at most,
with graphctx's :class:`~graphctx.generation.decoder.Generator`, in length-sorted batches of each
``--batch-sizes`` (``generate``) and with continuous batching over each batch of the largest size. Every
path decodes the same prompts to the same limit; each path's answers must equal the first path's.

    python benchmarks/generate_batch_size.py --data ../shared/data/stackexchange/cardano

Throughput = new tokens (through EOS) / wall time of the decoding calls (the model is loaded once, before;
one warm-up call). One JSON object on the last stdout line: new tokens/s per path, each path's speed-up
over the first, and whether its answers are identical.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from graphctx.generation.decoder import Generator, length_sorted_batches
from graphctx.generation.loading import load_generation_model
from graphctx.model import load_tokenizer, resolve_source
from graphctx.pipeline.config_file import load_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate_throughput import real_prompts

REPO = Path(__file__).resolve().parents[1]


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def decode(generator: Generator, prompts: list[list[int]]) -> tuple[list[list[int]], float]:
    """Every prompt's answer token ids, in the prompts' order, and the seconds the decoding took."""
    answers: list[list[int]] = [[] for _ in prompts]
    start = time.perf_counter()
    for batch in length_sorted_batches([len(p) for p in prompts], generator.settings.batch_size):
        decoded = generator.generate_ids([prompts[i] for i in batch], stop_strings=())
        for index, answer in zip(batch, decoded, strict=True):
            answers[index] = answer.token_ids
    return answers, time.perf_counter() - start


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--config", default=str(REPO / "configs/tiny.yaml"))
    parser.add_argument("--data", default=str(REPO.parent / "shared/data/stackexchange/cardano"))
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, help="default: the config's generation.max_new_tokens")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 16, 32])
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads")
    parser.add_argument("--no-continuous", action="store_true", help="leave continuous batching out")
    parser.add_argument("--workdir", default=str(REPO / ".cache/generate-batch-size"))
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    config = load_config(args.config, devices=False)
    generation = replace(config.generation, device="cpu", static_cache=False)
    if args.new_tokens:
        generation = replace(generation, max_new_tokens=args.new_tokens)
    spec = config.model.spec
    folder = Path(resolve_source(spec))
    prompts = real_prompts(
        args.data, folder, args.prompts, generation.max_prompt_tokens, Path(args.workdir) / "cache"
    )
    lengths = [len(p) for p in prompts]
    log(f"{len(prompts)} prompts of {min(lengths)}..{max(lengths)} tokens; {spec.source} on the CPU")
    model = load_generation_model(spec, None, generation, "cpu", weights="released")
    tokenizer = load_tokenizer(spec)
    paths = [(f"generate_batch_{size}", replace(generation, batch_size=size)) for size in args.batch_sizes]
    if not args.no_continuous:
        largest = max(args.batch_sizes)
        paths.append(
            (f"continuous_batch_{largest}", replace(generation, batch_size=largest, backend="continuous"))
        )
    with torch.no_grad():
        Generator(model, tokenizer, generation).generate_ids([prompts[0][:16]], stop_strings=())  # warm-up
    figures: dict[str, float] = {}
    speedups: dict[str, float] = {}
    identical: dict[str, bool] = {}
    reference = None
    for name, settings in paths:
        answers, seconds = decode(Generator(model, tokenizer, settings), prompts)
        tokens = sum(map(len, answers))
        figures[name] = round(tokens / seconds, 1)
        reference = reference or (name, answers)
        identical[name] = answers == reference[1]
        speedups[name] = round(figures[name] / figures[reference[0]], 2)
        log(f"{name}: {tokens} tokens in {seconds:.1f} s, identical to {reference[0]}: {identical[name]}")
    result = {
        "benchmark": "generate_batch_size",
        "device": "cpu",
        "threads": args.threads,
        "model": f"{spec.source} (released weights, float32)",
        "prompts": len(prompts),
        "prompts_kind": "real GraphGen-shaped cardano",
        "prompt_tokens": [min(lengths), max(lengths), round(sum(lengths) / len(lengths))],
        "new_tokens": generation.max_new_tokens,
        "new_tokens_per_s": figures,
        "speedup_vs_first": speedups,
        "identical_to_first": identical,
        "transformers": __import__("transformers").__version__,
    }
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()

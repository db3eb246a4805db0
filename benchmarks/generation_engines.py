"""Answer generation engines on the CPU: graphctx's paths against plain transformers ``generate`` and other
engines, on the same real prompts, token limit and greedy decoding, in one run.

The prompts are the first ``--prompts`` base-model prompts of an evaluation (``--eval-dir``, written by
``python evaluate.py --config configs/tiny.yaml``: ZeroShot and the four ``w/o INST`` variants, whose
prompts share their retrieved pairs), decoded by the tiny default's released SmolLM2 weights with its
``max_new_tokens`` and stop strings. Every path runs in its own process (its peak RSS is its own), loads
its model untimed (``setup_s``: loading, and an engine's conversion), then decodes every prompt:

* ``graphctx_generate``: :class:`graphctx.generation.decoder.Generator` as evaluate.py ran it before
  ``generation.backend: prefix``: float32, length-sorted left-padded batches of ``--batch-size``;
  the reference for ``same_tokens``;
* ``graphctx_prefix``: the same with ``backend: prefix`` (:mod:`graphctx.prefill`), float32;
* ``graphctx_prefix_fastest``: ``backend: prefix`` with ``dtype: fastest`` (tiny.yaml's path);
* ``transformers_generate``: plain ``model.generate`` one prompt at a time (no pads, no batch), float32,
  with the same generation config (greedy, EOS, the stop strings), as a user without graphctx calls it;
* ``ctranslate2`` (float32) and ``ctranslate2_int8`` (``int8_float32``): CTranslate2's
  ``Generator.generate_batch`` on the model converted by its Transformers converter, batches of
  ``--batch-size`` sorted by length;
* ``onnxruntime_genai``: ONNX Runtime GenAI on the model built by its model builder (float32, CPU), one
  prompt at a time.

Engines know no stop strings: their answers are cut at the first stop string afterwards, as
:meth:`Generator.answer` cuts graphctx's. Figures per path: new tokens/s (answer tokens through EOS or up to
the stop string, over the decoding wall time), time to first token (mean over prompts of the time from the
start of the prompt's batch to its first token), peak RSS, and ``same_tokens``, the share of prompts whose
answer tokens equal ``graphctx_generate``'s. An engine that is not installed is reported as such.

    python benchmarks/generation_engines.py --eval-dir runs/tiny/eval --workdir /tmp/engines

Prints progress to stderr and one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

PATHS = (
    "graphctx_generate",
    "graphctx_prefix",
    "graphctx_prefix_fastest",
    "transformers_generate",
    "ctranslate2",
    "ctranslate2_int8",
    "onnxruntime_genai",
)
ENGINE_PACKAGES = {
    "ctranslate2": "ctranslate2",
    "ctranslate2_int8": "ctranslate2",
    "onnxruntime_genai": "onnxruntime-genai",
}
BASE_VARIANTS = ("ZeroShot", "Base-TextGen", "Base-TextContextGen", "Base-GraphGen", "Base-GraphContextGen")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def real_prompts(eval_dir: Path, count: int) -> list[str]:
    """The first ``count`` base-model prompts of the evaluation, variant by variant in the matrix order."""
    prompts = []
    for variant in BASE_VARIANTS:
        for path in sorted((eval_dir / "predictions").glob(f"{variant}*.jsonl")):
            if path.stem.split(".")[0] != variant:
                continue
            prompts += [json.loads(line)["prompt"] for line in path.read_text().splitlines() if line]
    if len(prompts) < count:
        raise SystemExit(f"--eval-dir {eval_dir}: {len(prompts)} base-model prompts, {count} asked for")
    return prompts[:count]


class Timer:
    """First-token times: ``start`` a batch, ``first`` once its first token exists."""

    def __init__(self) -> None:
        self.ttft: list[float] = []
        self.began = 0.0

    def start(self) -> None:
        self.began = time.perf_counter()

    def first(self, rows: int) -> None:
        self.ttft += [time.perf_counter() - self.began] * rows


def run_path(path: str, prompts: list[list[int]], args: argparse.Namespace) -> dict[str, Any]:
    """Load ``path``'s model (timed apart), decode every prompt; new token ids per prompt through EOS."""
    import torch

    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer, StoppingCriteria, StoppingCriteriaList

    from graphctx.generation.decoder import Generator, length_sorted_batches
    from graphctx.generation.loading import resolve_dtype
    from graphctx.generation.settings import GenerationSettings
    from graphctx.prompts import BASE_STOP_STRINGS

    folder = args.model
    tokenizer = AutoTokenizer.from_pretrained(folder)
    eos = tokenizer.eos_token_id
    timer = Timer()
    begun = time.perf_counter()
    decode: Callable[[], list[list[int]]]
    if path.startswith("graphctx") or path == "transformers_generate":
        fastest = path == "graphctx_prefix_fastest"
        settings = GenerationSettings(
            max_new_tokens=args.new_tokens,
            batch_size=args.batch_size,
            backend="generate" if path in ("graphctx_generate", "transformers_generate") else "prefix",
            dtype="fastest" if fastest else "float32",
            device="cpu",
        )
        dtype = resolve_dtype(settings, torch.device("cpu"))
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype, attn_implementation="sdpa").eval()

        class FirstToken(StoppingCriteria):
            def __init__(self, rows: int) -> None:
                self.rows, self.seen = rows, False

            def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
                if not self.seen:
                    self.seen = True
                    timer.first(self.rows)
                return torch.zeros(input_ids.shape[0], dtype=torch.bool)

        generator = Generator(model, tokenizer, settings)
        original = model.generate

        def timed_generate(*a: Any, **kw: Any) -> Any:
            timer.start()
            rows = kw["input_ids"].shape[0]
            return original(*a, stopping_criteria=StoppingCriteriaList([FirstToken(rows)]), **kw)

        model.generate = timed_generate  # type: ignore[method-assign]

        def decode() -> list[list[int]]:
            if path == "transformers_generate":
                return [
                    generator.generate_ids([ids], stop_strings=BASE_STOP_STRINGS)[0].token_ids
                    for ids in prompts
                ]
            answers: list[list[int]] = [[] for _ in prompts]
            for batch in length_sorted_batches([len(ids) for ids in prompts], args.batch_size):
                for index, answer in zip(
                    batch,
                    generator.generate_ids([prompts[i] for i in batch], stop_strings=BASE_STOP_STRINGS),
                    strict=True,
                ):
                    answers[index] = answer.token_ids
            return answers

        cut = generator
    else:
        from graphctx.generation.settings import GenerationSettings as Settings

        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        cut = Generator(model, tokenizer, Settings(max_new_tokens=args.new_tokens))
        del model
        if path.startswith("ctranslate2"):
            import ctranslate2
            from ctranslate2.converters import TransformersConverter

            converted = args.workdir / "ctranslate2"
            if not (converted / "model.bin").is_file():
                TransformersConverter(str(folder)).convert(str(converted), quantization="float32", force=True)
            compute = "int8_float32" if path.endswith("int8") else "float32"
            engine = ctranslate2.Generator(
                str(converted), device="cpu", compute_type=compute, intra_threads=args.threads
            )

            def decode() -> list[list[int]]:
                answers: list[list[int]] = [[] for _ in prompts]
                for batch in length_sorted_batches([len(ids) for ids in prompts], args.batch_size):
                    tokens = [tokenizer.convert_ids_to_tokens(prompts[i]) for i in batch]
                    firsts: set[int] = set()

                    def step(result: Any, firsts: set[int] = firsts) -> bool:
                        if result.batch_id not in firsts:
                            firsts.add(result.batch_id)
                            timer.first(1)
                        return False

                    timer.start()
                    results = engine.generate_batch(
                        tokens,
                        max_length=args.new_tokens,
                        sampling_topk=1,
                        include_prompt_in_result=False,
                        end_token=[tokenizer.eos_token],
                        return_end_token=True,
                        callback=step,
                    )
                    for index, result in zip(batch, results, strict=True):
                        answers[index] = list(result.sequences_ids[0])
                return answers
        else:
            import onnxruntime_genai as og

            built = args.workdir / "onnxruntime-genai"
            if not (built / "genai_config.json").is_file():
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "onnxruntime_genai.models.builder",
                        "-i",
                        str(folder),
                        "-o",
                        str(built),
                        "-p",
                        "fp32",
                        "-e",
                        "cpu",
                    ],
                    check=True,
                    stdout=sys.stderr,
                )
            engine = og.Model(str(built))

            def decode() -> list[list[int]]:
                answers = []
                for ids in prompts:
                    params = og.GeneratorParams(engine)
                    params.set_search_options(max_length=len(ids) + args.new_tokens, do_sample=False)
                    generator = og.Generator(engine, params)
                    timer.start()
                    generator.append_tokens(ids)
                    new: list[int] = []
                    while not generator.is_done() and len(new) < args.new_tokens:
                        generator.generate_next_token()
                        if not new:
                            timer.first(1)
                        new.append(int(generator.get_next_tokens()[0]))
                    answers.append(new)
                return answers

    setup = time.perf_counter() - begun
    started = time.perf_counter()
    raw = decode()
    wall = time.perf_counter() - started
    answers = [cut.answer(ids, BASE_STOP_STRINGS).token_ids for ids in raw]
    return {
        "setup_s": round(setup, 1),
        "decode_s": round(wall, 1),
        "new_tokens": sum(map(len, answers)),
        "new_tokens_per_s": round(sum(map(len, answers)) / wall, 2),
        "ttft_s": round(sum(timer.ttft) / len(timer.ttft), 2) if timer.ttft else None,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "answers": answers,
        "eos": eos,
    }


def installed(path: str) -> bool:
    package = ENGINE_PACKAGES.get(path)
    if package is None:
        return True
    from importlib.util import find_spec

    return find_spec(package.replace("-", "_")) is not None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval-dir", type=Path, default=Path("runs/tiny/eval"))
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/graphctx-engines"))
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=Path(".cache/graphctx"),
        help="graphctx's cache (the converted SmolLM2)",
    )
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=96, help="tiny.yaml's generation.max_new_tokens")
    parser.add_argument("--batch-size", type=int, default=8, help="generation.batch_size's default")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    prompts_file = args.workdir / "prompts.json"
    if args.child:
        prompts = json.loads(prompts_file.read_text())
        print(json.dumps(run_path(args.child, prompts, args)))
        return
    from transformers import AutoTokenizer

    from graphctx.model import ModelSpec, resolve_source

    model = Path(resolve_source(ModelSpec(source="smollm2-gguf", cache_dir=str(args.cache_dir))))
    tokenizer = AutoTokenizer.from_pretrained(model)
    texts = real_prompts(args.eval_dir, args.prompts)
    prompts = [tokenizer(text)["input_ids"] for text in texts]
    prompts_file.write_text(json.dumps(prompts))
    results: dict[str, Any] = {}
    for path in args.paths:
        if not installed(path):
            results[path] = {"skipped": f"not installed: pip install {ENGINE_PACKAGES[path]}"}
            continue
        log(f"{path}: {len(prompts)} prompts")
        given = list(sys.argv[1:] if argv is None else argv)
        child = [sys.executable, __file__, *given, "--child", path, "--model", str(model)]
        done = subprocess.run(child, capture_output=True, text=True, check=False)
        if done.returncode:
            results[path] = {
                "error": done.stderr.strip().splitlines()[-1]
                if done.stderr.strip()
                else f"exit {done.returncode}"
            }
            log(f"{path}: failed: {results[path]['error']}")
            continue
        results[path] = json.loads(done.stdout.strip().splitlines()[-1])
        log(f"{path}: {results[path]['new_tokens_per_s']} new tokens/s")
    reference = results.get("graphctx_generate", {}).get("answers")
    for figures in results.values():
        answers = figures.pop("answers", None)
        figures.pop("eos", None)
        if reference is not None and answers is not None:
            figures["same_tokens"] = round(
                sum(a == b for a, b in zip(answers, reference, strict=True)) / len(reference), 3
            )
    print(
        json.dumps(
            {
                "benchmark": "generation_engines",
                "prompts": len(prompts),
                "prompt_tokens": sum(map(len, prompts)),
                "new_tokens_max": args.new_tokens,
                "batch_size": args.batch_size,
                "threads": args.threads,
                "paths": results,
            }
        )
    )


if __name__ == "__main__":
    main()

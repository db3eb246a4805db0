"""Every GPU claim in one command: the GPU tests, training, generation and retrieval, each against its
competitor in the same run, and pass/fail against each target. One JSON object on the last stdout line.

On the GPU machine (one H200; at most 9 minutes), with ``.gpu`` carried (``bash scripts/gpu/pack.sh`` first,
where PyPI and ../shared are reachable: the wheels the image lacks and the cardano dump):

    bash scripts/gpu/install.sh && PYTHONUNBUFFERED=1 python3 benchmarks/gpu_suite.py --report-dir "$OUT"

Anywhere, at toy sizes in a few minutes (CI runs part of it: tests/test_gpu_suite.py):

    python benchmarks/gpu_suite.py --device cpu --quick

Steps (``--only`` picks some):

* ``gpu_tests``: ``pytest -m gpu`` (varlen packing boundaries, compiled blocks, paged AdamW, liger, PPR on
  CUDA); meanwhile the random Llama-2-7B-shaped model is built and saved once for the next two steps.
* ``training``: ``benchmarks/train_throughput.py`` (real cardano lengths, the plain transformers + peft +
  bitsandbytes recipe as competitor) with the variants eager, liger-kernel, compiled blocks, liger +
  compile and checkpoint fraction 0.5 (in that order), against one baseline run.
* ``generation``: ``benchmarks/generate_throughput.py`` on 256 real GraphGen-shaped cardano prompts (at
  most 1,023 tokens), every path at most 128 answers in flight and 128 new tokens: graphctx's path
  (merged adapter, ``generation.backend: generate``; the only figure for the target and the cost plan),
  transformers' continuous batching on the same merged model (set-up timed apart), graphctx with
  ``backend: continuous``, plain ``generate`` on the 4-bit model with the adapter, the static cache with CUDA
  graphs, and plain ``generate`` on the 4-bit model without adapter; each path's share of answers
  token-identical to graphctx's. (``pytest -m gpu`` checks the two backends token for token in float32.)
* ``retrieval``: ``benchmarks/retrieval.py`` twice: a 20k pool against networkx and igraph (speedups per
  linked query, every peer on the same queries), and the 1M-node pool at mean degree >= 50 (build + 10k
  queries, against the 60 s target); then ``benchmarks/retrieval_scale.py`` at 1M and 10M: the Faiss
  GPU k-NN build and forward-push PageRank per query (docs/scale.md's 24M projections rest on them).

Each step runs in its own process (liger's RoPE patch and CUDA memory stay there) with a share of
``--budget-s``; a step past its share is stopped and reported as timed out, the others still run. Every
step's stderr goes to ``<report-dir or workdir>/logs/<step>.log``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GPU_SITE = REPO / ".gpu" / "site"
"""Where scripts/gpu/install.sh puts the wheels the GPU image lacks."""
CARRIED_DATA = REPO / ".gpu" / "data" / "cardano"
"""The cardano dump as scripts/gpu/pack.sh packs it for the GPU machine (../shared does not travel)."""
STEPS = ["gpu_tests", "retrieval", "training", "generation"]

TARGETS = {
    "gpu_tests": "pytest -m gpu: every test passes (on CUDA: none skipped)",
    "training": "graphctx >= 9,700 real tokens/s with peak memory <= 40 GiB (Llama-2-7B shape, QLoRA)",
    "generation": ">= 4,000 new tokens/s by graphctx's path (Llama-2-7B shape, 256 real prompts, batches of "
    "128, 128 new tokens)",
    "retrieval": "1M-node pool at mean degree >= 50: graph build + 10,000 queries <= 60 s",
}
TRAINING_TOKENS_PER_S, TRAINING_MEMORY_GIB = 9700.0, 40.0
GENERATION_TOKENS_PER_S = 4000.0
RETRIEVAL_SECONDS, RETRIEVAL_MEAN_DEGREE = 60.0, 50.0

#: Arguments of each benchmark: the full H200 run and the toy CPU run (same steps, toy sizes).
SIZES = {
    "full": {
        "training": [
            *("--token-budget", "32768", "--steps", "3", "--warmup-steps", "2"),
            *("--variants", "eager", "liger", "compile", "liger+compile", "ckpt0.5"),
        ],
        "generation": [
            *("--prompts", "256", "--batch-size", "128"),
            *("--new-tokens", "128", "--max-prompt", "1023"),  # static cache: widths fit one 1024 bucket
        ],
        "retrieval_peers": ["--pool", "20000", "--queries", "2000", "--peer-queries", "60"],
        "retrieval_scale": [
            *("--pool", "1000000", "--dim", "1024", "--clusters", "2000"),
            *("--queries", "10000", "--peer-queries", "0"),
        ],
        "retrieval_knn": ["--sizes", "1000000", "10000000", "--queries", "200", "--exact-max", "0"],
    },
    "quick": {
        "training": [
            *("--token-budget", "1024", "--max-length", "256", "--baseline-batch-size", "2"),
            *("--steps", "2", "--warmup-steps", "1", "--variants", "eager", "ckpt0.5", "compile", "liger"),
        ],
        "generation": [
            *("--prompts", "8", "--batch-size", "4"),
            *("--new-tokens", "4", "--max-prompt", "64"),
        ],
        "retrieval_peers": ["--pool", "3000", "--queries", "300", "--peer-queries", "20"],
        "retrieval_scale": [
            *("--pool", "6000", "--dim", "256", "--clusters", "12"),  # mean degree ~78
            *("--queries", "300", "--peer-queries", "0"),
        ],
        "retrieval_knn": [
            "--sizes",
            "3000",
            "--queries",
            "5",
            "--recall-sample",
            "50",
            "--exact-max",
            "3000",
        ],
    },
}
#: Share of ``--budget-s`` per step (retrieval's two runs share theirs).
SHARES = {"gpu_tests": 0.18, "retrieval": 0.12, "training": 0.38, "generation": 0.32}


def log(message: str) -> None:
    print(f"[gpu_suite {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def child_environment() -> dict[str, str]:
    """This environment with the installed GPU wheels and the repository first on the import path."""
    paths = [str(GPU_SITE)] if GPU_SITE.is_dir() else []
    paths += [str(REPO)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    offline = {name: "1" for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
    return {
        **os.environ,
        **offline,
        "WANDB_MODE": "offline",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join(paths),
    }


def version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(device: str) -> dict[str, object]:
    """GPU, CUDA and the versions of the packages the figures depend on."""
    import torch

    info: dict[str, object] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "gpu_memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
        if torch.cuda.is_available()
        else None,
        "cpu_count": os.cpu_count(),
        "device": device,
        "gpu_site": GPU_SITE.is_dir(),
    }
    for package in ("transformers", "bitsandbytes", "peft", "liger-kernel", "triton", "networkx", "igraph"):
        info[package] = version(package)
    return info


def run_json(name: str, command: list[str], timeout: float, logs: Path) -> dict[str, object]:
    """Run ``command`` in the repository root; its last stdout line parsed as JSON, plus rc and wall time."""
    logs.mkdir(parents=True, exist_ok=True)
    log(f"{name}: {' '.join(command[1:])} (up to {timeout:.0f} s)")
    started = time.perf_counter()
    with (logs / f"{name}.log").open("w") as stderr:
        try:
            done = subprocess.run(
                command,
                cwd=REPO,
                env=child_environment(),
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as stopped:
            wall = round(time.perf_counter() - started, 1)
            log(f"{name}: stopped at its {timeout:.0f} s share")
            figures = last_json(stopped.stdout)
            return {**(figures or {}), "error": f"stopped at its {timeout:.0f} s share", "wall_s": wall}
    wall = round(time.perf_counter() - started, 1)
    figures = last_json(done.stdout)
    log(f"{name}: rc {done.returncode} in {wall} s")
    if done.returncode != 0 or figures is None:
        tail = (logs / f"{name}.log").read_text().strip().splitlines()[-3:]
        return {**(figures or {}), "error": f"rc {done.returncode}: {' | '.join(tail)}", "wall_s": wall}
    return {**figures, "wall_s": wall}


def last_json(stdout: str | bytes | None) -> dict | None:
    """The last stdout line that is a JSON object (benchmarks print their figures so far after each part)."""
    if isinstance(stdout, bytes):
        stdout = stdout.decode(errors="replace")
    for line in reversed((stdout or "").strip().splitlines()):
        try:
            figures = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(figures, dict):
            return figures
    return None


def junit_summary(path: Path) -> dict[str, object]:
    """Counts of a pytest junit XML file, the failed tests and every recorded property."""
    root = ET.parse(path).getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    counts = {
        key: sum(int(s.get(key, 0)) for s in suites) for key in ("tests", "failures", "errors", "skipped")
    }
    failed, properties = [], {}
    for case in root.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(name)
        for prop in case.iter("property"):
            properties[f"{case.get('name')}.{prop.get('name')}"] = json.loads(prop.get("value"))
    return {**counts, "failed": failed, "properties": properties}


def gpu_tests(timeout: float, logs: Path) -> dict[str, object]:
    """``pytest -m gpu`` with a junit report (the packing test records its logit gaps there)."""
    xml = logs / "gpu_tests.xml"
    logs.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider"]
    command += [f"--junitxml={xml}", "tests"]
    log(f"gpu_tests: pytest -m gpu (up to {timeout:.0f} s)")
    started = time.perf_counter()
    with (logs / "gpu_tests.log").open("w") as output:
        try:
            done = subprocess.run(
                command, cwd=REPO, env=child_environment(), stdout=output, stderr=subprocess.STDOUT,
                timeout=timeout, check=False,
            )  # fmt: skip
            rc = done.returncode
        except subprocess.TimeoutExpired:
            rc = None
    wall = round(time.perf_counter() - started, 1)
    if rc is None or not xml.is_file():
        return {"error": "timed out" if rc is None else f"rc {rc}, no report", "wall_s": wall}
    return {**junit_summary(xml), "rc": rc, "wall_s": wall}


def verdicts(results: dict[str, dict], device: str) -> dict[str, dict[str, object]]:
    """Each target: the figure that decides it and whether it is met (None when the step did not run)."""
    out: dict[str, dict[str, object]] = {}
    tests = results.get("gpu_tests")
    if tests is not None:
        ok = "failures" in tests and tests["failures"] == tests["errors"] == 0 and tests["tests"] > 0
        if device == "cuda":
            ok = ok and tests["skipped"] == 0
        out["gpu_tests"] = {"value": {k: tests.get(k) for k in ("tests", "failures", "errors", "skipped")}}
        out["gpu_tests"]["pass"] = bool(ok)
    training = results.get("training")
    if training is not None:
        variants = training.get("variants", {})
        best = training.get("fastest_within_memory")
        figure = variants.get(best, {}) if best else {}
        out["training"] = {
            "value": {
                "variant": best,
                **{k: figure.get(k) for k in ("tokens_per_s", "peak_mem_gib", "speedup")},
            },
            "pass": bool(figure)
            and figure["tokens_per_s"] >= TRAINING_TOKENS_PER_S
            and figure["peak_mem_gib"] <= TRAINING_MEMORY_GIB,
        }
    generation = results.get("generation")
    if generation is not None:  # graphctx's own path only: a competitor's figure never passes it
        ours = generation.get("graphctx_new_tokens_per_s")
        out["generation"] = {
            "value": {
                "path": "graphctx",
                "backend": generation.get("graphctx_backend"),
                "new_tokens_per_s": ours,
                "speedup_over": generation.get("graphctx_speedup_over"),
            },
            "pass": ours is not None and ours >= GENERATION_TOKENS_PER_S,
        }
    retrieval = results.get("retrieval")
    if retrieval is not None:
        scale = retrieval.get("scale", {})
        seconds, degree = scale.get("build_plus_queries_s"), scale.get("mean_degree")
        out["retrieval"] = {
            "value": {"pool": scale.get("pool"), "build_plus_queries_s": seconds, "mean_degree": degree},
            "pass": seconds is not None and seconds <= RETRIEVAL_SECONDS and degree >= RETRIEVAL_MEAN_DEGREE,
        }
    for name, verdict in out.items():
        verdict["target"] = TARGETS[name]
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--quick", action="store_true", help="toy sizes (a few minutes on a CPU)")
    parser.add_argument("--only", nargs="+", choices=STEPS, default=STEPS, help="steps to run")
    parser.add_argument("--budget-s", type=float, help="whole run (default: 540 full, 1800 quick)")
    parser.add_argument("--workdir", type=Path, default=REPO / ".cache" / "gpu-suite", help="models, caches")
    parser.add_argument("--report-dir", type=Path, help="write gpu_suite.json and the step logs here")
    parser.add_argument("--train-variants", nargs="+", help="instead of the size's training variants")
    parser.add_argument("--generation-paths", nargs="+", help="generate_throughput.py --paths (default: all)")
    parser.add_argument(
        "--data",
        default=str(
            CARRIED_DATA if CARRIED_DATA.is_dir() else REPO.parent / "shared/data/stackexchange/cardano"
        ),
        help="Stack Exchange dump (default: .gpu/data/cardano when packed, else ../shared's cardano)",
    )
    args = parser.parse_args(argv)
    if GPU_SITE.is_dir():
        sys.path.insert(0, str(GPU_SITE))
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: no CUDA device visible (use --device cpu --quick)")
    sizes = SIZES["quick" if args.quick else "full"]
    budget = args.budget_s or (1800.0 if args.quick else 540.0)  # quick: coverage, not a time test
    logs = (args.report_dir or args.workdir) / "logs"
    cache = args.workdir / "cache"
    python = [sys.executable]
    device = ["--device", args.device]
    started = time.perf_counter()
    results: dict[str, dict] = {}

    def share(step: str) -> float:
        """This step's share of the budget, plus whatever earlier steps left unused."""
        later = sum(SHARES[s] for s in STEPS[STEPS.index(step) :] if s in args.only)
        left = budget - (time.perf_counter() - started)
        return max(30.0, left * SHARES[step] / later)

    # The random model both model benchmarks use is built (on the device) while the tests run.
    prepare = None
    if {"training", "generation"} & set(args.only):
        command = [*python, "benchmarks/train_throughput.py", *device, "--cache-dir", str(cache)]
        command += ["--data", args.data, "--prepare-only"]
        logs.mkdir(parents=True, exist_ok=True)
        prepare = subprocess.Popen(
            command, cwd=REPO, env=child_environment(), stdout=subprocess.PIPE,
            stderr=(logs / "prepare.log").open("w"), text=True,
        )  # fmt: skip
    if "gpu_tests" in args.only:
        results["gpu_tests"] = gpu_tests(share("gpu_tests"), logs)
    model = None
    if prepare is not None:
        stdout, _ = prepare.communicate()
        lines = stdout.strip().splitlines()
        model = json.loads(lines[-1])["model"] if prepare.returncode == 0 and lines else None
        log(f"prepared model: {model}")
    if "retrieval" in args.only:
        allotted = share("retrieval")
        retrieval_started = time.perf_counter()
        results["retrieval"] = {
            "peers": run_json(
                "retrieval_peers",
                [*python, "benchmarks/retrieval.py", *device, *sizes["retrieval_peers"]],
                allotted / 2,
                logs,
            )
        }
        left = allotted - (time.perf_counter() - retrieval_started)
        results["retrieval"]["scale"] = run_json(
            "retrieval_scale",
            [*python, "benchmarks/retrieval.py", *device, *sizes["retrieval_scale"]],
            max(30.0, left),
            logs,
        )
        left = allotted - (time.perf_counter() - retrieval_started)
        results["retrieval"]["knn_push"] = run_json(
            "retrieval_knn",
            [*python, "benchmarks/retrieval_scale.py", *device, *sizes["retrieval_knn"]],
            max(30.0, left),
            logs,
        )
    for step, script, extra in (
        ("training", "train_throughput.py", ["--cache-dir", str(cache), "--data", args.data]),
        (
            "generation",
            "generate_throughput.py",
            ["--workdir", str(args.workdir / "generation"), "--real", args.data],
        ),
    ):
        if step not in args.only:
            continue
        if model is None:
            results[step] = {"error": f"the random model was not built: see {logs / 'prepare.log'}"}
            continue
        allotted = share(step)
        if step == "generation":
            extra = [*extra, "--base-model", model]
        # start no new variant/path in the last 30% of the share; one stopped midway loses only itself
        command = [*python, f"benchmarks/{script}", *device, *extra, *sizes[step]]
        if step == "training" and args.train_variants:
            command += ["--variants", *args.train_variants]  # the last --variants wins
        if step == "generation" and args.generation_paths:
            command += ["--paths", *args.generation_paths]
        command += ["--time-budget-s", f"{0.7 * allotted:.0f}"]
        results[step] = run_json(step, command, allotted, logs)

    report = {
        "suite": "graphctx gpu suite",
        "device": args.device,
        "quick": args.quick,
        "targets_apply": args.device == "cuda" and not args.quick,
        "environment": environment(args.device),
        "budget_s": budget,
        "wall_s": round(time.perf_counter() - started, 1),
        "steps": results,
        "targets": verdicts(results, args.device),
    }
    report["all_pass"] = all(v["pass"] for v in report["targets"].values())
    if args.report_dir:
        args.report_dir.mkdir(parents=True, exist_ok=True)
        (args.report_dir / "gpu_suite.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()

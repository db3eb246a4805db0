"""Evaluate the paper's variant matrix on the test split.

    python evaluate.py --config configs/tiny.yaml [--variants ...] [--metrics ...] [--evaluation.limit N]
        [--section.key value ...]

For each variant (see ``graphctx.prompts.VARIANTS``) the test split's questions are answered with the
variant's prompt and model, the answers scored (BERTScore, ROUGE-1/L, fact score, AutoAIS, entity Jaccard),
and a results table written with 95% bootstrap intervals and paired tests (below).
Predictions are appended to JSONL files as they are made: rerunning the same command after an interruption
continues where it stopped.

Several processes, as for training: ``--trainer.devices 4`` (and ``--trainer.num_nodes``, with the config's
``trainer.accelerator / strategy``) starts them through Lightning's launcher, ``srun`` under SLURM (see
``scripts/slurm/evaluate.sbatch``). Retrieval and enhancement are shared out over the processes, then the
batches are dealt over them; the files and the table are the ones a single process writes.
"""

from __future__ import annotations

import contextlib
import sys
from typing import TYPE_CHECKING, TextIO

from jsonargparse import ArgumentParser, Namespace

from graphctx.command_line import add_config, add_version, command_parser, old_spelling, parse
from graphctx.errors import debug_enabled, report
from graphctx.evaluation_settings import comparisons_text
from graphctx.quiet import quiet_third_party

PAIRED_TESTS = (
    "Paired tests, fixed before scoring (evaluation.comparisons; Holm-corrected over pairs x metrics): by\n"
    f"default each graph variant vs its text twin ({comparisons_text()}),\n"
    "and each <variant>@<retriever> row vs its variant."
)

if TYPE_CHECKING:
    from graphctx.pipeline.processes import StopRequest


RENAMED = {"--limit": "--evaluation.limit", "--output-dir": "--evaluation.output_dir"}
"""evaluate.py's options of older releases -> the config key that replaced them (one spelling)."""


def add_arguments(parser: ArgumentParser) -> None:
    """evaluate.py's options: the config's (every ``--section.key VALUE``) and its own."""
    add_config(parser, "YAML config (as for train.py)")
    parser.add_argument(
        "--variants",
        nargs="+",
        help="variants to run: sets evaluation.variants (any name it takes, e.g. TextGen@overlap); the "
        "baselines only by name",
    )
    parser.add_argument(
        "--metrics",
        nargs="+",
        help="score only these metrics, by registry name (rouge, bertscore, fact_score, entity_jaccard, "
        "autoais and the plug-ins of evaluation.metrics.extra; default: all); their scores and "
        "fingerprints are those of a full run",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        help="a model sweep: each base model (Hub id or folder) runs the base variants into "
        "<output_dir>/models/<name>/, one table in sweep.md / sweep.csv",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="move answers made with other settings (or repeating ids) aside into OUTPUT_DIR/stale/ "
        "(else: fail); only in a folder evaluate.py made",
    )
    add_version(parser)


def build_parser(help_asked: bool = False) -> ArgumentParser:
    """evaluate.py's parser (``help_asked``: the settings documented from their docstrings)."""
    return command_parser("evaluate.py", f"{__doc__}\n{PAIRED_TESTS}", add_arguments, help_asked)


def main(argv: list[str] | None = None) -> int:
    """Evaluate. The results table goes to stdout, all else to stderr. graphctx's own errors end it with one
    ``error: ...`` line (``--debug`` or ``GRAPHCTX_DEBUG=1``: and the traceback)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if (refused := old_spelling("evaluate.py", argv, RENAMED)) is not None:
        print(refused, file=sys.stderr)
        return 2
    stop = None
    if not {"-h", "--help", "--version"} & set(argv):
        from graphctx.pipeline.processes import StopRequest

        stop = StopRequest()  # before anything slow: a SLURM SIGUSR1 during start-up must not kill it
    results = sys.stdout
    return report(lambda: run(argv, stop, results), debug_enabled("--debug" in argv))


def run(argv: list[str], stop: StopRequest | None, out: TextIO) -> int:
    """Parse ``argv`` (``--help`` and ``--version`` print to stdout), then evaluate with stdout on stderr."""
    args = parse(build_parser(bool({"-h", "--help"} & set(argv))), argv)
    if args.variants is not None:
        args.evaluation.variants = args.variants  # checked with the config, as the config's own
    quiet_third_party()
    with contextlib.redirect_stdout(sys.stderr):
        return evaluate(args, stop, out)


def evaluate(args: Namespace, stop: StopRequest | None, out: TextIO) -> int:
    """Launch the processes, run the evaluation; on a stop request, rank 0 requeues the SLURM job."""
    from graphctx.evaluation.matrix.inputs import check_inputs
    from graphctx.evaluation.matrix.runner import MatrixEvaluation
    from graphctx.evaluation.matrix.table import to_markdown
    from graphctx.model.preemption import requeue_slurm_job
    from graphctx.pipeline.config_file import run_config
    from graphctx.pipeline.processes import Preempted, launch_processes

    config = run_config(args)
    processes = launch_processes(config.trainer)
    output_key = "evaluation.output_dir"
    if args.models:
        from graphctx.evaluation.matrix.sweep import run_sweep

        configs = {model: run_config(with_model(args, model)) for model in args.models}

        def work() -> str | None:
            return run_sweep(
                configs,
                args.variants,
                None,
                None,
                processes,
                stop,
                args.overwrite,
                output_key,
                args.metrics,
            )
    else:
        evaluation = MatrixEvaluation(config, None, processes=processes, stop=stop, metrics=args.metrics)
        check_inputs(evaluation, output_key, args.overwrite)

        def work() -> str | None:
            table = evaluation.evaluate(overwrite=args.overwrite)
            return None if table is None else to_markdown(table)

    try:
        markdown = work()
    except Preempted as stopped:
        print(f"evaluate.py: {stopped}", file=sys.stderr)
        if processes.is_zero:
            requeue_slurm_job()
        return 0
    if markdown is not None:
        print(markdown, file=out)
    return 0


def with_model(args: Namespace, model: str) -> Namespace:
    """``args`` with ``model.spec.source`` set to ``model`` (one model of a sweep)."""
    chosen = args.clone()
    chosen.model.spec.source = model
    return chosen


if __name__ == "__main__":
    sys.exit(main())

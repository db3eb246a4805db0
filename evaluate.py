"""Evaluate the paper's variant matrix on the test split.

    python evaluate.py --config configs/tiny.yaml [--variants ...] [--limit N] [--section.key value ...]

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

import argparse
import contextlib
import sys
from typing import TYPE_CHECKING, TextIO

from graphctx.errors import debug_enabled, report
from graphctx.evaluation_settings import comparisons_text
from graphctx.prompts import BASELINE_VARIANTS, VARIANTS
from graphctx.quiet import quiet_third_party
from graphctx.settings_help import add_settings_help

PAIRED_TESTS = (
    "Paired tests, fixed before scoring (evaluation.comparisons; Holm-corrected over pairs x metrics): by\n"
    f"default each graph variant vs its text twin ({comparisons_text()}),\n"
    "and each <variant>@<retriever> row vs its variant."
)

if TYPE_CHECKING:
    from graphctx.pipeline.processes import StopRequest


def positive_int(value: str) -> int:
    """``--limit``: a whole number of at least 1."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=f"{__doc__}\n{PAIRED_TESTS}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
    )
    parser.add_argument("--config", required=True, help="YAML config (as for train.py)")
    add_settings_help(parser)
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=list(VARIANTS | BASELINE_VARIANTS),
        help="variants to run (default: evaluation.variants); the baselines only by name",
    )
    parser.add_argument(
        "--models",
        nargs="+",
        help="a model sweep: each base model (Hub id or folder) runs the base variants into "
        "<output_dir>/models/<name>/, one table in sweep.md / sweep.csv",
    )
    parser.add_argument(
        "--limit", type=positive_int, help="evaluate the first N questions of the split (by id)"
    )
    parser.add_argument("--output-dir", help="default: evaluation.output_dir")
    parser.add_argument("--debug", action="store_true", help="show the traceback of an error")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="move answers made with other settings (or repeating ids) aside into OUTPUT_DIR/stale/ "
        "(else: fail); only in a folder evaluate.py made",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Evaluate; unknown ``--section.key value`` pairs override the config. The results table goes to stdout,
    all else to stderr. graphctx's own errors end it with one ``error: ...`` line (``--debug`` or
    ``GRAPHCTX_DEBUG=1``: and the traceback)."""
    args, overrides = build_parser().parse_known_args(argv)
    from graphctx.pipeline.processes import StopRequest

    stop = StopRequest()  # before anything slow: a SLURM SIGUSR1 during start-up must not kill the process
    results = sys.stdout
    quiet_third_party()
    with contextlib.redirect_stdout(sys.stderr):
        return report(lambda: evaluate(args, overrides, stop, results), debug_enabled(args.debug))


def evaluate(args: argparse.Namespace, overrides: list[str], stop: StopRequest, out: TextIO) -> int:
    """Launch the processes, run the evaluation; on a stop request, rank 0 requeues the SLURM job."""
    from graphctx.evaluation.matrix.inputs import check_inputs
    from graphctx.evaluation.matrix.runner import MatrixEvaluation
    from graphctx.evaluation.matrix.table import to_markdown
    from graphctx.model.preemption import requeue_slurm_job
    from graphctx.pipeline.config_file import load_config
    from graphctx.pipeline.processes import Preempted, launch_processes

    config = load_config(args.config, overrides)
    processes = launch_processes(config.trainer)
    output_key = "--output-dir" if args.output_dir else "evaluation.output_dir"
    if args.models:
        from graphctx.evaluation.matrix.sweep import run_sweep

        configs = {m: load_config(args.config, [*overrides, "--model.spec.source", m]) for m in args.models}

        def work() -> str | None:
            return run_sweep(
                configs,
                args.variants,
                args.limit,
                args.output_dir,
                processes,
                stop,
                args.overwrite,
                output_key,
            )
    else:
        evaluation = MatrixEvaluation(
            config, args.variants, args.limit, args.output_dir, processes=processes, stop=stop
        )
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


if __name__ == "__main__":
    sys.exit(main())

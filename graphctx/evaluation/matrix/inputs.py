"""The input checks every evaluation runs before it writes a file: one run, or each model of a sweep."""

from __future__ import annotations

from graphctx.errors import check_output_folder
from graphctx.evaluation.matrix.resume_guard import check_overwrite
from graphctx.evaluation.matrix.runner import MatrixEvaluation
from graphctx.knowledge.store import kg_sources
from graphctx.model.loading import adapter_weights


def check_inputs(run: MatrixEvaluation, output_key: str, overwrite: bool = False) -> None:
    """Refuse, before any file of the run is written, an output folder that is a file, a split that leaves
    no question to evaluate, an adapter folder peft would load a pickle from or that holds two adapters
    (:func:`~graphctx.model.loading.adapter_weights`) and a knowledge graph without sources
    (``output_key`` names the setting that chose the folder); with ``overwrite``, a folder evaluate.py did
    not make (:func:`~graphctx.evaluation.matrix.resume_guard.check_overwrite`)."""
    check_output_folder(run.output_dir, output_key)
    if overwrite:
        check_overwrite(run.output_dir, output_key)
    if any(variant.model == "adapter" for variant in run.variants):
        adapter_weights(run.config.adapter_dir)
    run.load_rows()  # the dataset and the split, with its questions
    knowledge = run.config.knowledge
    if knowledge.enabled and "local" in knowledge.sources and any(v.knowledge for v in run.variants):
        kg_sources(knowledge)

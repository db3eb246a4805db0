"""The resume guard: a rerun extends only what was made with the same settings.

Every variant's answers carry the fingerprint of everything they depend on
(:meth:`ResumeGuard.prediction_fingerprint`: model, template, dataset settings and the SHA-256s of its
source files, split, decoding, weights, the adapter file peft loads, retrieval and knowledge, less the
speed-only knobs of :data:`SPEED_ONLY`), every metric's scores that of the metric and the answers
(:meth:`ResumeGuard.metric_fingerprint`), both stored in a ``.meta.json`` beside the file. Answers made
with other settings are refused, naming what changed (or moved aside with ``--overwrite``); scores of other
metric settings are moved aside and scored again (:mod:`~.stale`). Nothing is deleted.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path
from typing import Any

from graphctx.cache import cache_root, file_digest, fingerprint, write_json_atomic
from graphctx.data.sources import source_digests
from graphctx.errors import ConfigError
from graphctx.evaluation.attribution.attributor import fingerprint_parts as attribution_parts
from graphctx.evaluation.jsonl import RecordFile, read_records
from graphctx.evaluation.matrix.metric_fingerprints import changed, metric_parts
from graphctx.evaluation.matrix.run_files import RunFiles
from graphctx.evaluation.matrix.stale import StaleArea
from graphctx.folder_lock import LOCK_FILE
from graphctx.knowledge.backends import also_fingerprints, knowledge_source
from graphctx.knowledge.extractors import plugin_fingerprints
from graphctx.model.loading import adapter_weights
from graphctx.pipeline.answerer import decoded_weights
from graphctx.pipeline.run_config import RunConfig
from graphctx.prompts import Variant
from graphctx.retrieval.builders import retrieval_numerics

ANSWER_FORMAT = 3
"""Bump when the same settings start making other answers (prompt encoding, the weights decoded, stopping);
part of the fingerprint, so a rerun never mixes answers made the old and the new way. 2: the paper's exact
prompt string, NF4-dequantised merge, stop strings for the base variants. 3: the base rows and the LLM
extractor decode the released weights (``generation.base_weights``)."""


SPEED_ONLY: dict[str, set[str]] = {
    "model": {
        "cache_dir",
        "attention",
        "gradient_checkpointing",
        "checkpoint_fraction",
        "compile",
        "liger",
        "loss_chunk_tokens",
    },
    "generation": {"batch_size", "device", "static_cache", "cache_bucket_tokens", "backend"},
    "retrieval": {
        "device",  # its type (cpu/cuda), which changes the numbers, is in the fingerprint's numerics
        "embedding_batch_size",
        "query_batch_size",
        "similarity_chunk_size",
        "max_batch_slots",
        "shared_component_nodes",
        "knn_recall_sample",  # retrieval.scale's: measures the k-NN graph's recall, changes no edge
        "extra",  # the plug-in retrievers: a variant answering with one adds that one's fingerprint
    },
    # plug-in sources and extractors: each its own fingerprint
    "knowledge": {"batch_size", "device", "cache_dir", "extra", "extractors_extra"},
}
"""Settings that change how fast answers are made (or only training), not which answers: left out of the
fingerprint that guards a resumed run."""


OFF_BY_DEFAULT: dict[str, set[str]] = {"generation": {"citations"}}
"""Extensions added after runs were made, each off by default: out of the fingerprint while off, so a run
made before they existed resumes (on, they change the prompts and are in it)."""


IDLE_MODES: dict[tuple[str, str], set[str]] = {
    ("graph_build", "exact"): {"knn_k", "knn_nprobe"},
    ("ppr", "power"): {"ppr_eps"},
}
"""Settings of ``retrieval.scale`` read only in another mode (the k-NN build's, forward push's): out of the
fingerprint while their mode is off, so changing one never re-answers a run that does not use it."""


def idle_modes(config: RunConfig) -> set[str]:
    """The retrieval settings :data:`IDLE_MODES` leaves out for this config."""
    scale = config.retrieval.scale
    return {
        name for (key, value), names in IDLE_MODES.items() if getattr(scale, key) == value for name in names
    }


def switched_off(generation: Any) -> set[str]:
    """The generation settings :data:`OFF_BY_DEFAULT` leaves out for this config (those that are off)."""
    return {name for name in OFF_BY_DEFAULT["generation"] if not getattr(generation, name)}


def _settings(settings: Any, leave_out: set[str]) -> dict[str, Any]:
    return _without(dataclasses.asdict(settings), leave_out)


def _without(fields: dict[str, Any], leave_out: set[str]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k not in leave_out}


def adapter_digest(config: RunConfig) -> str:
    """The digest of the adapter weights file peft loads (:func:`~graphctx.model.loading.adapter_weights`:
    a folder holding both formats, or only a pickle, is refused)."""
    return file_digest(adapter_weights(config.adapter_dir))


MARKER = ".graphctx-evaluation"
"""The file every evaluation writes into its output folder: ``--overwrite`` moves files aside only in a
folder holding it (:func:`check_overwrite`)."""


def mark_folder(output_dir: Path) -> None:
    """Write :data:`MARKER` into ``output_dir`` (once)."""
    marker = output_dir / MARKER
    if not marker.is_file():
        output_dir.mkdir(parents=True, exist_ok=True)
        marker.write_text("written by evaluate.py: --overwrite may move this folder's files into stale/\n")


def check_overwrite(output_dir: Path, output_key: str) -> None:
    """Refuse ``--overwrite`` on a folder an evaluation did not make: one that exists and holds files, but
    neither :data:`MARKER` nor (an older graphctx's run) a ``predictions/*.meta.json``."""
    if not output_dir.is_dir() or (output_dir / MARKER).is_file():
        return
    if any((output_dir / "predictions").glob("*.meta.json")):
        return
    if any(p.name != LOCK_FILE for p in output_dir.iterdir()):
        raise ConfigError(
            f"{output_key}: --overwrite moves files aside only in a folder evaluate.py made (it holds "
            f"{MARKER}); {output_dir} is not one: choose another folder"
        )


def _as_json(parts: dict[str, Any]) -> Any:
    """``parts`` as a meta file stores them (tuples as lists), to compare with a stored copy."""
    return json.loads(json.dumps(parts, default=str))


class ResumeGuard:
    """The fingerprints of one evaluation's answers and scores, and the check of the files on disk."""

    def __init__(self, config: RunConfig, run_files: RunFiles, stale: StaleArea) -> None:
        self.config = config
        self.run_files = run_files
        self.stale = stale
        self._fingerprints: dict[str, str] = {}
        self._metric_parts: dict[str, dict[str, Any]] | None = None

    def prediction_fingerprint(self, variant: Variant) -> dict[str, Any]:
        """Everything a variant's answers depend on; speed-only and training-only knobs are left out, so
        a run can resume on another device or with another batch size."""
        config = self.config
        parts: dict[str, Any] = {
            "answer_format": ANSWER_FORMAT,
            "variant": dataclasses.asdict(variant),
            "stop_strings": list(variant.stop_strings),
            "model": _settings(config.model.spec, SPEED_ONLY["model"]),
            "template": dataclasses.asdict(config.template),
            "dataset": dataclasses.asdict(config.data.dataset),
            "source": self.source_digests(),
            "filter_models": [spec.source for spec in config.filter_models],
            "split": config.evaluation.split,
            # base_weights only binds the base rows: it enters as the variant's ``weights``
            "generation": _settings(
                config.generation,
                SPEED_ONLY["generation"] | {"base_weights"} | switched_off(config.generation),
            ),
            "weights": decoded_weights(variant.model, config.generation),
        }
        if variant.model == "adapter":
            parts["adapter"] = adapter_digest(config)
        if variant.name == "GenQA":  # a retrained GenQA makes other answers
            parts["genqa"] = [file_digest(p) for p in sorted(config.genqa_dir.glob("model*.safetensors"))]
        if variant.retrieval != "none":
            plugin = config.retriever_entries[variant.retrieval].fingerprint()
            if plugin:  # a plug-in retriever: its code and arguments
                parts["retriever"] = plugin
            # flat (retrieval.scale's fields by their names): as answers were keyed before that section
            leave_out = SPEED_ONLY["retrieval"] | idle_modes(config)
            parts["retrieval"] = _without(config.retrieval.flat(), leave_out)
            parts["retrieval"]["numerics"] = retrieval_numerics(config.retrieval)  # auto resolved
            parts["knowledge"] = config.knowledge.identity(SPEED_ONLY["knowledge"])
            source = knowledge_source(config.knowledge).fingerprint()
            if source:  # a plug-in knowledge source: its code and arguments
                parts["knowledge_source"] = source
            also = also_fingerprints(config.knowledge)
            if also:  # plug-in sources in knowledge.also: their code and arguments
                parts["also_sources"] = also
            extractors = plugin_fingerprints(config.knowledge)
            if extractors:  # plug-in triplet extractors: their code and arguments
                parts["extractor_plugins"] = extractors
        attribution = attribution_parts(config)
        if attribution:  # the lines' attributions (evaluation.attribution); left out while it is empty
            parts["attribution"] = attribution
        return parts

    def source_digests(self) -> Any:
        """The SHA-256s of the dataset's source files (:func:`~graphctx.data.sources.source_digests`, as
        the dump manifest records them), computed once: a dump changed in place (a gold answer rewritten)
        changes every variant's fingerprint, so its answers are made and scored again."""
        if "source" not in self._fingerprints:
            self._fingerprints["source"] = source_digests(self.config.data.dataset.source)
        return self._fingerprints["source"]

    def fingerprint(self, variant: Variant) -> str:
        """The hash of :meth:`prediction_fingerprint` (computed once)."""
        if variant.name not in self._fingerprints:
            self._fingerprints[variant.name] = fingerprint(self.prediction_fingerprint(variant))
        return self._fingerprints[variant.name]

    def scorer_parts(self, metric: str) -> dict[str, Any]:
        """What computes ``metric``'s scores, answers aside: its settings, models and libraries
        (:func:`~graphctx.evaluation.matrix.metric_fingerprints.metric_parts`)."""
        if self._metric_parts is None:
            config = self.config
            self._metric_parts = metric_parts(config.metric_entries, config.evaluation.metrics)
        return self._metric_parts[metric]

    def gold_folder(self, metric: str) -> Path:
        """Where ``metric``'s gold values live (:mod:`graphctx.metrics.gold`): in the cache, under the
        fingerprint of its scorer, so any run with the same scorer reads them."""
        key = fingerprint(self.scorer_parts(metric))
        return cache_root(self.config.cache_dir) / "gold" / f"{metric}-{key}"

    def metric_fingerprint_parts(self, variant: Variant, metric: str) -> dict[str, Any]:
        """Everything ``metric``'s scores of ``variant`` depend on: :meth:`scorer_parts` and the variant's
        answers."""
        return {"metric": metric, "predictions": self.fingerprint(variant)} | self.scorer_parts(metric)

    def metric_fingerprint(self, variant: Variant, metric: str) -> str:
        """The hash of :meth:`metric_fingerprint_parts` (computed once)."""
        key = f"{variant.name}/{metric}"
        if key not in self._fingerprints:
            self._fingerprints[key] = fingerprint(self.metric_fingerprint_parts(variant, metric))
        return self._fingerprints[key]

    def check_settings(self, variant: Variant, overwrite: bool) -> None:
        """Refuse to extend predictions made with other settings (``overwrite``: move them, and every score
        of the variant, aside into ``stale/``); move aside each metric's scores made with other metric
        settings, so that only that metric is scored again. Nothing is deleted.

        A meta file without a single row (a run that failed before its first answer, e.g. loading the
        adapter) binds nothing: it is replaced."""
        mark_folder(self.run_files.output_dir)
        self._check_repeated(variant, overwrite)
        parts = self.prediction_fingerprint(variant)
        meta = {"fingerprint": fingerprint(parts), "settings": parts}
        predictions = self.run_files.predictions_file(variant)
        meta_file = predictions.with_suffix(".meta.json")
        if meta_file.is_file() and RecordFile(predictions).records:
            previous = json.loads(meta_file.read_text())
            if previous["fingerprint"] != meta["fingerprint"]:
                differ = ", ".join(changed(previous.get("settings"), _as_json(parts))) or "fingerprint"
                if not overwrite:
                    raise ConfigError(
                        f"{meta_file}: the predictions of {variant.name} were made with other settings "
                        f"({differ} changed); use another evaluation.output_dir or pass --overwrite (the "
                        "old answers are then moved into stale/)"
                    )
                for path in self.run_files.variant_files(variant):
                    self.stale.move_file(path, f"--overwrite: answers made with other settings ({differ})")
        legacy = self.run_files.scores_file(variant)
        if legacy.is_file() and not legacy.with_suffix("").is_dir():
            self.stale.move_file(legacy, "scores without per-metric fingerprints (an older graphctx)")
        write_json_atomic(meta_file, meta)
        for metric in self.run_files.metrics:
            self._check_metric(variant, metric)

    def _check_repeated(self, variant: Variant, overwrite: bool) -> None:
        """A file of ``variant`` with an id on two rows (two runs that wrote into one folder before the
        folder lock, or a hand edit) is refused naming the way out; ``overwrite`` moves every file of the
        variant into ``stale/``, so it is answered and scored again."""
        files = [path for path in self.run_files.variant_files(variant) if path.suffix == ".jsonl"]
        for path in files:
            counts = Counter(int(row["id"]) for row in read_records(path))
            repeated = sorted(i for i, n in counts.items() if n > 1)
            if not repeated:
                continue
            if not overwrite:
                raise ConfigError(
                    f"{path}: id {repeated[0]} is on {counts[repeated[0]]} rows ({len(repeated)} id(s) "
                    "repeat: two runs wrote into this folder?); rerun with --overwrite to move "
                    f"{variant.name}'s files into stale/ and answer it again"
                )
            for file in self.run_files.variant_files(variant):
                self.stale.move_file(file, f"--overwrite: {path.name} repeats ids (two runs in one folder?)")
            return

    def _check_metric(self, variant: Variant, metric: str) -> None:
        """Move aside ``metric``'s scores of ``variant`` made with other settings; record this run's."""
        path = self.run_files.metric_file(variant, metric)
        parts = self.metric_fingerprint_parts(variant, metric)
        meta = {"fingerprint": self.metric_fingerprint(variant, metric), "settings": parts}
        meta_file = path.with_suffix(".meta.json")
        previous = json.loads(meta_file.read_text()) if meta_file.is_file() else None
        if previous is not None and previous["fingerprint"] == meta["fingerprint"]:
            return
        if path.is_file() and RecordFile(path).records:
            differ = changed((previous or {}).get("settings"), _as_json(parts))
            reason = f"{metric} scores made with other settings ({', '.join(differ) or 'no record'})"
            self.stale.move_file(path, reason)
            self.stale.move_file(meta_file, reason)
        write_json_atomic(meta_file, meta)

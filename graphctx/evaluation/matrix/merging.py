"""Rank 0's bookkeeping of an evaluation's files: the processes' shards merged in, the files tidied.

Merging refuses prediction shards made with other settings (``--overwrite``: moves them aside) and moves
aside score shards of another metric fingerprint (:mod:`graphctx.evaluation.matrix.shards`); tidying, after
the
final merge, moves aside rows whose id is not in the split (and scores without an answer), puts every file's
rows in decoding order and writes each variant's joined scores file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from graphctx.cache import atomic_path
from graphctx.errors import ConfigError
from graphctx.evaluation.jsonl import RecordFile, dump_line, read_records
from graphctx.evaluation.matrix.resume_guard import ResumeGuard
from graphctx.evaluation.matrix.run_files import RunFiles
from graphctx.evaluation.matrix.shards import foreign_shards, merge_shards, write_in_order
from graphctx.evaluation.matrix.stale import StaleArea
from graphctx.prompts import Variant


def merge(
    variants: Sequence[Variant], guard: ResumeGuard, log: Callable[[str], None], overwrite: bool = False
) -> None:
    """Refuse prediction shards made with other settings (``overwrite``: move them aside), move score shards
    of another metric fingerprint aside, and move the others into the variant's files."""
    run_files, stale = guard.run_files, guard.stale
    for variant in variants:
        predictions = run_files.predictions_file(variant)
        stamp = guard.fingerprint(variant)
        for path, found in foreign_shards(predictions, variant.name, stamp):
            if not overwrite:
                raise ConfigError(
                    f"{path}: a shard of {variant.name} made with other settings (fingerprint {found}, "
                    f"this run {stamp}); use another evaluation.output_dir or pass --overwrite"
                )
            stale.move_file(path, "--overwrite: a shard of answers made with other settings")
        for main, metric in run_files.metric_files(variant):
            for path, _ in foreign_shards(main, metric, guard.metric_fingerprint(variant, metric)):
                stale.move_file(path, f"a shard of {metric} scores made with other settings")
        for main, name in ((predictions, variant.name), *run_files.metric_files(variant)):
            added = merge_shards(main, name)
            if added:
                log(f"{variant.name}: {added} rows merged from the shards into {main}")


def tidy(
    variant: Variant, run_files: RunFiles, stale: StaleArea, order: list[int], split_ids: set[int], why: str
) -> None:
    """Move aside ``variant``'s rows whose id is not in ``split_ids`` (``why``: the split named) and scores
    without an answer, put every file's rows in ``order`` (ids; rows outside it after them, in id order:
    kept, never dropped), and write the variant's joined scores file."""
    predictions = run_files.predictions_file(variant)
    stale.move_rows(predictions, RecordFile(predictions).done - split_ids, why)
    answered = RecordFile(predictions).done
    write_in_order(predictions, order)
    metric_rows = []
    for main, metric in run_files.metric_files(variant):
        orphans = RecordFile(main).done - answered
        stale.move_rows(main, orphans, f"{metric} scores of rows without an answer")
        write_in_order(main, order)
        metric_rows.append(RecordFile(main).records)
    joined = [
        {k: v for records in metric_rows for k, v in records.get(i, {}).items()} | {"id": i}
        for i in (r["id"] for r in read_records(predictions))
        if any(i in records for records in metric_rows)
    ]
    data = "".join(dump_line(r) for r in joined)
    with atomic_path(run_files.scores_file(variant)) as tmp:
        tmp.write_text(data)

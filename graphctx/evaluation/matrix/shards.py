"""The evaluation's work split over processes, and the per-process shard files it is written to.

The unit of work is one batch of one variant's fixed decoding order (:func:`graphctx.generation.
length_sorted_batches` over the whole split), so a row is always decoded, and scored, together with the
same rows, whichever process takes the batch and however many there are: the answers and scores do not
depend on the world size. Pending units are dealt to the processes longest-processing-time first: each,
costliest first, goes to the process with the least work so far, the cost of a unit being its padded prompt
tokens plus the tokens it may generate, ``rows · (longest prompt + max_new_tokens)`` (a batch with only
scoring left: the sum of its prompt lengths).

With more than one process, rank ``r`` appends to ``<folder>/shards/<name>.<fingerprint>.rank<r>.jsonl``
beside each file it writes: ``predictions/shards/<variant>...`` with the fingerprint of the variant's answer
settings (:meth:`MatrixEvaluation.prediction_fingerprint`), ``scores/<variant>/shards/<metric>...`` with
that of the metric's (:meth:`MatrixEvaluation.metric_fingerprint`). Rank 0 moves the shards into the files
at the start of a run (what a killed or requeued run left) and at its end; a shard with another fingerprint
is never merged (moved aside, :mod:`graphctx.evaluation.matrix.stale`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from graphctx.cache import atomic_path
from graphctx.evaluation.jsonl import RecordFile, dump_line, read_records


@dataclass(frozen=True)
class Unit:
    """One batch of one variant: ``rows`` are positions in the evaluated split."""

    variant: str
    number: int
    """Position of the batch in the variant's decoding order (longest prompts first)."""
    rows: tuple[int, ...]
    cost: int


def balance(units: Sequence[Unit], world_size: int) -> list[list[Unit]]:
    """``units`` dealt over ``world_size`` processes, longest-processing-time first; each process's units
    in the order given. Deterministic: ties go to the lower rank; every unit goes to exactly one process."""
    loads = [0] * world_size
    shares: list[list[int]] = [[] for _ in range(world_size)]
    order = sorted(range(len(units)), key=lambda i: (-units[i].cost, i))
    for i in order:
        rank = min(range(world_size), key=lambda r: (loads[r], r))
        loads[rank] += units[i].cost
        shares[rank].append(i)
    return [[units[i] for i in sorted(share)] for share in shares]


def shard_path(main: Path, variant: str, fingerprint: str, rank: int) -> Path:
    """Rank ``rank``'s shard of ``main`` (a variant's predictions or scores file)."""
    return main.parent / "shards" / f"{variant}.{fingerprint}.rank{rank}.jsonl"


def shards_of(main: Path, variant: str) -> list[Path]:
    """Every shard of ``main`` on disk, whatever its fingerprint or rank."""
    folder = main.parent / "shards"
    return sorted(folder.glob(f"{variant}.*.rank*.jsonl")) if folder.is_dir() else []


def foreign_shards(main: Path, name: str, fingerprint: str) -> list[tuple[Path, str]]:
    """Every shard of ``main`` made with another fingerprint than ``fingerprint``, with the one it has."""
    found = [(path, path.name[len(name) + 1 :].split(".")[0]) for path in shards_of(main, name)]
    return [(path, stamp) for path, stamp in found if stamp != fingerprint]


def merge_shards(main: Path, variant: str) -> int:
    """Append the rows of every shard of ``main`` that ``main`` lacks, then delete the shards; returns the
    rows added. Safe to interrupt: a row already in ``main`` is never appended twice."""
    records = RecordFile(main)
    before = len(records.records)
    for path in shards_of(main, variant):
        records.append(RecordFile(path).records.values())
        path.unlink()
    return len(records.records) - before


def write_in_order(main: Path, ids: Iterable[int]) -> None:
    """Rewrite ``main`` with its rows in the order of ``ids`` (those it has), then its other rows in id
    order (kept: a smaller ``limit`` never drops a row), atomically; unchanged when already in that order."""
    if not main.is_file():
        return
    by_id = {int(record["id"]): record for record in read_records(main)}
    first = [i for i in dict.fromkeys(ids) if i in by_id]
    rest = sorted(set(by_id) - set(first))
    data = "".join(dump_line(by_id[i]) for i in first + rest)
    if main.read_text() == data:
        return
    with atomic_path(main) as tmp:
        tmp.write_text(data)

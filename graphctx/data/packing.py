"""The batches of one training pass: length-grouped, or examples packed into rows without attention
across them.

:data:`EpochBatches` is a list of batches; a batch is a list of rows; a row is a list of example indices.
Unpacked, each row holds one example and a batch groups examples of similar length (little padding).
Packed, examples are placed into rows of at most ``capacity`` tokens by best-fit decreasing, and
``position_ids`` restart at 0 for each example, which is how attention kernels (SDPA/flex masks in
transformers, varlen attention) find the boundaries.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence

import torch

from graphctx.data.instruct import IGNORE_INDEX

EpochBatches = list[list[list[int]]]


def pack_rows(lengths: Sequence[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing bin packing of example lengths into rows of at most ``capacity`` tokens.

    Each example goes, longest first, into the row whose free space is the smallest that still fits it
    (a sorted list of free spaces, so O(n log n)). Rows come out in creation order.
    """
    if any(length > capacity for length in lengths):
        raise ValueError(f"an example of {max(lengths)} tokens exceeds the packing capacity {capacity}")
    rows: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (free tokens, row index), sorted
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        need = lengths[index]
        slot = bisect.bisect_left(free, (need, -1))
        if slot < len(free):
            space, row = free.pop(slot)
        else:
            space, row = capacity, len(rows)
            rows.append([])
        rows[row].append(index)
        bisect.insort(free, (space - need, row))
    return rows


def epoch_batches(
    lengths: Sequence[int], batch_size: int, pack: bool, capacity: int, seed: int
) -> EpochBatches:
    """Batches for one pass over the examples; the order of batches is shuffled with ``seed``.

    Unpacked: examples sorted by length and cut into batches of ``batch_size``. Packed: rows from
    :func:`pack_rows`, ``batch_size`` rows per batch.
    """
    if pack:
        rows = pack_rows(lengths, capacity)
    else:
        rows = [[index] for index in sorted(range(len(lengths)), key=lambda i: lengths[i])]
    batches = [rows[start : start + batch_size] for start in range(0, len(rows), batch_size)]
    random.Random(seed).shuffle(batches)
    return batches


def collate_rows(
    rows: list[list[dict[str, list[int]]]], pad_id: int, packed: bool
) -> dict[str, torch.Tensor]:
    """Tensors for a batch of rows of encoded examples, right-padded to the longest row.

    Every batch has ``input_ids``, ``labels`` (-100 on prompts and pads) and ``position_ids``. Unpacked
    batches also have ``attention_mask``. Packed batches have none: their pads form one more "example"
    whose positions restart at 0, so no real token attends to a pad or to another example.
    """
    lengths = [sum(len(example["input_ids"]) for example in row) for row in rows]
    width = max(lengths)
    batch = {
        "input_ids": torch.full((len(rows), width), pad_id, dtype=torch.long),
        "labels": torch.full((len(rows), width), IGNORE_INDEX, dtype=torch.long),
        "position_ids": torch.empty((len(rows), width), dtype=torch.long),
    }
    for i, (row, length) in enumerate(zip(rows, lengths, strict=True)):
        batch["input_ids"][i, :length] = torch.tensor([t for example in row for t in example["input_ids"]])
        batch["labels"][i, :length] = torch.tensor([t for example in row for t in example["labels"]])
        if packed:
            pieces = [len(example["input_ids"]) for example in row] + [width - length]
            batch["position_ids"][i] = torch.cat([torch.arange(n) for n in pieces])
        else:
            batch["position_ids"][i] = torch.arange(width)
    if not packed:
        batch["attention_mask"] = (torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]).long()
    return batch

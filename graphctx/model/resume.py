"""Resume, from any checkpoint of a run, to a larger ``trainer.max_steps``."""

from __future__ import annotations

from typing import Any


def reopen_stopped_epoch(checkpoint: dict[str, Any]) -> bool:
    """Mark the epoch of a checkpoint that ``max_steps`` stopped mid-epoch as unfinished again; returns
    whether the checkpoint changed.

    A run that ``max_steps`` stops mid-epoch still closes its epoch (the epoch-end hooks run and the epoch
    counters reach ``completed == ready``), and the checkpoint saved at its end says so: resumed with a
    larger ``max_steps`` and ``max_epochs`` already reached, Lightning's fit loop ends at once and trains
    nothing. When the epoch's batches were not all drawn (``is_last_batch`` false), the counters are put
    back as a checkpoint saved mid-epoch holds them (started, not processed or completed), so the resumed
    run goes on from the saved data position to the new ``max_steps``.
    """
    fit = checkpoint.get("loops", {}).get("fit_loop", {})
    epochs = fit.get("epoch_progress")
    batches = fit.get("epoch_loop.batch_progress", {})
    if not epochs or batches.get("is_last_batch", True) or batches.get("current", {}).get("ready", 0) == 0:
        return False
    current = epochs["current"]
    if current["completed"] < 1 or current["completed"] != current["ready"]:
        return False
    for counts in (epochs["current"], epochs["total"]):
        counts["processed"] -= 1
        counts["completed"] -= 1
    checkpoint["epoch"] = current["completed"]
    return True

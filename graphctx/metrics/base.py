"""A torchmetrics base class for metrics that score each row and report the macro mean.

Per-row scores live in list states reduced with ``"cat"``, so after a DDP sync every rank holds all rows:
the macro mean, bootstrap intervals and paired tests are computed from the same numbers. Rows a metric
cannot score (e.g. a premise longer than the judge accepts) are stored as NaN and left out of the mean;
how many there were is kept in a summed count state and reported beside the mean.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities.data import dim_zero_cat


class RowScoreMetric(Metric):
    """Base for metrics with one score per row; subclasses name their states and fill them in ``update``.

    ``score_states`` are per-row float64 list states; ``count_states`` are int64 totals. ``label`` (e.g.
    ``"causal-lm:smollm2-gguf"``) is appended in brackets to every output key so stand-ins are never
    mistaken for the paper's metric.
    """

    full_state_update = False
    is_differentiable = False
    higher_is_better = True
    score_states: tuple[str, ...] = ()
    count_states: tuple[str, ...] = ()

    def __init__(self, label: str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self.label = label
        for name in self.score_states:
            self.add_state(name, default=[], dist_reduce_fx="cat")
        # Rows are float64 (exact rouge_score numbers); a rank without rows then syncs an empty float64
        # placeholder, as the all-gather needs the same dtype on every rank.
        self.set_dtype(torch.float64)
        for name in self.count_states:
            self.add_state(name, default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def output_key(self, state: str) -> str:
        """The key under which ``state`` is reported: ``state`` or ``state[label]``."""
        return f"{state}[{self.label}]" if self.label else state

    def _append_rows(self, **scores: Sequence[float]) -> None:
        """Append one batch of per-row scores to each named list state."""
        for name, values in scores.items():
            getattr(self, name).append(torch.as_tensor(values, dtype=self.dtype, device=self.device))

    def _add_counts(self, **counts: int) -> None:
        """Add batch totals to the named count states."""
        for name, value in counts.items():
            setattr(self, name, getattr(self, name) + value)

    def _rows(self, name: str) -> Tensor:
        """All rows of one list state (one tensor whether or not the state has been synced)."""
        state = getattr(self, name)
        if isinstance(state, list) and not state:
            return torch.empty(0, dtype=self.dtype, device=self.device)
        return dim_zero_cat(state)

    def compute(self) -> dict[str, Tensor]:
        """Macro mean of every score over its scored (non-NaN) rows, and every count."""
        means = {self.output_key(name): torch.nanmean(self._rows(name)) for name in self.score_states}
        counts = {self.output_key(name): getattr(self, name) for name in self.count_states}
        return means | counts

    def per_row(self) -> dict[str, Tensor]:
        """Every row's scores (synced across processes when running distributed), NaN for unscored rows.

        Under DDP the rows come rank by rank, each rank's rows in its update order.
        """
        with self.sync_context(should_sync=self._to_sync, should_unsync=self._should_unsync):
            return {self.output_key(name): self._rows(name).clone() for name in self.score_states}

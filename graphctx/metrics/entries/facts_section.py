"""The part the two metrics of the shared ``evaluation.metrics.facts`` section have in common: a scorer
chosen by a method setting, labelled by it, and fingerprinted by that method's fields only."""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

from graphctx.metrics.choice import ScorerChoice
from graphctx.metrics.registry import MetricEntry

SCORING = 2
"""Version of the offline scoring in :mod:`graphctx.metrics.facts` (the triplet fact score, spaCy's entity
sets), in those methods' fingerprints: bump it when a change there changes scores, so no cached score or
gold value of the old code is reused (2: auxiliary verbs lemmatised, the triplet score's 0 rows counted
after FactSumm's filter; spaCy entities of the prose only, value types dropped, SQuAD-normalised)."""


class FactsSectionEntry(MetricEntry):
    """A metric of the ``facts`` section: subclasses choose their scorer (:meth:`choose`) and name the
    section's fields each method reads (:attr:`method_fields`)."""

    sections = ("facts",)
    paper_metric = True
    method_fields: ClassVar[dict[str, tuple[str, ...]]] = {}
    """The fields of the ``facts`` section each method reads."""

    def choose(self) -> ScorerChoice:
        """The scorer the settings resolve to (:mod:`graphctx.metrics.choice`)."""
        raise NotImplementedError

    @cached_property
    def choice(self) -> ScorerChoice:
        return self.choose()

    @property
    def method(self) -> str:
        return self.choice.method

    @property
    def label(self) -> str:
        return self.choice.label

    def settings_parts(self) -> dict[str, Any]:
        fields = self.method_fields[self.method]
        return {"facts": {name: getattr(self.settings.facts, name) for name in fields}}

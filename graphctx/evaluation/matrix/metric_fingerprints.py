"""What computed each metric's scores: the parts of its fingerprint, so a rerun re-scores exactly the
metrics whose parts changed, and no other.

A metric's parts (:class:`~graphctx.metrics.registry.MetricEntry`'s ``settings_parts`` and
``fingerprint``) are the ``evaluation.metrics`` fields it reads (less the speed-only ``batch_size`` and
``device``; of the shared ``facts`` section only the fields of the chosen fact or entity method), what they
resolve to without loading weights, the identity of every model it runs
(:func:`~graphctx.model_use.model_identity`) and the versions of the libraries in its path. A section of
:class:`MetricSettings` that no metric claims counts for every metric, so a new setting never leaves a
score stale; the plug-in list (``extra``) counts for each plug-in alone. The fingerprint of a variant's
scores adds the fingerprint of its predictions: new answers are new scores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from graphctx.metrics.entry_defaults import settings_part
from graphctx.metrics.registry import MetricEntry
from graphctx.metrics.settings import MetricSettings

PLUGINS = "extra"
"""The ``evaluation.metrics`` field listing plug-ins: each plug-in's fingerprint has its own entry."""


def metric_parts(entries: Sequence[MetricEntry], settings: MetricSettings) -> dict[str, dict[str, Any]]:
    """Each metric of ``entries`` → the parts its scores depend on (predictions aside)."""
    claimed = {section for entry in entries for section in entry.sections} | {PLUGINS}
    shared = {
        f.name: settings_part(getattr(settings, f.name))
        for f in dataclasses.fields(settings)
        if f.name not in claimed
    }
    return {
        entry.name: {"settings": entry.settings_parts() | shared} | entry.fingerprint() for entry in entries
    }


def changed(old: Any, new: Any, prefix: str = "") -> list[str]:
    """The dotted keys at which ``old`` and ``new`` (nested dicts) differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(set(old) | set(new))
        return [d for k in keys for d in changed(old.get(k), new.get(k), f"{prefix}{k}.")]
    return [] if old == new else [prefix.rstrip(".")]

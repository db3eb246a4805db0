"""What a metric *may* declare beyond its contract (:class:`~graphctx.metrics.registry.MetricEntry`: name,
columns, scorer, fingerprint): every member here has a default that fits a CPU metric of plain Python
beyond the paper, and the built-ins override what differs (their table and plan places, models, memory,
stand-in labels)."""

from __future__ import annotations

import dataclasses
import importlib.metadata
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from graphctx.metrics.settings import MetricSettings
    from graphctx.model_use import ModelUse

SPEED_ONLY = {"batch_size", "device"}
"""Metric settings that change how fast scores are made, not which."""


class ByteCounter(Protocol):
    """What a metric asks of the memory plan (:class:`graphctx.stack.memory.MemoryEstimate`)."""

    def weight_bytes(self, source: str, per_param: float) -> float | None:
        """Bytes of ``source``'s weights at ``per_param`` bytes each (None: shape unknown here)."""

    def decoding_bytes(self, source: str, new_tokens: int, batch: int) -> float | None:
        """bf16 weights, prefill and KV cache of decoding a batch of prompts with ``source``."""

    def extractor_bytes(self) -> float | None:
        """The knowledge stage's triplet extractors (REBEL in float32, the LLM decoding)."""


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def library_versions(packages: Sequence[str]) -> dict[str, str | None]:
    """Each package's installed version (None when it is not installed)."""
    return {package: _version(package) for package in packages}


def settings_part(settings: Any) -> dict[str, Any]:
    """A settings dataclass as a dict, less the speed-only fields."""
    return {k: v for k, v in dataclasses.asdict(settings).items() if k not in SPEED_ONLY}


class MetricDefaults:
    """The optional members of a metric, with their defaults (see the module docstring)."""

    name: str
    settings: MetricSettings

    column_rank: ClassVar[int] = 100
    """Where the columns go in the table (built-ins 10-50; lower first)."""
    plan_rank: ClassVar[int] = 100
    """Where the metric goes in ``graphctx plan``'s metric section (lower first)."""
    title: ClassVar[str] = ""
    """Its name in results.md's model lines."""
    sections: ClassVar[tuple[str, ...]] = ()
    """The ``evaluation.metrics`` sections it reads (in its fingerprint)."""
    libraries: ClassVar[tuple[str, ...]] = ()
    """Packages in its path, whose versions are in its fingerprint."""
    premise: ClassVar[bool] = False
    """Scores an answer against the context it was generated from: rows without one get NaN."""
    passages: ClassVar[bool] = False
    """Scores an answer's ``[n]`` citations against the numbered passages its prompt showed (a prediction
    line's ``passages``, ``generation.citations``): its scorer also takes each row's passages, a fifth
    argument (None: the row's prompt numbered none)."""
    paper_metric: ClassVar[bool] = False
    """One of the paper's metrics (False: an extension beyond the paper)."""
    paper_columns: ClassVar[dict[str, tuple[str, str]]] = {}
    """Score key → (its column in the paper's Table 3, its header in results.md's "Beside the paper")."""
    judge_keys: ClassVar[tuple[str, str] | None] = None
    """A judge of (premise, claim) pairs declares its (accept key, score key), both before any label (e.g.
    ``("autoais", "autoais_soft")``): the run then scores control pairs with it, its scorer given a gold
    sentence as the answer and a gold answer as the premise, and results.md says whether it can tell
    supported from unsupported (:mod:`graphctx.metrics.judge_check`)."""

    @property
    def label(self) -> str:
        """'' when the paper's scorer computes it, else the label every key it writes carries."""
        return ""

    def settings_parts(self) -> dict[str, Any]:
        """The settings its scores depend on: its own ``evaluation.metrics`` sections, speed-only fields
        left out."""
        return {section: settings_part(getattr(self.settings, section)) for section in self.sections}

    def models(self) -> list[ModelUse]:
        """The models it loads (for ``plan``, the missing-model check and provenance)."""
        return []

    def pipelines(self) -> list[tuple[str, str]]:
        """``(setting key, spaCy pipeline)`` it loads."""
        return []

    def stand_in(self) -> dict[str, Any] | None:
        """Its ``plan`` stand-in entry when it does not run the paper's scorer."""
        return None

    def needs_extractor(self) -> bool:
        """Whether scoring needs the knowledge stage's triplet extractor."""
        return False

    def plan_json(self) -> dict[str, Any]:
        """Its part of ``graphctx plan --json``'s ``metrics`` section."""
        return {"paper": self.paper_metric, "label": self.label}

    def plan_lines(self) -> list[str]:
        """Its lines of ``graphctx plan``'s text (without the stand-in mark)."""
        return []

    def stand_in_key(self) -> str:
        """The setting key its plan line is marked STAND-IN by."""
        return f"evaluation.metrics.{self.name}"

    def description(self) -> str:
        """Its results.md model line (the stand-in tag added by the caller from :attr:`label`)."""
        return ""

    def describe(self, key: str, value: float) -> str:
        """One of its scores read for people (``graphctx answer``)."""
        return f"{value:.4f}"

    def memory_stage(self) -> str | None:
        """The evaluation memory stage it runs in (None: the CPU, no device memory)."""
        return self.name

    def memory_bytes(self, counter: ByteCounter) -> float | None:
        """Device bytes of its models in its stage (None: unknown here)."""
        return 0.0

    def callback_bytes(self, counter: ByteCounter, on_cuda: bool) -> list[float | None]:
        """What it adds to training's rank 0 when the validation callback computes it."""
        return []

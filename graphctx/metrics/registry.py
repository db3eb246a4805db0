"""The metric registry: every metric graphctx scores with, built in or plugged in from a user's package, is a
:class:`MetricEntry` subclass that declares everything the rest of graphctx asks of it.

Scoring, score fingerprints, the results table, ``graphctx plan`` (JSON and text), the memory plan and
results.md's model lines iterate the entries of a config (:func:`metric_entries`); no code outside an
entry's own module branches on a metric's name. A config adds metrics of its own LightningCLI style::

    evaluation:
      metrics:
        extra:
          - class_path: mypkg.metrics.AnswerLength
            init_args: {max_words: 200}

The class is imported, checked to be a :class:`MetricEntry` with a new ``name``, and built as
``cls(context, **init_args)``; it then gets the same per-metric score files, resume, fingerprints, shards,
bootstrap intervals, paired tests and plan lines as a built-in. A plug-in is an extension: never the
paper's metric, listed as such.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from graphctx.decoding import Backend
from graphctx.errors import ConfigError
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.metrics.entry_defaults import MetricDefaults
from graphctx.metrics.settings import MetricSettings
from graphctx.model.settings import ModelSpec
from graphctx.plugins import import_class, load_plugins, plugin_name, running, source_fingerprint

if TYPE_CHECKING:
    from graphctx.knowledge.triplets import TripletExtractor
    from graphctx.model_use import ModelUse

RowScores = dict[str, list[float]]
"""Score key → one value per row (NaN: not scored)."""

RowScorer = Callable[[Sequence[str], Sequence[str], Sequence[str], Sequence[str | None]], RowScores]
"""``(questions, generated, gold, premises) → RowScores``: scores a batch with fresh metric states."""


@dataclass(frozen=True)
class MetricContext:
    """What a metric may read of a config: its settings, the knowledge stage (whose extractors the triplet
    fact score runs), the generation model (the LLM extractor may be that model) and how LLMs decode
    (``generation.backend``: UniversalNER's)."""

    settings: MetricSettings
    knowledge: KnowledgeSettings
    generation: ModelSpec
    backend: Backend = "generate"


AUTO_DEVICE = "auto (CUDA when available, else CPU)"


def device_of(device: str | None) -> str:
    """A configured device, or what ``auto`` (unset) means."""
    return device or AUTO_DEVICE


def stand_in_tag(label: str) -> str:
    """results.md's tag of a scorer: the paper's, or a stand-in with its label."""
    return f" — stand-in, scores labelled [{label}]" if label else " — the paper's"


def per_row_scores(metric: Any) -> RowScores:
    """A :class:`~graphctx.metrics.base.RowScoreMetric`'s per-row scores as lists."""
    return {key: values.tolist() for key, values in metric.per_row().items()}


class MetricEntry(MetricDefaults):
    """One metric's contract: its :attr:`name`, its :attr:`columns`, a :meth:`scorer` of rows and the
    :meth:`fingerprint` of what its scores depend on. Everything else graphctx may ask of a metric is
    optional, with defaults (:class:`~graphctx.metrics.entry_defaults.MetricDefaults`); a plug-in usually
    needs only ``name``, ``columns`` and ``score_rows`` (see :class:`RowMetric`).
    """

    name: ClassVar[str]
    """The metric's name in configs (``evaluation.callback_metrics``) and its score file's stem."""
    columns: ClassVar[dict[str, str]]
    """Score key (before any ``[label]``) → results-table column, in column order."""

    def __init__(self, context: MetricContext) -> None:
        self.context = context
        self.settings = context.settings

    def fingerprint(self) -> dict[str, Any]:
        """What its scores depend on beyond its settings (``settings_parts``): resolved models, their
        identity (:func:`graphctx.model_use.model_identity`), library versions, a plug-in's code."""
        raise NotImplementedError(f"metric {self.name!r} gives no fingerprint")

    def scorer(
        self,
        device: str | None,
        cache_dir: str | None,
        extractor: TripletExtractor | None,
        gold_store: Any,
    ) -> RowScorer:
        """A scorer of batches of rows, ``(questions, generated, gold, premises) → score key → one float per
        row`` (NaN: not scored), with this metric's models loaded once."""
        raise NotImplementedError(f"metric {self.name!r} does not score")


class OneModelEntry(MetricEntry):
    """A metric that runs one model, :attr:`use`: that model is its :meth:`models`, its stand-in when it is
    not the reference, and the setting its plan line is marked by."""

    @property
    def use(self) -> ModelUse:
        raise NotImplementedError

    def models(self) -> list[ModelUse]:
        return [self.use]

    def stand_in(self) -> dict[str, Any] | None:
        use = self.use
        if use.is_paper:
            return None
        return {"stage": use.stage, "key": use.key, "configured": use.source, "paper": use.paper}

    def stand_in_key(self) -> str:
        return self.use.key


class RowMetric(MetricEntry):
    """The base of a plug-in metric: scores rows with plain Python in :meth:`score_rows`.

    Its fingerprint is its class path, its ``init_args`` and the SHA-256 of its module's source, so an edit
    of the plug-in re-scores. It runs on the CPU (no device memory in the plan)."""

    init_args: dict[str, Any]
    class_path: str

    def score_rows(
        self,
        questions: Sequence[str],
        generated: Sequence[str],
        gold: Sequence[str],
        premises: Sequence[str | None],
    ) -> RowScores:
        """Score key → one float per row."""
        raise NotImplementedError

    def fingerprint(self) -> dict[str, Any]:
        return source_fingerprint(self)

    def plan_json(self) -> dict[str, Any]:
        return {"class_path": self.class_path, "init_args": self.init_args, **super().plan_json()}

    def description(self) -> str:
        return f"{self.class_path} (a plug-in metric, beyond the paper)"

    def memory_stage(self) -> str | None:
        return None

    def scorer(self, device, cache_dir, extractor, gold_store) -> RowScorer:
        def score(questions, generated, gold, premises) -> RowScores:
            what = f"evaluation.metrics.extra {plugin_name(self)}"
            with running(what):
                scores = self.score_rows(questions, generated, gold, premises)
            return checked_scores(what, scores, self.columns, len(generated))

        return score


def checked_scores(what: str, scores: Any, columns: Mapping[str, str], rows: int) -> RowScores:
    """A plug-in's ``score_rows`` result as floats, or one ``ConfigError`` line starting with ``what``: a
    mapping of exactly its declared ``columns``, each ``rows`` numbers, none infinite (NaN: not scored)."""
    if not isinstance(scores, Mapping):
        raise ConfigError(f"{what}: score_rows() returned {type(scores).__name__}, not a mapping of columns")
    unknown, missing = sorted(set(scores) - set(columns)), sorted(set(columns) - set(scores))
    if unknown or missing:
        raise ConfigError(f"{what}: score_rows() wrote {sorted(scores)}; its columns are {sorted(columns)}")
    found: RowScores = {}
    for key, values in scores.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or len(values) != rows:
            count = len(values) if isinstance(values, Sequence) else type(values).__name__
            raise ConfigError(f"{what}: score_rows() gave {count} {key} scores for {rows} rows")
        bad = next((v for v in values if isinstance(v, bool) or not isinstance(v, int | float)), None)
        if bad is not None:
            raise ConfigError(f"{what}: score_rows()'s {key} score {bad!r} is not a number")
        if any(math.isinf(v) for v in values):
            raise ConfigError(f"{what}: score_rows()'s {key} scores hold an infinite value")
        found[key] = [float(v) for v in values]
    return found


class GoldScored:
    """A row scorer whose metric extracts something from the gold answer: fresh states per batch, the gold
    side (:class:`~graphctx.metrics.gold.GoldSide`) shared by every batch, extracted once per gold text and
    kept in ``store`` when given."""

    def __init__(self, build: Callable[[], Any], store: Any = None) -> None:
        self.build = build
        self.store = store
        self.gold: Any = None
        """The shared :class:`~graphctx.metrics.gold.GoldSide`, once the first batch is scored."""

    def __call__(self, questions, generated, gold, premises) -> RowScores:
        from graphctx.metrics.gold import GoldSide

        metric = self.build()
        if self.gold is None:
            self.gold = GoldSide(metric.gold_value, self.store)
        metric.gold = self.gold
        metric.update(generated, gold)
        return per_row_scores(metric)


def premise_rows(score: RowScorer, keys: Sequence[str]) -> RowScorer:
    """``score`` applied to the rows that have a premise; the other rows get NaN under ``keys``."""

    def scored(questions, generated, gold, premises) -> RowScores:
        rows = [i for i, premise in enumerate(premises) if premise]
        out: RowScores = {key: [math.nan] * len(generated) for key in keys}
        if rows:
            values = score(
                [questions[i] for i in rows],
                [generated[i] for i in rows],
                [gold[i] for i in rows],
                [premises[i] for i in rows],
            )
            for key, column in values.items():
                merged = out.setdefault(key, [math.nan] * len(generated))
                for position, value in zip(rows, column, strict=True):
                    merged[position] = value
        return out

    return scored


# ---- the registry ------------------------------------------------------------------------------------------
BUILT_IN = (
    "graphctx.metrics.entries.rouge:Rouge",
    "graphctx.metrics.entries.bertscore:BertScore",
    "graphctx.metrics.entries.fact_score:FactScoreEntry",
    "graphctx.metrics.entries.entity_jaccard:EntityJaccardEntry",
    "graphctx.metrics.entries.autoais:AutoAISEntry",
)
"""The built-in metrics, in scoring order (one stage's models at a time)."""


def built_in_classes() -> list[type[MetricEntry]]:
    """The built-in metric classes, in scoring order."""
    return [import_class(path, "graphctx") for path in BUILT_IN]


EXTENSIONS: dict[str, str] = {
    "minicheck": "graphctx.metrics.entries.minicheck:MiniCheckEntry",
    "alce_citations": "graphctx.metrics.entries.citations:CitationEntry",
}
"""Short names of the metrics graphctx ships beyond the paper (``class_path: minicheck``)."""


def metric_entries(context: MetricContext) -> list[MetricEntry]:
    """Every metric of a config: the built-ins, then ``evaluation.metrics.extra`` in its order."""
    entries: list[MetricEntry] = [cls(context) for cls in built_in_classes()]
    section = "evaluation.metrics.extra"
    taken = [entry.name for entry in entries]
    plugins = load_plugins(context.settings.extra, MetricEntry, section, taken, context, aliases=EXTENSIONS)
    for position, entry in enumerate(plugins):
        if not getattr(entry, "columns", None):
            raise ConfigError(
                f"{section}[{position}]: {entry.class_path} declares no columns (score key → name)"
            )
        missing = [
            f"{m}()" for m in ("scorer", "fingerprint") if getattr(type(entry), m) is getattr(MetricEntry, m)
        ]
        if missing:
            raise ConfigError(
                f"{section}[{position}]: {entry.class_path} gives no {' or '.join(missing)} (a MetricEntry "
                "gives name, columns, scorer() and fingerprint(); a RowMetric name, columns, score_rows())"
            )
    return entries + plugins


def entries_named(entries: Sequence[MetricEntry], names: Sequence[str], where: str) -> list[MetricEntry]:
    """The entries of ``names``, in registry order; an unknown name is a one-line error naming ``where``."""
    known = [entry.name for entry in entries]
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise ConfigError(f"{where}: unknown metric(s) {unknown}; choose from {known}")
    return [entry for entry in entries if entry.name in names]


def column_order(entries: Sequence[MetricEntry | type[MetricEntry]]) -> dict[str, str]:
    """Score key → column name of every entry, in table order."""
    ordered = sorted(entries, key=lambda entry: entry.column_rank)
    return {key: name for entry in ordered for key, name in entry.columns.items()}


def paper_columns(entries: Sequence[MetricEntry | type[MetricEntry]]) -> dict[str, tuple[str, str]]:
    """Score key → (Table 3's column, header) of every metric the paper published, in table order."""
    ordered = sorted(entries, key=lambda entry: entry.column_rank)
    return {key: column for entry in ordered for key, column in entry.paper_columns.items()}


def built_in_columns() -> dict[str, str]:
    """The built-in metrics' columns, in table order."""
    return column_order(built_in_classes())

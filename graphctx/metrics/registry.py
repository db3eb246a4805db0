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

import dataclasses
import importlib
import importlib.metadata
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from graphctx.decoding import Backend
from graphctx.errors import ConfigError
from graphctx.knowledge.settings import KnowledgeSettings
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

SPEED_ONLY = {"batch_size", "device"}
"""Metric settings that change how fast scores are made, not which."""


@dataclass(frozen=True)
class MetricContext:
    """What a metric may read of a config: its settings, the knowledge stage (whose extractors the triplet
    fact score runs), the generation model (the LLM extractor may be that model) and how LLMs decode
    (``generation.backend``: UniversalNER's)."""

    settings: MetricSettings
    knowledge: KnowledgeSettings
    generation: ModelSpec
    backend: Backend = "generate"


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


def settings_part(settings: Any) -> dict[str, Any]:
    """A settings dataclass as a dict, less the speed-only fields."""
    return {k: v for k, v in dataclasses.asdict(settings).items() if k not in SPEED_ONLY}


class MetricEntry:
    """One metric: its name and score keys, what it reads and runs, and how it scores rows.

    Subclasses set the class attributes and override what differs; a plug-in usually needs only
    ``name``, ``columns`` and :meth:`score_rows` (see :class:`RowMetric`).
    """

    name: ClassVar[str]
    """The metric's name in configs (``evaluation.callback_metrics``) and its score file's stem."""
    columns: ClassVar[dict[str, str]] = {}
    """Score key (before any ``[label]``) → results-table column, in column order."""
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

    def __init__(self, context: MetricContext) -> None:
        self.context = context
        self.settings = context.settings

    # ---- what it is -------------------------------------------------------------------------------------
    @property
    def label(self) -> str:
        """'' when the paper's scorer computes it, else the label every key it writes carries."""
        return ""

    def settings_parts(self) -> dict[str, Any]:
        """The settings its scores depend on: its own ``evaluation.metrics`` sections, speed-only fields
        left out."""
        return {section: settings_part(getattr(self.settings, section)) for section in self.sections}

    def fingerprint(self) -> dict[str, Any]:
        """What its scores depend on beyond :meth:`settings_parts`: resolved models, their identity
        (:func:`graphctx.model_use.model_identity`) and the versions of :attr:`libraries`."""
        return {"libraries": library_versions(self.libraries)}

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

    # ---- scoring ----------------------------------------------------------------------------------------
    def scorer(
        self,
        device: str | None,
        cache_dir: str | None,
        extractor: TripletExtractor | None,
        gold_store: Any,
    ) -> RowScorer:
        """A scorer of batches of rows with this metric's models loaded once (module docstring)."""
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
        if not entry.columns:
            raise ConfigError(
                f"{section}[{position}]: {entry.class_path} declares no columns (score key → name)"
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

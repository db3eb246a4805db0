"""The triplet-extractor registry: every extractor τ^init can come from, built in or plugged in from a
user's package, is an :class:`ExtractorEntry` that says what it loads and how it is built.

Built in: ``spacy`` (offline SVO over the dependency parse), ``rebel`` (Babelscape's seq2seq model) and
``llm`` (a prompted causal LM, by default the generation model itself); the paper unites rebel and llm.
A config adds its own LightningCLI style and names it in ``knowledge.extractors`` like a built-in::

    knowledge:
      extractors: [spacy, my_triplets]
      extractors_extra:
        - class_path: mypkg.triplets.MyExtractor
          init_args: {min_words: 3}

The configured extractors' triplets are united (:class:`~graphctx.knowledge.triplets.ExtractorUnion`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from graphctx.errors import ConfigError
from graphctx.knowledge.settings import KnowledgeSettings
from graphctx.knowledge.triplets import ExtractorUnion, Triplet, TripletExtractor
from graphctx.paper import GENERATION, REBEL, Reference
from graphctx.plugins import checked_method, load_plugins, plugin_name, running, source_fingerprint

if TYPE_CHECKING:
    from graphctx.knowledge.kg import Gazetteer
    from graphctx.knowledge.llm import GenerationModel


@dataclass(frozen=True)
class ExtractorModel:
    """A model an extractor loads: its setting key, the configured source and the paper's model there."""

    key: str
    source: str
    reference: Reference


@dataclass(frozen=True)
class Lent:
    """What the knowledge stage lends its extractors: the loaded generation model (None when the caller has
    none) and the KG's labels for linking (read on first call)."""

    generation_model: GenerationModel | None
    gazetteer: Callable[[], Gazetteer]


class WeightCounter(Protocol):
    """What an extractor asks of the memory plan (:class:`graphctx.stack.memory.MemoryEstimate`)."""

    def weight_bytes(self, source: str, per_param: float) -> float | None: ...

    def decoding_bytes(self, source: str, new_tokens: int, batch: int) -> float | None: ...


class ExtractorEntry:
    """One triplet extractor: its name, what it loads, and how it is built."""

    name: ClassVar[str]
    """Its name in ``knowledge.extractors``."""
    reads_labels: ClassVar[bool] = False
    """Links its heads and tails through the KG's gazetteer (so the gazetteer is built)."""

    def __init__(self, settings: KnowledgeSettings) -> None:
        self.settings = settings

    def build(self, lent: Lent) -> TripletExtractor:
        """The extractor, its model loaded."""
        raise NotImplementedError

    def model(self) -> ExtractorModel | None:
        """The configured model it loads (for ``plan``, the missing-model check and the fact score's
        fingerprint); None: none."""
        return None

    @property
    def shares_generation_model(self) -> bool:
        """Whether it runs on the generation model, which the entry point must lend it."""
        return False

    def pipelines(self) -> list[tuple[str, str]]:
        """``(setting key, spaCy pipeline)`` it loads."""
        return []

    def plan_details(self) -> dict[str, Any]:
        """What ``plan --json`` shows beside its model."""
        return {}

    def memory_bytes(self, counter: WeightCounter, generation_source: str) -> float | None:
        """Device bytes while it extracts (None: unknown here); ``generation_source``: the generation
        model's source."""
        return 0.0

    def own_weight_bytes(self, counter: WeightCounter) -> list[float | None]:
        """Weights it loads on ``knowledge.device`` beside a loaded generation model (the validation
        callback's triplet fact score)."""
        return []

    def fingerprint(self) -> dict[str, Any]:
        """What its triplets depend on beyond the ``knowledge`` settings (a plug-in: its code, arguments)."""
        return {}


class SpacyEntry(ExtractorEntry):
    name = "spacy"
    reads_labels = True

    def build(self, lent: Lent) -> TripletExtractor:
        from graphctx.knowledge.spacy_extractor import SpacyExtractor

        gazetteer = lent.gazetteer()
        return SpacyExtractor.load(self.settings.spacy_model, gazetteer.maps, gazetteer.matcher_resolve())

    def pipelines(self) -> list[tuple[str, str]]:
        return [("knowledge.spacy_model", self.settings.spacy_model)]


class RebelEntry(ExtractorEntry):
    name = "rebel"

    def build(self, lent: Lent) -> TripletExtractor:
        from graphctx.knowledge.rebel import RebelExtractor

        return RebelExtractor.from_pretrained(self.settings)

    def model(self) -> ExtractorModel:
        return ExtractorModel("knowledge.rebel_model", self.settings.rebel_model, REBEL)

    def plan_details(self) -> dict[str, Any]:
        return {"device": self.settings.device}

    def memory_bytes(self, counter: WeightCounter, generation_source: str) -> float | None:
        """Its weights in float32."""
        return counter.weight_bytes(self.settings.rebel_model, 4)

    def own_weight_bytes(self, counter: WeightCounter) -> list[float | None]:
        return [counter.weight_bytes(self.settings.rebel_model, 4)]


class LLMEntry(ExtractorEntry):
    name = "llm"

    def build(self, lent: Lent) -> TripletExtractor:
        from graphctx.knowledge.llm import LLMExtractor

        return LLMExtractor.from_settings(self.settings, lent.generation_model)

    def model(self) -> ExtractorModel:
        """``knowledge.llm_model`` (``""``: the generation model, :attr:`shares_generation_model`)."""
        return ExtractorModel("knowledge.llm_model", self.settings.llm_model, GENERATION)

    @property
    def shares_generation_model(self) -> bool:
        return not self.settings.llm_model

    def plan_details(self) -> dict[str, Any]:
        shared = self.shares_generation_model
        device = "the generation model's" if shared else self.settings.device
        return {"shares_generation_model": shared, "device": device}

    def memory_bytes(self, counter: WeightCounter, generation_source: str) -> float | None:
        """bf16 weights, prefill and KV cache of decoding one batch of triplet lists."""
        settings = self.settings
        source = settings.llm_model or generation_source
        return counter.decoding_bytes(source, settings.llm_max_new_tokens, settings.batch_size)


BUILT_IN: tuple[type[ExtractorEntry], ...] = (SpacyEntry, RebelEntry, LLMEntry)


class PluginExtractor(ExtractorEntry):
    """The base of a plug-in extractor: subclass it, set ``name``, implement :meth:`build` (any object with
    ``extract(texts) -> list[list[Triplet]]``); its fingerprint: its class path, ``init_args`` and source."""

    class_path: str
    init_args: dict[str, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        build = cls.__dict__.get("build")
        if build is not None and not getattr(build, "checked", False):
            cls.build = checked_method(build, CheckedExtractor.of, EXTRA)  # type: ignore[method-assign]

    def plan_details(self) -> dict[str, Any]:
        return {"class_path": self.class_path}

    def fingerprint(self) -> dict[str, Any]:
        return source_fingerprint(self)


EXTRA = "knowledge.extractors_extra"


class CheckedExtractor:
    """A plug-in's extractor whose output is checked: one list of :class:`Triplet` s per text; anything
    else, or an exception it raises, is one ``ConfigError`` line naming the plug-in. Each triplet's
    ``source`` is the plug-in's name, whatever the plug-in set."""

    def __init__(self, what: str, extractor: TripletExtractor) -> None:
        self.what = what
        self.extractor = extractor
        self.name = extractor.name

    @classmethod
    def of(cls, entry: PluginExtractor, extractor: Any, args: tuple) -> CheckedExtractor:
        what = f"{EXTRA} {plugin_name(entry)}"
        if not callable(getattr(extractor, "extract", None)):
            raise ConfigError(
                f"{what}: build() returned {type(extractor).__name__}, not an extractor (an object with "
                "name and extract(texts) -> list[list[Triplet]])"
            )
        if not isinstance(getattr(extractor, "name", None), str):
            extractor.name = entry.name
        return cls(what, extractor)

    def extract(self, texts: Sequence[str]) -> list[list[Triplet]]:
        with running(self.what):
            found = self.extractor.extract(texts)
        if not isinstance(found, list) or len(found) != len(texts):
            count = len(found) if isinstance(found, list) else type(found).__name__
            raise ConfigError(f"{self.what}: extract() gave {count} triplet lists for {len(texts)} texts")
        for number, triplets in enumerate(found):
            if not isinstance(triplets, list):
                raise ConfigError(f"{self.what}: extract()'s list {number} is a {type(triplets).__name__}")
            wrong = next((t for t in triplets if not isinstance(t, Triplet)), None)
            if wrong is not None:
                raise ConfigError(
                    f"{self.what}: extract()'s list {number} holds {wrong!r}, not a "
                    "graphctx.knowledge.triplets.Triplet"
                )
        return [[dataclasses.replace(t, source=self.name) for t in triplets] for triplets in found]


def extractor_entries(settings: KnowledgeSettings) -> dict[str, ExtractorEntry]:
    """Every extractor of a config by name: the built-ins, then ``knowledge.extractors_extra``."""
    entries: dict[str, ExtractorEntry] = {cls.name: cls(settings) for cls in BUILT_IN}
    extra = "knowledge.extractors_extra"
    plugins = load_plugins(settings.extractors_extra, PluginExtractor, extra, entries, settings)
    return entries | {entry.name: entry for entry in plugins}


def selected_extractors(settings: KnowledgeSettings) -> list[ExtractorEntry]:
    """The extractors ``knowledge.extractors`` names, in its order."""
    entries = extractor_entries(settings)
    unknown = [name for name in settings.extractors if name not in entries]
    if unknown:
        raise ConfigError(
            f"knowledge.extractors: unknown extractor(s) {unknown}; choose from {list(entries)}"
        )
    return [entries[name] for name in settings.extractors]


def uses_generation_model(settings: KnowledgeSettings) -> bool:
    """Whether an extractor runs on the generation model, which the entry point must then lend."""
    return any(entry.shares_generation_model for entry in selected_extractors(settings))


def plugin_fingerprints(settings: KnowledgeSettings) -> dict[str, dict[str, Any]]:
    """The fingerprint of each plug-in extractor ``knowledge.extractors`` names (empty for built-ins)."""
    return {entry.name: part for entry in selected_extractors(settings) if (part := entry.fingerprint())}


def build_extractor(
    settings: KnowledgeSettings,
    generation_model: GenerationModel | None = None,
    gazetteer: Gazetteer | None = None,
) -> TripletExtractor:
    """The union of ``settings.extractors`` with their models loaded (a single one is returned as is).

    ``generation_model``: the loaded generation model, which the ``llm`` extractor uses when
    ``settings.llm_model`` is ``""`` (see :func:`uses_generation_model`).
    ``gazetteer``: KG labels for an extractor that links (default: :func:`build_gazetteer` of ``settings``).
    """

    def labels() -> Gazetteer:
        from graphctx.knowledge.backends import build_gazetteer

        return gazetteer if gazetteer is not None else build_gazetteer(settings)

    lent = Lent(generation_model, labels)
    extractors = [entry.build(lent) for entry in selected_extractors(settings)]
    return extractors[0] if len(extractors) == 1 else ExtractorUnion(extractors)

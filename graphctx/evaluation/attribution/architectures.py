"""Attribution architectures (Bohnet et al., 2022, §4): how an answer's one attribution passage is chosen.

Each is an :class:`Architecture` in the list ``evaluation.attribution``, LightningCLI style like the other
registries (:mod:`graphctx.plugins`); a short name stands for a built-in::

    evaluation:
      attribution:
        - class_path: rtr
        - class_path: posthoc
          init_args: {retriever: dense, k: 50}
        - class_path: autoais_rerank
          init_args: {retriever: dense, k: 50}
        - class_path: mypkg.attribution.MyArchitecture

- ``rtr`` (retrieve-then-read): a passage of the answer's own context. Rule: where the prompt asked for
  citations (the line has ``citations``), the passage cited most often (ties: the first cited); else the
  top-ranked retrieved pair shown in the prompt (passage 1). A context-free prompt has no passage. A
  sentence with a mark naming no passage of the prompt is unsupported, as ALCE's ``compute_autoais`` counts
  it: its marks name no attribution; when every marked sentence is such, the row is unattributed
  (:data:`OUT_OF_RANGE`, scored 0), and the run goes on.
- ``posthoc`` (post-hoc retrieval): query = question ⊕ answer (``"{question}\\n{answer}"``), ranked over
  the whole pool by any registered retriever (``retriever``, default ``dense``), top ``k`` (default 50);
  the attribution is the top-1, as the paper's post-hoc systems take it.
- ``autoais_rerank``: the same top ``k``, each judged by the AutoAIS judge (P(entail) of passage →
  answer); the attribution is the most probable (ties: the better ranked; none within the judge's input
  limit: the top-1, probability null). The judge is then part of the system, so these rows report no
  AutoAIS (the paper judges them by human AIS only).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from graphctx.errors import ConfigError
from graphctx.evaluation.attribution.corpus import Corpus, Passage
from graphctx.plugins import load_plugins, source_fingerprint

if TYPE_CHECKING:
    from graphctx.retrieval.retriever import Hit

SECTION = "evaluation.attribution"
BUILT_IN = {
    "rtr": "graphctx.evaluation.attribution.architectures:RetrieveThenRead",
    "posthoc": "graphctx.evaluation.attribution.architectures:PostHoc",
    "autoais_rerank": "graphctx.evaluation.attribution.architectures:AutoAISRerank",
}
"""Short names of the built-in architectures (``class_path: posthoc``)."""


@dataclass(frozen=True)
class AttributionRow:
    """One answered row as an architecture sees it."""

    question: str
    answer: str
    context: list[Passage]
    """The passages its prompt showed, in prompt order (passage ``n`` is ``context[n - 1]``)."""
    marks: list[list[int]] | None
    """Per answer sentence, the passage numbers its citation marks name; None: the prompt asked for none."""
    where: str
    """The row in messages, e.g. ``predictions of GraphGen, row 123``."""


OUT_OF_RANGE = "citation mark names no passage"
"""Why an ``rtr`` row whose every marked sentence names a missing passage is unattributed."""


@dataclass(frozen=True)
class Choice:
    """An architecture's attribution of one row: the passage (None: nothing to attribute to) and, when
    the architecture judged it itself, the judge's P(entail); ``unattributed``: why the row has no
    passage although it has an answer to attribute (scored 0, counted by reason)."""

    passage: Passage | None
    probability: float | None = None
    unattributed: str | None = None
    out_of_range: int = 0
    """Sentences with a mark naming no passage of the prompt (``rtr``)."""


class Tools(Protocol):
    """What an architecture may use: the corpus, any registered retriever over the pool, the judge."""

    corpus: Corpus

    def retrieve(self, retriever: str, k: int, queries: Sequence[str]) -> list[list[Hit]]:
        """Each query's top ``k`` pool posts by ``retriever``."""

    def probabilities(
        self, rows: Sequence[AttributionRow], passages: Sequence[Passage]
    ) -> list[float | None]:
        """The judge's P(entail) of each passage → its row's answer (None: over the judge's input limit)."""


@dataclass(frozen=True)
class ArchitectureContext:
    """What an architecture may read of a config when it is built: the registered retrievers' names."""

    retrievers: Collection[str]


class Architecture:
    """One way of choosing an attribution; a plug-in sets ``name`` and implements :meth:`choose`."""

    name: ClassVar[str]
    judge_in_system: ClassVar[bool] = False
    """The AutoAIS judge chooses the passage: the row reports no AutoAIS."""
    class_path: str
    init_args: dict[str, Any]

    def __init__(self, context: ArchitectureContext) -> None:
        self.context = context

    def choose(self, rows: Sequence[AttributionRow], tools: Tools) -> list[Choice]:
        """One choice per row."""
        raise NotImplementedError

    def rule(self) -> str:
        """The rule, as results.md states it."""
        return self.class_path

    def fingerprint(self) -> dict[str, Any]:
        """What its choices depend on: its class, ``init_args`` and module source."""
        return source_fingerprint(self)


class RetrieveThenRead(Architecture):
    name = "rtr"

    def rule(self) -> str:
        return (
            "the passage the answer cites most often (ties: the first cited) where the prompt asks for "
            "citations, else the top-ranked retrieved pair shown in the prompt"
        )

    def choose(self, rows: Sequence[AttributionRow], tools: Tools) -> list[Choice]:
        return [cited_choice(row) if row.marks and any(row.marks) else Choice(top_shown(row)) for row in rows]


def top_shown(row: AttributionRow) -> Passage | None:
    """Passage 1 of the row's prompt (its top retrieved pair, else its first sentence); None: no context."""
    return row.context[0] if row.context else None


def cited_choice(row: AttributionRow) -> Choice:
    """The passage the row's marks name most often (ties: the first cited), over the sentences whose
    marks all name a passage of the prompt (ALCE: a sentence with an out-of-range mark is unsupported);
    none left: unattributed (:data:`OUT_OF_RANGE`)."""
    sentences = [sentence for sentence in row.marks or [] if sentence]
    valid = [s for s in sentences if all(1 <= mark <= len(row.context) for mark in s)]
    out_of_range = len(sentences) - len(valid)
    marks = [mark for sentence in valid for mark in sentence]
    if not marks:
        return Choice(None, 0.0, OUT_OF_RANGE, out_of_range)
    counts = Counter(marks)
    best = max(counts.values())
    chosen = row.context[next(mark for mark in marks if counts[mark] == best) - 1]
    return Choice(chosen, out_of_range=out_of_range)


class PostHoc(Architecture):
    name = "posthoc"

    def __init__(self, context: ArchitectureContext, retriever: str | None = "dense", k: int = 50) -> None:
        super().__init__(context)
        known = sorted(context.retrievers)
        if not retriever:
            raise ConfigError(f"{SECTION}: {self.name} names no retriever; choose from {known}")
        if retriever not in known:
            raise ConfigError(f"{SECTION}: {self.name}: unknown retriever {retriever!r}; choose from {known}")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError(f"{SECTION}: {self.name}: k must be an integer of at least 1, got {k!r}")
        self.retriever = retriever
        self.k = k

    def rule(self) -> str:
        return f"top-1 of {self.retriever} retrieval over the pool, query = question ⊕ answer (top {self.k})"

    def candidates(self, rows: Sequence[AttributionRow], tools: Tools) -> list[list[Passage]]:
        """Each row's top ``k`` pool posts for question ⊕ answer, best first."""
        hits = tools.retrieve(self.retriever, self.k, [f"{row.question}\n{row.answer}" for row in rows])
        return [[tools.corpus.post(hit.id) for hit in found] for found in hits]

    def choose(self, rows: Sequence[AttributionRow], tools: Tools) -> list[Choice]:
        return [Choice(found[0] if found else None) for found in self.candidates(rows, tools)]


class AutoAISRerank(PostHoc):
    name = "autoais_rerank"
    judge_in_system = True

    def rule(self) -> str:
        return (
            f"the AutoAIS judge's most probable of the top {self.k} by {self.retriever} (question ⊕ answer)"
        )

    def choose(self, rows: Sequence[AttributionRow], tools: Tools) -> list[Choice]:
        candidates = self.candidates(rows, tools)
        flat_rows = [row for row, found in zip(rows, candidates, strict=True) for _ in found]
        scores = iter(tools.probabilities(flat_rows, [p for found in candidates for p in found]))
        choices = []
        for found in candidates:
            probabilities = [next(scores) for _ in found]
            judged = [(p, -rank) for rank, p in enumerate(probabilities) if p is not None]
            if not judged:
                choices.append(Choice(found[0] if found else None))
                continue
            probability, rank = max(judged)
            choices.append(Choice(found[-rank], probability))
        return choices


def architectures(items: Sequence[Any], context: ArchitectureContext) -> list[Architecture]:
    """The architectures of ``evaluation.attribution``, in order (a name used twice is an error)."""
    return load_plugins(items, Architecture, SECTION, (), context, aliases=BUILT_IN)

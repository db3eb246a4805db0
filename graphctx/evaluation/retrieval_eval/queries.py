"""The query set of retrieval-eval: which questions are judged, against which pool questions.

What is fair, and why:

- **Queries** are the questions of the dump created in the evaluated split's time window (the split's
  dates; with a split by fractions, from the split's first question to the next split's first, or to the
  end of the dump for test) that link, in either direction, to a pool question created before them.
  Questions the dataset's filters drop (no accepted answer, closed as a duplicate, a duplicate title, a
  short answer...) are queries too, with their text from Posts.xml cleaned as the dataset cleans it: the
  filters judge the *answer* a question has, while retrieval reads only the question, and without them
  closed duplicates, the strongest evidence there is, would all be lost. ``test_size`` sampling is
  likewise ignored: retrieval is cheap, and every linked question narrows the intervals.
- **Relevant** pool questions are those linked to the query (duplicate = 2, linked = 1), among the pool
  exactly as retrieval uses it (the training split's rows after every filter): a link to a question the
  pool lacks cannot be retrieved, so it is not counted as a miss. Only older pool questions count, so
  nothing from the query's future is asked for.
- **Leakage**: a link is often in the query's own body, its anchor text the target's title or URL slug,
  which would hand the answer to BM25 (and to the embeddings). Anchors and bare URLs that point at a
  linked question (``/questions/<id>``, ``/q/<id>``, ``/a/<answer id>``) are removed before cleaning
  (``mask_links=False`` keeps them). The same holds the other way: a pool question whose body links to a
  judged query (edited after the query was asked, or a newer question cited back) would carry the query's
  title into the pool text, so those links are removed from the pool texts too (:func:`masked_pool_texts`,
  counted in the report); other pool texts stay as retrieval uses them.
- Fewer than :data:`FEW_QUERIES` queries give wide intervals: a warning says so.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from graphctx.data.dates import canonical
from graphctx.data.dumpfiles import resolve_dump
from graphctx.data.links import (
    DumpLinks,
    LinkQuery,
    link_queries,
    linked_question_text,
    read_dump_links,
    require_links,
)
from graphctx.data.settings import DatasetSettings
from graphctx.data.sources import TABLE_SUFFIXES
from graphctx.data.splits import split_ranges
from graphctx.errors import ConfigError, DataError

FEW_QUERIES = 30
SPLIT_ORDER = ("train", "validation", "test")


def check_link_source(settings: DatasetSettings, split: str) -> None:
    """Refuse, before anything loads, a source without links (a tabular file, ``hf:``), a dump without
    PostLinks.xml and an evaluated split of ``train`` (its questions are the pool)."""
    source = settings.source
    if source.startswith("hf:") or Path(source).suffix.lower() in TABLE_SUFFIXES:
        raise DataError(
            f"data.dataset.source={source}: a tabular or Hugging Face source has no PostLinks.xml; "
            "retrieval-eval needs a Stack Exchange dump (site folder or .7z) for its ground truth"
        )
    if split not in SPLIT_ORDER[1:]:
        raise ConfigError(
            f"evaluation.split={split!r}: retrieval-eval judges validation or test questions against the "
            "training pool (train's questions are the pool itself)"
        )
    require_links(resolve_dump(source))


def split_window(
    settings: DatasetSettings, created: Mapping[str, Sequence[str]], split: str
) -> tuple[str, str | None]:
    """``[start, end)`` of ``split`` as canonical ISO times (``end`` None: no bound): the configured dates,
    or, with a split by fractions, from the split's first question to the next split's first."""
    ranges = split_ranges(settings.split)
    if ranges is not None:
        start, end = ranges[split]
        return canonical(start), canonical(end)
    if not created[split]:
        raise DataError(f"{settings.source}: split {split!r} is empty")
    later = SPLIT_ORDER[SPLIT_ORDER.index(split) + 1 :]
    end = next((min(created[name]) for name in later if created[name]), None)
    return min(created[split]), end


def load_link_queries(
    settings: DatasetSettings, dataset: Mapping[str, Any], split: str, mask: bool = True
) -> tuple[list[LinkQuery], DumpLinks]:
    """The queries of ``split`` (see the module docstring) and the links read; a ``DataError`` when no
    linked question reaches the pool."""
    links = read_dump_links(settings.source)
    train = dataset["train"]
    pool_created = dict(zip(train["id"], train["created"], strict=True))
    created = {name: dataset[name]["created"] for name in SPLIT_ORDER}
    start, end = split_window(settings, created, split)
    queries = link_queries(links, pool_created, start, end, set(dataset[split]["id"]), mask)
    if not queries:
        raise DataError(
            f"{links.links_file}: none of its {links.rows} links (duplicate or linked) joins a question "
            f"created in split {split!r} [{start}, {end or 'end'}) to an older question of the pool "
            f"({len(pool_created)} training questions): nothing to evaluate"
        )
    return queries, links


def few_queries_warning(count: int, split: str) -> str | None:
    """One warning line when fewer than :data:`FEW_QUERIES` queries are judged; else None."""
    if count >= FEW_QUERIES:
        return None
    return (
        f"warning: only {count} {split} question(s) link to an older pool question (fewer than "
        f"{FEW_QUERIES}): the intervals are wide and method differences mostly noise"
    )


def masked_pool_texts(
    ids: Sequence[int], texts: Sequence[str], links: DumpLinks, query_ids: Collection[int]
) -> tuple[list[str], int]:
    """The pool texts with every link to one of ``query_ids`` removed (anchor text included, as
    :func:`~graphctx.data.links.mask_links` removes them from queries), and how many pool texts changed.
    Only a pool question linked to a query is re-read from its HTML; every other text is kept as is."""
    queries = set(query_ids)
    out, changed = list(texts), 0
    for position, post in enumerate(ids):
        targets = set(links.grades.get(post, {})) & queries
        if not targets or post not in links.questions:
            continue
        masked = linked_question_text(links, post, mask=True, targets=targets)
        if masked != linked_question_text(links, post, mask=False):
            out[position] = masked
            changed += 1
    return out, changed

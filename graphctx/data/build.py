"""Build (or read back from the cache) the train/validation/test ``DatasetDict`` of Q&A pairs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase

from graphctx.cache import cache_root, file_digest, fingerprint, publish_once, read_entry
from graphctx.data.arrow import ArrowRowWriter, write_rows
from graphctx.data.cleaning import Cleaned
from graphctx.data.dates import canonical
from graphctx.data.filters import QuestionFilter
from graphctx.data.parallel import resolve_workers
from graphctx.data.records import FEATURES, check_column_mapping
from graphctx.data.settings import DatasetSettings
from graphctx.data.sources import SourceRead, candidates, source_fingerprint
from graphctx.data.splits import FRACTION_KEYS, SPLITS, fraction_cuts, split_ranges
from graphctx.errors import ConfigError, DataError
from graphctx.folder_lock import FolderLock

PIPELINE_VERSION = 5
REASONS = (
    "answer_parent_mismatch",
    "no_accepted_answer",
    "linked_duplicate",
    "empty_question",
    "duplicate_title",
    "short_answer",
    "link_only_answer",
    "too_long",
)


Tokenizers = PreTrainedTokenizerBase | Sequence[PreTrainedTokenizerBase] | None
"""The tokenizer(s) the token-length filter counts in: a question is kept only when it fits
``filters.max_tokens`` in every one of them (a model sweep passes every swept model's)."""


def load_qa_dataset(
    settings: DatasetSettings,
    cache_dir: str | Path | None = None,
    tokenizer: Tokenizers = None,
) -> datasets.DatasetDict:
    """The Q&A ``DatasetDict`` for ``settings``, built once and then read from the cache."""
    return prepare_qa_dataset(settings, cache_dir, tokenizer)[0]


def prepare_qa_dataset(
    settings: DatasetSettings,
    cache_dir: str | Path | None = None,
    tokenizer: Tokenizers = None,
) -> tuple[datasets.DatasetDict, dict[str, Any]]:
    """``(dataset, summary)``; the summary counts rows read, each filter's removals and split sizes.

    The cache key hashes the source files' bytes, every setting that shapes the output (all but
    ``workers``), the tokenizer's definition (:func:`tokenizer_identity`, when the token-length filter
    uses it; never where its files lie) and the pipeline version, so any
    change rebuilds and nothing stale is read. A cached entry whose files are damaged (truncated, bytes
    changed, missing) is reported on stderr with its path, moved aside and rebuilt.
    """
    split_ranges(settings.split)
    check_column_mapping(settings.column_mapping)
    tokenizers = _tokenizers(tokenizer)
    workers = resolve_workers(settings.workers, "data.dataset.workers")
    folder = dataset_folder(settings, cache_dir, tokenizers)
    remove_dead_builds(folder.parent)
    cached = read_entry(folder, _read_built)
    if cached is not None:
        return cached
    with publish_once(folder) as tmp:
        _build(settings, tokenizers, tmp, workers)
    return _read_built(folder)


def dataset_folder(
    settings: DatasetSettings, cache_dir: str | Path | None = None, tokenizer: Tokenizers = None
) -> Path:
    """The cache entry of the dataset of ``settings`` (see :func:`prepare_qa_dataset` for its key)."""
    tokenizers = _tokenizers(tokenizer)
    if settings.filters.max_tokens is not None and not tokenizers:
        raise ConfigError(
            "data.dataset.filters.max_tokens is set but no tokenizer was given; "
            "pass the model's tokenizer or set max_tokens: null"
        )
    ids = sorted(tokenizer_identity(t) for t in tokenizers) if settings.filters.max_tokens else []
    tokenizer_id = (ids[0] if len(ids) == 1 else ids) or None
    key = fingerprint(
        PIPELINE_VERSION, _output_settings(settings), source_fingerprint(settings.source), tokenizer_id
    )
    return cache_root(cache_dir) / "datasets" / key


def read_built(folder: Path) -> datasets.DatasetDict | None:
    """The dataset built in ``folder``, or None when it is not there (nothing is built)."""
    built = read_entry(folder, _read_built)
    return None if built is None else built[0]


def tokenizer_identity(tokenizer: PreTrainedTokenizerBase) -> list[Any]:
    """What a tokenizer counts tokens by, wherever its files lie: its class, its size and the SHA-256 of its
    whole definition (a fast tokenizer's ``tokenizer.json``: vocabulary, merges, normalisation; a slow
    one's vocabulary)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    definition = (
        backend.to_str() if backend is not None else json.dumps(sorted(tokenizer.get_vocab().items()))
    )
    digest = hashlib.sha256(definition.encode()).hexdigest()
    return [type(tokenizer).__name__, len(tokenizer), digest]


def _read_built(folder: Path) -> tuple[datasets.DatasetDict, dict[str, Any]]:
    """A built entry, checked: each split file's SHA-256 and row count must be those recorded when it was
    written (``files.json``), so a truncated or damaged file raises instead of being read."""
    summary = json.loads((folder / "summary.json").read_text())
    recorded = json.loads((folder / "files.json").read_text())
    splits = {}
    for name in SPLITS:
        path = folder / f"{name}.arrow"
        if file_digest(path) != recorded[name]:
            raise ValueError(f"{path.name}: its bytes differ from those written (SHA-256 mismatch)")
        splits[name] = datasets.Dataset.from_file(str(path))
        if len(splits[name]) != summary[name]:
            raise ValueError(f"{path.name}: {len(splits[name])} rows, but {summary[name]} were written")
    return datasets.DatasetDict(splits), summary


def _output_settings(settings: DatasetSettings) -> dict[str, Any]:
    """The settings that shape the dataset: all but ``workers``, which changes only the speed."""
    values = asdict(settings)
    del values["workers"]
    return values


class EmptySplitError(DataError):
    """A split is empty; ``summary`` holds the counts and dates of what was read (``graphctx data`` prints
    them before the error)."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


def _build(
    settings: DatasetSettings, tokenizers: Sequence[PreTrainedTokenizerBase], out: Path, workers: int
) -> None:
    """Read, filter and split the source into ``out``: one Arrow file per split, ``summary.json`` and the
    files' digests (``files.json``); raises :class:`EmptySplitError` when a split ends up empty."""
    out.mkdir(parents=True)
    keep = _question_filter(settings, tokenizers)
    ranges = split_ranges(settings.split)
    by_dates = ranges is not None
    read = SourceRead()
    counts: Counter[str] = Counter()
    scratch = out / SCRATCH
    lock = FolderLock(scratch, "a dataset build")
    lock.acquire()  # a fresh folder: held; freed by the kernel if this process is killed
    kept_path = scratch / "kept.arrow"
    try:
        found = candidates(settings, keep, scratch, workers, read)
        created = _write_kept(found, keep, kept_path, counts)
        if ranges is None:
            ranges = fraction_cuts(sorted(created), settings.split)
        answer_end = ranges["train"][1] if settings.split.train_answers_before_end else None
        _write_splits(datasets.Dataset.from_file(str(kept_path)), created, ranges, out, counts, answer_end)
    finally:
        lock.release()
        shutil.rmtree(scratch, ignore_errors=True)
    read.counts.update(counts)
    summary = _summary(settings, by_dates, read, created)
    empty = _sample_splits(settings, out, summary)
    if empty:
        raise EmptySplitError(_empty_message(settings, empty, by_dates, read.counts), summary)
    digests = {name: file_digest(out / f"{name}.arrow") for name in SPLITS}
    (out / "files.json").write_text(json.dumps(digests, indent=2))
    (out / "summary.json").write_text(json.dumps(summary, indent=2))


SCRATCH = "scratch"


def remove_dead_builds(kind_folder: Path) -> list[Path]:
    """Remove the temporaries of dataset builds whose process died (``kill -9``, a node lost) and return
    them: a build holds the lock of its ``scratch`` folder (the dump's SQLite copy, the kept rows) while it
    runs (:class:`~graphctx.folder_lock.FolderLock`, released by the kernel when its holder dies), so a
    scratch folder whose lock can be taken belongs to no live build. A live build's is left alone."""
    removed = []
    for scratch in sorted(kind_folder.glob(f".*.tmp/{SCRATCH}")):
        lock = FolderLock(scratch, "a dataset build")
        if not lock.acquire():
            continue
        lock.release()
        shutil.rmtree(scratch.parent, ignore_errors=True)
        removed.append(scratch.parent)
    return removed


def _tokenizers(tokenizer: Tokenizers) -> tuple[PreTrainedTokenizerBase, ...]:
    if tokenizer is None:
        return ()
    return tuple(tokenizer) if isinstance(tokenizer, Sequence) else (tokenizer,)


def _question_filter(
    settings: DatasetSettings, tokenizers: Sequence[PreTrainedTokenizerBase]
) -> QuestionFilter:
    """The filters of ``settings``; the token-length one counts a text's tokens in each of ``tokenizers``
    and keeps the most, so a kept question fits every one (the character shortcut takes the fewest
    characters per token among them)."""
    if not tokenizers:
        return QuestionFilter(settings.filters, None, None)

    def count_tokens(text: str) -> int:
        return max(len(t(text, add_special_tokens=False)["input_ids"]) for t in tokenizers)

    return QuestionFilter(settings.filters, count_tokens, min(max_token_chars(t) for t in tokenizers))


def _write_kept(
    found: Iterator[Cleaned], keep: QuestionFilter, path: Path, counts: Counter[str]
) -> list[datetime]:
    """Write the candidates that pass every filter to ``path`` in source order, counting each removal
    (``removed_<reason>``) and the rows kept; the kept rows' creation times, in that order."""
    created: list[datetime] = []
    kept = ArrowRowWriter(path, FEATURES)
    try:
        for reason, cleaned in found:
            if reason is None:
                row, answer_beyond_links = cleaned
                reason = keep.reject_text(row["title"], row["question"], row["answer"], answer_beyond_links)
            if reason:
                counts[f"removed_{reason}"] += 1
                continue
            counts["kept"] += 1
            created.append(datetime.fromisoformat(row["created"]))
            kept.write(row)
    finally:
        kept.close()
    return created


def _summary(
    settings: DatasetSettings, by_dates: bool, read: SourceRead, created: list[datetime]
) -> dict[str, Any]:
    """Counts (every removal reason, zero or not), the dates of the source and of the kept rows, the rule
    for answers and the files read; :func:`_sample_splits` adds each split's size and dates."""
    return {
        "source": settings.source,
        "split_by": "dates" if by_dates else "fractions",
        **{reason: 0 for reason in ("questions", "with_accepted_answer")},
        **{f"removed_{reason}": 0 for reason in REASONS},
        "removed_fabricated": 0,
        "removed_fabricated_links": 0,
        "removed_answer_after_split": 0,
        **read.counts,
        "dump_first": read.span.first,
        "dump_last": read.span.last,
        "kept_first": canonical(min(created)) if created else None,
        "kept_last": canonical(max(created)) if created else None,
        "answer_rule": "answer before train end"
        if settings.split.train_answers_before_end
        else "question date",
        "manifest": read.manifest,
    }


def _sample_splits(settings: DatasetSettings, out: Path, summary: dict[str, Any]) -> list[str]:
    """Sample each split down to its configured size (``{name}_size``, seeded, kept in date order), record
    its size and first and last dates in ``summary``; the names of the empty splits."""
    empty = []
    for name in SPLITS:
        path = out / f"{name}.arrow"
        part = datasets.Dataset.from_file(str(path))
        size = getattr(settings.split, f"{name}_size", None)
        if size is not None and size < len(part):
            part = part.shuffle(seed=settings.split.seed).select(range(size)).sort("created")
            write_rows(out / f"{name}.sample.arrow", FEATURES, part)
            os.replace(out / f"{name}.sample.arrow", path)
        summary[name] = len(part)
        summary[f"{name}_first"] = min(part["created"]) if len(part) else None
        summary[f"{name}_last"] = max(part["created"]) if len(part) else None
        if len(part) == 0:
            empty.append(name)
    return empty


def _write_splits(
    kept: datasets.Dataset,
    created: list[datetime],
    ranges: dict[str, tuple[datetime, datetime]],
    out: Path,
    counts: Counter[str],
    answer_end: datetime | None,
) -> None:
    """Write each kept row (in source order) to the split whose range holds its creation time.

    With ``answer_end`` set (the end of train's range), a train row whose accepted answer was posted at or
    after it is dropped (``removed_answer_after_split``): no answer from the evaluation period enters
    training or the retrieval pool. Validation and test gold answers may be of any date.
    """
    writers = {name: ArrowRowWriter(out / f"{name}.arrow", FEATURES) for name in SPLITS}
    try:
        for row, moment in zip(kept, created, strict=True):
            split = next((name for name, (start, end) in ranges.items() if start <= moment < end), None)
            if split is None:
                counts["outside_split_ranges"] += 1
                continue
            if (
                split == "train"
                and answer_end is not None
                and row["answer_created"]
                and datetime.fromisoformat(row["answer_created"]) >= answer_end
            ):
                counts["removed_answer_after_split"] += 1
                continue
            writers[split].write(row)
    finally:
        for writer in writers.values():
            writer.close()


def _empty_message(settings: DatasetSettings, empty: list[str], by_dates: bool, counts: Counter[str]) -> str:
    split = settings.split
    name = empty[0]
    if not by_dates:
        fractions = "/".join(str(getattr(split, key)) for key in FRACTION_KEYS)
        where = (
            f"{counts['kept']} kept question(s) cut at fractions {fractions} "
            f"(data.dataset.split.*_fraction) leave it none"
        )
    else:
        start, end = (getattr(split, f"{name}_{side}") for side in ("start", "end"))
        where = f"no kept question created in [{start}, {end}) (data.dataset.split.{name}_start/_end)"
    others = f" (also empty: {', '.join(empty[1:])})" if len(empty) > 1 else ""
    return f"{settings.source}: split '{name}' is empty{others}: {where}; counts so far: {_describe(counts)}"


def max_token_chars(tokenizer: PreTrainedTokenizerBase) -> int:
    """The most characters one token of ``tokenizer`` stands for: its longest vocabulary entry.

    Byte-level BPE entries hold one character per byte and SentencePiece entries the text itself (``▁`` for
    a space; byte pieces ``<0xE2>`` overstate), so a text of more than ``max_tokens`` times this many
    characters has more than ``max_tokens`` tokens, for tokenizers that drop no characters (LLM tokenizers;
    not BERT's, which drops whitespace).
    """
    return max(len(piece) for piece in tokenizer.get_vocab())


def _describe(counts: Counter[str]) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(counts.items()))

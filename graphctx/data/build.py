"""Build (or read back from the cache) the train/validation/test ``DatasetDict`` of Q&A pairs."""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from concurrent.futures.process import BrokenProcessPool
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase

from graphctx.cache import cache_root, file_digest, fingerprint, publish_once, read_entry
from graphctx.data.arrow import ArrowRowWriter, write_rows
from graphctx.data.cleaning import Cleaned, Screened, clean_screened
from graphctx.data.dates import canonical
from graphctx.data.dumpfiles import resolve_dump
from graphctx.data.filters import QuestionFilter
from graphctx.data.html import without_urls
from graphctx.data.parallel import ordered_map, resolve_workers
from graphctx.data.records import FEATURES, check_column_mapping, load_table, rows_from_table
from graphctx.data.settings import DatasetSettings, SplitSettings
from graphctx.data.splits import FRACTION_KEYS, SPLITS, split_ranges
from graphctx.data.stackexchange import DumpReader, RawQuestion
from graphctx.errors import ConfigError, DataError

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


def load_qa_dataset(
    settings: DatasetSettings,
    cache_dir: str | Path | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> datasets.DatasetDict:
    """The Q&A ``DatasetDict`` for ``settings``, built once and then read from the cache."""
    return prepare_qa_dataset(settings, cache_dir, tokenizer)[0]


def prepare_qa_dataset(
    settings: DatasetSettings,
    cache_dir: str | Path | None = None,
    tokenizer: PreTrainedTokenizerBase | None = None,
) -> tuple[datasets.DatasetDict, dict[str, Any]]:
    """``(dataset, summary)``; the summary counts rows read, each filter's removals and split sizes.

    The cache key hashes the source files' bytes, every setting that shapes the output (all but
    ``workers``), the tokenizer (when the token-length filter uses it) and the pipeline version, so any
    change rebuilds and nothing stale is read. A cached entry whose files are damaged (truncated, bytes
    changed, missing) is reported on stderr with its path, moved aside and rebuilt.
    """
    split_ranges(settings.split)
    check_column_mapping(settings.column_mapping)
    if settings.filters.max_tokens is not None and tokenizer is None:
        raise ConfigError(
            "data.dataset.filters.max_tokens is set but no tokenizer was given; "
            "pass the model's tokenizer or set max_tokens: null"
        )
    tokenizer_id = (tokenizer.name_or_path, len(tokenizer)) if settings.filters.max_tokens else None
    workers = resolve_workers(settings.workers, "data.dataset.workers")
    key = fingerprint(
        PIPELINE_VERSION, _output_settings(settings), _source_fingerprint(settings.source), tokenizer_id
    )
    folder = cache_root(cache_dir) / "datasets" / key
    cached = read_entry(folder, _read_built)
    if cached is not None:
        return cached
    with publish_once(folder) as tmp:
        _build(settings, tokenizer, tmp, workers)
    return _read_built(folder)


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


TABLE_SUFFIXES = {".json", ".jsonl", ".csv", ".parquet"}


def check_source(source: str) -> None:
    """A :class:`DataError` naming ``source`` when its file or dump is not there (cheap: call it before any
    model or tokenizer loads)."""
    if source.startswith("hf:"):
        return
    path = Path(source)
    if path.suffix.lower() in TABLE_SUFFIXES:
        if not path.is_file():
            raise DataError(f"{path}: data file not found")
    else:
        resolve_dump(path)


def _source_fingerprint(source: str) -> Any:
    check_source(source)
    if source.startswith("hf:"):
        return source
    path = Path(source)
    if path.suffix.lower() in TABLE_SUFFIXES:
        return file_digest(path)
    files = resolve_dump(path)
    if files.archive is not None:  # size and modification time: hashing GBs on every run costs seconds
        stat = files.archive.stat()
        return ["7z", files.archive.name, stat.st_size, stat.st_mtime_ns]
    return [file_digest(files.posts), file_digest(files.links) if files.links else None]


def fraction_cuts(created: list[datetime], split: SplitSettings) -> dict[str, tuple[datetime, datetime]]:
    """Half-open ranges that cut the sorted creation times ``created`` at the configured fractions:
    ``b_1 = t[round(n f_train)]``, ``b_2 = t[round(n (f_train + f_val))]``; train ``[t_0, b_1)``,
    validation ``[b_1, b_2)``, test ``[b_2, t_{n-1}]`` (an end past the newest question)."""
    n = len(created)
    first = created[0] if created else datetime.min.replace(tzinfo=UTC)
    past_last = (created[-1] if created else first) + timedelta(microseconds=1)

    def cut(share: float) -> datetime:
        index = round(n * share)
        return created[index] if index < n else past_last

    first_cut = cut(split.train_fraction)
    second_cut = max(first_cut, cut(split.train_fraction + split.validation_fraction))
    return {
        "train": (first, first_cut),
        "validation": (first_cut, second_cut),
        "test": (second_cut, past_last),
    }


class EmptySplitError(DataError):
    """A split is empty; ``summary`` holds the counts and dates of what was read (``graphctx data`` prints
    them before the error)."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


@dataclass
class DateSpan:
    """The first and last of the creation times it was shown (canonical ISO strings sort as time)."""

    first: str | None = None
    last: str | None = None

    def add(self, created: str) -> None:
        self.first = created if self.first is None else min(self.first, created)
        self.last = created if self.last is None else max(self.last, created)


def _build(
    settings: DatasetSettings, tokenizer: PreTrainedTokenizerBase | None, out: Path, workers: int
) -> None:
    out.mkdir(parents=True)
    source_counts: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    count_tokens = (
        (lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])) if tokenizer else None
    )
    keep = QuestionFilter(settings.filters, count_tokens, max_token_chars(tokenizer) if tokenizer else None)
    ranges = split_ranges(settings.split)
    by_dates = ranges is not None
    dump_span = DateSpan()
    scratch = out / "scratch"
    scratch.mkdir()
    kept_path = scratch / "kept.arrow"
    created: list[datetime] = []
    manifest: dict[str, Any] = {}
    try:
        candidates = _candidates(settings, keep, scratch, source_counts, workers, dump_span, manifest)
        kept = ArrowRowWriter(kept_path, FEATURES)
        try:
            for reason, cleaned in candidates:
                if reason is None:
                    row, answer_beyond_links = cleaned
                    reason = keep.reject_text(
                        row["title"], row["question"], row["answer"], answer_beyond_links
                    )
                if reason:
                    counts[f"removed_{reason}"] += 1
                    continue
                counts["kept"] += 1
                created.append(datetime.fromisoformat(row["created"]))
                kept.write(row)
        finally:
            kept.close()
        if ranges is None:
            ranges = fraction_cuts(sorted(created), settings.split)
        answer_end = ranges["train"][1] if settings.split.train_answers_before_end else None
        _write_splits(datasets.Dataset.from_file(str(kept_path)), created, ranges, out, counts, answer_end)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    source_counts.update(counts)
    counts = source_counts
    summary: dict[str, Any] = {
        "source": settings.source,
        "split_by": "dates" if by_dates else "fractions",
        **{reason: 0 for reason in ("questions", "with_accepted_answer")},
        **{f"removed_{reason}": 0 for reason in REASONS},
        "removed_fabricated": 0,
        "removed_answer_after_split": 0,
        **counts,
        "dump_first": dump_span.first,
        "dump_last": dump_span.last,
        "kept_first": canonical(min(created)) if created else None,
        "kept_last": canonical(max(created)) if created else None,
        "answer_rule": "answer before train end"
        if settings.split.train_answers_before_end
        else "question date",
        "manifest": manifest,
    }
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
    if empty:
        raise EmptySplitError(_empty_message(settings, empty, by_dates, counts), summary)
    digests = {name: file_digest(out / f"{name}.arrow") for name in SPLITS}
    (out / "files.json").write_text(json.dumps(digests, indent=2))
    (out / "summary.json").write_text(json.dumps(summary, indent=2))


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


def _candidates(
    settings: DatasetSettings,
    keep: QuestionFilter,
    scratch: Path,
    counts: Counter[str],
    workers: int,
    span: DateSpan,
    manifest: dict[str, Any],
) -> Iterator[Cleaned]:
    """``(reason, None)`` or ``(None, (row, answer text beyond links))`` per source question, in source order.

    ``reason`` comes from the cheap checks (``keep.reject_raw``), so HTML is cleaned only for questions
    that pass them; dump HTML is cleaned in ``workers`` processes. ``counts`` receives what the source
    held (rows, questions, answers...) once it is read through, ``span`` the creation times of all its
    questions, ``manifest`` the files read (name, size, SHA-256) and the first and last post dates.
    """
    source = settings.source
    if source.startswith("hf:") or Path(source).suffix.lower() in TABLE_SUFFIXES:
        if not source.startswith("hf:"):
            path = Path(source)
            manifest["files"] = [
                {"name": path.name, "size": path.stat().st_size, "sha256": file_digest(path)}
            ]
        table = load_table(source, settings.hf_split)
        site = settings.site or Path(source.removeprefix("hf:")).stem
        for row in rows_from_table(table, settings.column_mapping, site, source):
            counts["rows"] += 1
            counts["questions"] += 1
            counts["with_accepted_answer"] += bool(row["answer"])
            span.add(row["created"])
            reason = keep.reject_raw(bool(row["answer"]), [])
            yield (reason, None) if reason else (None, (row, without_urls(row["answer"]).strip()))
        manifest.update(first_post=span.first, last_post=span.last)
        return
    reader = DumpReader(source, scratch)
    site = settings.site or reader.files.site
    screened = (_screen(keep, raw, span) for raw in reader.questions())
    clean = partial(clean_screened, site=site, origin=str(reader.posts))
    try:
        yield from ordered_map(clean, screened, workers, preload=["graphctx.data.cleaning"])
    except BrokenProcessPool as exc:
        raise ConfigError(
            f"data.dataset.workers: a worker cleaning {reader.posts} died (killed for memory, or the main "
            "script could not be re-imported: guard its entry point with if __name__ == '__main__'); "
            "set workers: 1 to clean in this process"
        ) from exc
    counts.update(reader.counts)
    files = reader.files
    if files.archive is not None:
        stat = files.archive.stat()
        manifest["archive"] = {
            "name": files.archive.name,
            "size": stat.st_size,
            "sha256": file_digest(files.archive),
        }
    manifest.update(files=files.manifest, first_post=reader.first_post, last_post=reader.last_post)


def _screen(keep: QuestionFilter, raw: RawQuestion, span: DateSpan) -> Screened:
    """``(reason, None)`` when the cheap checks reject ``raw`` (HTML dropped), else ``(None, raw)``."""
    span.add(raw.created)
    reason = keep.reject_raw(raw.answer_html is not None, raw.duplicate_of, raw.answer_parent_mismatch)
    return (reason, None) if reason else (None, raw)


def _describe(counts: Counter[str]) -> str:
    return ", ".join(f"{name}={value}" for name, value in sorted(counts.items()))

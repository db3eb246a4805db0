"""Settings of the data pipeline: where the posts come from, how they are filtered and split."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from graphctx.checks import AT_LEAST_ONE, NON_NEGATIVE, Range, check_own_fields
from graphctx.data.instruct import TEMPLATES
from graphctx.paths import site_problem


@dataclass
class FilterSettings:
    """The paper's filters; each one can be switched off and each one is counted."""

    RANGES: ClassVar[dict[str, Range]] = {"min_answer_chars": NON_NEGATIVE, "max_tokens": AT_LEAST_ONE}

    def __post_init__(self) -> None:
        check_own_fields(self)

    require_accepted_answer: bool = True
    """Drop questions whose accepted answer is missing (no AcceptedAnswerId, or the row is absent)."""
    drop_linked_duplicates: bool = True
    """Drop questions closed as duplicates (PostLinks.xml rows with LinkTypeId=3, PostId side)."""
    drop_duplicate_titles: bool = True
    """Drop questions whose normalised title equals an earlier question's title."""
    min_answer_chars: int = 40
    """Answers shorter than this (clean text, characters) are non-specific and dropped; 0 disables."""
    drop_link_only_answers: bool = True
    """Drop answers that are little more than links (under ``min_answer_chars`` once link text and URLs
    are removed)."""
    max_tokens: int | None = 1024
    """Drop pairs whose prompt + answer exceed this many tokens of the model's tokenizer; null disables."""


@dataclass
class SplitSettings:
    """Temporal split by question creation time, in one of two ways.

    - **Fractions** (the default, no dates set): the kept questions, oldest first, are cut at
      ``train_fraction`` and ``train_fraction + validation_fraction`` of their number. With ``n`` kept
      questions created at ``t_0 <= ... <= t_{n-1}``, the cuts are the times ``b_1 = t_{round(n f_train)}``
      and ``b_2 = t_{round(n (f_train + f_val))}``: train is ``[t_0, b_1)``, validation ``[b_1, b_2)``,
      test ``[b_2, t_{n-1}]``, so questions created at the same moment stay in one split. The resulting
      dates are reported (``graphctx data``).
    - **Dates** (all six bounds set): half-open ``[start, end)`` ranges of ISO 8601 dates (``2021-04-01``,
      ``2021-4-1``, ``2021-04-01 12:00``; UTC unless a zone is given; see ``graphctx.data.dates``) compared
      as datetimes; a bound that is not a date, a reversed range or two overlapping ranges is a
      ``ConfigError`` naming the keys. Gaps are allowed (counted as ``outside_split_ranges``).
    """

    RANGES: ClassVar[dict[str, Range]] = {"validation_size": AT_LEAST_ONE, "test_size": AT_LEAST_ONE}
    """The fractions and dates are checked together by ``graphctx.data.build.split_ranges``."""

    def __post_init__(self) -> None:
        check_own_fields(self)

    train_fraction: float = 0.8
    """Without dates: share of the kept questions (the oldest) that train."""
    validation_fraction: float = 0.1
    """Without dates: share that validates (the next ones); the three fractions sum to 1."""
    test_fraction: float = 0.1
    """Without dates: share that tests (the newest)."""
    train_start: str | None = None
    train_end: str | None = None
    validation_start: str | None = None
    validation_end: str | None = None
    test_start: str | None = None
    test_end: str | None = None
    validation_size: int | None = None
    """Randomly sample the validation split down to this many rows (seeded); null keeps all."""
    test_size: int | None = None
    """Randomly sample the test split down to this many rows (paper: a fixed sample); null keeps all."""
    seed: int = 0
    """Seed of the random sampling of validation and test."""
    train_answers_before_end: bool = True
    """A train pair (and so a retrieval-pool entry) needs its accepted answer posted before train's range
    ends; later ones are dropped and counted (removed_answer_after_split). false restores the
    question-date-only rule (not the default: test-period answers then leak into training and contexts).
    Validation and test gold answers may be of any date either way."""


@dataclass
class DatasetSettings:
    """Where the Q&A pairs come from and how they are cleaned, filtered and split."""

    RANGES: ClassVar[dict[str, Range]] = {"workers": AT_LEAST_ONE}

    def __post_init__(self) -> None:
        check_own_fields(self)

    source: str
    """A Stack Exchange site folder (Posts.xml [+ PostLinks.xml]), a Posts.xml (plain or gzip) or a site's
    .7z archive (read in place); or a local
    .json/.jsonl/.csv/.parquet file; or a Hugging Face dataset id (``hf:owner/name``)."""
    site: str | None = None
    """Site name stored in each row; default: the folder name of ``source``. A host-like token
    (``askubuntu``, ``unix.stackexchange.com``): letters, digits, ``.``, ``-``, ``_``."""
    hf_split: str = "train"
    """For Hugging Face / tabular sources: which split of the source to read."""
    column_mapping: dict[str, str] = field(default_factory=dict)
    """For tabular sources: graphctx column -> source column (e.g. ``{question: title, answer: best}``).
    Needed columns: ``answer``, ``created``, and ``question`` or ``title`` (+ optional ``body``). Keys must
    be graphctx fields and mapped columns must exist; ``created`` holds ISO 8601 dates, epoch seconds or
    milliseconds; ids must be unique."""
    workers: int | None = None
    """Processes that clean dump HTML (the slow stage); null: one per available core, 1: no pool. Only
    speed changes: the dataset (and its cache key) is the same for any value."""
    filters: FilterSettings = field(default_factory=FilterSettings)
    split: SplitSettings = field(default_factory=SplitSettings)

    @staticmethod
    def consistency(value: Any) -> list[tuple[str, str]]:
        """A ``site`` that is not a site's name (it names folders of ``graphctx reproduce``)."""
        problem = None if value.site is None else site_problem(value.site)
        return [] if problem is None else [("site", problem)]


@dataclass
class DataModuleSettings:
    """Instruction-tuning batches from the Q&A dataset (train and validation splits).

    The ``data`` section. Plain settings, so that a config is read and checked without importing
    Lightning; the data module is built from them (``InstructionDataModule(settings, cache_dir)``)."""

    RANGES: ClassVar[dict[str, Range]] = {
        "max_length": AT_LEAST_ONE,
        "min_prompt_tokens": NON_NEGATIVE,
        "batch_size": AT_LEAST_ONE,
        "num_workers": NON_NEGATIVE,
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    dataset: DatasetSettings
    """where the Q&A pairs come from and how they are filtered and split."""
    template: str = "paper"
    """instruction format, ``paper`` (``[INST]q[\\INST]Answer:a``) or ``llama2-chat``."""
    max_length: int = 1024
    """tokens per example (and per packed row); longer examples are truncated."""
    min_prompt_tokens: int = 64
    """the question is cut to this many tokens before the answer is cut."""
    batch_size: int = 4
    """rows per batch (examples when unpacked; packed rows of ``max_length`` when packed)."""
    pack: bool = True
    """pack several examples into each row (no pad compute, no cross-example attention)."""
    num_workers: int = 0
    """DataLoader worker processes."""
    seed: int = 0
    """seed of the batch order."""

    @staticmethod
    def consistency(value: Any) -> list[tuple[str, str]]:
        """An instruction template that does not exist."""
        if value.template in TEMPLATES:
            return []
        return [
            (
                "template",
                f"unknown instruction template {value.template!r}; choose one of {sorted(TEMPLATES)}",
            )
        ]

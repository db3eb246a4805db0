"""Rows per split for a cost estimate (``graphctx plan --cost``, ``graphctx reproduce --dry-run``): read
from the config's dataset, which building needs the dump and the generation model's tokenizer; when either
is missing here the estimate is refused at once, naming the one that works without them (``--counts``)."""

from __future__ import annotations

from graphctx.data.sources import check_source
from graphctx.errors import ConfigError, DataError
from graphctx.stack.model_stack import ModelStack

COUNTS_HINT = "or estimate the cost without it: --counts train=N,test=M (the rows per split)"


def check_countable(stack: ModelStack) -> None:
    """Refuse, before anything loads, to count the rows of a dataset that cannot be built here."""
    try:
        check_source(stack.config.data.dataset.source)
    except DataError as error:
        raise DataError(f"{error}; {COUNTS_HINT}") from None
    missing = stack.missing([stack.generation])
    if missing:  # its tokenizer filters and counts the rows
        raise ConfigError(f"{missing[0]['hint']}; {COUNTS_HINT}")


def split_sizes(stack: ModelStack) -> dict[str, int]:
    """Rows per split of the config's dataset (built, or read from the cache)."""
    check_countable(stack)
    return {name: len(split) for name, split in stack.config.load_dataset().items()}

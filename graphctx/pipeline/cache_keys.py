"""The cache entries a config's runs read, listed without running anything heavy (``graphctx cache``).

Each kind of entry is keyed as its stage keys it: ``models`` by the converted model's folder
(:func:`~graphctx.model.loading.converted_folder`), ``datasets`` by
:func:`~graphctx.data.build.dataset_folder`, ``retrieval-index`` by
:func:`~graphctx.retrieval.index.index_key` of the training pool (read from the cached dataset) and of
``graphctx serve``'s live pool in the cache, the KG stores by their sources' digests. Where the set cannot
be listed without running the stage (an entry per query, per scored answer, per plug-in), the kind is
*open*: :attr:`Reach.open` says why, and pruning keeps all of its entries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from graphctx.cache import SERVE_POOL, cache_root, fingerprint
from graphctx.data.build import dataset_folder, read_built
from graphctx.knowledge.backends import selected_sources
from graphctx.model.loading import converted_folder
from graphctx.model.settings import ModelSpec
from graphctx.pipeline.pool import INDEXES_FILE, POOL_FILE
from graphctx.retrieval.index import index_key

OPEN_KINDS = {
    "embeddings": "query texts are embedded as commands are given them (index, retrieval-eval, serve)",
    "enhanced": "one entry per query and retrieved pairs: known only by retrieving",
    "gold": "keyed by the scored gold answers: known only by scoring",
    "judge_controls": "keyed by the drawn control pairs: known only by scoring",
}
"""The kinds whose entries a config's runs read but that cannot be listed without running them."""


@dataclass
class Reach:
    """The entries (names under ``<cache>/<kind>/``) a config's runs read, by kind, and the kinds that
    cannot be listed, with why."""

    keys: dict[str, set[str]] = field(default_factory=dict)
    open: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, name: str) -> None:
        self.keys.setdefault(kind, set()).add(name)

    def merge(self, other: Reach) -> Reach:
        """What either reaches (a kind open in one stays open)."""
        kinds = set(self.keys) | set(other.keys)
        keys = {kind: self.keys.get(kind, set()) | other.keys.get(kind, set()) for kind in kinds}
        return Reach(keys, self.open | other.open)


def model_specs(config: Any) -> list[ModelSpec]:
    """The models the config loads that a cache entry may hold: the base model, the token filter's
    models, an LLM AutoAIS judge and the LLM extractor's model, each in the config's cache."""
    sources = [config.evaluation.metrics.autoais.model, getattr(config.knowledge, "llm_model", "")]
    specs = [config.model.spec, *config.filter_specs]
    specs += [ModelSpec(source=source, cache_dir=config.cache_dir) for source in sources if source]
    return specs


def reached(config: Any) -> Reach:
    """What ``config``'s runs read from its cache (module docstring); nothing is built or converted."""
    reach = Reach(open=dict(OPEN_KINDS))
    converted = [folder for spec in model_specs(config) if (folder := converted_folder(spec)) is not None]
    for folder in converted:
        reach.add("models", folder.name)
    settings = config.data.dataset
    if settings.filters.max_tokens is not None and not all(folder.is_dir() for folder in converted):
        reach.open["datasets"] = "the token filter's model is not converted yet, so its tokenizer is unknown"
        reach.open["retrieval-index"] = "the dataset is not built yet"
    else:
        tokenizers = []
        if settings.filters.max_tokens is not None:
            from graphctx.model import load_tokenizer

            tokenizers = [load_tokenizer(spec) for spec in config.filter_specs]
        folder = dataset_folder(settings, config.cache_dir, tokenizers)
        reach.add("datasets", folder.name)
        dataset = read_built(folder)
        if dataset is None:
            reach.open["retrieval-index"] = "the dataset is not built yet, so its training pool is unknown"
        else:
            reach.add("retrieval-index", pool_key(dataset["train"], config.retrieval))
    for name in served_indexes(config):
        reach.add("retrieval-index", name)
    store_entries(config, reach)
    return reach


def pool_key(rows: Any, settings: Any) -> str:
    """The index key of a pool of rows (by id, the last row of an id winning, as the pool is built)."""
    pool = {int(row["id"]): row["question"] for row in rows}
    return index_key(list(pool), list(pool.values()), settings)


def served_indexes(config: Any) -> list[str]:
    """The index entries ``graphctx serve``'s live pool in the cache (``<cache>/serve-pool``) reads: those
    its writes listed and that of its committed pool."""
    folder = cache_root(config.cache_dir) / SERVE_POOL
    names = json.loads((folder / INDEXES_FILE).read_text()) if (folder / INDEXES_FILE).is_file() else []
    if (folder / POOL_FILE).is_file():
        with open(folder / POOL_FILE, encoding="utf-8") as handle:
            names.append(pool_key((json.loads(line) for line in handle if line.strip()), config.retrieval))
    return names


def store_entries(config: Any, reach: Reach) -> None:
    """The KG stores of ``knowledge.backend`` and ``knowledge.also``."""
    from graphctx.knowledge import plugin_store, store, tagwiki, wikidata

    settings = config.knowledge
    for source in selected_sources(settings):
        if source.name == "local":
            reach.add("kg-store", store.store_path(settings).name)
        elif source.name == "tagwiki":
            reach.add("tagwiki-store", tagwiki.store_path(settings).name)
        elif source.name == "wikidata":
            key = fingerprint(wikidata.CACHE_FORMAT, settings.sparql_endpoint, settings.language)
            reach.add("kg-cache", f"{key}.sqlite")
        else:
            reach.add("plugin-kg-store", plugin_store.store_path(source, settings).name)

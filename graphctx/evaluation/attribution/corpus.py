"""The attribution corpus: every passage an answer may be attributed to, each with a stable id.

- A pool post (a training question with its accepted answer): id ``post:<question id>``, text as the
  prompt shows a pair (``Question: …\\nAnswer: …``), link ``https://<site host>/q/<question id>``.
- A knowledge sentence of a context: a KG fact's sentence has id ``kg:<head id>|<relation id>|<tail id>``
  (the KG's ids, e.g. ``kg:Q7715973|P31|Q9135``), a sentence of an extracted triplet (τ^init, no KG ids)
  ``triplet:<head>|<relation>|<tail>`` (its labels); text: the sentence; no link. The same fact has the same
  id in every context and every run.

The site host is ``data.dataset.site`` (else the dump's name): a name with a dot is a host already
(``unix.stackexchange.com``), the sites with their own domain map to it (``askubuntu`` → ``askubuntu.com``),
any other name ``<name>.stackexchange.com``; no site (a Hugging Face or tabular source without
``data.dataset.site``): no link.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from graphctx.data.dumpfiles import site_name
from graphctx.knowledge.budget import QAPair
from graphctx.knowledge.provenance import SourcedFact
from graphctx.knowledge.verbalise import Sentence

OWN_DOMAINS = {
    "askubuntu": "askubuntu.com",
    "serverfault": "serverfault.com",
    "superuser": "superuser.com",
    "stackoverflow": "stackoverflow.com",
    "mathoverflow": "mathoverflow.net",
    "stackapps": "stackapps.com",
}
"""Stack Exchange sites that are not ``<name>.stackexchange.com``."""


@dataclass(frozen=True)
class Passage:
    """One passage of the corpus: its stable id, its text (what the judge reads), its link on the site."""

    id: str
    text: str
    link: str | None = None


def site_host(site: str | None) -> str | None:
    """The site's host name (module docstring), None without a site."""
    if not site:
        return None
    name = site.strip().lower()
    if "." in name:
        return name
    return OWN_DOMAINS.get(name, f"{name}.stackexchange.com")


def dataset_site(source: str, site: str | None) -> str | None:
    """``data.dataset.site``, else the name of a dump folder or archive; None for a Hugging Face or tabular
    source (no site to link to)."""
    if site:
        return site
    if source.startswith("hf:") or Path(source).suffix.lower() in {".json", ".jsonl", ".csv", ".parquet"}:
        return None
    return site_name(Path(source))


def config_host(config: Any) -> str | None:
    """The host of a run config's site (``data.dataset``): what post links are built on."""
    dataset = config.data.dataset
    return site_host(dataset_site(dataset.source, dataset.site))


def question_link(host: str | None, qid: int | None) -> str | None:
    """The question's page on its site, ``https://<host>/q/<id>`` (None without a host or an id)."""
    return f"https://{host}/q/{qid}" if host and qid is not None else None


def post_passage(pair: QAPair, host: str | None) -> Passage:
    """A pool post as a passage (module docstring)."""
    link = question_link(host, pair.id)
    return Passage(f"post:{pair.id}", pair.text(), link)


def sentence_passage(sentence: Sentence, facts: Sequence[SourcedFact] = ()) -> Passage:
    """A knowledge sentence as a passage: a KG fact's ids when ``facts`` holds the fact it states (same
    sentence, case-insensitively), else its triplet's labels (module docstring)."""
    said = sentence.text.lower()
    fact = next((f.fact for f in facts if f.sentence.lower() == said), None)
    if fact is not None:
        return Passage(f"kg:{fact.head_id}|{fact.relation_id}|{fact.tail_id}", sentence.text)
    t = sentence.triplet
    return Passage(f"triplet:{t.head}|{t.relation}|{t.tail}", sentence.text)


class Corpus:
    """The pool's posts by question id, and the passages of one context in prompt order."""

    def __init__(self, pool: Mapping[int, Mapping[str, Any]], site: str | None) -> None:
        self.pool = pool
        self.host = site_host(site)

    def post(self, post_id: int) -> Passage:
        """The pool post ``post_id`` as a passage."""
        row = self.pool[post_id]
        return post_passage(QAPair(row["question"], row["answer"], post_id), self.host)

    def context(
        self, pairs: Sequence[QAPair], sentences: Sequence[Sentence], facts: Sequence[SourcedFact] = ()
    ) -> list[Passage]:
        """A prompt's context as numbered passages: the pairs 1..p (best first), then the knowledge
        sentences p+1.. (ALCE's numbering of :mod:`graphctx.citations`)."""
        return [post_passage(p, self.host) for p in pairs] + [sentence_passage(s, facts) for s in sentences]

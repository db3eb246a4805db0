"""Entity surface forms: normalisation, and the entity set Ent(C) linked to knowledge-graph ids."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from graphctx.knowledge.triplets import Triplet

_EDGE_PUNCTUATION = " \t\n\"'`“”‘’()[]{}<>,;:!?*=|/\\"
_LEADING_ARTICLE = re.compile(r"^(?:the|a|an)\s+")


def normalise_entity(surface: str) -> str:
    """A comparison key for an entity mention: NFKC, lower case, single spaces, no edge punctuation.

    Inner punctuation that names software is kept (``cardano-node``, ``c++``, ``node.js``, ``.net``);
    a trailing full stop and a leading article are removed (``The Docker daemon.`` → ``docker daemon``).
    """
    text = unicodedata.normalize("NFKC", surface).lower()
    text = " ".join(text.replace("_", " ").split())
    text = text.strip(_EDGE_PUNCTUATION).rstrip(".").strip(_EDGE_PUNCTUATION)
    return _LEADING_ARTICLE.sub("", text)


@dataclass(frozen=True)
class Entity:
    """One member of Ent(C): its key, the first surface seen, and the KG ids it links to (maybe none)."""

    key: str
    surface: str
    ids: tuple[str, ...] = ()


@dataclass
class EntitySet:
    """Ent(C): heads and tails of τ^init (plus KG labels mentioned in C), keyed by normalised form."""

    entities: dict[str, Entity] = field(default_factory=dict)

    @classmethod
    def from_surfaces(cls, surfaces: Iterable[str], links: Mapping[str, Iterable[str]]) -> EntitySet:
        """Entities for ``surfaces`` (first surface per key wins) with ids from ``links`` (key → ids)."""
        entities: dict[str, Entity] = {}
        for surface in surfaces:
            key = normalise_entity(surface)
            if key and key not in entities:
                entities[key] = Entity(key, surface.strip(), tuple(sorted(set(links.get(key, ())))))
        return cls(entities)

    @staticmethod
    def surfaces_of(triplets: Iterable[Triplet]) -> list[str]:
        """Heads and tails of ``triplets`` in order of appearance."""
        return [part for t in triplets for part in (t.head, t.tail)]

    @cached_property
    def ids(self) -> set[str]:
        """Every KG id any member links to."""
        return {kg_id for entity in self.entities.values() for kg_id in entity.ids}

    def linked(self) -> list[Entity]:
        """Members with at least one KG id, in insertion order."""
        return [entity for entity in self.entities.values() if entity.ids]

    def contains(self, kg_id: str, label: str) -> bool:
        """Whether a KG node (by id, else by its label's normalised form) is in the set."""
        return kg_id in self.ids or normalise_entity(label) in self.entities

    def __len__(self) -> int:
        return len(self.entities)

"""What a plug-in knowledge source gives: plain labelled triples (:class:`Triple` of :class:`Node` s)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Node:
    """An entity or a relation of a plug-in source: its id (unique within the source), its label (what
    sentences say) and other names a text may use for it (entities: matched in mentions)."""

    id: str
    label: str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Triple:
    """One fact: ``head`` —``relation``→ ``tail``, e.g. ``Triple(Node("cardano", "Cardano"),
    Node("written_in", "programmed in"), Node("haskell", "Haskell"))``."""

    head: Node
    relation: Node
    tail: Node

"""Offline triplets from spaCy's dependency parse: subject–verb–object over noun chunks.

For every verb (or copula) with a nominal subject, each direct object / attribute gives
``(subject, verb, object)`` and each prepositional object gives ``(subject, verb + preposition, object)``,
the verb as written with a passive auxiliary (``failed on``, ``is required by``); negation adds ``not``.
Subjects and objects are the noun chunks around the tokens; pronouns, wh-words and stop-word-only
phrases are skipped. Phrases that name a KG label (software, Debian package) are replaced by that label,
which links them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from spacy.lang.en.stop_words import STOP_WORDS
from spacy.language import Language
from spacy.tokens import Doc, Span, Token

from graphctx.knowledge.entities import normalise_entity
from graphctx.knowledge.mentions import MentionMatcher, english_words
from graphctx.knowledge.spacy_load import load_spacy
from graphctx.knowledge.text import strip_code_blocks
from graphctx.knowledge.triplets import Triplet

SUBJECT_DEPS = {"nsubj", "nsubjpass"}
OBJECT_DEPS = {"dobj", "attr", "oprd"}
MAX_PHRASE_TOKENS = 6


def _phrase(token: Token, chunks: Mapping[int, Span]) -> Span | None:
    """The noun chunk holding ``token`` (leading determiners/possessives dropped), if it is informative."""
    if token.pos_ == "PRON" or token.tag_ in {"WP", "WDT", "WRB"}:
        return None
    span = chunks.get(token.i) or token.doc[token.i : token.i + 1]
    while len(span) > 1 and (span[0].pos_ in {"DET", "PRON"} or span[0].tag_ == "PRP$"):
        span = span[1:]
    if len(span) > MAX_PHRASE_TOKENS or all(t.is_stop or t.is_punct for t in span):
        return None
    return span


def _subjects(verb: Token) -> list[Token]:
    subjects = [c for c in verb.children if c.dep_ in SUBJECT_DEPS]
    if not subjects and verb.dep_ in {"conj", "xcomp"} and verb.head is not verb:
        return _subjects(verb.head)  # "X downloads and installs Y": installs inherits X
    return subjects


def svo_triplets(doc: Doc) -> list[tuple[str, str, str]]:
    """(subject, relation, object) phrases of one parsed document, in text order, without duplicates."""
    chunks = {token.i: chunk for chunk in doc.noun_chunks for token in chunk}
    found: list[tuple[str, str, str]] = []
    for verb in doc:
        if verb.pos_ not in {"VERB", "AUX"}:
            continue
        subjects = [s for s in (_phrase(t, chunks) for t in _subjects(verb)) if s is not None]
        if not subjects:
            continue
        passive_aux = " ".join(c.text.lower() for c in verb.children if c.dep_ == "auxpass")
        negated = any(c.dep_ == "neg" for c in verb.children)
        particle = " ".join(c.text.lower() for c in verb.children if c.dep_ == "prt")
        negation = "not" if negated else ""
        if verb.pos_ == "AUX":  # "is not", but "not support" (its "does" is a separate token)
            words = (passive_aux, verb.text.lower(), negation, particle)
        else:
            words = (passive_aux, negation, verb.text.lower(), particle)
        base = " ".join(w for w in words if w)  # "is required by", "not support", "set up"
        objects: list[tuple[str, Token]] = [(base, c) for c in verb.children if c.dep_ in OBJECT_DEPS]
        for prep in (c for c in verb.children if c.dep_ in {"prep", "agent"}):
            objects += [(f"{base} {prep.text.lower()}", o) for o in prep.children if o.dep_ == "pobj"]
        for relation, obj in objects:
            tail = _phrase(obj, chunks)
            if tail is None:
                continue
            for head in subjects:
                triplet = (head.text, relation, tail.text)
                if head.text != tail.text and triplet not in found:
                    found.append(triplet)
    return found


class SpacyExtractor:
    """Batched spaCy SVO extraction with KG-label canonicalisation of heads and tails."""

    name = "spacy"

    def __init__(self, nlp: Language, matcher: MentionMatcher | None = None, batch_size: int = 32) -> None:
        self.nlp = nlp
        self.matcher = matcher
        self.batch_size = batch_size

    @classmethod
    def load(
        cls,
        model: str,
        gazetteer: Mapping[str, Mapping[str, str]] | None = None,
        resolve: Callable[[Iterable[str]], None] | None = None,
    ) -> SpacyExtractor:
        """Load the spaCy pipeline ``model``; with a gazetteer, heads/tails naming KG labels are linked
        (``resolve``: see :class:`MentionMatcher`)."""
        nlp = load_spacy(model, "knowledge.spacy_model")
        matcher = (
            MentionMatcher(gazetteer, english_words(nlp), resolve=resolve) if gazetteer is not None else None
        )
        return cls(nlp, matcher)

    def canonical(self, phrase: str) -> str:
        """The KG label a phrase names (``postgres`` → ``PostgreSQL``), else the phrase itself."""
        label = self.matcher.prose_label(phrase) if self.matcher is not None else None
        return label or phrase

    def extract(self, texts: Sequence[str]) -> list[list[Triplet]]:
        """One list of triplets per text (prose only: fenced code is not parsed)."""
        found = [
            svo_triplets(doc)
            for doc in self.nlp.pipe((strip_code_blocks(t) for t in texts), batch_size=self.batch_size)
        ]
        if self.matcher is not None:
            self.matcher.prepare(part for svo in found for head, _, tail in svo for part in (head, tail))
        results = []
        for svo in found:
            triplets = []
            for head, relation, tail in svo:
                triplet = Triplet(self.canonical(head), relation, self.canonical(tail), self.name)
                if triplet not in triplets and normalise_entity(triplet.head) not in STOP_WORDS:
                    triplets.append(triplet)
            results.append(triplets)
        return results

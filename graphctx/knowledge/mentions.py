"""Entity linking by surface form: find knowledge-graph labels (software, Debian packages) in text.

Token n-grams (up to ``max_words``) are looked up by their normalised form in the store's gazetteer,
longest match first, without overlaps. Many labels are also English words (``Sync``, ``Expect``, the
package ``make``), so a one-word match that is an English word (the spaCy pipeline's WordNet lemma index
plus stop words) counts only when written exactly as the software label (``Docker``, ``Python``); a
package name counts in prose only when it is not an English word. Package names in install commands
(``apt install git jq``) and whole inline code spans (`` `jq` ``) always count.

The gazetteer is either the local store's (complete) or one filled on demand from a SPARQL endpoint
(``resolve``): :meth:`MentionMatcher.prepare` looks up, in bounded batches, every surface a text could
match (:meth:`MentionMatcher.candidates`) before it is matched.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

from spacy.lang.en.stop_words import STOP_WORDS
from spacy.language import Language

from graphctx.knowledge.entities import normalise_entity

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9+#._-]*[A-Za-z0-9+#]|[A-Za-z0-9]")
_INLINE_CODE = re.compile(r"`([^`\s]+)`")
_INSTALL = re.compile(
    r"\b(?:apt-get|apt|yum|dnf|brew|apk|zypper|snap)\s+(?:-\S+\s+)*install\s+([^\n;&|`]+)", re.IGNORECASE
)


def english_words(nlp: Language) -> frozenset[str]:
    """Lower-case English words: the pipeline lemmatizer's WordNet index plus spaCy's stop words."""
    words: set[str] = set(STOP_WORDS)
    if "lemmatizer" in nlp.pipe_names:
        lookups = nlp.get_pipe("lemmatizer").lookups
        if lookups.has_table("lemma_index"):
            for entries in lookups.get_table("lemma_index").values():
                words.update(entries)
    return frozenset(words)


class MentionMatcher:
    """Find KG labels mentioned in text; returns the display labels in order of first mention."""

    def __init__(
        self,
        gazetteer: Mapping[str, Mapping[str, str]],
        dictionary: Iterable[str] = STOP_WORDS,
        max_words: int = 4,
        resolve: Callable[[Iterable[str]], None] | None = None,
    ) -> None:
        """``resolve``: fills ``gazetteer``'s maps (kept by reference) with the labels of given surfaces."""
        self.software = gazetteer.get("software", {})
        self.packages = gazetteer.get("package", {})
        self.dictionary = frozenset(dictionary)
        self.max_words = max_words
        self.resolve = resolve

    def prepare(self, surfaces: Iterable[str]) -> None:
        """Make lookups of ``surfaces`` answerable (a no-op on a complete gazetteer)."""
        if self.resolve is not None:
            self.resolve(surfaces)

    def candidates(self, text: str) -> list[str]:
        """Every surface :meth:`find` may look up in ``text``: install arguments, inline code spans and token
        n-grams of up to ``max_words`` words."""
        found = [w.group() for m in _INSTALL.finditer(text) for w in _TOKEN.finditer(m.group(1))]
        found += [m.group(1) for m in _INLINE_CODE.finditer(text)]
        tokens = [m.group() for m in _TOKEN.finditer(text)]
        for width in range(1, self.max_words + 1):
            found += [" ".join(tokens[i : i + width]) for i in range(len(tokens) - width + 1)]
        return list(dict.fromkeys(found))

    def lookup(self, surface: str) -> str | None:
        """The label a code-context surface names (software or package), with no word filter."""
        key = normalise_entity(surface)
        return self.software.get(key) or self.packages.get(key)

    def _is_english(self, word: str) -> bool:
        """In the dictionary, directly or as a regular plural (``members``, ``boxes``)."""
        return any(
            form in self.dictionary for form in (word, word.removesuffix("s"), word.removesuffix("es"))
        )

    def is_common_word(self, surface: str) -> bool:
        """A one-word English surface not written exactly as a software label (``server``, ``docker``)."""
        key = normalise_entity(surface)
        is_word = " " not in key and (len(key) <= 2 or key.isdigit() or self._is_english(key))
        return is_word and self.software.get(key) != surface.strip()

    def prose_label(self, surface: str, sentence_initial: bool = False) -> str | None:
        """The label a prose surface names under the English-word rules above, or ``None``."""
        key = normalise_entity(surface)
        is_word = " " not in key and (len(key) <= 2 or key.isdigit() or self._is_english(key))
        label = self.software.get(key)
        if label is not None:
            # a capitalised English word opening a sentence ("Go to settings") is not a name
            return label if not is_word or (surface == label and not sentence_initial) else None
        label = self.packages.get(key)
        return label if label is not None and not is_word else None

    def find(self, text: str) -> list[str]:
        """KG labels mentioned in ``text``, each once, in order of first mention."""
        self.prepare(self.candidates(text))
        found: dict[int, str] = {}
        for match in _INSTALL.finditer(text):
            for word in _TOKEN.finditer(match.group(1)):
                label = self.lookup(word.group())
                if label is not None:
                    found.setdefault(match.start(1) + word.start(), label)
        for match in _INLINE_CODE.finditer(text):
            label = self.lookup(match.group(1))
            if label is not None:
                found.setdefault(match.start(1), label)
        tokens = [(m.group(), m.start()) for m in _TOKEN.finditer(text)]
        index = 0
        while index < len(tokens):
            for width in range(min(self.max_words, len(tokens) - index), 0, -1):
                words = tokens[index : index + width]
                start = words[0][1]
                initial = (
                    start == 0 or re.search(r"[.!?:\n]\s*$", text[max(0, start - 4) : start]) is not None
                )
                label = self.prose_label(" ".join(w for w, _ in words), initial)
                if label is not None:
                    found.setdefault(start, label)
                    index += width
                    break
            else:
                index += 1
        return list(dict.fromkeys(label for _, label in sorted(found.items())))

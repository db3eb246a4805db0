"""The paper's filters over joined questions, each switchable and counted by the reason it gives."""

from __future__ import annotations

import re
from collections.abc import Callable

from graphctx.data.settings import FilterSettings

_NON_WORD = re.compile(r"[\W_]+")


def normalise_title(title: str) -> str:
    """Lower-case alphanumerics only, for exact-duplicate title detection."""
    return _NON_WORD.sub(" ", title.lower()).strip()


class QuestionFilter:
    """Decides, question by question, whether a pair is kept; returns the reason when it is not.

    Reasons (the keys of the summary): ``answer_parent_mismatch`` (always on), ``no_accepted_answer``,
    ``linked_duplicate``, ``empty_question`` (nothing left of title and body after cleaning; always on),
    ``duplicate_title``, ``short_answer``, ``link_only_answer``, ``too_long``. The title check is
    stateful: the first question with a title wins, so feed questions in id (time) order.
    """

    def __init__(
        self,
        settings: FilterSettings,
        count_tokens: Callable[[str], int] | None = None,
        max_token_chars: int | None = None,
    ) -> None:
        """``max_token_chars``: the most characters one token can stand for; a text longer than
        ``max_tokens * max_token_chars`` is ``too_long`` without being tokenised (a 30 MB body costs
        nothing). ``None``: every text is tokenised."""
        if settings.max_tokens is not None and count_tokens is None:
            raise ValueError("filters.max_tokens is set, so a tokenizer is needed to count tokens")
        self.settings = settings
        self.count_tokens = count_tokens
        self.max_chars = (
            settings.max_tokens * max_token_chars
            if settings.max_tokens is not None and max_token_chars is not None
            else None
        )
        self._titles: set[str] = set()

    def reject_raw(
        self, has_answer: bool, duplicate_of: list[int], answer_mismatch: bool = False
    ) -> str | None:
        """Checks that need no text cleaning (run first: they are cheap).

        ``answer_mismatch``: the accepted answer's ParentId is another question (always removed).
        """
        if answer_mismatch:
            return "answer_parent_mismatch"
        if self.settings.require_accepted_answer and not has_answer:
            return "no_accepted_answer"
        if self.settings.drop_linked_duplicates and duplicate_of:
            return "linked_duplicate"
        return None

    def reject_text(self, title: str, question: str, answer: str, answer_beyond_links: str) -> str | None:
        """Checks on clean text; a kept title is remembered for later duplicates.

        ``answer_beyond_links`` is the answer's text with links and URLs removed.
        """
        settings = self.settings
        if not question.strip():
            return "empty_question"
        if settings.drop_duplicate_titles:
            key = normalise_title(title)
            if key and key in self._titles:
                return "duplicate_title"
        if settings.min_answer_chars and len(answer) < settings.min_answer_chars:
            return "short_answer"
        if (
            settings.drop_link_only_answers
            and settings.min_answer_chars
            and len(answer_beyond_links) < settings.min_answer_chars
        ):
            return "link_only_answer"
        if settings.max_tokens is not None:
            text = question + "\n" + answer
            if self.max_chars is not None and len(text) > self.max_chars:
                return "too_long"
            if self.count_tokens(text) > settings.max_tokens:
                return "too_long"
        if settings.drop_duplicate_titles:
            self._titles.add(normalise_title(title))
        return None

"""The human AIS rating form (``graphctx annotate export --task ais``): its two questions, their answers as
Doccano labels and a Label Studio config, and one annotator's answers read back as one judgment.

AIS (Rashkin et al., "Measuring Attribution in Natural Language Generation Models") is rated in two stages,
the protocol Attributed QA (Bohnet et al. 2022) uses for its human ratings: the rater first says whether the
answer is interpretable at all, and only then whether all of its information is fully supported by the
source (here: the attributed passage). An answer that is not interpretable is not attributable (the AIS
release's "INT & AIS" column). The answers' wording is that of the AIS release (its Q1/Q2 columns,
github.com/google-research-datasets/AIS); the questions follow the paper's "Is all of the information
relayed by the system response fully supported by the source document?", with "the answer to the question"
for the system response and "the source passage" for the document, as the raters here see them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

INTERPRETABLE_QUESTION = "Is all of the information relayed by the answer interpretable to you?"
ATTRIBUTABLE_QUESTION = (
    "Is all of the information relayed by the answer to the question fully supported by the source passage?"
)
UNDERSTOOD = "Yes, I understand it."
UNCLEAR = "No, the response is unclear."
ATTRIBUTABLE = "Yes, fully attributable."
NOT_ATTRIBUTABLE = "No, not fully attributable."

INTERPRETABLE_NAME, ATTRIBUTABLE_NAME = "interpretable", "attributable"
"""The Label Studio choice names of the two stages."""


@dataclass(frozen=True)
class Judgment:
    """One annotator's AIS judgment of one item: interpretable, and (if so) fully attributable."""

    interpretable: bool
    attributable: bool

    @property
    def ais(self) -> int:
        """1 when interpretable and fully attributable (the AIS release's ``INT & AIS``), else 0."""
        return int(self.interpretable and self.attributable)


_JUDGMENTS = {
    (UNCLEAR,): Judgment(False, False),
    (UNDERSTOOD, ATTRIBUTABLE): Judgment(True, True),
    (UNDERSTOOD, NOT_ATTRIBUTABLE): Judgment(True, False),
    (ATTRIBUTABLE,): Judgment(True, True),  # Doccano: one label answers both stages
    (NOT_ATTRIBUTABLE,): Judgment(True, False),
}


def judgment(labels: Sequence[str]) -> Judgment | None:
    """The judgment of one annotator's labels of one item: Label Studio's two choices (the second only
    when the first is "understood"), or Doccano's one label; None when not rated. Raises ``ValueError``
    (its message says what is wrong) for any other set, such as an item judged twice."""
    if not labels:
        return None
    order = (UNCLEAR, UNDERSTOOD, ATTRIBUTABLE, NOT_ATTRIBUTABLE)
    key = tuple(sorted(labels, key=lambda label: order.index(label) if label in order else -1))
    if key in _JUDGMENTS:
        return _JUDGMENTS[key]
    if key == (UNDERSTOOD,):
        raise ValueError(f"{list(labels)} answers the first question only; answer {ATTRIBUTABLE_QUESTION!r}")
    raise ValueError(
        f"{list(labels)} is not one AIS judgment (the first question once, the second once when the answer "
        "is understood)"
    )


INSTRUCTION = (
    f"1. {INTERPRETABLE_QUESTION} 2. If so: {ATTRIBUTABLE_QUESTION} Judge the passage alone, "
    "not what you know."
)

DOCCANO_LABELS = [
    {"text": text, "suffix_key": key, "background_color": color, "text_color": "#ffffff"}
    for text, key, color in (
        (UNCLEAR, "u", "#a6a6a6"),
        (ATTRIBUTABLE, "y", "#1a9641"),
        (NOT_ATTRIBUTABLE, "n", "#d7191c"),
    )
]
"""Doccano's labels (one per example, single-label project): "unclear" answers the first question; either
attributable label answers the second, the first being "understood"."""


def doccano_text(question: str, answer: str, passage: str, link: str | None) -> str:
    """What a Doccano annotator reads: the question, the answer, the source and the two questions."""
    source = f"SOURCE ({link})" if link else "SOURCE"
    return f"QUESTION\n{question}\n\nANSWER\n{answer}\n\n{source}\n{passage}\n\n{INSTRUCTION}"


def _choices(name: str, to_name: str, values: Sequence[str], extra: str = "") -> str:
    head = f'  <Choices name="{name}" toName="{to_name}" choice="single-radio" required="true"{extra}>\n'
    return head + "".join(f'    <Choice value="{escape(v)}"/>\n' for v in values) + "  </Choices>\n"


_SECOND = (
    f' visibleWhen="choice-selected" whenTagName="{INTERPRETABLE_NAME}"'
    f' whenChoiceValue="{escape(UNDERSTOOD)}"'
)

LABEL_STUDIO_CONFIG = (
    "<View>\n"
    '  <Header value="Question"/>\n'
    '  <Text name="question" value="$question"/>\n'
    '  <Header value="Answer"/>\n'
    '  <Text name="answer" value="$answer"/>\n'
    '  <Header value="Source"/>\n'
    '  <Text name="link" value="$link"/>\n'
    '  <Text name="passage" value="$passage"/>\n'
    f'  <Header value="1. {escape(INTERPRETABLE_QUESTION)}"/>\n'
    + _choices(INTERPRETABLE_NAME, "answer", (UNDERSTOOD, UNCLEAR))
    + f"  <View{_SECOND}>\n"
    f'    <Header value="2. {escape(ATTRIBUTABLE_QUESTION)}"/>\n'
    "  </View>\n"
    + _choices(ATTRIBUTABLE_NAME, "passage", (ATTRIBUTABLE, NOT_ATTRIBUTABLE), _SECOND)
    + "</View>\n"
)
"""Label Studio's labeling config: question, answer, source link and passage; the first question, then the
second, shown (and required) only once the answer is understood."""

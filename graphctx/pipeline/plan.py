"""The resolved stack of a config, read without loading any weights (``graphctx plan``).

For each stage: the model (id or folder, revision), where it would be read from, its device and dtype, and
what it computes; ``stand_ins`` lists every stage that does not run the paper's model (``graphctx.paper``),
``extensions`` what runs beyond the paper (mention linking), and ``missing`` every configured model that
cannot be found here. train.py and evaluate.py print the plan when they start, log it with the run's
config, and refuse to start when a model they need is missing (:func:`check_models`): a missing model is an
error naming its key, never a silent fallback.

The stack itself is :class:`~graphctx.pipeline.stack.ModelStack`; the JSON is built section by section in
:mod:`graphctx.pipeline.plan_report`, the text and results.md's model lines in
:mod:`graphctx.pipeline.plan_text`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

from graphctx.errors import ConfigError
from graphctx.pipeline import plan_report, plan_text
from graphctx.pipeline.stack import ModelStack
from graphctx.prompts import Variant


class Plan(ModelStack):
    """The resolved stack of one config; :meth:`to_json` and :meth:`to_text` render it."""

    def to_json(self) -> dict[str, Any]:
        """The plan as one JSON object (``graphctx plan --json``)."""
        return plan_report.plan_json(self)

    def to_text(self) -> str:
        """One screen: a line per stage, stand-ins marked, then what is missing."""
        return plan_text.plan_text(self)

    def model_descriptions(self, variants: Collection[str] = ()) -> dict[str, str]:
        """Per stage and per metric, one line on the model behind it, stand-ins named, and the
        substitutions of the baselines among ``variants`` (for results.md)."""
        return plan_text.model_descriptions(self, variants)


def check_models(plan: ModelStack, command: str, variants: Sequence[Variant] | None = None) -> None:
    """Fail, naming the key and how to get it, when a model ``command`` needs (see
    :meth:`~graphctx.pipeline.stack.ModelStack.needed_by`) cannot be found."""
    missing = plan.missing(plan.needed_by(command, variants))
    if missing:
        raise ConfigError("; ".join(item["hint"] for item in missing))

"""The model stack of a config and its report (``graphctx plan``): which model each stage runs, which of
them are the paper's, which a command needs, which cannot be found here, and the memory each stage needs,
resolved without loading any weights.

- :mod:`~graphctx.stack.model_stack`: :class:`~graphctx.stack.model_stack.ModelStack` and
  :func:`~graphctx.stack.model_stack.check_models` (train.py and evaluate.py refuse to start when a model
  they need is missing: an error naming its key, never a silent fallback);
- :mod:`~graphctx.stack.report`: ``graphctx plan``'s JSON and text, from one table of sections
  (values both state: :mod:`~graphctx.stack.report_values`);
- :mod:`~graphctx.stack.descriptions`: results.md's model lines;
- :mod:`~graphctx.stack.memory`: device memory per rank of training and of each evaluation stage, from
  :mod:`~graphctx.stack.model_shapes` and the counted :mod:`~graphctx.stack.shape_table`.
"""

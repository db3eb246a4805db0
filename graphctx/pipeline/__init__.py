"""The answering pipeline the entry points share, between the stages and evaluation.

- ``run_config``: :class:`RunConfig`, a parsed config with every path resolved once and its dataset;
- ``config_file``: parsing and checking a YAML config into a :class:`RunConfig`;
- ``plan``: the model stack a config runs (``graphctx plan``): ``stack`` (:class:`ModelStack`, each stage's
  model as a ``model_use.ModelUse``), rendered by ``plan_report`` (JSON) and ``plan_text`` (text);
  ``memory``: its memory estimate per stage, from the shapes of ``model_shapes`` (the known ids' counted
  once into ``shape_table``);
- ``answerer``: the answering recipe every entry point shares, pool → contexts → prompts → answers
  (:class:`Answerer`), holding one generation model at a time;
- ``contexts``: the retrieved and enhanced context of each question (:class:`ContextBuilder`), ``pool``: the
  retrieval pool's index and retriever;
- ``processes``: the process group several ranks share the work over.
"""

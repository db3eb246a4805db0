"""The answering pipeline the entry points share, between the stages and evaluation.

- ``run_config``: :class:`RunConfig`, a parsed config with every path resolved once and its dataset;
- ``config_file``: parsing and checking a YAML config into a :class:`RunConfig`;
- ``answerer``: the answering recipe every entry point shares, pool → contexts → prompts → answers
  (:class:`Answerer`), holding one generation model at a time;
- ``contexts``: the retrieved and enhanced context of each question (:class:`ContextBuilder`), ``pool``: the
  retrieval pool's index and retriever;
- ``processes``: the process group several ranks share the work over.
"""

"""The answering pipeline the entry points share, between the stages and evaluation.

- ``run_config``: :class:`RunConfig`, a parsed config with every path resolved once and its dataset;
- ``config_file``: parsing and checking a YAML config into a :class:`RunConfig`;
- ``plan``: the model stack a config runs (``graphctx plan``), ``memory``: its memory estimate;
- ``contexts``: the retrieved and enhanced context of each question (:class:`ContextBuilder`);
- ``processes``: the process group several ranks share the work over.
"""

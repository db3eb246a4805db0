"""Evaluation only, in three parts: :mod:`~graphctx.evaluation.matrix` (evaluate.py's variant matrix,
its resume guard, shards, tables, sweep, tracking, the validation callback and the export of a run),
:mod:`~graphctx.evaluation.retrieval_eval` (retrieval judged by the dump's links, TREC files) and
:mod:`~graphctx.evaluation.annotation` (the human-evaluation round trip); :mod:`~graphctx.evaluation.jsonl`
is the JSON-lines record file they share."""

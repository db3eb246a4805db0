"""``graphctx retrieval-eval``: retrieval methods judged by the dump's duplicate and linked posts (nDCG@10,
MRR@10, recall@k), the threshold sweep, and the TREC files the IR community's tools read."""

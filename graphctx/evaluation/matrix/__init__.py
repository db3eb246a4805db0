"""The variant matrix: evaluate.py's run (contexts → answers → scores → tables), its resume guard, file
layout, shards, the model sweep, W&B tracking, the validation callback and the export of a run."""

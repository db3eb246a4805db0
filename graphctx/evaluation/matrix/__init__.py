"""The variant matrix: evaluate.py's run (contexts → answers → scores → tables), its resume guard, the run
folder's files, shards, the model sweep, W&B tracking, the validation callback and the export of a run."""

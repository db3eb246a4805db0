"""Evaluation: the paper's variant matrix, generation, metrics tables and the validation callback."""

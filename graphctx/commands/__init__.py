"""Subcommands of the ``graphctx`` console script, one module each."""

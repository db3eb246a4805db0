"""``graphctx reproduce``: the paper's protocol as a graph of stages per site, run locally or on SLURM.

:mod:`~graphctx.reproduce.stages` builds the graph (data only), :mod:`~graphctx.reproduce.state` keeps what
is done in a state folder, :mod:`~graphctx.reproduce.local` runs the stages here and
:mod:`~graphctx.reproduce.slurm` submits them as dependent jobs. An entry-point layer (9), beside
:mod:`graphctx.commands`: every stage is one of the project's own commands.
"""

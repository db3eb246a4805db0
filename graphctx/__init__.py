"""graphctx: GraphContextGen (graph-grounded answer generation on community Q&A) on PyTorch Lightning."""

__version__ = "0.1.0"

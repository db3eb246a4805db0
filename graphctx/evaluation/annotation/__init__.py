"""The human-evaluation round trip: ``graphctx annotate export`` (blind items for Label Studio / doccano),
``import`` (ratings back, checked against the export's key) and the paper's Figure 3 report."""

"""The built-in metrics' registry entries (:class:`graphctx.metrics.registry.MetricEntry`), one module each:
what the rest of graphctx asks of a metric, with its heavy libraries imported only when it scores."""

"""Errors with messages that name the file, row or setting at fault."""


class GraphctxError(Exception):
    """Base class: a problem in the user's input or settings, reported without a traceback by the CLI."""


class DataError(GraphctxError):
    """A data file is missing, malformed, or leaves a split empty."""


class ConfigError(GraphctxError):
    """A configuration file or setting is invalid."""


class KnowledgeGraphUnavailable(GraphctxError):
    """The knowledge-graph endpoint failed too many requests (``knowledge.sparql_max_failure_share``)."""

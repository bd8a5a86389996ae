"""Leaves every layer may use: citations, JSON value checks, metrics, where a configuration may point
the file system (``paths``), the outbound guard (``outbound``), secret references (``secrets``) and
EDDI's string parameters read as typed values (``parameters``)."""

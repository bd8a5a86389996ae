"""What the product keeps besides vectors: the state database on SQLite (``sqlite``, the embedded
default) or PostgreSQL (``postgres``, a fleet's shared state), its tables and migrations (``schema``),
and the leases by which a fleet's processes share work (``fleet``). ``from eddi_rag import state``
hands on the schema's entry points."""

from eddi_rag.state.schema import LATEST, VERSION_TABLE, NewerDatabaseError, migrate, on_postgresql, open_state, version

__all__ = ["LATEST", "VERSION_TABLE", "NewerDatabaseError", "migrate", "on_postgresql", "open_state", "version"]

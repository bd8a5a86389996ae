"""The one base of every error the product raises for a caller: ``status`` is its HTTP status and
``str(error)`` its safe message (never a secret or a stack). REST, MCP and the CLI each map it in
one place (``api/errors.py``, ``interop/mcp.py``, ``cli.py``); an error class keeps its built-in
base too (``ValueError``, ``LookupError``...), so ``except ValueError`` still catches it."""

from __future__ import annotations

from typing import Any


class EddiRagError(Exception):
    status = 500

    def body(self) -> dict[str, Any]:
        """The JSON a caller gets."""
        return {"error": str(self)}

    def headers(self) -> dict[str, str]:
        return {}

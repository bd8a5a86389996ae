"""The one base of every error the product raises for a caller: ``status`` is its HTTP status and
``str(error)`` its safe message (never a secret or a stack). REST, MCP and the CLI each map it in
one place (``api/errors.py``, ``interop/mcp.py``, ``cli.py``); an error class keeps its built-in
base too (``ValueError``, ``LookupError``...), so ``except ValueError`` still catches it.

``failure`` says what fixes an error when it ends a job (an ingestion's history shows it with its fix): the
``FILE`` (replace it; retrying will not help), a ``DEPENDENCY`` (down or missing: retry later; also any error
that does not say), the ``CONFIGURATION`` (change it, or store the key it names, then retry), or our ``READER``
(a parser failed in a way no file explains: likely this product's fault, reported with the details)."""

from __future__ import annotations

from typing import Any

FILE, DEPENDENCY, CONFIGURATION, READER = "file", "dependency", "configuration", "reader"
TLS_TO_PLAIN = ("WRONG_VERSION_NUMBER", "wrong version number")  # OpenSSL's words for a TLS hello a plain port answered


def described(e: BaseException) -> str:
    """What went wrong, said to a person: our own error's message as it is (it names what and why), another's after its
    kind (``ConnectionRefusedError: …``: its message alone may be a bare code), and a hint where OpenSSL's words hide
    the cause (TLS asked of a port that speaks plain text)."""
    text = str(e).strip()
    said = text if isinstance(e, EddiRagError) and text else f"{type(e).__name__}: {text}" if text else type(e).__name__
    if any(words in text for words in TLS_TO_PLAIN):
        said += " (the server answered TLS in plain text: this port does not speak TLS; use the server's TLS port, or turn TLS off for it)"
    return said


def fix_of(e: BaseException) -> str | None:
    """What fixes ``e``, where it says (``EddiRagError.fix``)."""
    return e.fix if isinstance(e, EddiRagError) else None


class EddiRagError(Exception):
    status = 500
    failure: str | None = None  # FILE, DEPENDENCY, CONFIGURATION or READER, when it says
    fix: str | None = None  # what to do about it, in words (a source's failed run keeps it for Health), when it says

    def fixed_by(self, fix: str | None) -> EddiRagError:
        """This error, saying what fixes it."""
        self.fix = fix
        return self

    def body(self) -> dict[str, Any]:
        """The JSON a caller gets."""
        return {"error": str(self)}

    def headers(self) -> dict[str, str]:
        return {}

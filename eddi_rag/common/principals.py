"""Principal strings (who a document's ACL names) and the reader a search reads as (retrieval.access applies them):
``user:<id>``, ``group:<id>``, ``email:<address>``, ``public``, ``link:organization``, each maybe ``deny:``-prefixed."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eddi_rag.errors import EddiRagError

ACL = "acl"  # the metadata field of a chunk holding its document's ACL
DENY = "deny:"
MAX_ENTRIES = 1_000  # principals in one ACL (Onyx caps its lists at the same)
_ONE = r"(?:deny:)?(?:public|link:organization|(?:user|group|email):[^ ,\x00-\x1f\x7f][^,\x00-\x1f\x7f]{0,253})"
ID_PATTERN = r"^[^, \x00-\x1f\x7f][^,\x00-\x1f\x7f]*$"  # a user or group id: no comma, no control character
PRINCIPAL_PATTERN = f"^{_ONE}$"  # one entry of an ACL (JSON Schema pattern)
ACL_PATTERN = rf"^\s*{_ONE}(?:\s*,\s*{_ONE})*\s*$"  # an ACL as one comma-separated string (a query parameter, a form field)
_PRINCIPAL = re.compile(r"^(?:public|link:organization|(?:user|group|email):[^ ,\x00-\x1f\x7f][^,\x00-\x1f\x7f]{0,253})$")


class InvalidAclError(EddiRagError, ValueError):
    """An ACL that is not a list of principal strings (HTTP 400); the message names the field and the entry."""
    status = 400


def not_an_id(name: object) -> bool:
    """Whether ``name`` cannot be a user or group id: 1 to 200 characters, no comma, no control character, not starting
    with a space (what ``ID_PATTERN`` says)."""
    return (not isinstance(name, str) or not name or len(name) > 200 or "," in name or name[0] == " "
            or any(ord(ch) < 32 or ord(ch) == 127 for ch in name))


def parse_acl(value: Any, path: str = "acl") -> list[str]:
    """``value`` as an ACL: a list (or a comma-separated string) of principals ``user:<id>``, ``group:<id>``,
    ``email:<address>``, ``public``, ``link:organization``, each maybe ``deny:``-prefixed, surrounding spaces trimmed;
    duplicates dropped, order kept. InvalidAclError names ``path`` and the entry."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        raise InvalidAclError(f"{path}: an ACL is a list of principals such as \"group:finance\", got {type(value).__name__}")
    if len(value) > MAX_ENTRIES:
        raise InvalidAclError(f"{path}: at most {MAX_ENTRIES:,} principals, got {len(value):,}")
    out: list[str] = []
    for i, entry in enumerate(value):
        entry = entry.strip() if isinstance(entry, str) else entry  # ("group:hr " is group:hr, never a principal of its own)
        granted = entry[len(DENY):] if isinstance(entry, str) and entry.startswith(DENY) else entry
        if not isinstance(entry, str) or not _PRINCIPAL.match(granted):
            shown = repr(entry)[:80] if isinstance(entry, str) else type(entry).__name__
            raise InvalidAclError(f"{path}[{i}]: {shown} is no principal; use user:<id>, group:<id>, email:<address>, "
                                  "public or link:organization, or deny: before one of them")
        if entry not in out:
            out.append(entry)
    return out


@dataclass(frozen=True)
class Reader:
    """Who a search reads as. ``user`` None: nobody verified (an anonymous caller, a scheduled turn). ``groups`` None:
    the group directory's (the user was named by a caller acting for users); a tuple: the credential's own, with the
    directory's beside them (a source's permission sync fills the directory: a key bound to bob reads as bob's synced
    groups too)."""

    user: str | None
    groups: tuple[str, ...] | None = None
    email: str | None = None  # only a verified one

    def principals(self, groups: Sequence[str] = ()) -> tuple[str, ...]:
        """The principal strings this reader holds (``groups``: the directory's, beside the credential's own)."""
        if self.user is None:
            return ()
        held = ["public", "link:organization", f"user:{self.user}"]
        held += [f"group:{g}" for g in (*(self.groups or ()), *groups)]
        if self.email:
            held.append(f"email:{self.email}")
        return tuple(dict.fromkeys(held))


NOBODY = Reader(None)

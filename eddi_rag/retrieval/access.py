"""Who may read what (docs/permissions.md): a knowledge base's ``audience`` and its documents' ACLs, turned into the
filter every search of it runs with, inside the store's own query (before ranking, before k, and around the hits:
a chunk the reader may not read never joins a passage).

- ``AGENT_USERS`` (the default, EDDI's): whoever may talk to the agent reads every chunk (tenants and private
  chunks aside).
- ``OWNER``: only the knowledge base's ``owner`` (a principal, ``user:<id>``) reads it.
- ``DOCUMENT_ACL``: a chunk is read only when the reader's principals meet its ``acl``: one of its grants is among
  them and none of its ``deny:`` entries is.

A reader is a verified user (``Reader.user``) with their groups and verified e-mail; principals come from the
credential (an API key bound to a user, an OIDC token's claims) or, for a caller acting for users (the agent
runtime, an in-process caller), from the group directory (``records.groups``), never from a request body.

It fails closed: an ``OWNER`` / ``DOCUMENT_ACL`` knowledge base asked with no verified user gives nothing
(``WithheldError``: the LlmTask hook traces ``withheld``); a chunk without an ``acl`` is readable by nobody; an
error while resolving groups withholds the knowledge base. ``aclMode: warn`` reads as ``AGENT_USERS`` does and
counts (and logs) what enforcing would withhold, so an operator can check coverage first.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client import Counter

from eddi_rag.common.metrics import REGISTRY
from eddi_rag.common.principals import ACL, DENY, NOBODY, InvalidAclError, Reader, parse_acl
from eddi_rag.errors import EddiRagError
from eddi_rag.stores import filters

log = logging.getLogger(__name__)

AGENT_USERS, OWNER, DOCUMENT_ACL = "AGENT_USERS", "OWNER", "DOCUMENT_ACL"
AUDIENCES = (AGENT_USERS, OWNER, DOCUMENT_ACL)
ACL_MODES = ("enforce", "warn")

__all__ = ["ACL", "AUDIENCES", "NOBODY", "Access", "InvalidAclError", "Reader", "WithheldError", "access", "parse_acl",
           "readable_by"]

WITHHELD = Counter(
    "eddi_rag_acl_withheld", "Searches of a knowledge base whose audience withheld it (no verified user, not the owner, "
    "an error resolving groups), and chunks aclMode warn would have withheld, by mode.", ["mode"], registry=REGISTRY)


class WithheldError(EddiRagError, PermissionError):
    """Retrieval from a knowledge base was withheld from this reader (HTTP 403): it names why, never what exists."""
    status = 403


@dataclass(frozen=True)
class Access:
    """What a search of one knowledge base adds for one reader: ``node``, the filter the store runs (enforce);
    ``would``, what enforcing would add (warn: counted, not applied); ``principals``, whose they are."""

    node: filters.Node | None = None
    would: filters.Node | None = None
    principals: tuple[str, ...] = ()

    def counted(self, kb: str, hits: Sequence[Any]) -> list[str]:
        """aclMode warn: the ids among ``hits`` (anything with ``id`` and ``metadata``) enforcing would withhold,
        logged and counted."""
        if self.would is None:
            return []
        withheld = [h.id for h in hits if not filters.matches(self.would, h.metadata)]
        if withheld:
            WITHHELD.labels("warn").inc(len(withheld))
            log.warning("aclMode warn: knowledge base %r would withhold %d of %d chunks from %s", kb, len(withheld),
                        len(hits), ", ".join(self.principals[2:3]) or "a reader with no verified user")
        return withheld


EVERYONE = Access()


def readable_by(principals: Sequence[str]) -> filters.Node:
    """The chunks ``principals`` may read: their ``acl`` grants one of them and denies none."""
    return filters.And((filters.Compare(ACL, "$containsAny", tuple(principals)),
                        filters.Compare(ACL, "$containsNone", tuple(DENY + p for p in principals))))


def access(kb: str, audience: str, mode: str, owner: str | None, reader: Reader,
           groups: Callable[[str], Sequence[str]]) -> Access:
    """What ``reader`` may read of knowledge base ``kb`` (named in errors); ``groups(user)``: the directory's groups
    of a user (its error withholds the knowledge base). WithheldError when nothing may be read."""
    if audience == AGENT_USERS:
        return EVERYONE
    try:
        resolved = groups(reader.user) if reader.user is not None else ()
    except Exception as e:  # noqa: BLE001 - an error never widens what is read
        WITHHELD.labels(mode).inc()
        log.warning("knowledge base %r withheld: the groups of %r could not be resolved: %s", kb, reader.user, e)
        raise WithheldError(f"knowledge base {kb!r} withheld: the reader's groups could not be resolved") from e
    principals = reader.principals(resolved)
    if audience == OWNER:
        allowed, why = owner is not None and owner in principals, "reads by its owner only"
        node = None
    else:
        allowed, why = bool(principals), "reads by document permissions"
        node = readable_by(principals) if principals else None
    if not principals or not allowed:
        if mode == "warn":  # everything this reader gets would be withheld
            return Access(None, filters.parse({ACL: {"$containsAny": []}}), principals)
        WITHHELD.labels(mode).inc()
        who = "no verified user" if not principals else "a reader who is not its owner"
        raise WithheldError(f"knowledge base {kb!r} {why} (audience {audience}) and was asked by {who}")
    return Access(None, node, principals) if mode == "warn" else Access(node, None, principals)

"""What an ingestion job can be: ``pending → processing → completed | failed: <message> | cancelled``, and the formats
that are no file."""

from __future__ import annotations

PENDING, PROCESSING, COMPLETED, CANCELLED = "pending", "processing", "completed", "cancelled"
UNAVAILABLE = "pending: indexing unavailable"  # the KB's store is down: tried again until it is back
WAITING = (PENDING, PROCESSING, UNAVAILABLE)
MAX_ATTEMPTS = 3  # times a job is started before it fails for good
REFUSED = "refused"  # the format of an upload refused at the door (kept in the history, never run)
REEMBED = "reembed"  # the format of a job that re-embeds a whole knowledge base (its body is not a file)
RELABEL = b"relabel"  # the body of such a job that labels its documents' languages again instead (nothing embedded)

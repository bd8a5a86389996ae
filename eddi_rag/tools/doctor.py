"""``eddi-rag doctor``'s table of the checks (``Health.checks``: each with its fix)."""

from __future__ import annotations

from eddi_rag.verbs.health import Check


def format_table(checks: list[Check]) -> str:
    rows = [("KNOWLEDGE BASE", "CHECK", "STATUS", "DETAIL", "FIX")]
    rows += [(c.kb, c.check, "ok" if c.ok else "FAIL", c.detail, c.fix) for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(5)).rstrip() for r in rows)

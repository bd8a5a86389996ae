"""``eddi-rag doctor``'s table of the checks (``Health.checks``: each with its fix)."""

from __future__ import annotations

from eddi_rag.verbs.health import Check


def format_table(checks: list[Check]) -> str:
    rows = [("KNOWLEDGE BASE", "CHECK", "STATUS", "DETAIL", "FIX")]
    shown = {"ok": "ok", "warning": "WARN", "failed": "FAIL", "skipped": "skipped"}
    rows += [(c.kb, c.check, shown[c.level], c.detail, c.fix) for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(5)).rstrip() for r in rows)

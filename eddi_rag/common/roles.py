"""The roles a key or token gives, spelled once (auth, the keys API, the CLI): viewer < editor < admin, as EDDI's
eddi-viewer / eddi-editor / eddi-admin, and the auditor, who reads the audit record and nothing else."""

from __future__ import annotations

from typing import Literal, get_args

KeyRole = Literal["viewer", "editor", "admin", "auditor"]
KEY_ROLES: tuple[str, ...] = get_args(KeyRole)
ROLES: tuple[str, ...] = KEY_ROLES[:3]  # ranked
AUDITOR: str = KEY_ROLES[3]  # no role above or below it

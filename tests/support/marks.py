"""Marks a parameter carries when it reaches a server on loopback (the others run in this process)."""

from __future__ import annotations

import pytest

SERVED = [pytest.mark.integration, pytest.mark.services]


def engines(*names: str, served: tuple[str, ...]) -> list:
    """``names`` as parameters, those in ``served`` marked integration and services."""
    return [pytest.param(name, marks=SERVED if name in served else []) for name in names]

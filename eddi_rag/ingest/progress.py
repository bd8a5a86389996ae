"""What an ingestion tells whoever runs it, and asks of them: one object passed down (a queued job's
``ingest.worker.JobProgress``; ``SILENT`` when nobody listens) instead of a callback per thing heard."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def parsed(self, unit: str, done: int) -> None:
        """``done`` pages, rows or slides read so far."""

    def embedded(self, done: int, total: int) -> None:
        """``done`` chunks of ``total`` embedded (a raise stops the ingestion before anything is written)."""

    def cancelled(self) -> bool:
        """Whether to stop now (a parse process is killed)."""

    def warn(self, text: str) -> None:
        """Something the document's author should check."""


class Silent:
    """Nobody listens, nothing stops it."""

    def parsed(self, unit: str, done: int) -> None:
        pass

    def embedded(self, done: int, total: int) -> None:
        pass

    def cancelled(self) -> bool:
        return False

    def warn(self, text: str) -> None:
        pass


SILENT = Silent()

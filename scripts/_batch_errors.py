"""ik_batch's two kinds of failure, told apart by the exit status a farm's retry logic reads."""

from __future__ import annotations


class BatchError(Exception):
    """A problem with one file (exit 2); the message is one line. ``field``: the setting or input the
    add-on or the core refused (``IKSolversError.field``), else None; the report keeps it."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class WorkerCrash(Exception):
    """A worker process died or failed unexpectedly (exit 3: worth a retry)."""

"""ik_batch's Open Job Description lines (issue 21): what a farm monitor shows of a running task.

OpenJD ("How Jobs Are Run", implemented by openjd-sessions, the runtime of ``openjd run`` and of
Deadline Cloud's worker agent) reads lines of a task's stdout that start with::

    openjd_progress: <a number from 0.0 to 100.0>   the task's progress, in percent
    openjd_status: <text>                           a one-line status message
    openjd_fail: <text>                             the reason shown if the task fails

``openjd_fail`` only words the failure: whether the task failed is still its exit status. The
lines are written only when ``IK_SOLVERS_OPENJD=1`` is set (farm/ik_bake/template.yaml sets it),
so a run on a terminal stays as it was.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from _batch_progress import Progress

ENV = "IK_SOLVERS_OPENJD"
"""Set to ``1`` to turn the lines on."""


def enabled() -> bool:
    return os.environ.get(ENV) == "1"


def _line(kind: str, text: str) -> None:
    if enabled():
        # One line each: the runtime reads a message up to the end of its line only.
        print(f"openjd_{kind}: {' '.join(text.split())}", file=sys.stdout, flush=True)


def progress(percent: float) -> None:
    _line("progress", f"{min(100.0, max(0.0, percent)):.1f}")


def status(text: str) -> None:
    _line("status", text)


def fail(reason: str) -> None:
    _line("fail", reason)


def with_fail_lines(report: Callable[..., None]) -> Callable[..., None]:
    """``report`` (``_cli.report``: one problem, one line on stderr) that also words the problem as
    the task's failure reason (``openjd_fail``; the runtime keeps the last one)."""

    def report_and_fail(prog: str, message: object, *, usage: bool = False) -> None:
        report(prog, message, usage=usage)
        fail(f"{prog}: {'usage error: ' if usage else ''}{message}")

    return report_and_fail


class OpenJDProgress(Progress):
    """ik_batch's progress lines on stderr, plus ``openjd_progress`` / ``openjd_status`` on stdout:
    per file opened and per chain baked, counting each file's chains as equal parts of it."""

    def start_file(self, path: Path) -> None:
        super().start_file(path)
        progress(100.0 * self.done / self.files)
        status(f"file {self.done + 1}/{self.files} {path.name}: baking")

    def chain(self, path: Path, name: str, index: int, count: int, frames: int, seconds: float) -> None:
        super().chain(path, name, index, count, frames, seconds)
        progress(100.0 * (self.done + index / count) / self.files)
        status(f"file {self.done + 1}/{self.files} {path.name}: chain {index}/{count} {name} baked ({frames} frames)")

    def end_file(self) -> None:
        super().end_file()
        progress(100.0 * self.done / self.files)


def make_progress(files: int) -> Progress:
    """The progress reporter of a run over ``files`` files: with OpenJD lines when ``enabled()``."""
    return OpenJDProgress(files) if enabled() else Progress(files)

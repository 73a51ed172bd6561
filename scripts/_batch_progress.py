"""ik_batch's bounds and progress (issue 10): ``--jobs`` capped by the CPUs and the memory, and the
``[ik_batch] ...`` progress lines on stderr with an estimate of the time left."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

PROG = "ik_batch"
WORKER_MEMORY = 0.5 * 2**30
"""Bytes one worker process needs (a bpy process with a small file: about 0.5 GB measured, issue 10)."""


def cap_jobs(requested: int) -> tuple[int, str | None]:
    """``requested`` workers capped by the usable CPUs and the available memory; the reason if capped."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    available = available_memory()
    by_memory = requested if available is None else max(1, int(available // WORKER_MEMORY))
    jobs = max(1, min(requested, cpus, by_memory))
    if jobs == requested:
        return jobs, None
    memory = "unknown memory" if available is None else f"{available / 2**30:.1f} GB available"
    return jobs, (f"--jobs {requested} capped to {jobs}: {cpus} usable CPUs, {memory} "
                  f"at about {WORKER_MEMORY / 2**30:.1f} GB per worker")


def available_memory() -> float | None:
    """Bytes of memory available for new processes: psutil when installed, else /proc/meminfo
    (Blender's own Python has no psutil); None when neither says."""
    try:
        import psutil
    except ImportError:
        pass
    else:
        return float(psutil.virtual_memory().available)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Progress:
    """``[ik_batch] ...`` lines on stderr per file and per baked chain, with an estimate of the time left
    (the mean time per file so far times the files left, less what this file has already taken)."""

    def __init__(self, files: int):
        self.files = files
        self.done = 0
        self.started = time.perf_counter()
        self.file_started = self.started
        self.said: set[str] = set()

    def note(self, text: str) -> None:
        """``say`` ``text`` once per run (e.g. the --jobs cap, the same for every file)."""
        if text not in self.said:
            self.said.add(text)
            self.say(text)

    def say(self, text: str) -> None:
        print(f"[{PROG}] {text}", file=sys.stderr, flush=True)

    def start_file(self, path: Path) -> None:
        self.file_started = time.perf_counter()
        self.say(f"file {self.done + 1}/{self.files} {path.name}: opening{self.left()}")

    def chain(self, path: Path, name: str, index: int, count: int, frames: int, seconds: float) -> None:
        now = time.perf_counter()
        this_file = (now - self.file_started) / (index / count) if count else 0.0
        rest = this_file - (now - self.file_started) + self.per_file(this_file) * (self.files - self.done - 1)
        self.say(f"file {self.done + 1}/{self.files} {path.name}: chain {index}/{count} {name} {frames} frames "
                 f"in {seconds:.2f} s; about {rest:.0f} s left")

    def end_file(self) -> None:
        self.done += 1

    def per_file(self, guess: float) -> float:
        return (time.perf_counter() - self.started) / self.done if self.done else guess

    def left(self) -> str:
        if not self.done:
            return ""
        return f"; about {self.per_file(0.0) * (self.files - self.done):.0f} s left"

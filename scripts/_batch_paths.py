"""ik_batch's checks of every path it will write, made before any file is opened (issue 10).

Nothing the batch writes may land on something it reads or on another thing it writes, compared
resolved (symlinks followed) and, where both exist, by ``os.path.samefile`` (hard links); a report
only ever replaces an ik_batch report (its ``tool`` field says so); an existing output .blend is
replaced only with ``--overwrite`` (the old one kept as ``NAME.blend1``); and every folder written into is
probed for writing first, so a read-only folder fails in a second, not after the whole bake.

Conflicts are usage errors (``UsageError``, exit 1: the command line is wrong); a folder that
cannot be written is a ``WriteError`` (exit 2: the same run fails the same way).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from _cli import UsageError


class WriteError(Exception):
    """A folder the batch must write into cannot be written (one line, exit 2)."""


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name the same file: resolved paths equal, or the same inode."""
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


REPORT_V1_FIELDS = {"jobs", "chunk_size", "files"}
"""The unversioned report of round 1 (schema version 1): exactly these fields."""


def is_batch_report(path: Path) -> bool:
    """Whether ``path`` holds a JSON report this script wrote: ``"tool": "ik_batch"`` with a
    ``schema_version`` and a ``files`` list, or the unversioned report's exact fields. A ``files`` list
    alone is not enough (an npm ``package.json`` has one)."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return False
    if not isinstance(data, dict) or not isinstance(data.get("files"), list):
        return False
    versioned = data.get("tool") == "ik_batch" and isinstance(data.get("schema_version"), int)
    return versioned or set(data) == REPORT_V1_FIELDS


def check_written_paths(inputs: Iterable[Path], outputs: dict[Path, Path], report: Path | None, *,
                        in_place: bool, overwrite: bool) -> None:
    """Refuse (``UsageError``) any written path that meets an input or another written path.

    ``outputs`` maps each saved input to its output. With ``in_place`` an input may be its own output.
    """
    inputs = list(inputs)
    seen: list[tuple[Path, str]] = []
    for source, output in outputs.items():
        own = in_place and same_file(output, source)
        for other in inputs:
            if same_file(output, other) and not (own and other == source):
                what = "the input" if other == source else "another input,"
                raise UsageError(f"the output {output} of {source} is {what} {other}; "
                                 "use --in-place to replace an input with its baked version")
        for earlier, owner in seen:
            if same_file(output, earlier):
                raise UsageError(f"{owner} and {source} would both be saved to {output}")
        seen.append((output, str(source)))
        if own:
            continue
        if output.is_dir():
            raise UsageError(f"the output {output} of {source} is a folder")
        if output.exists() and not overwrite:
            raise UsageError(f"the output {output} exists; pass --overwrite to replace it "
                             f"(Blender keeps the old file as {output.name}1)")
    if report is None:
        return
    for other in inputs:
        if same_file(report, other):
            raise UsageError(f"--report {report} is the input {other}")
    for output, owner in seen:
        if same_file(report, output):
            raise UsageError(f"--report {report} is the output of {owner}")
    if report.is_dir():
        raise UsageError(f"--report {report} is a folder")
    if report.exists() and not is_batch_report(report):
        raise UsageError(f"--report {report} exists and is not an ik_batch report; not replacing it")


def check_writable(paths: Iterable[Path]) -> None:
    """Probe the folder of every path by creating (and removing) a file there; ``WriteError`` if one fails.

    A missing folder is created by the batch: its nearest existing ancestor is probed instead.
    ``os.access`` is not enough (root passes it on a read-only folder).
    """
    probed: set[Path] = set()
    for path in paths:
        folder = path.absolute().parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if folder in probed:
            continue
        probed.add(folder)
        if not folder.is_dir():
            raise WriteError(f"cannot write {path}: {folder} is not a folder")
        try:
            with tempfile.TemporaryFile(dir=folder, prefix=".ik_batch_probe_"):
                pass
        except OSError as error:
            raise WriteError(f"cannot write {path}: {folder} is not writable ({error.strerror})") from None


def read_manifest(path: Path) -> list[tuple[Path, Path | None]]:
    """The (input, output or None) pairs of a ``--manifest`` file (see ``--help``); UsageError if unreadable.

    JSON when the text starts with ``[``, else lines of ``INPUT`` or ``INPUT<TAB>OUTPUT``. Relative
    paths are relative to the manifest's folder, so a manifest moves with its files.
    """
    try:
        text = path.read_text()
    except OSError as error:
        raise UsageError(f"--manifest {path}: cannot be read ({error.strerror})") from None
    base = path.resolve().parent
    rows: list[tuple[object, object]] = []
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as error:
            raise UsageError(f"--manifest {path}: not valid JSON ({error})") from None
        for item in items:
            if isinstance(item, dict) and set(item) <= {"input", "output"} and "input" in item:
                rows.append((item["input"], item.get("output")))
            else:
                rows.append((item, None))
    else:
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                given, _, output = line.strip().partition("\t")
                rows.append((given.strip(), output.strip() or None))
    entries: list[tuple[Path, Path | None]] = []
    for number, (source, target) in enumerate(rows, 1):
        if not isinstance(source, str) or not source or not (target is None or isinstance(target, str) and target):
            raise UsageError(f"--manifest {path}: entry {number} is not an input path with an optional output path")
        entries.append((base / source, None if target is None else base / target))
    if not entries:
        raise UsageError(f"--manifest {path}: lists no input file")
    return entries

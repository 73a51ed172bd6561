"""Where ik_batch puts a baked file (issue 21): one run at a time per output, saved under a name of its
own, moved into place only when every check passed.

Blender saves through the fixed name ``OUTPUT@`` and renames it at the end: two processes saving the
same output (a duplicated farm task) wrote the same ``@`` file, and one run ended with an unreadable
output while a process exited 0. Here:

- ``output_lock``: a run holds ``.NAME.ik_batch-lock`` beside the output while it bakes that file,
  an advisory ``flock`` the kernel drops when the process dies (a crash leaves no stale lock); a
  second run on the same output fails that file at once (exit 2) instead of racing the first.
- ``staged``: the file is saved to a unique temporary name in the output's own folder (relative
  library paths stay valid), re-opened and checked there, and removed if anything failed, so a failed
  check leaves the output, or an ``--in-place`` input and its ``.blend1``, as they were.
- ``publish``: the checked file replaces the output with ``os.replace`` (a reader sees the old file or
  the new one, never half of one); the replaced file is kept as ``OUTPUT1`` as Blender keeps it, and
  an output that appeared while baking is not replaced without ``--overwrite``.

This module does not import bpy.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: the lock file is created exclusively instead (a crash leaves it behind)
    fcntl = None  # type: ignore[assignment]


class OutputError(Exception):
    """Another run is baking into the output, or it appeared while baking (one line, exit 2)."""


def lock_path(output: Path) -> Path:
    """The lock file of ``output``: hidden, beside it."""
    return output.parent / f".{output.name}.ik_batch-lock"


@contextlib.contextmanager
def output_lock(output: Path | None) -> Iterator[None]:
    """Hold ``output``'s lock for the block (nothing when ``output`` is None); OutputError if another
    run holds it. The output's folder is created if missing."""
    if output is None:
        yield
        return
    path = lock_path(output)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = _acquire(path, output)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # before the lock goes: a run that opened this file sees it gone
        os.close(handle)


def _acquire(path: Path, output: Path) -> int:
    busy = OutputError(f"{output}: another ik_batch run is baking into it (it holds {path.name}); "
                       "not baking it twice")
    while True:
        if fcntl is None:
            try:
                return os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
            except FileExistsError:
                raise busy from None
        handle = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(handle)
            raise busy from None
        try:
            current = os.path.samestat(os.fstat(handle), os.stat(path))
        except FileNotFoundError:
            current = False
        if current:
            return handle
        os.close(handle)  # the holder removed the file between our open and our lock: lock the new one


@contextlib.contextmanager
def staged(output: Path) -> Iterator[Path]:
    """A new, unique path beside ``output`` to save into; removed afterwards (with Blender's ``@``
    file) unless ``publish`` moved it into place."""
    output.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(dir=output.parent, prefix=f".{output.stem}.", suffix=".ik_batch.blend")
    os.close(handle)
    temporary = Path(name)
    try:
        yield temporary
    finally:
        for leftover in (temporary, Path(f"{temporary}@")):
            leftover.unlink(missing_ok=True)


def publish(temporary: Path, output: Path, *, replace: bool, versions: int) -> None:
    """Move the checked ``temporary`` to ``output`` in one step. An existing output is replaced only
    with ``replace`` (else OutputError), keeping ``versions`` old files as ``OUTPUT1``, ``OUTPUT2``,
    ... (Blender's ``save_version``)."""
    if not replace:
        try:
            os.link(temporary, output)  # fails if the output exists, whoever wrote it
            return
        except FileExistsError:
            raise OutputError(f"{output}: appeared while baking (another run?); not replaced without "
                              "--overwrite") from None
        except OSError:
            pass  # no hard links on this file system: the lock still keeps ik_batch runs apart
        if os.path.lexists(output):
            raise OutputError(f"{output}: appeared while baking (another run?); not replaced without --overwrite")
    elif versions > 0 and output.is_file():
        keep_backups(output, versions)
    os.replace(temporary, output)


def keep_backups(output: Path, versions: int) -> None:
    """Shift ``OUTPUT1`` .. to ``OUTPUT2`` .. (up to ``versions``) and keep ``output`` as ``OUTPUT1``,
    which stays readable as ``output`` throughout (a hard link, or a copy)."""
    for number in range(versions - 1, 0, -1):
        older = Path(f"{output}{number}")
        if older.exists():
            os.replace(older, f"{output}{number + 1}")
    spare = output.parent / f".{output.name}1.ik_batch-tmp"
    spare.unlink(missing_ok=True)
    try:
        os.link(output, spare)
    except OSError:
        shutil.copy2(output, spare)
    os.replace(spare, f"{output}1")

"""Ctrl-C during a bake (issue 21): a KeyboardInterrupt stops the bake even where it lands inside a
handler that Blender calls while it evaluates a frame — Blender prints what a handler raises and
carries on, so the interrupt alone would be swallowed and the bake would finish as if nothing happened.

While a bake works (:func:`honoured`) an interrupt is remembered twice over: SIGINT sets a flag
before raising as usual (where Python's default handler is in place: ``bpy`` as a module,
``ik_batch``), and our own handlers note a KeyboardInterrupt they catch (:func:`note`). The bake
calls :func:`raise_pending` after every frame change, so the interrupt surfaces there; the bake
then puts everything back and lets it propagate.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


class _Watch:
    pending = False
    """An interrupt arrived while a bake works and has not been raised yet."""
    depth = 0
    """How many :func:`honoured` blocks are open."""


def note() -> None:
    """Remember an interrupt that a handler caught (it must not be lost in Blender's handler loop)."""
    _Watch.pending = True


def watching() -> bool:
    """Whether a bake is at work that will raise a noted interrupt (:func:`raise_pending`)."""
    return _Watch.depth > 0


def raise_pending() -> None:
    """Raise KeyboardInterrupt if an interrupt arrived since the bake started working (or last raised);
    nothing outside :func:`honoured` (a cancelled bake puts things back undisturbed)."""
    if _Watch.pending and _Watch.depth:
        _Watch.pending = False
        raise KeyboardInterrupt


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    _Watch.pending = True
    signal.default_int_handler(signum, frame)


@contextmanager
def honoured() -> Iterator[None]:
    """A block of bake work in which every interrupt is remembered; raised at the latest on leaving it."""
    previous = None
    if _Watch.depth == 0:
        _Watch.pending = False
        if (threading.current_thread() is threading.main_thread()
                and signal.getsignal(signal.SIGINT) is signal.default_int_handler):
            previous = signal.signal(signal.SIGINT, _on_sigint)
    _Watch.depth += 1
    try:
        yield
        raise_pending()
    finally:
        _Watch.depth -= 1
        if not _Watch.depth:
            _Watch.pending = False  # raised, or propagating from where SIGINT raised it
        if previous is not None:
            signal.signal(signal.SIGINT, previous)

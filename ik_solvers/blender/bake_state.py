"""What every bake job keeps to put the scene back (``bake.BakeJob``, ``body_bake.BodyBakeJob``): the
current frame, the pose and the action when it starts; the frame put back after evaluating others,
everything put back on cancel, an error or Ctrl-C, the reports stored on the chains when it ends."""

from __future__ import annotations

import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, TypeVar

from . import interrupts
from .identity import remember
from .report import BakeReport, store_report
from .snapshots import ActionSnapshot, PoseSnapshot

if TYPE_CHECKING:
    import bpy


Result = TypeVar("Result")


def steps_until(steps: Generator[None, None, Result], deadline: float | None) -> tuple[bool, Result | None]:
    """Run a computation in ``steps`` (a key reduction's rounds) until it ends — ``(True, its result)`` — or,
    between two steps, past ``deadline`` — ``(False, None)``: call again to go on."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return True, done.value
        if deadline is not None and time.perf_counter() > deadline:
            return False, None


class BakeState:
    """The scene a bake started from (:meth:`_snapshot`), and the ways a bake ends."""

    def __init__(self, context: bpy.types.Context, obj: bpy.types.Object) -> None:
        scene, view_layer = context.scene, context.view_layer
        assert scene is not None and view_layer is not None  # a bake runs in a scene's context
        self.scene = scene
        self.view_layer = view_layer
        self.obj = obj
        self._finished = False

    def _snapshot(self) -> None:
        """Remember the current frame, the pose and (before its first change) the action."""
        self._frame = (self.scene.frame_current, self.scene.frame_subframe)
        self._pose = PoseSnapshot(self.obj)
        self.action = ActionSnapshot(self.obj)

    @contextmanager
    def _interruptible(self) -> Iterator[None]:
        """Bake work that a Ctrl-C stops: also one landing in a handler Blender calls while it
        evaluates a frame (``interrupts``); the job then puts everything back and the
        KeyboardInterrupt propagates."""
        try:
            with interrupts.honoured():
                yield
        except KeyboardInterrupt:
            self.cancel()
            raise

    def _restore_frame(self) -> None:
        frame, subframe = self._frame
        if (self.scene.frame_current, self.scene.frame_subframe) != (frame, subframe):
            self.scene.frame_set(frame, subframe=subframe)
            interrupts.raise_pending()

    def _end(self, baked: Iterable[tuple[str, BakeReport | None, Sequence[str]]], keep_rotation_of: set[str],
             keep_location_of: frozenset[str] | set[str] = frozenset()) -> None:
        """Restore the current frame and the unbaked pose (the keyed channels show their keys), store each
        chain's report and remember its bones (``baked``: name, report, bones), release the snapshot."""
        self._restore_frame()
        self.view_layer.update()
        self._pose.restore(keep_rotation_of=keep_rotation_of, keep_location_of=keep_location_of)
        settings = {chain.name: chain for chain in self.obj.ik_solvers.chains}  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        for name, report, bones in baked:
            if report is not None and name in settings:
                store_report(settings[name], report)
                remember(self.obj, settings[name], bones)
        self._finished = True
        self.action.release()

    def cancel(self) -> None:
        """Put the action, the frame and the pose back exactly as they were."""
        if self._finished:
            return
        self.action.restore()
        self._restore_frame()
        self._pose.restore()
        self.view_layer.update()
        self._finished = True

"""Live mode checks Blender's evaluation of what it wrote, as the Solve operator does (issue 22).

A constraint or driver on a chain bone (Rigify's ORG bones posed by Copy Transforms, a Copy Rotation
on the forearm) may put the tip Blender shows elsewhere than the solve. Checking inside the handler
would need a depsgraph evaluation per move: Blender evaluates the pose live mode writes in a second
pass of the same update, which runs no post-update handlers. So a write is only noted
(:func:`note_chain_write`, ``body_live.write_live_body``: the pose, each goal, no evaluation) and checked
later against Blender's evaluation with the Solve operator's helpers (``verify.posed_tip_offset``,
``verify.evaluated_goal_excess``):

- by a one-shot timer (:func:`check_written`, at most every :data:`CHECK_DELAY` seconds while the
  target moves, and once after it stops), which Blender's event loop runs after the update;
- by the next update that reads the armature and has nothing to solve (a constraint added or its
  target moved while live: the warning comes at once).

Either checks only while the chain's bones still hold the channels written (a frame change, a hand
edit or a bake posed them otherwise: nothing to say of our write). The verdict — the Solve operator's
sentence (``verify.overridden_sentence``) or nothing — is the chain's stored message, which the panel's
status shows; a solve keeps the chain's last verdict until its own write is checked (no flicker while
dragging).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import bpy
import numpy as np

from .verify import evaluated_goal_excess, overridden_sentence, posed_tip_offset

if TYPE_CHECKING:
    from .live_state import LiveChain, RigValues
    from .spec import ChainSpec

CHECK_DELAY = 0.1
"""Seconds from a live write to the timer's check of Blender's evaluation (a timer runs once armed)."""

CHANNELS = (("rotation_mode", 1), ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4),
            ("location", 3))
"""The pose-bone channels whose values, as written, make Blender's evaluation one of our write."""


@dataclass(eq=False, slots=True)
class Written:
    """One chain's pose as live mode wrote it, to be checked against Blender's evaluation (made at every
    live write: slotted and not frozen, the cheapest dataclass to make).

    Attributes
    ----------
    armature : str
        The armature's name (looked up again: no reference to scene data is kept).
    spec : ChainSpec
        The chain (its rig, its tolerance).
    q : ndarray, shape (n_dof,) or None
        A single chain: the joint variables written (compared with Blender's tip, ``posed_tip_offset``).
    goal : ndarray, shape (3,) or None
        A body chain: its goal in armature space as solved (``evaluated_goal_excess``).
    error : float
        A body chain: the solve's distance from that goal (scene units).
    """

    armature: str
    spec: ChainSpec
    q: np.ndarray | None = None
    goal: np.ndarray | None = None
    error: float = 0.0

    def verdict(self, obj: bpy.types.Object) -> str:
        """The Solve operator's warning if Blender's evaluation (now) puts the tip elsewhere, else ""."""
        if self.q is not None:
            offset = posed_tip_offset(obj, self.spec, self.spec.rig, self.q)
        else:
            assert self.goal is not None  # a body chain's write
            world = np.array(obj.matrix_world, dtype=float)
            offset = evaluated_goal_excess(obj, self.spec, self.error, world[:3, :3] @ self.goal + world[:3, 3])
        return "" if offset is None else overridden_sentence(self.spec.name, offset)


def store_verdict(chain: bpy.types.PropertyGroup, verdict: str) -> None:
    """The verdict as the chain's message (written only when it changed: each write is an update)."""
    if chain.last_message != verdict:  # type: ignore[attr-defined]  # IK_SOLVERS_PG_chain
        chain.last_message = verdict  # type: ignore[attr-defined]  # IK_SOLVERS_PG_chain


# --------------------------------------------------------------------------- single chains
def _row_index(rig: RigValues, bones: list[int]) -> np.ndarray:
    """Where :data:`CHANNELS` of pose bones ``bones`` sit in ``rig.values``."""
    bones_array = np.asarray(bones)[:, None]
    return np.concatenate([(rig.slices[name].start + bones_array * width + np.arange(width)).ravel()
                           for name, width in CHANNELS])


def note_chain_write(obj: bpy.types.Object, record: LiveChain, spec: ChainSpec, q: np.ndarray | Sequence[float],
                     bones: list[int] | None = None) -> None:
    """Remember the pose ``q`` just written to ``spec``'s joint bones (at ``bones`` in ``obj.pose.bones``)
    and the channels as ``record.rig_values`` read them after the write (``live_state.after_write``)."""
    rig = record.rig_values
    assert rig is not None and obj.pose is not None  # after_write read the armature's channels
    layout = (rig.counts, tuple(spec.rig.joint_bones))
    if record.row_layout != layout:
        if bones is None:
            bones = [obj.pose.bones.find(name) for name in spec.rig.joint_bones]
        record.row_index, record.row_layout = _row_index(rig, bones), layout
    assert record.row_index is not None  # set just above
    record.written = Written(obj.name, spec, q=np.asarray(q, dtype=float))  # not changed after: a solve's own array
    record.written_rows = rig.values[record.row_index]
    record.checked = False
    check_soon()


def check_chain(obj: bpy.types.Object, chain: bpy.types.PropertyGroup, record: LiveChain, values: RigValues) -> None:
    """Check the chain's last write against Blender's evaluation now, if ``values`` (a read of the
    armature now) show its bones as written; else forget the write (its pose is gone)."""
    written = record.written
    if written is None or record.row_index is None or record.row_layout is None:
        return
    rows = record.written_rows
    if rows is None or values.counts != record.row_layout[0] or not np.array_equal(values.values[record.row_index], rows):
        record.written = None
        return
    record.overridden = written.verdict(obj)
    record.checked = True
    store_verdict(chain, record.overridden)


def armature_of(written: Written, session_uid: int) -> bpy.types.Object | None:
    """The armature a write went to, if it is still that one (a file load frees the old one)."""
    obj = bpy.data.objects.get(written.armature)
    return obj if obj is not None and obj.session_uid == session_uid and obj.pose is not None else None


def _check_chain_now(session_uid: int, record: LiveChain) -> None:
    """The timer's check of one chain: its channels read again (into a copy of the last read)."""
    from .live_state import RigValues

    written, rig = record.written, record.rig_values
    assert written is not None and rig is not None  # note_chain_write had both
    obj = armature_of(written, session_uid)
    chain = None if obj is None else obj.ik_solvers.chains.get(written.spec.name)  # type: ignore[attr-defined]  # registered at runtime
    if obj is None or obj.pose is None or chain is None or len(obj.pose.bones) != rig.counts[0]:
        record.written = None
        return
    now = RigValues(rig.values.copy(), rig.slices, rig.counts)
    for name, _ in CHANNELS:
        obj.pose.bones.foreach_get(name, now.values[rig.slices[name]])
    check_chain(obj, chain, record, now)


# --------------------------------------------------------------------------- the timer
def check_soon() -> None:
    """Arm the timer that checks the writes not checked yet (once armed it runs once)."""
    if not bpy.app.timers.is_registered(check_written):
        bpy.app.timers.register(check_written, first_interval=CHECK_DELAY)


def check_written() -> float | None:
    """Check every live write not checked yet against Blender's evaluation (the timer's function; run
    by Blender's event loop after the update that wrote). Nothing escapes into Blender's timer loop;
    while live mode writes or a bake holds it still, it tries again later."""
    from .body_live import check_body_written
    from .live_state import state

    if state.busy or state.paused or state.loading:
        return CHECK_DELAY
    try:
        for key, record in list(state.chains.items()):
            if record.written is not None and not record.checked:
                _check_chain_now(key[0], record)
        check_body_written()
    except Exception as error:  # never into Blender's timer loop
        print(f"IK Solvers: live mode could not check Blender's evaluation: {error}")
    return None


def unregister() -> None:
    """Disarm the timer."""
    if bpy.app.timers.is_registered(check_written):
        bpy.app.timers.unregister(check_written)

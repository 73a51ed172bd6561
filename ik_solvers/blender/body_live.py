"""Live mode for a body (SPEC §8): an armature that solves its chains together is re-solved as one
body whenever one of its enabled chains is Live and a goal, a setting or the frame changed.

Every update reads and checks the whole body (``body.read_body``) and samples every goal; the solve
runs only when that, or the pose left by the last write (an undo, a hand edit), changed, so our own
write never causes another solve. There is no quick path: a goal move re-reads the body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .body import BodyInputs, BodySpec, read_body, sample_body, solve_body_inputs, store_goal_outcomes, write_body_pose
from .live_state import turn_off
from .spec import settings_key

if TYPE_CHECKING:
    import bpy

    from .properties import IK_SOLVERS_PG_chain

_solved: dict[int, tuple] = {}
"""Armature ``session_uid`` → what its last live body solve read and the pose it wrote."""

_POSE_CHANNELS = (("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4), ("location", 3))


def _pose_key(obj: bpy.types.Object) -> bytes:
    """Every pose bone's rotation and location channels, as stored."""
    assert obj.pose is not None  # a body's armature
    bones = obj.pose.bones
    parts = []
    for prop, width in _POSE_CHANNELS:
        values = np.empty(len(bones) * width, dtype=np.float32)
        bones.foreach_get(prop, values)
        parts.append(values.tobytes())
    return b"".join(parts)


def _inputs_key(obj: bpy.types.Object, spec: BodySpec, inputs: BodyInputs) -> tuple:
    settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
    arrays = [*inputs.positions, *(r for r in inputs.rotations if r is not None),
              *(p for p in inputs.poles if p is not None), inputs.swivels, inputs.fixed_q,
              np.array(obj.matrix_world, dtype=float)]
    return (settings.body_root, tuple(chain.name for chain in spec.specs), spec.weights, spec.priorities,
            tuple(settings_key(c) for c in settings.chains),
            b"".join(np.ascontiguousarray(a).tobytes() for a in arrays))


def update_live_body(obj: bpy.types.Object, live: list[IK_SOLVERS_PG_chain], depsgraph: bpy.types.Depsgraph | None,
                     force: bool) -> int:
    """Re-solve ``obj``'s body if what it reads changed (always if ``force``); 1 if solved, else 0.

    A body that cannot be solved keeps its pose and turns live mode off on its ``live`` chains with
    the reason (``live_state.turn_off``); nothing is raised into Blender's handler loop.
    """
    try:
        spec = read_body(obj)
        inputs = sample_body(obj, spec, depsgraph)
        read = _inputs_key(obj, spec, inputs)
        last = _solved.get(obj.session_uid)
        if not force and last is not None and last == (read, _pose_key(obj)):
            return 0
        result = solve_body_inputs(spec, inputs)
        write_body_pose(obj, spec, result)
        store_goal_outcomes(obj, spec, result)
        _solved[obj.session_uid] = (read, _pose_key(obj))
        return 1
    except Exception as error:  # never into Blender's handler loop
        _solved.pop(obj.session_uid, None)
        for chain in live:
            turn_off(obj, chain, error)
        return 0


def forget_bodies() -> None:
    """Forget every body's last solve (a file load)."""
    _solved.clear()

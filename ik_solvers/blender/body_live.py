"""Live mode for a body (SPEC §8): an armature that solves its chains together is re-solved as one
body whenever one of its enabled chains is Live and a goal, a setting or the frame changed.

Reading the body (``body.read_body``: every chain's rig, the fixed links, the ``Body``) costs
more than anything but the solve, and a goal move changes none of it. Each update reads in bulk
every armature value a body read depends on (``live_state.rig_values``: bones, pose, IK settings)
and the body's settings; when both are as our last write left them, the body read then is kept
(``body.recheck_body`` runs the checks that read other objects again), else it is read again. Every
goal is sampled at every update; the solve runs only when the inputs, or the pose left by the last
write (an undo, a hand edit), changed, so our own write never causes another solve. A kept body
and a body read again give the same solve, bit for bit: a body read depends on nothing the write sets
(the chains' rotations, the root's location and rotation). There is no quick path: every move of an
object runs the full update of live mode (``live.update_live_chains``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from .body import (
    BodyInputs,
    BodyResult,
    BodySpec,
    body_chain_settings,
    quaternion_bone_indices,
    read_body,
    recheck_body,
    sample_body,
    solve_body_inputs,
    store_goal_outcomes,
    write_body_pose,
)
from .live_check import Written, armature_of, check_soon, store_verdict
from .live_state import LiveChain, after_write, rig_values, turn_off
from .root_space import uniform_scale
from .spec import settings_key

if TYPE_CHECKING:
    import bpy

    from .properties import IK_SOLVERS_PG_chain


@dataclass(eq=False)
class LiveBody:
    """Live mode's record of one body between updates.

    Attributes
    ----------
    spec : BodySpec or None
        The body as last read.
    armature : LiveChain
        Holds the buffer of the bulk read of the armature (``live_state.rig_values``).
    read_key : bytes or None
        The armature's values and the body settings after our last write: equal, ``spec`` holds.
    solved : bytes or None
        The inputs of the last solve: equal (with ``read_key``), nothing to solve.
    quaternion_bones : list of int or None
        ``body.quaternion_bone_indices`` of ``spec`` (its bones' rotation modes are in ``read_key``).
    written : list of live_check.Written
        Each chain's goal and error of the last write, to check against Blender's evaluation
        (``live_check``; while the armature reads ``read_key``, Blender's evaluation is of that write).
    checked : bool
        Whether the timer checked that write already.
    overridden : dict
        Chain name → the last check's verdict (the Solve operator's warning, or ""), kept by the solves.
    """

    spec: BodySpec | None = None
    armature: LiveChain = field(default_factory=LiveChain)
    read_key: bytes | None = None
    solved: bytes | None = None
    quaternion_bones: list[int] | None = None
    written: list[Written] = field(default_factory=list)
    checked: bool = True
    overridden: dict[str, str] = field(default_factory=dict)


bodies: dict[int, LiveBody] = {}
"""Armature ``session_uid`` → its body's record."""


def armature_key(obj: bpy.types.Object, record: LiveBody, chains: list[IK_SOLVERS_PG_chain]) -> bytes:
    """Every armature value and body setting a body read depends on, as bytes (the settings first:
    :func:`_key_after_write` keeps them)."""
    settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
    values = rig_values(obj, chains[0], record.armature)
    bones = obj.data.bones  # type: ignore[union-attr]  # a body's armature
    names = record.spec.body.names if record.spec is not None else ()
    parents = tuple((name, getattr(bones[name].parent, "name", "")) if name in bones else (name,) for name in names)
    body = (settings.body_root, parents, np.array(obj.matrix_world, dtype=float).tobytes(),
            tuple((c.name, c.weight, c.priority, settings_key(c)) for c in chains))
    described = repr(body).encode()
    return len(described).to_bytes(8, "little") + described + values.values.tobytes()


def _key_after_write(obj: bpy.types.Object, record: LiveBody, before: bytes) -> bytes:
    """The :func:`armature_key` the next update reads if nothing but our write changed the armature
    since ``before`` (read this update): only the channels the write sets are read again."""
    values = record.armature.rig_values
    assert values is not None  # armature_key read them
    after_write(obj, values, _WRITTEN_CHANNELS)
    settings = 8 + int.from_bytes(before[:8], "little")
    return before[:settings] + values.values.tobytes()


_WRITTEN_CHANNELS = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle", "location")
"""What ``body.write_body_pose`` may set: the chains' rotations, the root's location and rotation."""


def _inputs_key(inputs: BodyInputs) -> bytes:
    arrays = [*inputs.positions, *(r for r in inputs.rotations if r is not None),
              *(p for p in inputs.poles if p is not None), inputs.swivels, inputs.fixed_q]
    return b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)


def live_body_spec(obj: bpy.types.Object, record: LiveBody, chains: list[IK_SOLVERS_PG_chain],
                   ) -> tuple[BodySpec, bool, bool]:
    """The body of ``obj`` (the ``record``'s kept one if it holds, else read again and kept), whether the
    armature and the body settings are as the last write left them, and whether the body was read again."""
    if not chains:
        read_body(obj)  # refuses the body in its own words: no enabled chain
    key = armature_key(obj, record, chains)
    as_left = record.spec is not None and key == record.read_key
    spec = recheck_body(obj, record.spec) if as_left and record.spec is not None else None
    fresh = spec is None
    if spec is None:
        record.spec = spec = read_body(obj)
        record.quaternion_bones = quaternion_bone_indices(obj, spec)
        key = armature_key(obj, record, chains)  # with the names of the body's bones
    record.read_key = key
    return spec, as_left, fresh


def write_live_body(obj: bpy.types.Object, record: LiveBody, result: BodyResult, inputs: BodyInputs, fresh: bool) -> None:
    """Write the pose and each goal's status of ``result`` (a solve of ``record``'s body from ``inputs``;
    ``fresh``: read again this update, its chains remember their bones) and remember the armature as
    written, and each goal and error for the check of Blender's evaluation (``live_check``)."""
    assert record.spec is not None and record.read_key is not None  # live_body_spec read them
    write_body_pose(obj, record.spec, result, quaternion_bones=record.quaternion_bones)
    store_goal_outcomes(obj, record.spec, result, remember_bones=fresh, messages=record.overridden)
    record.read_key = _key_after_write(obj, record, record.read_key)
    scale = uniform_scale(np.array(obj.matrix_world, dtype=float))
    record.written = [Written(obj.name, chain, goal=position[0], error=float(goal.error[0]) * scale)
                      for chain, position, goal in zip(record.spec.specs, inputs.positions, result.goals)]
    record.checked = False
    check_soon()


def check_body(obj: bpy.types.Object, record: LiveBody) -> None:
    """Check the body's last write against Blender's evaluation now (the armature reads as that write
    left it: the caller knows), each chain's verdict stored as its message."""
    chains = obj.ik_solvers.chains  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
    for written in record.written:
        verdict = record.overridden[written.spec.name] = written.verdict(obj)
        chain = chains.get(written.spec.name)
        if chain is not None:
            store_verdict(chain, verdict)
    record.checked = True


def check_body_written() -> None:
    """The timer's check of every body's write not checked yet (``live_check.check_written``), where
    the armature still reads as that write left it (else the write is forgotten: its pose is gone)."""
    for session_uid, record in list(bodies.items()):
        if record.checked or not record.written:
            continue
        obj = armature_of(record.written[0], session_uid)
        if obj is None or armature_key(obj, record, body_chain_settings(obj)) != record.read_key:
            record.written, record.checked = [], True
            continue
        check_body(obj, record)


def update_live_body(obj: bpy.types.Object, live: list[IK_SOLVERS_PG_chain], depsgraph: bpy.types.Depsgraph | None,
                     force: bool) -> int:
    """Re-solve ``obj``'s body if what it reads changed (always if ``force``); 1 if solved, else 0.

    A body that cannot be solved keeps its pose and turns live mode off on its ``live`` chains with
    the reason (``live_state.turn_off``); nothing is raised into Blender's handler loop.
    """
    record = bodies.setdefault(obj.session_uid, LiveBody())
    try:
        chains = body_chain_settings(obj)
        spec, as_left, fresh = live_body_spec(obj, record, chains)
        inputs = sample_body(obj, spec, depsgraph)
        sampled = _inputs_key(inputs)
        if not force and not fresh and as_left and record.solved == sampled:
            if record.written:
                check_body(obj, record)  # nothing to solve: Blender's evaluation of our last write, now
            return 0
        write_live_body(obj, record, solve_body_inputs(spec, inputs), inputs, fresh)
        record.solved = sampled
        return 1
    except Exception as error:  # never into Blender's handler loop
        bodies.pop(obj.session_uid, None)
        for chain in live:
            turn_off(obj, chain, error)
        return 0


def forget_bodies() -> None:
    """Forget every body's last read and solve (a file load)."""
    bodies.clear()

"""Solving a chain on a Rigify rig (``_rigify_rigs.RigifySetup``) with our add-on or Blender's IK
constraint, and measuring the result from Blender's own evaluation of the pose.

Ours go through the add-on's operators (``chain_add`` with the tip bone active and the target
selected, ``capture_preferred_pose`` at the rest pose, ``bake``); Blender's is its IK constraint
(Standard solver, with or without the setup's pole) baked by ``nla.bake``. Measurements read
Blender's evaluated pose only (``scene.frame_set``, ``matrix_world @ pose_bone.head`` / ``.tail`` /
``.matrix``), never the add-on's FK, with the measures of ``_measure.py``:

- tip error per frame and the geometric lower bound;
- backward joints: a joint bent to the opposite side of its rest bend by more than
  ``BACKWARD_DEGREES``, measured in the parent bone's frame;
- flips: the bend normal of some inner joint turning by more than ``FLIP_TURN_DEGREES`` between
  consecutive frames of one path (see :func:`measure`).

Import ``bpy`` the way the caller needs before using these.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass

import numpy as np
from _measure import (
    backward_joints,
    bend_angles,
    flip_frames,
    joint_normals,
    normal_turns,
    rest_lower_bounds,
    tip_errors,
    warned_flips,
)
from _rigify_rigs import RigifySetup, add_empty

TOLERANCE = 1e-5
"""Tolerance given to our chains (scene units: 0.01 mm): what an animator needs, and Blender's
constraint reaches about that on these rigs."""


# --------------------------------------------------------------------------- solving
def add_chain(setup: RigifySetup, method: str | None = None, *, pole: bool = False, name: str = "Chain",
              tolerance: float = TOLERANCE, max_iterations: int | None = None,
              reference_weight: float | None = None):
    """Add our chain through the operators (``chain_add`` with the tip bone active and the target
    selected), set its length and options, capture the preferred pose at the rest pose.

    ``method`` None gives the chain what ``chain_add`` gives a new chain of its length
    (``chains.default_method``: HI for two bones; SDLS with ``DEFAULT_REFERENCE_WEIGHT`` for longer
    ones — ``chain_add`` itself makes a two-bone chain, whose default we must not keep once the length
    is set). ``reference_weight`` overrides the chain's pull toward its reference pose. With ``pole``
    the chain gets the pole Empty (HI: the Pole Object zero-plane map). Returns the chain's settings.
    """
    import bpy

    from ik_solvers.blender.chains import DEFAULT_REFERENCE_WEIGHT, default_method
    from ik_solvers.core import Method

    rig = setup.rig
    bpy.context.view_layer.objects.active = rig
    rig.data.bones.active = rig.data.bones[setup.bones[-1]]
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig, setup.target]):
        assert bpy.ops.ik_solvers.chain_add() == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime (fake-bpy-module lists only built-in ones)
        chain = rig.ik_solvers.active_chain  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime
        chain.name = name
        chain.tip_bone = setup.bones[-1]
        chain.chain_length = len(setup.bones)
        chain.target = setup.target
        if method is None:
            chosen = default_method(len(setup.bones))
            chain.method = chosen.value
            chain.reference_weight = DEFAULT_REFERENCE_WEIGHT if chosen is Method.SDLS else 0.0
        else:
            chain.method = method
        if reference_weight is not None:
            chain.reference_weight = reference_weight
        chain.tolerance = tolerance
        if max_iterations is not None:
            chain.max_iterations = max_iterations
        if pole:
            chain.pole_target = setup.pole
            if chain.method == "HI":
                chain.zero_plane_map = "POLE_OBJECT"
        assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime (fake-bpy-module lists only built-in ones)
    return chain


def bake_ours(setup: RigifySetup, chain_name: str = "Chain", frame_start: int = 1,
              frame_end: int | None = None) -> float:
    """``ik_solvers.bake`` of one chain over the range (default: all paths); returns seconds."""
    import bpy

    rig = setup.rig
    frame_end = setup.frame_end if frame_end is None else frame_end
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        started = time.perf_counter()
        result = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=frame_start, frame_end=frame_end, chain=chain_name)  # type: ignore[attr-defined]  # an operator registered at runtime (fake-bpy-module lists only built-in ones)
        seconds = time.perf_counter() - started
    assert result == {"FINISHED"}, result
    return seconds


def add_blender_ik(setup: RigifySetup, pole: bool) -> object:
    """Blender's IK constraint (Standard solver) on the tip bone over the chain; with ``pole`` the pole
    Empty and, of 0°, ±90°, 180°, the pole angle that moves the rest pose least (Blender leaves it to
    the user)."""
    import bpy

    rig = setup.rig
    constraint = rig.pose.bones[setup.bones[-1]].constraints.new("IK")
    constraint.name = "IKCompare"
    constraint.chain_count = len(setup.bones)
    if pole:
        probe = add_empty("PoleProbe", setup.rest_joints[-1])
        constraint.target = probe
        constraint.pole_target = setup.pole
        best, best_angle = np.inf, 0.0
        for angle in (0.0, math.pi / 2, -math.pi / 2, math.pi):
            constraint.pole_angle = angle
            bpy.context.view_layer.update()
            moved = np.abs(evaluated_joints(setup) - setup.rest_joints).max()
            if moved < best:
                best, best_angle = moved, angle
        constraint.pole_angle = best_angle
        bpy.data.objects.remove(probe)
    constraint.target = setup.target
    bpy.context.scene.frame_set(1)
    return constraint


def bake_blender(setup: RigifySetup) -> float:
    """``nla.bake`` (visual keying, constraints kept) of the chain bones over all frames; seconds."""
    return nla_bake(setup.rig, set(setup.bones), setup.frame_end)


def nla_bake(rig, bones: set[str], frame_end: int) -> float:
    """Blender's ``nla.bake`` (visual keying, constraints kept) of ``bones`` of ``rig`` over frames 1 …
    ``frame_end``, in Pose Mode with just those bones selected; seconds."""
    import bpy

    from ik_solvers.blender import compat

    bpy.context.view_layer.objects.active = rig
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        bpy.ops.object.mode_set(mode="POSE")
        for pose_bone in rig.pose.bones:
            compat.select_pose_bone(pose_bone, pose_bone.name in bones)
        started = time.perf_counter()
        result = bpy.ops.nla.bake(frame_start=1, frame_end=frame_end, only_selected=True, visual_keying=True,
                                  clear_constraints=False, bake_types={"POSE"})
        seconds = time.perf_counter() - started
        bpy.ops.object.mode_set(mode="OBJECT")
    assert result == {"FINISHED"}, result
    return seconds


# --------------------------------------------------------------------------- measuring (Blender's evaluation)
def evaluated_joints(setup: RigifySetup) -> np.ndarray:
    """World joints ``(n+1, 3)`` of the pose as Blender evaluates it now (update the view layer first)."""
    world = np.array(setup.rig.matrix_world)
    pose = [setup.rig.pose.bones[b] for b in setup.bones]
    local = np.array([b.head[:] for b in pose] + [pose[-1].tail[:]])
    return local @ world[:3, :3].T + world[:3, 3]


def evaluate(setup: RigifySetup, frames=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blender's evaluation at ``frames`` (default all): joints ``(F, n+1, 3)``, pose bone world
    rotations ``(F, n, 3, 3)`` (orthonormalised) and targets ``(F, 3)``."""
    import bpy

    frames = np.arange(1, setup.frame_end + 1) if frames is None else np.asarray(frames)
    scene = bpy.context.scene
    n = len(setup.bones)
    joints = np.empty((len(frames), n + 1, 3))
    rotations = np.empty((len(frames), n, 3, 3))
    targets = np.empty((len(frames), 3))
    for i, frame in enumerate(frames):
        scene.frame_set(int(frame))
        world = np.array(setup.rig.matrix_world)
        joints[i] = evaluated_joints(setup)
        for k, name in enumerate(setup.bones):
            m = world[:3, :3] @ np.array(setup.rig.pose.bones[name].matrix)[:3, :3]
            rotations[i, k] = m / np.linalg.norm(m, axis=0)
        targets[i] = setup.target.matrix_world.translation[:]
    return joints, rotations, targets


@dataclass(frozen=True)
class Measurement:
    """Per-frame measurements of one solve over all frames (from Blender's evaluation)."""

    errors: np.ndarray  # (F,) scene units
    bounds: np.ndarray  # (F,) geometric lower bound
    bends: np.ndarray  # (F, n-1) degrees, positive on the rest side
    backward: np.ndarray  # (F, n-1) bool
    flips: list[int]  # 1-based frames


def measure(setup: RigifySetup, frames=None) -> Measurement:
    """Evaluate every frame (or ``frames``) and measure it; flips only when every frame is measured.

    Flips: the bend normal of some inner joint (:func:`_measure.joint_normals`) turning by more than
    ``FLIP_TURN_DEGREES`` between consecutive frames of one path. Per joint rather than one plane
    through the root, a reference joint and the tip: on two bones the same thing; on a zigzag chain
    (the human leg with foot: knee and ankle bent opposite ways) that plane's normal reverses whenever
    the reference joint crosses the root → tip line, although the chain stays in one plane with every
    joint bent its own way (it counted 2 such "flips" in HI's crouch).
    """
    joints, rotations, targets = evaluate(setup, frames)
    bends = bend_angles(joints, rotations, setup.rest_bend_axes)
    flips = [] if frames is not None else [
        frame + 1 for frame in flip_frames(normal_turns(joint_normals(joints), setup.frames_per_path))]
    return Measurement(tip_errors(joints, targets), rest_lower_bounds(setup.rest_joints, targets),
                       bends, backward_joints(bends), flips)


def bake_report(chain) -> dict | None:
    """The add-on's report of the chain's last bake (``not_reached_frames``, ``flip_frames`` with
    ``warned``, status counts), or None if it has none or it cannot be read."""
    try:
        return json.loads(chain.last_bake_report)
    except (AttributeError, TypeError, ValueError):
        return None


def action_keys(rig, bones) -> dict[tuple[str, int], np.ndarray]:
    """Every key (``co``, float32 pairs) of the bones' rotation F-curves in the rig's action."""
    from ik_solvers.blender import compat

    channelbag = compat.channelbag_for_assigned_slot(rig.animation_data)
    keys = {}
    for fcurve in channelbag.fcurves:
        if any(fcurve.data_path == f'pose.bones["{b}"].rotation_{mode}'
               for b in bones for mode in ("quaternion", "euler", "axis_angle")):
            co = np.empty(2 * len(fcurve.keyframe_points), np.float32)
            fcurve.keyframe_points.foreach_get("co", co)
            keys[(fcurve.data_path, fcurve.array_index)] = co
    return keys


def pole_warning_frames(setup: RigifySetup, chain) -> set[int]:
    """Frames at which an HI chain's pole warning is on (empty for other methods): the solve the bake
    ran, repeated through the Blender layer's own sampling and solving."""
    import bpy

    if chain.method != "HI":
        return set()
    from ik_solvers.blender.sampling import sample_fcurves
    from ik_solvers.blender.solving import prepare_solve, run_solve
    from ik_solvers.blender.spec import chain_spec

    rig = setup.rig
    rig.animation_data.action = None  # the reference pose the bake solved from (the keys would move it)
    for pose_bone in rig.pose.bones:
        pose_bone.matrix_basis.identity()
    bpy.context.scene.frame_set(1)
    spec = chain_spec(rig, chain)
    frames = np.arange(1, setup.frame_end + 1)
    result = run_solve(prepare_solve(spec, sample_fcurves(rig, spec, spec.rig, frames)))
    if result.hi is None:
        return set()
    return {int(f) for f, on in zip(frames, np.asarray(result.hi.pole_warnings, bool)) if on}


def count_warned_flips(frame_end: int, flips: list[int], report: dict | None, warnings: set[int]) -> int:
    """How many of the measured ``flips`` (1-based frames of a bake over ``1 … frame_end``) our bake warned
    of: the frame (or the one before) is listed in the bake report's flip frames or its frames bending a
    joint against its preferred way (a joint folding through straight turns its bend normal over), or has
    the pole warning on."""
    listed = np.zeros(frame_end, bool)
    report = report or {}
    for frame in {int(f["frame"]) for key in ("flip_frames", "against_bend_frames") for f in report.get(key, ())} | warnings:
        listed[frame - 1] = True
    return sum(warned_flips([frame - 1 for frame in flips], listed))

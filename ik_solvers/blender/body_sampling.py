"""A body bake's goals read from F-curves where that is exactly Blender's evaluation, and whether the
baked keys alone move the body (the body's counterpart of ``sampling.fcurve_sampling_blockers`` and
``verify.keys_alone_move_the_chain``): no ``frame_set`` per frame to sample, a sparse after-bake check.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .body import BodyInputs, BodySpec, armature_inverse, sample_body
from .keyframes import assigned_fcurves, rotation_data_path
from .sampling import fcurve_sampling_blockers, sample_point_fcurves
from .verify import keys_alone_move_the_chain

if TYPE_CHECKING:
    import bpy


def _baked_paths(obj: bpy.types.Object, spec: BodySpec) -> set[str]:
    """The F-curve paths a body bake writes: every keyed bone's rotation, the root's location."""
    assert obj.pose is not None  # read_body read the body from this armature's pose
    paths = {rotation_data_path(obj.pose.bones[name]) for name in spec.keyed_bones}
    if spec.root is not None:
        paths.add(obj.pose.bones[spec.root].path_from_id("location"))
    return paths


def body_sampling_blockers(scene: bpy.types.Scene, obj: bpy.types.Object, spec: BodySpec) -> list[str]:
    """Reasons the body's inputs cannot be read straight from F-curves (empty: they can).

    Every chain's own reasons (``sampling.fcurve_sampling_blockers``: its target and pole plain
    keyed objects, no rotation goal, nothing upstream of it that changes between frames), but the
    channels the body bake itself keys (the chains' rotations and the root's location and rotation,
    upstream of other chains: the bake replaces them and the body solve reads none of them), and
    the body's own reads held still: no fixed link or other armature value animated (the chains'
    reasons name every keyed channel but those), the chains' swivel angles unanimated.
    """
    ours = {f"the armature animates {path}" for path in _baked_paths(obj, spec)}
    reasons: list[str] = []
    for chain in spec.specs:
        reasons += [reason for reason in fcurve_sampling_blockers(scene, obj, chain.rig, chain)
                    if reason not in ours]
    return list(dict.fromkeys(reasons))


def keys_alone_move_the_body(obj: bpy.types.Object, spec: BodySpec, blockers: list[str]) -> bool:
    """Whether Blender's evaluated body at a baked frame is exactly its keys there: sampling from the
    F-curves was exact (``blockers`` empty) and none of the keyed F-curves is muted or modified."""
    if blockers:
        return False
    rigs = [chain.rig for chain in spec.specs] + ([spec.root_rig] if spec.root_rig is not None else [])
    if not all(keys_alone_move_the_chain(obj, rig, []) for rig in rigs):
        return False
    assert obj.pose is not None  # read_body read the body from this armature's pose
    location = None if spec.root is None else obj.pose.bones[spec.root].path_from_id("location")
    return not any(fcurve.data_path == location and (fcurve.mute or (fcurve.group is not None and fcurve.group.mute)
                                                     or len(fcurve.modifiers))
                   for fcurve in assigned_fcurves(obj))


def sample_body_fcurves(obj: bpy.types.Object, spec: BodySpec, frames: np.ndarray,
                        depsgraph: bpy.types.Depsgraph | None = None) -> list[BodyInputs]:
    """The body's inputs at ``frames (M,)`` (one :class:`BodyInputs` a frame) from the goals' F-curves,
    the rest as the current frame holds it (:func:`body_sampling_blockers` found nothing that changes):
    each goal taken into armature space as ``sample_body`` takes it, frame by frame (the same bits)."""
    current = sample_body(obj, spec, depsgraph)
    inverse, _ = armature_inverse(obj, depsgraph)
    goals = [sample_point_fcurves(chain.target, frames) for chain in spec.specs]
    poles = [None if chain.pole is None else sample_point_fcurves(chain.pole, frames) for chain in spec.specs]
    out = []
    for row in range(len(frames)):
        out.append(BodyInputs(
            positions=tuple((inverse[:3, :3] @ goal[row] + inverse[:3, 3])[None] for goal in goals),
            rotations=current.rotations,
            poles=tuple(None if pole is None else (inverse[:3, :3] @ pole[row] + inverse[:3, 3])[None] for pole in poles),
            swivels=current.swivels, fixed_q=current.fixed_q))
    return out

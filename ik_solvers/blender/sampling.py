"""Sampling a chain's inputs over frames: from F-curves where that is exactly Blender's evaluation,
else by evaluating each frame — and the rules that choose (:func:`fcurve_sampling_blockers`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .checks import pose_bone_of_path
from .errors import IKSolversError
from .keyframes import assigned_fcurves, values_at_keys
from .rig import RigChain, read_pose
from .root_space import root_matrices_world
from .spec import ChainSpec
from .time_varying import TimeVariance

if TYPE_CHECKING:
    import bpy


@dataclass(frozen=True, eq=False)
class FrameInputs:
    """Everything a solve reads from the evaluated scene, for N frames (world space).

    Attributes
    ----------
    target_world : ndarray, shape (N, 3)
        The target's world location per frame.
    root_world : ndarray, shape (N, 4, 4)
        World matrix of the chain's root space (``root_space.root_matrices_world``) per frame.
    pole_world : ndarray, shape (N, 3), or None
        The pole target's world location per frame (None without a pole target).
    target_parent_world : ndarray, shape (N, 4, 4), or None
        World matrix of the target's parent per frame (identity rows when it has none); None
        when the solve does not need it.
    swivel_angle : ndarray, shape (N,), or None
        The chain's swivel angle per frame (radians); None: the spec's value.
    influence : ndarray, shape (N,), or None
        The chain's influence per frame (0–1); None: 1 everywhere.
    fk_pose : ndarray, shape (N, n_dof), or None
        The FK pose per frame: the joint variables the chain's bones hold there before the solve
        writes them, read where the influence is below 1 (NaN rows elsewhere); None: not read.
    target_rotation_world : ndarray, shape (N, 3, 3), or None
        The goal's world orientation per frame (:func:`goal_rotation_world`), read for a chain with
        Rotation (``ChainSpec.use_rotation``); None: not read.
    """

    target_world: np.ndarray
    root_world: np.ndarray
    pole_world: np.ndarray | None = None
    target_parent_world: np.ndarray | None = None
    swivel_angle: np.ndarray | None = None
    influence: np.ndarray | None = None
    fk_pose: np.ndarray | None = None
    target_rotation_world: np.ndarray | None = None

    FIELDS = ("target_world", "root_world", "pole_world", "target_parent_world", "swivel_angle", "influence",
              "fk_pose", "target_rotation_world")

    @classmethod
    def stack(cls, frames: list[FrameInputs]) -> FrameInputs:
        """One batch from single-frame inputs (all with or all without each optional field)."""

        def joined(name: str) -> Any:
            values = [getattr(f, name) for f in frames]
            return None if values[0] is None else np.concatenate(values, 0)

        return cls(**{name: joined(name) for name in cls.FIELDS})

    def select(self, rows: np.ndarray) -> FrameInputs:
        """The inputs at ``rows`` (indices into the batch axis), optional fields staying None."""
        fields: dict[str, Any] = {name: None if getattr(self, name) is None else np.asarray(getattr(self, name))[rows]
                                  for name in self.FIELDS}
        return FrameInputs(**fields)


IDENTITY = np.eye(4)
IDENTITY.setflags(write=False)
"""The frame of a target without a parent (read-only: shared by every sample)."""


def _matrix(m: Any) -> np.ndarray:
    return np.array(m, dtype=float)


def _evaluated(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None) -> bpy.types.Object:
    return obj.evaluated_get(depsgraph) if depsgraph is not None else obj


def goal_world(target: bpy.types.Object, bone_name: str = "", depsgraph: bpy.types.Depsgraph | None = None,
               ) -> np.ndarray:
    """The evaluated world position ``(3,)`` the tip reaches for: the head of ``bone_name`` of the
    armature ``target`` (as the IK constraint's bone target), else the target object's origin."""
    target_eval = _evaluated(target, depsgraph)
    if not bone_name:
        return np.array(target_eval.matrix_world.translation, dtype=float)
    pose_bone = target_eval.pose.bones.get(bone_name) if target_eval.pose is not None else None
    if pose_bone is None:
        raise IKSolversError(f"the target bone '{bone_name}' is not a bone of '{target.name}'; pick one of its bones.")
    return np.array(target_eval.matrix_world @ pose_bone.head, dtype=float)


def goal_rotation_world(target: bpy.types.Object, bone_name: str = "",
                        depsgraph: bpy.types.Depsgraph | None = None) -> np.ndarray:
    """The evaluated world orientation ``(3, 3)`` the tip bone takes with Rotation: the rotation part
    (scale removed) of the target bone's world matrix (``bone_name`` of the armature ``target``),
    else of the target object's."""
    target_eval = _evaluated(target, depsgraph)
    world = _matrix(target_eval.matrix_world)
    if bone_name:
        assert target_eval.pose is not None  # goal_world read the bone from this armature's pose
        world = world @ _matrix(target_eval.pose.bones[bone_name].matrix)
    u, _, vt = np.linalg.svd(world[:3, :3])
    return u @ vt


def goal_parent_world(target: bpy.types.Object, bone_name: str = "",
                      depsgraph: bpy.types.Depsgraph | None = None) -> np.ndarray:
    """World matrix ``(4, 4)`` the goal rides with: a target bone's parent bone (else its armature),
    an object's parent (else the identity)."""
    target_eval = _evaluated(target, depsgraph)
    if bone_name:
        assert target_eval.pose is not None  # goal_world read the bone from this armature's pose
        parent_bone = target_eval.pose.bones[bone_name].parent
        world = target_eval.matrix_world if parent_bone is None else target_eval.matrix_world @ parent_bone.matrix
        return _matrix(world)
    parent = target_eval.parent
    return _matrix(parent.matrix_world) if parent is not None else IDENTITY


def sample_inputs(obj: bpy.types.Object, spec: ChainSpec, rig: RigChain | None = None,
                  depsgraph: bpy.types.Depsgraph | None = None) -> FrameInputs:
    """The current evaluation of everything the chain's solve reads, as a batch of one frame.

    Raises IKSolversError (named by the caller's ``errors.chain_context``) for a target gone or a
    root bone that no longer exists.
    """
    rig = spec.rig if rig is None else rig
    target = spec.target
    if target is None:
        raise IKSolversError("the chain has no target; pick an object (an Empty, or an armature and its bone).")
    target_world = goal_world(target, spec.goal_bone, depsgraph)[None]
    pole_world = None
    if spec.pole is not None:
        pole_world = np.array(_evaluated(spec.pole, depsgraph).matrix_world.translation, dtype=float)[None]
    target_parent_world = goal_parent_world(target, spec.goal_bone, depsgraph)[None]
    root_world = root_matrices_world(obj, rig, depsgraph)[None]
    influence = float(spec.per_frame_value(obj, "influence"))
    fk_pose = read_pose(obj, rig)[None] if influence < 1.0 else np.full((1, rig.chain.n_dof), np.nan)
    return FrameInputs(
        target_world=target_world,
        root_world=root_world,
        pole_world=pole_world,
        target_parent_world=target_parent_world,
        swivel_angle=np.array([spec.per_frame_value(obj, "swivel_angle")], dtype=float),
        influence=np.array([influence]),
        fk_pose=fk_pose,
        target_rotation_world=goal_rotation_world(target, spec.goal_bone, depsgraph)[None] if spec.use_rotation
        else None,
    )


TRANSFORM_PATHS = frozenset(
    {
        "location",
        "rotation_euler",
        "rotation_quaternion",
        "rotation_axis_angle",
        "scale",
        "delta_rotation_euler",
        "delta_rotation_quaternion",
        "delta_scale",
    }
)
"""Object F-curve paths that cannot move an unparented, unconstrained object's origin away from
``location`` (``delta_location`` can, so it is not here)."""


def _animation_blockers(id_data: bpy.types.ID | None, what: str, drivers: bool = True) -> list[str]:
    """Why ``id_data``'s animation is not a plain action evaluated at the scene frame (``drivers``:
    any driver counts; else the caller judges them)."""
    anim_data = getattr(id_data, "animation_data", None)
    if anim_data is None:
        return []
    reasons = []
    if drivers and len(anim_data.drivers):
        reasons.append(f"{what} has drivers")
    if len(anim_data.nla_tracks) or anim_data.use_tweak_mode:
        reasons.append(f"{what} has NLA tracks")
    if anim_data.action is not None:
        if anim_data.action_blend_type != "REPLACE" or anim_data.action_influence != 1.0:
            reasons.append(f"{what}'s action is blended")
        if anim_data.action.use_cyclic:
            reasons.append(f"{what}'s action is cyclic")
    return reasons


def _point_blockers(point: bpy.types.Object, what: str) -> list[str]:
    reasons = _animation_blockers(point, what)
    if point.parent is not None:
        reasons.append(f"{what} has a parent")
    if len(point.constraints):
        reasons.append(f"{what} has constraints")
    for fcurve in assigned_fcurves(point):
        if fcurve.data_path not in TRANSFORM_PATHS:
            reasons.append(f"{what} animates {fcurve.data_path}")
    return reasons


def _bone_prefixes(obj: bpy.types.Object, names: tuple[str, ...] | list[str]) -> dict[str, str]:
    """F-curve path prefix ``'pose.bones["name"].'`` → bone name."""
    assert obj.pose is not None  # names are bones of this armature's chain
    return {obj.pose.bones[name].path_from_id() + ".": name for name in names}


def _bone_of_path(prefixes: dict[str, str], path: str) -> tuple[str | None, str]:
    for prefix, name in prefixes.items():
        if path.startswith(prefix):
            return name, path[len(prefix):]
    return None, path


def fcurve_sampling_blockers(scene: bpy.types.Scene, obj: bpy.types.Object, rig: RigChain,
                             spec: ChainSpec) -> list[str]:
    """Reasons the chain's inputs cannot be read straight from F-curves (empty: they can).

    Sampling F-curves is exactly Blender's evaluation when every sampled point (target, pole) is
    an unparented, unconstrained, driver-free object animated only by its own action's transform
    F-curves, and the chain's root frame and geometry cannot change over time: the armature has
    no NLA, no parent, constraint, driver or ancestor-bone constraint that follows anything that
    changes between frames (``time_varying``: animation, the frame, simulations, the chain's own
    keys — a driver reading an unanimated custom property changes nothing), no constraint on the
    chain's bones and no driver on them or on the chain settings, and its action keys neither the
    object transform, nor the chain's ancestor bones, nor anything but rotation on the chain's
    bones (nothing else at all where drivers or constraints could carry it to the chain), nor the
    chain settings (e.g. an animated swivel angle), nor a locked chain bone's rotation. Anything
    else (a target bone too) is sampled by evaluating each frame; the same reasons make the
    after-bake check dense (``verify.keys_alone_move_the_chain``).
    """
    reasons = []
    render = scene.render
    if render.frame_map_old != render.frame_map_new:
        reasons.append("the scene remaps time")
    if spec.influence < 1.0:
        reasons.append("the chain's influence is below 1")  # the FK pose is read at every frame
    if spec.use_rotation:
        reasons.append("the chain takes the target's rotation")  # its world matrix is evaluated per frame
    if spec.goal_bone:
        reasons.append("the target is a bone")  # its head is evaluated per frame (hierarchy, constraints)
    for what, point in (("the target", spec.target), ("the pole target", spec.pole)):
        if point is not None:
            reasons += _point_blockers(point, what)
    armature_fcurves = assigned_fcurves(obj)
    animated_bones = {bone for bone in map(pose_bone_of_path, (f.data_path for f in armature_fcurves)) if bone}
    variance = TimeVariance(obj, rig, animated_bones)
    reasons += _animation_blockers(obj, "the armature", drivers=False)
    reasons += _animation_blockers(obj.data, "the armature data", drivers=False)
    if obj.parent is not None and (variance.object_varies(obj.parent) or variance.relations_vary(obj)):
        reasons.append("the armature has a parent that moves")
    if len(obj.constraints) and variance.relations_vary(obj):
        reasons.append("the armature has constraints that follow something that changes")
    if assigned_fcurves(obj.data):
        reasons.append("the armature data is animated")
    ancestors = []
    assert obj.pose is not None  # the chain was read from this armature's pose
    bone = cast("bpy.types.Armature", obj.data).bones[rig.bone_names[0]].parent
    while bone is not None:
        ancestors.append(bone.name)
        bone = bone.parent
    for name in rig.bone_names:
        if len(obj.pose.bones[name].constraints):
            reasons.append(f"bone '{name}' has constraints")
    for name in ancestors:  # their constraints matter only where they follow something that changes
        if len(obj.pose.bones[name].constraints) and name in variance.moving_bones():
            reasons.append(f"bone '{name}' has constraints that follow something that changes")
    chain_prefixes = _bone_prefixes(obj, rig.bone_names)
    ancestor_prefixes = _bone_prefixes(obj, ancestors)
    settings_prefix = spec.settings_path + "."
    related = False  # drivers or constraints that could carry any other animated value to the chain
    armature_ids: tuple[tuple[bpy.types.Object | bpy.types.Armature, str, str], ...] = (
        (obj, "the armature", "pose.bones["), (cast("bpy.types.Armature", obj.data), "the armature data", "bones["))
    for id_data, what, bones_prefix in armature_ids:
        anim_data = id_data.animation_data
        for fcurve in () if anim_data is None else anim_data.drivers:
            related = True
            path = fcurve.data_path
            if _bone_of_path(chain_prefixes, path)[0] is not None or path.startswith(settings_prefix):
                reasons.append(f"{what} has a driver on {path}")
        reasons += [f"{what}'s driver of {path} {why}" for path, why in variance.drivers_reasons(id_data, bones_prefix)]
    related = related or len(obj.constraints) > 0 or any(len(b.constraints) for b in obj.pose.bones)
    rotations = ("rotation_quaternion", "rotation_euler", "rotation_axis_angle")
    for fcurve in armature_fcurves:
        path = fcurve.data_path
        in_chain, prop = _bone_of_path(chain_prefixes, path)
        if in_chain is not None:
            # A joint bone's rotation is what the bake replaces (never read per frame); a locked
            # bone's is held as read, so animating it moves the chain.
            moves = prop not in rotations or in_chain not in rig.joint_bones
        else:
            # Other bones' channels, custom properties and other chains' settings reach this chain
            # only through a driver or a constraint: a bone's channels where it is upstream of the
            # chain (drivers and constraints that read it count above, the bone moving), any other
            # animated value as soon as there are drivers or constraints at all.
            moves = (_bone_of_path(ancestor_prefixes, path)[0] is not None or path in TRANSFORM_PATHS
                     or path == "delta_location" or path.startswith(settings_prefix))
            if related and not moves:
                keyed = pose_bone_of_path(path)  # None: a custom property or something else, read by anything
                moves = keyed is None or keyed in variance.upstream_bones()
        if moves:
            reasons.append(f"the armature animates {path}")
    return list(dict.fromkeys(reasons))  # one line per path, not per channel


def sample_point_fcurves(point: bpy.types.Object, frames: np.ndarray) -> np.ndarray:
    """World positions ``(N, 3)`` of an unparented, unconstrained object from its location F-curves.

    Only valid where ``fcurve_sampling_blockers`` found nothing. Unkeyed (or muted) components keep
    their current value, and ``delta_location`` is added in float32 as Blender's object matrix does.
    """
    positions = np.tile(np.array(point.location, dtype=np.float32), (len(frames), 1))
    frame_list = frames.tolist()
    for fcurve in assigned_fcurves(point):
        muted = fcurve.mute or (fcurve.group is not None and fcurve.group.mute)
        if fcurve.data_path == "location" and not muted:
            keyed = values_at_keys(fcurve, frames)
            evaluate = fcurve.evaluate
            positions[:, fcurve.array_index] = keyed if keyed is not None else [evaluate(f) for f in frame_list]
    return (positions + np.array(point.delta_location, dtype=np.float32)).astype(float)


def sample_fcurves(obj: bpy.types.Object, spec: ChainSpec, rig: RigChain, frames: np.ndarray) -> FrameInputs:
    """The chain's inputs for ``frames (N,)`` read from F-curves (see ``fcurve_sampling_blockers``)."""
    current = sample_inputs(obj, spec, rig)
    assert current.swivel_angle is not None  # sample_inputs always reads it
    n = len(frames)
    return FrameInputs(
        target_world=sample_point_fcurves(spec.target, frames),
        root_world=np.broadcast_to(current.root_world, (n, 4, 4)),
        pole_world=None if spec.pole is None else sample_point_fcurves(spec.pole, frames),
        target_parent_world=np.broadcast_to(np.eye(4), (n, 4, 4)),
        swivel_angle=np.full(n, current.swivel_angle[0]),
        influence=np.ones(n),  # below 1, the FK pose is read frame by frame (fcurve_sampling_blockers)
        fk_pose=np.full((n, rig.chain.n_dof), np.nan),
    )


def geometry_key(obj: bpy.types.Object, rig: RigChain) -> bytes:
    """The pose values the solve does not set that shape the chain: location and scale of its joint
    bones, the whole basis of its locked bones (held as read)."""
    values: list[float] = []
    joints = set(rig.joint_bones)
    assert obj.pose is not None  # the chain was read from this armature's pose
    for name in rig.bone_names:
        pose_bone = obj.pose.bones[name]
        if name in joints:
            values.extend(pose_bone.location[:])
            values.extend(pose_bone.scale[:])
        else:
            values.extend(value for row in pose_bone.matrix_basis.row for value in row)
    return np.array(values, dtype=np.float32).tobytes()



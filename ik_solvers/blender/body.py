"""The body solve's Blender side (SPEC §8): an armature's enabled chains read as one core ``Body``,
their goals sampled per frame, the solve run and its pose written.

With ``Object.ik_solvers.solve_together`` every enabled chain is one problem
(``core.body.solve_body``). The body is the chains' bones and their ancestors up to the tree root,
in armature space (goals are mapped there from the world, so the object's transform and uniform scale
are the root frame). Each chain bone is read as ``rig.read_chain`` reads it (kinds from the IK locks,
limits, stiffness); the body root (``body_root``) is a free joint whose location and rotation the
solve sets, starting from its rest pose; every other bone is a fixed link held at its pose of the
frame. Each frame starts from the same reference (the chains' references as the single-chain solve
takes them, the root at rest), so a bake in any order or chunking writes the same keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, cast

import numpy as np

from ..core import IKInputError, JointKind
from ..core.body import Body, BodyChain, BodyGoal, BodyResult, GoalStatus, solve_body
from ..core.kinematics import local_quaternions
from ..core.rotations import rotvecs_from_quaternions
from .chains import store_outcome
from .checks import check_chains_apart, check_target_bone_independent, check_target_independent
from .errors import IKSolversError
from .identity import remember
from .rig import (
    UNIT_SCALE_TOLERANCE,
    basis_quaternion,
    bone_offset,
    orthonormalised,
    read_chain,
    write_pose,
    write_quaternion_joints,
)
from .rig_chain import RigChain
from .root_space import uniform_scale
from .sampling import goal_rotation_world, goal_world
from .snapshots import PoseSnapshot
from .spec import ChainSpec, chain_spec

if TYPE_CHECKING:
    import bpy

    from .properties import IK_SOLVERS_PG_chain

_BONE_TAIL = np.array([0.0, 1.0, 0.0])


def solves_together(obj: bpy.types.Object) -> bool:
    """True when ``obj``'s enabled chains are solved as one body (``solve_together``)."""
    return bool(obj.ik_solvers.solve_together)  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)


def body_chain_settings(obj: bpy.types.Object) -> list[IK_SOLVERS_PG_chain]:
    """The chains a body solve of ``obj`` takes: every enabled one, in list order."""
    return [chain for chain in obj.ik_solvers.chains if chain.enabled]  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)


@dataclass(frozen=True, eq=False)
class BodySpec:
    """An armature's chains read as one body, at the edge (what ``ChainSpec`` is for one chain).

    Attributes
    ----------
    body : Body
        Armature space, armature units; bone ``i`` is ``body.names[i]``.
    specs : tuple of ChainSpec
        The chains (their settings, rig, reference pose, target), in list order.
    weights : tuple of float
    priorities : tuple of int
    root : str or None
        The body root bone (its location and rotation solved); None: nothing but the chains moves.
    root_rig : RigChain or None
        The body root read as a one-bone chain (its rotation channels are written through it).
    fixed_bones : tuple of str
        Bones in no chain and not the root: held at their pose of each frame.
    reference : ndarray, shape (n_dof,)
        Every frame's start: each chain's reference, the root at rest, the fixed links as read.
    tolerance : float
        What counts as reached (armature units): the smallest of the chains' tolerances.
    geometry : bytes
        The pose values the body is built from and the solve does not set (:func:`body_geometry`):
        a frame where they differ is refused, not solved on the wrong bones.
    """

    body: Body
    specs: tuple[ChainSpec, ...]
    weights: tuple[float, ...]
    priorities: tuple[int, ...]
    root: str | None
    root_rig: RigChain | None
    fixed_bones: tuple[str, ...]
    reference: np.ndarray
    tolerance: float
    geometry: bytes = b""

    def dofs_of(self, bones: tuple[str, ...] | list[str]) -> np.ndarray:
        """The body's variable indices of ``bones`` (names), in order."""
        return self.body.dofs([self.body.names.index(name) for name in bones])

    @cached_property
    def chain_dofs(self) -> tuple[np.ndarray, ...]:
        """Per chain, its variables in the body (the layout of its ``rig.chain``)."""
        return tuple(self.dofs_of(spec.rig.joint_bones) for spec in self.specs)

    @cached_property
    def root_dofs(self) -> np.ndarray:
        return self.dofs_of([self.root] if self.root is not None else [])

    @cached_property
    def fixed_dofs(self) -> np.ndarray:
        return self.dofs_of(self.fixed_bones)

    @property
    def keyed_bones(self) -> set[str]:
        """The bones a body bake keys (every chain bone, the root)."""
        return {bone for spec in self.specs for bone in spec.rig.joint_bones} | ({self.root} if self.root else set())


def read_body(obj: bpy.types.Object) -> BodySpec:
    """The body of ``obj``'s enabled chains and its ``body_root``.

    Raises IKSolversError: no enabled chain, a chain refused by ``spec.chain_spec``, chains sharing a
    bone, a chain bone with every IK axis locked, an unknown body root or one no chain hangs from, a
    root that cannot move (connected, not free in every IK axis, not in local location), a fixed link
    that does not inherit rotation or is scaled, a target that moves with the body.
    """
    chains = body_chain_settings(obj)
    if not chains:
        raise IKSolversError("There is no enabled chain to solve together.")
    specs = tuple(chain_spec(obj, chain) for chain in chains)
    check_chains_apart([(spec.name, spec.bone_names) for spec in specs])
    for spec in specs:
        if spec.rig.joint_bones != spec.rig.bone_names:
            locked = next(b for b in spec.rig.bone_names if b not in spec.rig.joint_bones)
            raise IKSolversError(f"bone '{locked}' has every IK axis locked; a body solve needs each chain bone "
                                 "free in at least one axis.", chain=spec.name)
    settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
    bones = cast("bpy.types.Armature", obj.data).bones
    root = settings.body_root or None
    if root is not None and bones.get(root) is None:
        raise IKSolversError(f"The body root '{root}' is not a bone of '{obj.name}'.", field="body_root")
    names = _body_bones(obj, specs)
    if root is not None and root not in names:
        raise IKSolversError(f"No chain hangs from the body root '{root}'; pick one of the chains' parents.",
                             field="body_root")
    _check_targets_apart(obj, specs, _movers(specs, root))
    owner = {bone: (k, joint) for k, spec in enumerate(specs) for joint, bone in enumerate(spec.rig.joint_bones)}
    root_rig = None if root is None else _root_rig(obj, root)
    columns: dict[str, list] = {key: [] for key in ("kinds", "offsets", "rests", "tails", "axes", "lower", "upper",
                                                     "weights", "q")}
    for name in names:
        if name in owner:
            k, joint = owner[name]
            _add_joint(columns, specs[k].rig, joint, specs[k].reference)
        elif name == root:
            assert root_rig is not None and obj.pose is not None  # read from this armature's pose
            offset = bone_offset(bones[name], obj.pose.bones[name], with_location=False)
            _add_joint(columns, root_rig, 0, np.zeros(3), offset)
        else:
            _add_fixed(columns, obj, name)
    index = {name: i for i, name in enumerate(names)}
    parents = tuple(index[parent.name] if (parent := bones[n].parent) is not None else -1 for n in names)
    try:
        body = Body(names=tuple(names), parents=parents, kinds=tuple(columns["kinds"]),
                    offsets=np.array(columns["offsets"]), rest_rotations=orthonormalised(np.array(columns["rests"])),
                    tails=np.array(columns["tails"]), axes=np.concatenate(columns["axes"]),
                    lower=np.concatenate(columns["lower"]), upper=np.concatenate(columns["upper"]),
                    weights=np.concatenate(columns["weights"]))
    except IKInputError as error:
        raise IKSolversError.from_input(error, "the body cannot be built") from error
    reference = np.concatenate(columns["q"])
    reference.setflags(write=False)
    fixed = tuple(n for n in names if n not in owner and n != root)
    return BodySpec(body=body, specs=specs, weights=tuple(float(c.weight) for c in chains),
                    priorities=tuple(int(c.priority) for c in chains), root=root, root_rig=root_rig,
                    fixed_bones=fixed, reference=reference, tolerance=min(s.options.tolerance for s in specs),
                    geometry=body_geometry(obj, names, root))


def recheck_body(obj: bpy.types.Object, kept: BodySpec) -> BodySpec | None:
    """``kept`` if it still is ``obj``'s body, for a caller that knows the armature (its bones, pose
    and IK settings) and the body settings (chain list, weights, priorities, root) are as when
    ``kept`` was read (live mode): the checks of the scene around each chain and the targets run again
    (``read_body``'s, which read other objects: a goal parented to a solved bone, a target gone), and
    each chain's spec must be the one kept. None: read the body again; IKSolversError as ``read_body``."""
    chains = body_chain_settings(obj)
    if [chain.name for chain in chains] != [spec.name for spec in kept.specs]:
        return None
    for chain, spec in zip(chains, kept.specs):
        if chain_spec(obj, chain, spec.rig, reuse=spec) is not spec:
            return None
    _check_targets_apart(obj, kept.specs, _movers(kept.specs, kept.root))
    return kept


def _movers(specs: tuple[ChainSpec, ...], root: str | None) -> list[str]:
    """The bones whose moves carry the body: the root, else each chain's start."""
    return [root] if root is not None else [spec.bone_names[0] for spec in specs]


def body_geometry(obj: bpy.types.Object, names: tuple[str, ...] | list[str], root: str | None) -> bytes:
    """The locations and scales of the body's bones ``names`` (but the root's location, which the
    solve sets), as stored: the body's shape besides its rotations."""
    assert obj.pose is not None  # a body's armature
    values: list[float] = []
    for name in names:
        pose_bone = obj.pose.bones[name]
        if name != root:
            values.extend(pose_bone.location[:])
        values.extend(pose_bone.scale[:])
    return np.array(values, dtype=np.float32).tobytes()


def _body_bones(obj: bpy.types.Object, specs: tuple[ChainSpec, ...]) -> list[str]:
    """Every chain bone and its ancestors, each after its parent (by depth, then armature order)."""
    bones = cast("bpy.types.Armature", obj.data).bones
    depth: dict[str, int] = {}
    for spec in specs:
        bone: bpy.types.Bone | None = bones[spec.bone_names[-1]]
        while bone is not None and bone.name not in depth:
            depth[bone.name] = len(bone.parent_recursive)
            bone = bone.parent
    order = {bone.name: i for i, bone in enumerate(bones)}
    return sorted(depth, key=lambda name: (depth[name], order[name]))


def _check_targets_apart(obj: bpy.types.Object, specs: tuple[ChainSpec, ...], movers: list[str]) -> None:
    """IKSolversError when a target or pole moves with a bone the body solve moves (the root, else any
    chain's start: a hand's goal on the chest moves when the chest is solved)."""
    for spec in specs:
        try:
            for mover in movers:
                if spec.goal_bone:
                    check_target_bone_independent(obj, mover, spec.target, spec.goal_bone, "the target")
                for what, point in (("the target", spec.target), ("the pole target", spec.pole)):
                    check_target_independent(obj, mover, point, what)
        except IKSolversError as error:
            error.name_where(spec.name)
            raise


def _root_rig(obj: bpy.types.Object, root: str) -> RigChain:
    """The body root as a one-bone chain; IKSolversError unless it is free to move and turn."""
    bone = cast("bpy.types.Armature", obj.data).bones[root]
    if bone.use_connect or not bone.use_local_location:
        raise IKSolversError(f"The body root '{root}' cannot move: disconnect it from its parent and use its local "
                             "location.", field="body_root")
    rig = read_chain(obj, root, 1)
    if rig.chain.kinds != (JointKind.BALL,):
        raise IKSolversError(f"The body root '{root}' must turn freely: unlock its IK axes.", field="body_root")
    return rig


def _add_joint(columns: dict[str, list], rig: RigChain, joint: int, reference: np.ndarray,
               offset: np.ndarray | None = None) -> None:
    """Joint ``joint`` of ``rig`` as a body bone (``offset (4, 4)``: another head and rest frame)."""
    chain = rig.chain
    dofs = chain.dof_start[joint] + np.arange(chain.kinds[joint].value)
    columns["kinds"].append(chain.kinds[joint])
    columns["offsets"].append(chain.offsets[joint] if offset is None else offset[:3, 3])
    columns["rests"].append(chain.rest_rotations[joint] if offset is None else offset[:3, :3])
    last = joint == chain.n_joints - 1
    columns["tails"].append(chain.tip_offset if last else _BONE_TAIL * np.linalg.norm(chain.offsets[joint + 1]))
    for key, values in (("axes", chain.axes), ("lower", chain.lower), ("upper", chain.upper),
                        ("weights", chain.weights)):
        columns[key].append(values[dofs])
    columns["q"].append(np.asarray(reference, dtype=float)[dofs])


def _add_fixed(columns: dict[str, list], obj: bpy.types.Object, name: str) -> None:
    """A bone in no chain: a fixed link, a ball joint held at its current rotation."""
    assert obj.pose is not None  # read_body reads the body from this armature's pose
    bone, pose_bone = cast("bpy.types.Armature", obj.data).bones[name], obj.pose.bones[name]
    if bone.parent is not None and not bone.use_inherit_rotation:
        raise IKSolversError(f"Bone '{name}' (a parent of the body's chains) does not inherit rotation; "
                             "enable Inherit Rotation.")
    if np.abs(np.array(pose_bone.scale, dtype=float) - 1.0).max() > UNIT_SCALE_TOLERANCE:
        raise IKSolversError(f"Bone '{name}' (a parent of the body's chains) has a pose scale other than 1; "
                             "reset it first.")
    offset = bone_offset(bone, pose_bone)
    columns["kinds"].append(JointKind.BALL)
    columns["offsets"].append(offset[:3, 3])
    columns["rests"].append(offset[:3, :3])
    columns["tails"].append(_BONE_TAIL * bone.length)
    columns["axes"].append(np.eye(3))
    columns["lower"].append(np.full(3, -np.inf))
    columns["upper"].append(np.full(3, np.inf))
    columns["weights"].append(np.ones(3))
    columns["q"].append(rotvecs_from_quaternions(basis_quaternion(pose_bone)))


# --------------------------------------------------------------------------- inputs per frame
@dataclass(frozen=True, eq=False)
class BodyInputs:
    """What a body solve reads from the evaluated scene, for N frames, in armature space.

    Attributes
    ----------
    positions : tuple of ndarray, shape (N, 3) each
        Each chain's goal (armature units).
    rotations : tuple of ndarray (N, 3, 3) or None
        Each chain's wanted tip-bone frame (with Rotation).
    poles : tuple of ndarray (N, 3) or None
    swivels : ndarray, shape (C, N)
    fixed_q : ndarray, shape (N, n_fixed_dof)
        The fixed links' rotations per frame (rotation vectors).
    """

    positions: tuple[np.ndarray, ...]
    rotations: tuple[np.ndarray | None, ...]
    poles: tuple[np.ndarray | None, ...]
    swivels: np.ndarray
    fixed_q: np.ndarray

    @classmethod
    def stack(cls, frames: list[BodyInputs]) -> BodyInputs:
        """One batch from single-frame inputs, in the order given."""
        def joined(parts: list) -> np.ndarray | None:
            return None if parts[0] is None else np.concatenate(parts)

        count = len(frames[0].positions)
        return cls(positions=tuple(np.concatenate([f.positions[k] for f in frames]) for k in range(count)),
                   rotations=tuple(joined([f.rotations[k] for f in frames]) for k in range(count)),
                   poles=tuple(joined([f.poles[k] for f in frames]) for k in range(count)),
                   swivels=np.concatenate([f.swivels for f in frames], axis=1),
                   fixed_q=np.concatenate([f.fixed_q for f in frames]))

    def select(self, rows: np.ndarray) -> BodyInputs:
        """The inputs at ``rows`` of the batch axis."""
        return BodyInputs(positions=tuple(p[rows] for p in self.positions),
                          rotations=tuple(None if r is None else r[rows] for r in self.rotations),
                          poles=tuple(None if p is None else p[rows] for p in self.poles),
                          swivels=self.swivels[:, rows], fixed_q=self.fixed_q[rows])


def armature_inverse(obj: bpy.types.Object, depsgraph: bpy.types.Depsgraph | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The inverse ``(4, 4)`` of the armature's evaluated world matrix (world to armature space), and
    its rotation ``turn (3, 3)``.

    world = [scale · turn | t], so its inverse is [turnᵀ / scale | −turnᵀ t / scale] (LAPACK's inverse
    of a 4×4 cost more than the rest of a frame's sampling)."""
    world = np.array((obj.evaluated_get(depsgraph) if depsgraph is not None else obj).matrix_world, dtype=float)
    scale = uniform_scale(world)
    u, _, vt = np.linalg.svd(world[:3, :3])
    turn = u @ vt
    inverse = np.eye(4)
    inverse[:3, :3] = turn.T / scale
    inverse[:3, 3] = -(inverse[:3, :3] @ world[:3, 3])
    return inverse, turn


def sample_body(obj: bpy.types.Object, spec: BodySpec, depsgraph: bpy.types.Depsgraph | None = None) -> BodyInputs:
    """The current evaluation of every goal, pole, swivel and fixed link, as a batch of one frame."""
    inverse, turn = armature_inverse(obj, depsgraph)
    positions, rotations, poles, swivels = [], [], [], []
    for chain in spec.specs:
        point = goal_world(chain.target, chain.goal_bone, depsgraph)
        if not np.all(np.isfinite(point)):
            raise IKSolversError("the target location is not finite.", chain=chain.name)
        positions.append((inverse[:3, :3] @ point + inverse[:3, 3])[None])
        rotations.append(None if not chain.use_rotation
                         else (turn.T @ goal_rotation_world(chain.target, chain.goal_bone, depsgraph))[None])
        pole = None
        if chain.pole is not None:
            pole_world = goal_world(chain.pole, "", depsgraph)
            pole = (inverse[:3, :3] @ pole_world + inverse[:3, 3])[None]
        poles.append(pole)
        swivels.append([float(chain.per_frame_value(obj, "swivel_angle"))])
    if body_geometry(obj, spec.body.names, spec.root) != spec.geometry:
        raise IKSolversError("a bone of the body has another location or scale here than when the body was read; "
                             "a body solve keeps the bones' locations (but the root's) and scales as they are.")
    assert obj.pose is not None  # read_body read the body from this armature's pose
    bones = obj.pose.bones
    # Every fixed link in one conversion (elementwise: the bits of one conversion per bone).
    fixed = (rotvecs_from_quaternions(np.array([basis_quaternion(bones[name]) for name in spec.fixed_bones])).reshape(1, -1)
             if spec.fixed_bones else np.zeros((1, 0)))
    return BodyInputs(tuple(positions), tuple(rotations), tuple(poles), np.array(swivels, dtype=float), fixed)


def solve_body_inputs(spec: BodySpec, inputs: BodyInputs) -> BodyResult:
    """The body solve of ``inputs`` (every frame from the spec's reference); IKSolversError if refused."""
    n = inputs.positions[0].shape[0]
    reference = np.broadcast_to(spec.reference, (n, spec.body.n_dof)).copy()
    reference[:, spec.fixed_dofs] = inputs.fixed_q
    chains = tuple(
        BodyChain(chain.name, chain.bone_names[0], chain.bone_names[-1],
                  BodyGoal(inputs.positions[k], inputs.rotations[k], spec.weights[k], spec.priorities[k]),
                  preferred=np.asarray(chain.reference, dtype=float), swivel=inputs.swivels[k],
                  zero_plane_map=chain.zero_plane_map, poles=inputs.poles[k])
        for k, chain in enumerate(spec.specs))
    try:
        return solve_body(spec.body, chains, body_root=spec.root, reference=reference,
                          tolerance=spec.tolerance)
    except IKInputError as error:
        raise IKSolversError.from_input(error) from error


def write_body_pose(obj: bpy.types.Object, spec: BodySpec, result: BodyResult, row: int = 0, *,
                    quaternion_bones: list[int] | None = None) -> None:
    """Set every chain bone's rotation and the body root's location and rotation to frame ``row`` of
    ``result``; everything is checked before the first channel changes (``rig.write_pose``).
    ``quaternion_bones`` (:func:`quaternion_bone_indices`, live mode): the same channel values in one
    bulk write (``rig.write_quaternion_joints``) instead of one per chain."""
    q = result.q[row]
    location = result.root_location[row]
    if not np.all(np.isfinite(q)) or not np.all(np.isfinite(location)):
        raise IKSolversError("The body solve produced non-finite values; the pose was not changed.")
    if quaternion_bones is not None:
        rotations = [local_quaternions(rig.chain, q[dofs][None])[0] for rig, dofs in _written_rigs(spec)]
        write_quaternion_joints(obj, np.concatenate(rotations), quaternion_bones)
    else:
        for rig, dofs in _written_rigs(spec):
            write_pose(obj, rig, q[dofs])
    if spec.root is not None and spec.root_rig is not None:
        assert obj.pose is not None  # read_body read the root from this armature's pose
        obj.pose.bones[spec.root].location = location.tolist()


def _written_rigs(spec: BodySpec) -> list[tuple[RigChain, np.ndarray]]:
    """Every chain's rig and the root's, with their variables in the body."""
    rigs = [(chain.rig, dofs) for chain, dofs in zip(spec.specs, spec.chain_dofs)]
    if spec.root is not None and spec.root_rig is not None:
        rigs.append((spec.root_rig, spec.root_dofs))
    return rigs


def quaternion_bone_indices(obj: bpy.types.Object, spec: BodySpec) -> list[int] | None:
    """The indices in ``obj.pose.bones`` of the bones :func:`write_body_pose` turns (each rig's joint
    bones, in ``_written_rigs`` order), if every one is in quaternion mode; else None."""
    assert obj.pose is not None  # read_body read the body from this armature's pose
    pose_bones = obj.pose.bones
    names = [bone for rig, _ in _written_rigs(spec) for bone in rig.joint_bones]
    if any(pose_bones[name].rotation_mode != "QUATERNION" for name in names):
        return None
    return [pose_bones.find(name) for name in names]


def solve_body_pose(obj: bpy.types.Object, view_layer: bpy.types.ViewLayer) -> tuple[BodySpec, BodyResult]:
    """Solve ``obj``'s body at the current frame and write the pose; each chain keeps its goal's status,
    error and bound (scene units). On any error the pose is put back exactly before it propagates."""
    spec = read_body(obj)
    result = solve_body_inputs(spec, sample_body(obj, spec))
    snapshot = PoseSnapshot(obj)
    try:
        write_body_pose(obj, spec, result)
    except Exception:  # anything: the pose goes back before the error propagates
        snapshot.restore()
        view_layer.update()
        raise
    view_layer.update()
    store_goal_outcomes(obj, spec, result)
    return spec, result


def store_goal_outcomes(obj: bpy.types.Object, spec: BodySpec, result: BodyResult, *,
                        remember_bones: bool = True, messages: dict[str, str] | None = None) -> None:
    """Each chain keeps its goal's status, error and bound (scene units) of the solve just written, its
    message from ``messages`` (by chain name; else none), and remembers its bones (unless
    ``remember_bones`` is False: live mode did at the body's read)."""
    scale = uniform_scale(np.array(obj.matrix_world, dtype=float))
    by_name = {chain.name: chain for chain in body_chain_settings(obj)}
    for chain, goal in zip(spec.specs, result.goals):
        settings = by_name[chain.name]
        status = goal.status[0].value
        turn = None if goal.orientation_error is None else float(goal.orientation_error[0])
        store_outcome(settings, status, (messages or {}).get(chain.name, ""), float(goal.error[0]) * scale, float(goal.bound[0]) * scale,
                      int(result.trunk_steps[0]), None if goal.hi is None else float(goal.hi.pole_angles[0]),
                      orientation_error=turn)
        if settings.last_goal_status != status:
            settings.last_goal_status = status
        if remember_bones:
            remember(obj, settings, chain.bone_names)


def goals_sentence(obj: bpy.types.Object, result: BodyResult, frame: int = 0) -> str:
    """One line: each goal's status, error and bound at batch row ``frame`` (scene units)."""
    scale = uniform_scale(np.array(obj.matrix_world, dtype=float))
    parts = []
    for goal in result.goals:
        text = f"{goal.name}: {goal.status[frame].value.lower().replace('_', ' ')}"
        if goal.status[frame] is not GoalStatus.REACHED:
            text += f" (error {goal.error[frame] * scale:.3g}, bound {goal.bound[frame] * scale:.3g})"
        parts.append(text)
    return "Solved the body: " + ", ".join(parts) + "."

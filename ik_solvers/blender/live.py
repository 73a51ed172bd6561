"""Live mode: re-solve the chains marked Live whenever their inputs move or the frame changes.

Two handlers drive it: ``frame_change_post`` re-solves every live chain (the frame change may have
reset keyed bones), ``depsgraph_update_post`` re-solves a live chain only when what it reads changed
(target, pole, root frame, swivel, the chain's spec). Our own pose writes trigger depsgraph updates too;
they change none of those inputs, so they never cause another solve, and a busy flag keeps a
handler that fires while we are writing from re-entering.

An update that reads and checks the whole armature (:func:`update_live_chains`) runs at a frame
change, whenever an armature is among the updated data, and after anything that forgets the quick
path (a setting a solve reads, live mode toggled, an undo, a bake). When only other objects moved
— the animator dragging a target — the chains it checked are re-solved by the quick path
(:func:`_quick_update`): the same checks of the target, the same inputs, and the core's one-target
HI solve, which has the batch solve's bits (docs/performance.md has what it costs). The handlers are persistent (they
outlive a file load) and hold no reference to scene data across a load: ``load_pre`` forgets
everything and pauses live mode until ``load_post``.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import bpy
import numpy as np
from bpy.app.handlers import persistent

from ..core import Method, PreferredPose, preferred_pose, solve_hi_one
from .chains import store_outcome, store_solve_outcome
from .checks import check_editable, check_target_independent, constraint_limits_hold
from .errors import IKSolversError, failure_sentence
from .identity import check_bones, follow_renamed_tip
from .rig import read_chain, write_pose, write_quaternion_joints
from .root_space import point_to_root, single_inverse
from .sampling import FrameInputs, sample_inputs
from .solving import checked_swivel, checked_target_point, poles_in_root, prepare_solve, root_scales, run_solve
from .spec import ChainSpec, chain_spec


@dataclass
class LiveState:
    """Live mode's memory between handler calls (``load_pre`` forgets it: the kept specs name the
    target and pole objects, which a file load frees).

    Attributes
    ----------
    signatures : dict
        (armature ``session_uid``, chain name) → bytes of the inputs of its last live solve.
    rigs : dict
        Same keys → (bytes of everything the rig reader reads, after our pose write; the chain read).
    specs : dict
        Same keys → (:func:`_spec_key` of the settings, the chain spec built from them, the
        spec's ``signature()``).
    buffers : dict
        Same keys → the :class:`RigValues` last read (its buffer is reused).
    quick : dict
        Same keys → :class:`QuickChain`: the live chains a target move may re-solve without the
        full update's checks (:func:`_quick_update`), as the last full update left them.
    quick_scene : int or None
        ``session_uid`` of the scene whose full update made ``quick``.
    quick_signatures : dict
        Same keys → the target, pole and swivel of the chain's last quick solve.
    busy : bool
        Set while live mode itself writes, so handlers fired by those writes return at once.
    loading : bool
        Between ``load_pre`` and ``load_post``.
    paused : int
        Nesting depth of :func:`paused` (a bake stepping through frames).
    """

    signatures: dict = field(default_factory=dict)
    rigs: dict = field(default_factory=dict)
    specs: dict = field(default_factory=dict)
    buffers: dict = field(default_factory=dict)
    quick: dict = field(default_factory=dict)
    quick_scene: int | None = None
    quick_signatures: dict = field(default_factory=dict)
    busy: bool = False
    loading: bool = False
    paused: int = 0

    def reset(self) -> None:
        self.signatures.clear()
        self.rigs.clear()
        self.specs.clear()
        self.buffers.clear()
        self.quick.clear()
        self.quick_scene = None
        self.quick_signatures.clear()
        self.busy = False
        self.loading = False
        self.paused = 0


state = LiveState()


def forget(obj, chain_name: str) -> None:
    """Drop what live mode remembers of a chain (it was turned off)."""
    key = (obj.session_uid, chain_name)
    state.signatures.pop(key, None)
    state.rigs.pop(key, None)
    state.specs.pop(key, None)
    state.buffers.pop(key, None)
    forget_quick()


def forget_quick() -> None:
    """The next update runs in full (an undo, a redo, live mode turned on or off for a chain): the
    quick path only trusts what the last full update checked."""
    state.quick.clear()
    state.quick_scene = None
    state.quick_signatures.clear()


@contextmanager
def paused() -> Iterator[None]:
    """Live mode holds still inside this block: a bake stepping through frames must read the
    scene as its keys make it, not re-solve (and rewrite) live chains at every frame."""
    state.paused += 1
    forget_quick()  # the bake changes the armature while the handlers look away
    try:
        yield
    finally:
        state.paused = max(state.paused - 1, 0)


def _inputs_signature(spec_signature: bytes, inputs: FrameInputs) -> bytes:
    """Bytes of everything a live solve reads: the sampled inputs and the spec's ``signature()``."""
    arrays = (inputs.target_world, inputs.root_world, inputs.pole_world, inputs.target_parent_world,
              inputs.swivel_angle)
    return b"".join(np.ascontiguousarray(a, dtype=float).tobytes() for a in arrays if a is not None) + spec_signature


POSE_BONE_PROPS = (
    ("location", 3), ("scale", 3), ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4),
    ("rotation_mode", 1), ("lock_ik_x", 1), ("lock_ik_y", 1), ("lock_ik_z", 1), ("use_ik_limit_x", 1),
    ("use_ik_limit_y", 1), ("use_ik_limit_z", 1), ("ik_min_x", 1), ("ik_min_y", 1), ("ik_min_z", 1), ("ik_max_x", 1),
    ("ik_max_y", 1), ("ik_max_z", 1), ("ik_stiffness_x", 1), ("ik_stiffness_y", 1), ("ik_stiffness_z", 1),
)
BONE_PROPS = (("matrix_local", 16), ("length", 1), ("use_connect", 1), ("use_inherit_rotation", 1),
              ("use_local_location", 1), ("inherit_scale", 1))


@dataclass
class RigValues:
    """Every armature value the rig reader can depend on, all bones at once, in one float64 buffer.

    Attributes
    ----------
    values : ndarray, shape (M,)
        :data:`POSE_BONE_PROPS` of every pose bone, then :data:`BONE_PROPS` of every bone, one
        ``foreach_get`` each into its slice (reused between updates: no allocation per property).
    slices : dict
        Property name → its slice of ``values``.
    counts : tuple of int
        Pose bones and bones when the layout was made (another count: a new buffer).
    names : bytes
        The chain's tip and length and the bone names from the tip up to the start's parent.
    """

    values: np.ndarray
    slices: dict
    counts: tuple[int, int]
    names: bytes = b""

    def key(self) -> bytes:
        return self.names + self.values.tobytes()


def _rig_values(obj, chain, key) -> RigValues:
    """Read :class:`RigValues` (bulk reads; the buffer of ``key``'s last read is reused).

    Reading the chain costs several times more than this; a live chain whose bones, pose and IK
    settings are as we left them reuses the chain read before (:func:`_read_rig`).
    """
    pose_bones, bones = obj.pose.bones, obj.data.bones
    counts = (len(pose_bones), len(bones))
    rig = state.buffers.get(key)
    if rig is None or rig.counts != counts:
        layout, offset = {}, 0
        for count, props in zip(counts, (POSE_BONE_PROPS, BONE_PROPS)):
            for name, width in props:
                layout[name] = slice(offset, offset + count * width)
                offset += count * width
        rig = state.buffers[key] = RigValues(np.empty(offset), layout, counts)
    values, slices = rig.values, rig.slices
    for collection, props in ((pose_bones, POSE_BONE_PROPS), (bones, BONE_PROPS)):
        for name, _ in props:
            collection.foreach_get(name, values[slices[name]])
    names = [repr((chain.tip_bone, chain.chain_length))]
    bone = bones.get(chain.tip_bone)
    while bone is not None and len(names) <= chain.chain_length + 1:  # the chain and the start's parent
        names.append(bone.name)
        bone = bone.parent
    rig.names = "\0".join(names).encode()
    return rig


def _after_write(obj, rig: RigValues, written: tuple[str, ...]) -> bytes:
    """The rig key :func:`_rig_values` would read after our pose write: ``write_pose`` sets the
    rotation ``written`` channels only, so only those are read again."""
    for name in written:
        obj.pose.bones.foreach_get(name, rig.values[rig.slices[name]])
    return rig.key()


def _read_rig(obj, chain, key, rig_key: bytes):
    cached = state.rigs.get(key)
    if cached is not None and cached[0] == rig_key:
        return cached[1]
    try:
        return read_chain(obj, chain.tip_bone, chain.chain_length)
    except IKSolversError as error:
        raise error.about(chain.name) from None


SPEC_SETTINGS = ("name", "tip_bone", "chain_length", "method", "max_iterations", "tolerance", "max_step_angle",
                 "step", "damping", "reference_weight", "has_preferred_pose", "swivel_angle", "zero_plane_map",
                 "parent_space", "flip_threshold")
"""The chain settings ``spec.chain_spec`` reads (with the target, pole and preferred pose)."""
_spec_settings = operator.attrgetter(*SPEC_SETTINGS)


def _spec_key(obj, chain, rig) -> tuple:
    """Everything ``chain_spec`` builds the spec from besides what it re-checks on every update
    (:func:`_live_spec`): the chain read and the armature's scale, then the chain's settings
    (:func:`_settings_key`)."""
    return ((id(rig.chain), rig.joint_bones, rig.bone_names, rig.parent_bone,
             np.array(obj.matrix_world, dtype=float).tobytes()), _settings_key(chain))


def _settings_key(chain) -> tuple:
    """The chain's settings, target, pole and preferred pose as ``chain_spec`` reads them."""
    preferred = chain.preferred_pose
    rotations = np.empty(4 * len(preferred), dtype=np.float64)
    preferred.foreach_get("rotation", rotations)
    target, pole = chain.target, chain.pole_target
    return (chain.path_from_id(), *_spec_settings(chain),
            None if target is None else target.session_uid, None if pole is None else pole.session_uid,
            tuple(item.bone_name for item in preferred), rotations.tobytes())


def _live_spec(obj, chain, rig, key):
    """``chain_spec(obj, chain, rig)``, built again only when what it is built from changed.

    The checks of the scene around the chain (editable armature, the chain's bones, Limit Rotation
    limits, a target independent of the chain) run on every update as ``chain_spec`` runs them; the
    rest (method, options, the preferred pose's joint variables, the armature's scale) is a function
    of :func:`_spec_key`, so the spec kept is the one ``chain_spec`` would build, with this ``rig``.
    """
    cached = state.specs.get(key)
    if cached is None or chain.target is None or cached[0] != _spec_key(obj, chain, rig):
        spec = chain_spec(obj, chain, rig)
        state.specs[key] = (_spec_key(obj, chain, spec.rig), spec, spec.signature())
        return spec
    try:
        check_editable(obj)
        if not constraint_limits_hold(obj, rig):
            state.specs.pop(key, None)
            return _live_spec(obj, chain, rig, key)  # chain_spec reads the chain again
        check_bones(obj, chain, rig.bone_names)
        for what, point in (("the target", chain.target), ("the pole target", chain.pole_target)):
            check_target_independent(obj, rig.bone_names[0], point, what)
    except IKSolversError as error:
        raise error.about(chain.name) from None
    spec = cached[1]
    return spec if spec.rig is rig else replace(spec, rig=rig)


def live_chains(scene) -> list[tuple[bpy.types.Object, list]]:
    """Armatures of ``scene`` with their chains marked Live, in list order."""
    found = []
    for obj in scene.objects:
        if obj.type != "ARMATURE" or obj.mode == "EDIT":
            continue
        chains = [chain for chain in obj.ik_solvers.chains if chain.use_live]
        for chain in chains:
            follow_renamed_tip(obj, chain)  # before the rig is read by the (old) tip bone's name
        if chains:
            found.append((obj, chains))
    return found


def update_live_chains(scene, depsgraph, *, force: bool) -> int:
    """Re-solve the live chains whose inputs changed since their last live solve (all if ``force``).

    Returns how many chains were solved. A chain that cannot be solved (no target, a bone gone, a
    solver failure) keeps its pose, turns live mode off and shows the reason in its status
    (:func:`turn_off`); nothing is raised into Blender's handler loop. Every chain is checked in full;
    what the checks found is offered to the next target moves (:func:`_quick_update`).
    """
    if state.busy or state.loading or state.paused:
        return 0
    state.busy = True
    forget_quick()
    solved, every_chain_quick = 0, True
    try:
        for obj, chains in live_chains(scene):
            checked = []
            for chain in chains:
                key = (obj.session_uid, chain.name)
                try:
                    rig_values = _rig_values(obj, chain, key)
                    spec = _live_spec(obj, chain, _read_rig(obj, chain, key, rig_values.key()), key)
                    inputs = sample_inputs(obj, spec, depsgraph=depsgraph)
                    signature = _inputs_signature(state.specs[key][2], inputs)
                    if not force and state.signatures.get(key) == signature:
                        checked.append((key, spec, inputs))
                        continue
                    prepared = prepare_solve(spec, inputs)
                    result = run_solve(prepared)
                    written = write_pose(obj, spec.rig, result.q[0])
                except Exception as error:  # never into Blender's handler loop
                    turn_off(obj, chain, error)
                    continue
                state.signatures[key] = signature
                # The chain as read (its q the pose at read time; nothing in a live solve reads q): the
                # same object as the spec's, so the next update reuses the spec without a copy.
                state.rigs[key] = (_after_write(obj, rig_values, written), spec.rig)
                solved += 1
                store_solve_outcome(chain, result.status[0].value, "", result, prepared)
                checked.append((key, spec, inputs))
            every_chain_quick &= _offer_quick(obj, checked)
    finally:
        state.busy = False
    if every_chain_quick and state.quick and depsgraph is not None:
        state.quick_scene = scene.session_uid
    return solved


# --------------------------------------------------------------------------- quick path
QUICK_ZERO_PLANE_MAPS = ("DEFAULT", "POLE_OBJECT")


@dataclass(frozen=True, eq=False)
class QuickChain:
    """What a target move needs to re-solve a live chain the last full update checked.

    Attributes
    ----------
    object_name : str
        The armature's name (looked up again at every move: no reference to scene data is kept).
    preferred : PreferredPose
        The spec's HI preferred pose, derived once.
    bone_indices : list of int
        The joint bones' indices in the armature's pose bones.
    quaternion_joints : bool
        Every joint bone is in quaternion mode (written by ``write_quaternion_joints``, else by
        ``write_pose``; a change of rotation mode is an update of the armature).
    root_world : ndarray, shape (1, 4, 4)
        The chain's root frame as the full update read it (only an update of the armature moves it).
    root_inverse : list
        Its inverse (``world_to_root``'s), as four rows of four floats.
    world_scale : float
        Its uniform scale (scene units per root-space unit).
    """

    object_name: str
    preferred: PreferredPose
    bone_indices: list[int]
    quaternion_joints: bool
    root_world: np.ndarray
    root_inverse: list
    world_scale: float


def _offer_quick(obj, checked: list[tuple[tuple, ChainSpec, FrameInputs]]) -> bool:
    """Offer the quick path to the chains of ``obj`` just checked; False if one of them cannot take it.

    A chain can when a move of other objects changes nothing but its target and pole: its solve is
    HI with a built-in zero-plane map and the sphere riding with the start joint's parent (so with
    the chain's root, which only an update of the armature moves), and no other live chain of the
    armature moves a bone its root hangs from (each chain's write would move the next one's root).
    """
    bones = obj.data.bones
    offered = True
    for key, spec, inputs in checked:
        others = {name for other_key, other, _ in checked if other_key != key for name in other.rig.joint_bones}
        root = bones.get(spec.rig.parent_bone) if spec.rig.parent_bone else None
        above = set() if root is None else {root.name, *(bone.name for bone in root.parent_recursive)}
        if (spec.method is not Method.HI or spec.zero_plane_map not in QUICK_ZERO_PLANE_MAPS
                or spec.parent_space != "START_JOINT" or above & others):
            offered = False
            continue
        root_world = np.asarray(inputs.root_world, dtype=float).reshape(1, 4, 4)
        joint_bones = [obj.pose.bones[name] for name in spec.rig.joint_bones]
        state.quick[key] = QuickChain(
            obj.name, preferred_pose(spec.rig.chain, spec.reference),
            [obj.pose.bones.find(name) for name in spec.rig.joint_bones],
            all(bone.rotation_mode == "QUATERNION" for bone in joint_bones), root_world,
            single_inverse(root_world)[0].tolist(), float(root_scales(spec, root_world)[0]))
    return offered


def _quick_update(scene, depsgraph) -> bool:
    """Re-solve every live chain of ``scene`` after a move of objects other than armatures, without
    the full update's checks of the armature: the last full update checked it, and only an update of
    the armature (which this handler would see) changes what they checked or the chain's root frame.
    The chain's settings, its target's independence, the target and the pole are read again.

    Returns False, having done nothing, when a chain is not as the last full update left it (then
    the full update runs).
    """
    if not state.quick or state.quick_scene != scene.session_uid:
        return False
    chains: list[tuple] = []
    for key, quick in state.quick.items():
        # By name in the blend file's objects (a scan, as the scene's would be, but of a flat list):
        # an object leaves the scene only with an update of the scene, which runs in full.
        obj = bpy.data.objects.get(quick.object_name)
        if obj is None or obj.session_uid != key[0] or key not in state.specs:
            return False
        chain = obj.ik_solvers.chains.get(key[1])
        spec = state.specs[key][1]
        # The settings the solve reads forget the quick path when they change (properties.py); a
        # removed target or pole only empties the pointer, and the spec's object is gone.
        if chain is None or not chain.use_live or chain.target != spec.target or chain.pole_target != spec.pole:
            return False
        chains.append((obj, chain, key, quick, spec))
    state.busy = True
    try:
        for obj, chain, key, quick, spec in chains:
            try:
                _quick_solve(obj, chain, key, quick, spec, depsgraph)
            except Exception as error:  # never into Blender's handler loop
                turn_off(obj, chain, error)
    finally:
        state.busy = False
    return True


def _quick_solve(obj, chain, key, quick: QuickChain, spec: ChainSpec, depsgraph) -> None:
    """One chain's quick update: the target's independence checked, target, pole and swivel read and
    checked as the full update does and taken to the root frame it read; the solve is the core's
    one-target HI (``solve_hi_one``: the batch solve's bits), the write bone by bone."""
    target, pole = chain.target, chain.pole_target  # the spec's (_quick_update)
    try:
        for what, point in (("the target", target), ("the pole target", pole)):
            check_target_independent(obj, spec.rig.bone_names[0], point, what)
    except IKSolversError as error:
        raise error.about(chain.name) from None
    target_world = checked_target_point(spec, tuple(target.evaluated_get(depsgraph).matrix_world.translation))
    pole_world = None if pole is None else tuple(pole.evaluated_get(depsgraph).matrix_world.translation)
    swivel = checked_swivel(spec, chain.swivel_angle)
    signature = (target_world, pole_world, swivel)
    if state.quick_signatures.get(key) == signature:
        return
    poles = None if pole_world is None else poles_in_root(spec, pole_world, quick.root_world)
    target_root = point_to_root(target_world, quick.root_inverse)
    solved = solve_hi_one(quick.preferred, target_root, swivel=swivel, zero_plane_map=spec.zero_plane_map,
                          pole=None if poles is None else poles[0], tolerance=spec.options.tolerance)
    if solved is None:  # input the one-target solve leaves to the batch solve (which refuses it, or decides)
        prepared = prepare_solve(spec, sample_inputs(obj, spec, depsgraph=depsgraph))
        result = run_solve(prepared)
        written = write_pose(obj, spec.rig, result.q[0])
        store_solve_outcome(chain, result.status[0].value, "", result, prepared)
    else:
        # Non-finite joint values make non-finite rotations, which the writes refuse before writing.
        if quick.quaternion_joints:
            written = write_quaternion_joints(obj, solved.local_quaternions, quick.bone_indices)
        else:
            written = write_pose(obj, spec.rig, np.array(solved.q))
        scale = quick.world_scale
        store_outcome(chain, solved.status.value, "", solved.error * scale, solved.lower_bound * scale,
                      solved.iterations, solved.pole_angle)
    state.quick_signatures[key] = signature
    state.rigs[key] = (_after_write(obj, state.buffers[key], written), spec.rig)


# --------------------------------------------------------------------------- failures
def turn_off(obj, chain, error: BaseException) -> None:
    """Live mode off for ``chain`` after it failed: the reason on the chain (the panel shows it),
    its memory dropped, the pose as it was. Writing the settings may fail too (a file closing):
    then there is nothing left to tell."""
    forget(obj, chain.name)
    try:
        store_solve_outcome(chain, "ERROR", f"{failure_sentence(error)} Live IK turned off.")
        chain.use_live = False
    except Exception:  # the chain's settings are gone with their file
        pass


def _guarded(update) -> None:
    """Run a handler's work; anything escaping the per-chain guard turns every live chain off
    with the reason, printed once (never a traceback at every frame change)."""
    try:
        update()
    except Exception as error:  # never into Blender's handler loop
        state.busy = False
        print(f"IK Solvers: live mode turned off: {failure_sentence(error)}")
        for scene in bpy.data.scenes:
            try:
                for obj, chains in live_chains(scene):
                    for chain in chains:
                        turn_off(obj, chain, error)
            except Exception:  # a scene we cannot read has nothing live
                continue


# --------------------------------------------------------------------------- handlers
@persistent
def on_frame_change(scene, depsgraph=None) -> None:
    _guarded(lambda: update_live_chains(scene, depsgraph, force=True))


@persistent
def on_depsgraph_update(scene, depsgraph) -> None:
    _guarded(lambda: _on_depsgraph_update(scene, depsgraph))


def _on_depsgraph_update(scene, depsgraph) -> None:
    if state.busy or state.loading or state.paused:
        return
    # One pass over the updates: an object moved, or an armature changed (its settings or pose).
    moved, only_objects_moved = False, True
    for update in depsgraph.updates:
        data = update.id
        if not isinstance(data, bpy.types.Object):
            only_objects_moved = False
        elif data.type == "ARMATURE":
            moved, only_objects_moved = True, False
            break
        elif update.is_updated_transform:
            moved = True
    if not only_objects_moved:
        # The scene, a collection, an action … changed: what the last full update found (which
        # armatures are in the scene, what moves them) may not hold any more.
        forget_quick()
    if moved and not (only_objects_moved and _quick_update(scene, depsgraph)):
        update_live_chains(scene, depsgraph, force=False)


@persistent
def on_load_pre(*_args) -> None:
    state.reset()
    state.loading = True


@persistent
def on_load_post(*_args) -> None:
    state.loading = False


@persistent
def on_undo_redo(*_args) -> None:
    forget_quick()


HANDLERS = (
    ("frame_change_post", on_frame_change),
    ("depsgraph_update_post", on_depsgraph_update),
    ("load_pre", on_load_pre),
    ("load_post", on_load_post),
    ("load_post_fail", on_load_post),
    ("undo_pre", on_undo_redo),
    ("redo_pre", on_undo_redo),
)


def register() -> None:
    """Add live mode's handlers (its operator registers with the other operators)."""
    state.reset()
    for name, handler in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if handler not in handlers:
            handlers.append(handler)


def unregister() -> None:
    """Remove live mode's handlers."""
    for name, handler in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while handler in handlers:
            handlers.remove(handler)
    state.reset()

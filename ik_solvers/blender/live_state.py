"""Live mode's memory between handler calls: what it last solved and read, and how it forgets.

``state`` is the one :class:`LiveState`, with one :class:`LiveChain` record per live chain.
``load_pre`` forgets everything (the kept specs name the target and pole objects, which a file load
frees); a chain turned off forgets its record (:func:`forget`); anything that may change what the
last full update checked forgets the quick path (:func:`forget_quick`; ``live.register`` makes it
the listener of the update hook of ``properties.SOLVE_SETTINGS``). :class:`RigValues` is the bulk
read of every armature value the rig reader can depend on, whose bytes tell whether the chain read
before still holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, cast

import numpy as np

from ..core import PreferredPose
from .chains import store_solve_outcome
from .errors import failure_sentence
from .rig import read_pose
from .rig_chain import RigChain
from .sampling import FrameInputs
from .spec import ChainSpec

if TYPE_CHECKING:
    import bpy

    from .live_check import Written
    from .properties import IK_SOLVERS_PG_chain


@dataclass(frozen=True, eq=False)
class QuickChain:
    """What a target move needs to re-solve a live chain the last full update checked
    (``live_quick.offer_quick`` makes it).

    Attributes
    ----------
    object_name : str
        The armature's name (looked up again at every move: no reference to scene data is kept).
    preferred : PreferredPose or None
        The spec's HI preferred pose, derived once, for a chain the one-target HI solve serves;
        None: the chain solves as the full update does.
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
    preferred: PreferredPose | None
    bone_indices: list[int]
    quaternion_joints: bool
    root_world: np.ndarray
    root_inverse: list[list[float]]
    world_scale: float


@dataclass(eq=False)
class LiveChain:
    """Live mode's one record of a live chain between updates.

    Attributes
    ----------
    spec : ChainSpec or None
        The spec of the last full update (built again only when its ``source`` changed); its
        ``rig`` is the chain as read then (its q the pose at read time; nothing in a live solve reads q).
    rig_values : RigValues or None
        The last bulk read of the armature (its buffer is reused).
    rig_key : bytes or None
        ``RigValues.key()`` after our last pose write: the next read equal to it reuses ``spec.rig``.
    inputs : FrameInputs or None
        The inputs the last full update sampled.
    solved : tuple or None
        The spec's ``source`` and the sampled inputs of the last full solve: equal, nothing to solve.
    quick : QuickChain or None
        Offered by the last full update to the target moves (``live_quick.quick_update``).
    quick_solved : object
        The target, pole and swivel (or the sampled inputs) of the last quick solve.
    fk_pose : ndarray or None
        The FK pose ``(1, n_dof)``: the joint bones' pose before live mode's writes
        (:func:`kept_fk_pose`); a chain at influence below 1 blends with it, not with its own write.
    written : live_check.Written or None
        The last write, to check against Blender's evaluation (``live_check``).
    written_rows : ndarray or None
        ``live_check.CHANNELS`` of the joint bones as read after that write (at ``row_index`` in
        ``rig_values.values``, laid out for ``row_layout``: the counts and the joint bones' names).
    checked : bool
        Whether the timer checked that write already.
    overridden : str
        The last check's verdict: the Solve operator's warning, or "" (kept by the solves until their check).
    """

    spec: ChainSpec | None = None
    rig_values: RigValues | None = None
    rig_key: bytes | None = None
    inputs: FrameInputs | None = None
    solved: tuple | None = None
    quick: QuickChain | None = None
    quick_solved: object = None
    fk_pose: np.ndarray | None = None
    written: Written | None = None
    written_rows: np.ndarray | None = None
    row_index: np.ndarray | None = None
    row_layout: tuple | None = None
    checked: bool = False
    overridden: str = ""


ChainKey = tuple[int, str]
"""(armature ``session_uid``, chain name): a live chain's key."""


@dataclass
class LiveState:
    """Live mode's memory between handler calls (``load_pre`` forgets it: the kept specs name the
    target and pole objects, which a file load frees).

    Attributes
    ----------
    chains : dict
        :data:`ChainKey` → :class:`LiveChain`, one record per live chain.
    quick_scene : int or None
        ``session_uid`` of the scene whose full update offered the quick path to every live chain.
    busy : bool
        Set while live mode itself writes, so handlers fired by those writes return at once.
    loading : bool
        Between ``load_pre`` and ``load_post``.
    paused : int
        Nesting depth of :func:`paused` (a bake stepping through frames).
    """

    chains: dict[ChainKey, LiveChain] = field(default_factory=dict)
    quick_scene: int | None = None
    busy: bool = False
    loading: bool = False
    paused: int = 0

    @property
    def quick(self) -> dict[ChainKey, QuickChain]:
        """The chains offered to the quick path, by key."""
        return {key: record.quick for key, record in self.chains.items() if record.quick is not None}

    def reset(self) -> None:
        self.chains.clear()
        self.quick_scene = None
        self.busy = False
        self.loading = False
        self.paused = 0


state = LiveState()


def forget(obj: bpy.types.Object, chain_name: str) -> None:
    """Drop what live mode remembers of a chain (it was turned off)."""
    state.chains.pop((obj.session_uid, chain_name), None)
    forget_quick()


def forget_quick() -> None:
    """The next update runs in full (an undo, a redo, a setting a solve reads, live mode turned on or
    off for a chain): the quick path only trusts what the last full update checked."""
    for record in state.chains.values():
        record.quick = record.quick_solved = None
    state.quick_scene = None


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
    slices: dict[str, slice]
    counts: tuple[int, int]
    names: bytes = b""

    def key(self) -> bytes:
        return self.names + self.values.tobytes()


def rig_values(obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain, record: LiveChain) -> RigValues:
    """Read :class:`RigValues` (bulk reads into the buffer of ``record``'s last read).

    Reading the chain costs several times more than this; a live chain whose bones, pose and IK
    settings are as we left them reuses the chain read before (``record.rig_key``).
    """
    assert obj.pose is not None  # a live chain's armature
    pose_bones, bones = obj.pose.bones, cast("bpy.types.Armature", obj.data).bones
    counts = (len(pose_bones), len(bones))
    rig = record.rig_values
    if rig is None or rig.counts != counts:
        layout, offset = {}, 0
        for count, props in zip(counts, (POSE_BONE_PROPS, BONE_PROPS)):
            for name, width in props:
                layout[name] = slice(offset, offset + count * width)
                offset += count * width
        rig = record.rig_values = RigValues(np.empty(offset), layout, counts)
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


def after_write(obj: bpy.types.Object, rig: RigValues, written: tuple[str, ...]) -> bytes:
    """The rig key :func:`rig_values` would read after our pose write: ``write_pose`` sets the
    rotation ``written`` channels only, so only those are read again."""
    assert obj.pose is not None  # the armature just written to
    for name in written:
        obj.pose.bones.foreach_get(name, rig.values[rig.slices[name]])
    return rig.key()


def kept_fk_pose(record: LiveChain, inputs: FrameInputs, ours: bool, obj: bpy.types.Object, rig: RigChain,
                 ) -> FrameInputs:
    """``inputs`` whose FK pose is the one the bones held before live mode's writes: read again when
    they do not hold our last write (``ours`` False: a frame change reset keyed bones, the animator
    posed them, or nothing was written yet), else the one remembered. Only a chain at an influence
    below 1 reads it (elsewhere ``inputs`` keep their NaN rows)."""
    if not ours or record.fk_pose is None:
        record.fk_pose = read_pose(obj, rig)[None]
    if inputs.influence is not None and np.any(np.asarray(inputs.influence) < 1.0):
        inputs = replace(inputs, fk_pose=record.fk_pose)
    return inputs


def inputs_key(inputs: FrameInputs) -> bytes:
    """Bytes of the sampled inputs (with the spec's ``source``, everything a live solve reads)."""
    arrays = (getattr(inputs, name) for name in FrameInputs.FIELDS)
    return b"".join(np.ascontiguousarray(a, dtype=float).tobytes() if a is not None else b"-" for a in arrays)


def turn_off(obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain, error: BaseException) -> None:
    """Live mode off for ``chain`` after it failed: the reason on the chain (the panel shows it),
    its memory dropped, the pose as it was. Writing the settings may fail too (a file closing):
    then there is nothing left to tell."""
    forget(obj, chain.name)
    try:
        store_solve_outcome(chain, "ERROR", f"{failure_sentence(error)} Live IK turned off.")
        chain.use_live = False
    except Exception:  # the chain's settings are gone with their file
        pass


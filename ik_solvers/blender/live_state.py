"""Live mode's memory between handler calls: what it last solved and read, and how it forgets.

``state`` is the one :class:`LiveState`. ``load_pre`` forgets everything (the kept specs name the
target and pole objects, which a file load frees); a chain turned off forgets its part
(:func:`forget`); anything that may change what the last full update checked forgets the quick path
(:func:`forget_quick`). :class:`RigValues` is the bulk read of every armature value the rig reader
can depend on, whose bytes tell whether the chain read before still holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from .chains import store_solve_outcome
from .errors import failure_sentence
from .sampling import FrameInputs


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
        Same keys → (``live._spec_key`` of the settings, the chain spec built from them, the
        spec's ``signature()``).
    buffers : dict
        Same keys → the :class:`RigValues` last read (its buffer is reused).
    quick : dict
        Same keys → ``live_quick.QuickChain``: the live chains a target move may re-solve without the
        full update's checks (``live_quick.quick_update``), as the last full update left them.
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


def rig_values(obj, chain, key) -> RigValues:
    """Read :class:`RigValues` (bulk reads; the buffer of ``key``'s last read is reused).

    Reading the chain costs several times more than this; a live chain whose bones, pose and IK
    settings are as we left them reuses the chain read before (``live._read_rig``).
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


def after_write(obj, rig: RigValues, written: tuple[str, ...]) -> bytes:
    """The rig key :func:`rig_values` would read after our pose write: ``write_pose`` sets the
    rotation ``written`` channels only, so only those are read again."""
    for name in written:
        obj.pose.bones.foreach_get(name, rig.values[rig.slices[name]])
    return rig.key()


def inputs_signature(spec_signature: bytes, inputs: FrameInputs) -> bytes:
    """Bytes of everything a live solve reads: the sampled inputs and the spec's ``signature()``."""
    arrays = (inputs.target_world, inputs.root_world, inputs.pole_world, inputs.target_parent_world,
              inputs.swivel_angle)
    return b"".join(np.ascontiguousarray(a, dtype=float).tobytes() for a in arrays if a is not None) + spec_signature


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


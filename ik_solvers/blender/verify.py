"""What Blender shows is what we report: Blender's own evaluation of a chain's baked keys, measured
against the target and against the solve (constraints, drivers, NLA — anything that moves the bones
after our keys shows up here)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..core import forward_kinematics
from . import interrupts, live_state
from .errors import chain_context
from .key_reduction import curve_tips
from .keyframes import assigned_fcurves, rotation_data_path
from .rig_chain import RigChain
from .root_space import root_matrices_world
from .sampling import geometry_key, goal_world

if TYPE_CHECKING:
    import bpy

    from ..core.key_reduction import ReducedKeys
    from .frames import SolvedFrames
    from .spec import ChainSpec

DENSE_LIMIT = 500
"""Where something besides the keys could move the chain, bakes of at most this many keyed frames
are checked at every frame; longer ones at every k-th frame (about this many) plus every frame the
solve did not reach."""

SPARSE_LIMIT = 32
"""Where nothing but the baked keys can move the chain (:func:`keys_alone_move_the_chain`), at most
this many evenly spread frames plus at most this many of the unreached ones. There Blender's
evaluation of a keyed frame is the key itself, and the sample checks the whole path from solve to
evaluated pose (keying, channel conversion, rotation mode, the chain's read of the rig): a fault
on one frame in ten shows in 32 frames with 97 % probability, a systematic one on the first."""

PEAK_FRAMES = 8
"""Reduced keys where the keys alone move the chain: the frames of the largest offsets the curves
predict that Blender evaluates in full (``frame_set``), besides at most ``SPARSE_LIMIT`` minus as many
kept keys."""

FLOAT32_EPS = 2.0**-24
"""Unit roundoff of Blender's float32 storage (rest matrices, channels, object matrices)."""

FLOAT32_FACTOR = 16.0
"""The tip of Blender's float32 evaluation sits within ``2 · eps · (n + 2) · (|tip| + reach)`` of
the float64 solve (measured 3-4× below that bound over 200 random poses on the test rigs,
tests/blender/conftest.py ``float32_slack``); a mismatch must exceed eight times that bound
(``16 · eps · …``), so rounding never counts as one."""


@dataclass(frozen=True)
class Evaluation:
    """Blender's evaluation of one chain's baked keys at some of the baked frames.

    Attributes
    ----------
    frames_checked : int
    max_error : float
        Max over the checked frames of (|evaluated tip − target| − lower bound), clipped at 0
        (scene units).
    mismatch_frames : list of int
        Frames where the evaluated tip is farther from the solved tip than the chain's tolerance
        (or float32 rounding, whichever is larger).
    max_offset : float
        Largest |evaluated tip − solved tip| over the checked frames (scene units).
    """

    frames_checked: int
    max_error: float
    mismatch_frames: list[int]
    max_offset: float


def _spread(indices: np.ndarray, limit: int) -> np.ndarray:
    """Every k-th of ``indices`` (and the last), at most about ``limit`` of them."""
    if indices.size <= limit:
        return indices
    stride = int(np.ceil(indices.size / limit))
    return np.union1d(indices[::stride], indices[-1:])


def rows_to_check(n: int, flagged: np.ndarray, limit: int = DENSE_LIMIT, flagged_limit: int | None = None) -> np.ndarray:
    """Indices into ``n`` baked frames to evaluate, in order: all when ``n <= limit``, else every k-th
    frame, the last one and the ``flagged`` ones (bool ``(N,)``; all, or about ``flagged_limit``
    of them evenly spread)."""
    if n <= limit:
        return np.arange(n)
    flagged_rows = np.flatnonzero(flagged)
    if flagged_limit is not None:
        flagged_rows = _spread(flagged_rows, flagged_limit)
    return np.union1d(_spread(np.arange(n), limit), flagged_rows)


def keys_alone_move_the_chain(obj: bpy.types.Object, rig: RigChain, sampling_blockers: list[str]) -> bool:
    """Whether Blender's evaluated chain at a keyed frame is exactly its baked keys there.

    True when F-curve sampling was exact (``sampling_blockers`` empty: no constraint on the chain,
    no NLA or blended action on the armature, nothing animated but the chain's rotations, and no
    parent, driver or ancestor constraint that follows anything changing between frames — see
    ``time_varying``; Rigify's drivers of unanimated custom properties change nothing) and the
    chain's rotation F-curves are neither muted nor modified. Then the chain's surroundings are
    the same at every frame, the keys alone move it, and a spread sample covers every frame.
    """
    if sampling_blockers:
        return False
    assert obj.pose is not None  # the chain was read from this armature's pose
    paths = {rotation_data_path(obj.pose.bones[name]) for name in rig.joint_bones}
    for fcurve in assigned_fcurves(obj):
        if fcurve.data_path in paths and (fcurve.mute or (fcurve.group is not None and fcurve.group.mute)
                                          or len(fcurve.modifiers)):
            return False
    return True


def _mismatch_thresholds(spec: ChainSpec, rig: RigChain, root_world: np.ndarray, tip_world: np.ndarray) -> np.ndarray:
    """Per checked frame ``(M,)``: how far the evaluated tip may sit from the solved one (scene units),
    given root frames ``(M, 4, 4)`` and evaluated tips ``(M, 3)``."""
    scale = np.cbrt(np.abs(np.linalg.det(root_world[:, :3, :3])))
    chain = rig.chain
    reach = (np.linalg.norm(chain.offsets[1:], axis=1).sum() + np.linalg.norm(chain.tip_offset)) * scale
    rounding = FLOAT32_FACTOR * FLOAT32_EPS * (len(rig.bone_names) + 2) * (np.linalg.norm(tip_world, axis=1) + reach)
    return np.maximum(spec.options.tolerance * scale, rounding)


def _evaluated_tip(obj: bpy.types.Object, spec: ChainSpec) -> np.ndarray:
    """The chain's tip ``(3,)`` (world) as Blender evaluates the pose now."""
    assert obj.pose is not None  # the chain was read from this armature's pose
    return np.array(obj.matrix_world @ obj.pose.bones[spec.bone_names[-1]].tail, dtype=float)


def posed_tip_offset(obj: bpy.types.Object, spec: ChainSpec, rig: RigChain, q: np.ndarray) -> float | None:
    """How far (scene units) Blender's evaluation puts the chain's tip from the solve's once the pose
    ``q (n_dof,)`` is written and the view layer updated; None where that is within the tolerance or
    float32 rounding (``_mismatch_thresholds``, the bake's check of its keys). A constraint or driver
    on a chain bone may override the pose: the Solve operator says so, as the bake does."""
    root, tip = root_matrices_world(obj, rig), _evaluated_tip(obj, spec)
    solved = root[:3, :3] @ forward_kinematics(rig.chain, q[None]).positions[0, -1] + root[:3, 3]
    offset = float(np.linalg.norm(tip - solved))
    return None if offset <= _mismatch_thresholds(spec, rig, root[None], tip[None])[0] else offset


def evaluated_goal_excess(obj: bpy.types.Object, spec: ChainSpec, error: float, goal: np.ndarray | None = None,
                          ) -> float | None:
    """How much farther (scene units) Blender's evaluated tip sits from the chain's goal (world ``(3,)``
    as solved; by default as evaluated now) than the solve's ``error`` (scene units) said, once the pose
    is written and the view layer updated; None within the tolerance or float32 rounding. The body
    solve's counterpart of :func:`posed_tip_offset` (a body's chain has no joint variables of its own
    to compare)."""
    root, tip = root_matrices_world(obj, spec.rig), _evaluated_tip(obj, spec)
    if goal is None:
        goal = goal_world(spec.target, spec.goal_bone)
    excess = float(np.linalg.norm(tip - goal)) - error
    return None if excess <= _mismatch_thresholds(spec, spec.rig, root[None], tip[None])[0] else excess


def overridden_sentence(chain: str, offset: float) -> str:
    """The warning where Blender's evaluation moved the chain's tip ``offset`` (scene units) from the
    solve's (the Solve operator reports it, live mode stores it as the chain's message)."""
    return (f"'{chain}': Blender's evaluated tip differs from the solve by {offset:.3g}; "
            "a constraint, driver or NLA strip on the chain changes the solved pose.")


class BakedCheck:
    """Blender's evaluation of one chain's baked keys (already written), resumable frame by frame.

    ``rigs`` maps geometry keys to chains read at that geometry (read and added when missing);
    ``flagged (N,)`` marks the frames the solve did not reach. ``keys_alone``: nothing but the
    baked keys can move the chain (:func:`keys_alone_move_the_chain`), so a sparse sample of frames
    is asked (``SPARSE_LIMIT``); otherwise a dense one with every flagged frame (``DENSE_LIMIT``).
    ``reduced``: the chain's reduced keys (their tip may sit their bound farther than the tolerance
    from the solved one) at ``key_frames (N,)``, the bake's frames in action time. ``predict`` False: a body
    chain's, whose root moves with the keys above it (the body bake measures every frame itself,
    :func:`~.body_keys.evaluated_unit_errors`), checked on the sample as without reduced keys. Reduced keys are
    checked at every frame: with ``keys_alone`` every frame's tip from Blender's evaluation of the
    F-curves (:func:`~.key_reduction.curve_tips`), and ``frame_set`` on the sparse sample, the kept
    keys and the :data:`PEAK_FRAMES` largest predicted offsets, where the evaluated tip must also be
    the predicted one (docs/key-reduction.md argues it); otherwise ``frame_set`` on every frame.
    ``solved_tips (N, 3)``: the tip the solve puts in the armature's space at every frame, where it is not the
    chain's joint variables under Blender's evaluated root (a body's reduced keys: each chain's curves take back
    what the reduced keys above it turn, :mod:`..core.body.keys`), compared in the world.
    :meth:`advance` moves the scene's current frame: the caller puts it back once done (or on an
    error). Each frame only reads Blender's evaluation; :meth:`result` compares them all at once.
    """

    def __init__(self, scene: bpy.types.Scene, obj: bpy.types.Object, spec: ChainSpec, rigs: dict[bytes, RigChain],
                 solved: SolvedFrames, flagged: np.ndarray, *, keys_alone: bool = False,
                 reduced: ReducedKeys | None = None, key_frames: np.ndarray | None = None, predict: bool = True,
                 solved_tips: np.ndarray | None = None) -> None:
        self.scene, self.obj, self.spec, self.rigs, self.solved = scene, obj, spec, rigs, solved
        self.solved_tips = solved_tips
        self.allowance = 0.0 if reduced is None else reduced.key_error
        self._predicted: tuple[np.ndarray, np.ndarray] | None = None
        """Root-space tips ``(N, 3)`` of Blender's evaluation of the reduced curves and of the solve, every frame."""
        if reduced is not None and keys_alone and predict:
            rig = next(iter(rigs.values()))
            self._predicted = (curve_tips(obj, rig, solved.frames if key_frames is None else key_frames),
                               forward_kinematics(rig.chain, solved.q).positions[:, -1])
            offsets = np.linalg.norm(self._predicted[0] - self._predicted[1], axis=1)
            peaks = np.argsort(offsets, kind="stable")[-PEAK_FRAMES:]
            self.rows = np.union1d(np.union1d(_spread(reduced.indices, SPARSE_LIMIT - PEAK_FRAMES), peaks),
                                   _spread(np.flatnonzero(flagged), SPARSE_LIMIT)).tolist()
        else:
            limit, flagged_limit = (SPARSE_LIMIT, SPARSE_LIMIT) if keys_alone else (DENSE_LIMIT, None)
            self.rows = rows_to_check(len(solved.frames), flagged, limit, flagged_limit).tolist()
        self.done = 0
        self._fixed_geometry = next(iter(rigs)) if keys_alone else None
        self._seen: list[tuple[int, bytes, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        """(row, geometry key, root world (4, 4), evaluated tip (3,), evaluated target (3,), the armature's world
        matrix (4, 4)) per checked frame."""

    def advance(self, deadline: float | None = None) -> bool:
        """Check frames until all are checked (True) or past ``deadline`` (False: call again)."""
        with live_state.paused():
            while self.done < len(self.rows):
                self._check(self.rows[self.done])
                self.done += 1
                if deadline is not None and time.perf_counter() > deadline and self.done < len(self.rows):
                    return False
        return True

    def _check(self, row: int) -> None:
        """Read Blender's evaluation of the chain at the baked frame ``row``."""
        spec, obj = self.spec, self.obj
        frame = int(self.solved.frames[row])
        self.scene.frame_set(frame)
        interrupts.raise_pending()  # a Ctrl-C that landed in a frame-change handler
        key = self._fixed_geometry if self._fixed_geometry is not None else geometry_key(obj, spec.rig)
        rig = self.rigs.get(key)
        if rig is None:
            with chain_context(spec.name, frame):
                rig = self.rigs[key] = spec.read_rig(obj)
        tip, target = _evaluated_tip(obj, spec), goal_world(spec.target, spec.goal_bone)
        self._seen.append((row, key, root_matrices_world(obj, rig), tip, target, np.array(obj.matrix_world)))

    def result(self) -> Evaluation:
        """The comparison of every frame checked so far with the target and the solve."""
        max_error, max_offset, mismatch_rows = 0.0, 0.0, []
        for key in dict.fromkeys(seen[1] for seen in self._seen):
            group = [seen for seen in self._seen if seen[1] == key]
            rows = np.array([seen[0] for seen in group])
            root, tip, target, world = (np.array([seen[k] for seen in group]) for k in (2, 3, 4, 5))
            rig = self.rigs[key]
            if self.solved_tips is None:
                placed, local_tip = root, forward_kinematics(rig.chain, self.solved.q[rows]).positions[:, -1]
            else:
                placed, local_tip = world, self.solved_tips[rows]
            solved_tip = np.einsum("nij,nj->ni", placed[:, :3, :3], local_tip) + placed[:, :3, 3]
            error = np.linalg.norm(tip - target, axis=1) - np.asarray(self.solved.bound)[rows]
            offset = np.linalg.norm(tip - solved_tip, axis=1)
            max_error = max(max_error, float(error.max()))
            max_offset = max(max_offset, float(offset.max()))
            thresholds = _mismatch_thresholds(self.spec, rig, root, tip)
            mismatch = offset > thresholds + self.allowance
            if self._predicted is not None:  # every frame, and the pose is the core's of Blender's curves
                world = root[0]  # the keys alone move the chain: the same root at every frame
                predicted, solved = (tips @ world[:3, :3].T + world[:3, 3] for tips in self._predicted)
                every = np.linalg.norm(predicted - solved, axis=1)
                roots = np.broadcast_to(world, (len(predicted), 4, 4))
                mismatch_rows += np.flatnonzero(
                    every > _mismatch_thresholds(self.spec, rig, roots, predicted) + self.allowance).tolist()
                max_offset = max(max_offset, float(every.max()))
                mismatch |= np.linalg.norm(tip - predicted[rows], axis=1) > thresholds
            mismatch_rows += rows[mismatch].tolist()
        frames = [int(self.solved.frames[row]) for row in sorted(set(mismatch_rows))]
        return Evaluation(frames_checked=self.done, max_error=max_error, mismatch_frames=frames, max_offset=max_offset)


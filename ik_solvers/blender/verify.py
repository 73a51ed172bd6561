"""What Blender shows is what we report: Blender's own evaluation of a chain's baked keys, measured
against the target and against the solve (constraints, drivers, NLA — anything that moves the bones
after our keys shows up here)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import forward_kinematics
from . import live
from .errors import IKSolversError
from .rig import RigChain, root_matrices_world
from .sampling import geometry_key

DENSE_LIMIT = 500
"""Bakes of at most this many keyed frames are checked at every frame; longer ones at every k-th
frame (about this many) plus every frame the solve did not reach."""

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
    mismatch_frames: list
    max_offset: float


def rows_to_check(n: int, flagged: np.ndarray, limit: int = DENSE_LIMIT) -> np.ndarray:
    """Indices into ``n`` baked frames to evaluate: all when ``n <= limit``, else every k-th frame,
    the last one and every ``flagged`` one (bool ``(n,)``), in order."""
    if n <= limit:
        return np.arange(n)
    stride = int(np.ceil(n / limit))
    rows = np.union1d(np.arange(0, n, stride), np.flatnonzero(flagged))
    return np.union1d(rows, [n - 1])


def _mismatch_threshold(spec, rig: RigChain, root_world: np.ndarray, tip_world: np.ndarray) -> float:
    scale = float(np.cbrt(abs(np.linalg.det(root_world[:3, :3]))))
    chain = rig.chain
    reach = (np.linalg.norm(chain.offsets[1:], axis=1).sum() + np.linalg.norm(chain.tip_offset)) * scale
    rounding = FLOAT32_FACTOR * FLOAT32_EPS * (len(rig.bone_names) + 2) * (
        float(np.linalg.norm(tip_world)) + reach)
    return max(spec.options.tolerance * scale, rounding)


def evaluate_baked(scene, obj, spec, rigs: dict, solved, flagged: np.ndarray) -> Evaluation:
    """Step Blender through the checked frames of ``solved`` (keys already written) and measure.

    ``rigs`` maps geometry keys to chains read at that geometry (read and added when missing).
    The caller puts the current frame back. Live mode holds still meanwhile.
    """
    rows = rows_to_check(len(solved.frames), flagged)
    tip_bone = spec.bone_names[-1]
    max_error, max_offset, mismatches = 0.0, 0.0, []
    with live.paused():
        for row in rows.tolist():
            frame = int(solved.frames[row])
            scene.frame_set(frame)
            key = geometry_key(obj, spec.rig)
            rig = rigs.get(key)
            if rig is None:
                try:
                    rig = rigs[key] = spec.read_rig(obj)
                except IKSolversError as error:
                    raise error.about(spec.name, frame) from None
            root = root_matrices_world(obj, rig)
            local_tip = forward_kinematics(rig.chain, solved.q[row][None]).positions[0, -1]
            solved_tip = root[:3, :3] @ local_tip + root[:3, 3]
            tip = np.array(obj.matrix_world @ obj.pose.bones[tip_bone].tail, dtype=float)
            target = np.array(spec.target.matrix_world.translation, dtype=float)
            max_error = max(max_error, float(np.linalg.norm(tip - target)) - float(solved.bound[row]))
            offset = float(np.linalg.norm(tip - solved_tip))
            max_offset = max(max_offset, offset)
            if offset > _mismatch_threshold(spec, rig, root, tip):
                mismatches.append(frame)
    return Evaluation(frames_checked=int(rows.size), max_error=max(max_error, 0.0), mismatch_frames=mismatches,
                      max_offset=max_offset)

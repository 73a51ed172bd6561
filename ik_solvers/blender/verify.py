"""What Blender shows is what we report: Blender's own evaluation of a chain's baked keys, measured
against the target and against the solve (constraints, drivers, NLA — anything that moves the bones
after our keys shows up here)."""

from __future__ import annotations

import time
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


class BakedCheck:
    """Blender's evaluation of one chain's baked keys (already written), resumable frame by frame.

    ``rigs`` maps geometry keys to chains read at that geometry (read and added when missing);
    ``flagged (N,)`` marks the frames the solve did not reach (always checked). :meth:`advance`
    moves the scene's current frame: the caller puts it back once done (or on an error).
    """

    def __init__(self, scene, obj, spec, rigs: dict, solved, flagged: np.ndarray):
        self.scene, self.obj, self.spec, self.rigs, self.solved = scene, obj, spec, rigs, solved
        self.rows = rows_to_check(len(solved.frames), flagged).tolist()
        self.done = 0
        self._max_error, self._max_offset = 0.0, 0.0
        self._mismatches: list[int] = []

    def advance(self, deadline: float | None = None) -> bool:
        """Check frames until all are checked (True) or past ``deadline`` (False: call again)."""
        with live.paused():
            while self.done < len(self.rows):
                self._check(self.rows[self.done])
                self.done += 1
                if deadline is not None and time.perf_counter() > deadline and self.done < len(self.rows):
                    return False
        return True

    def result(self) -> Evaluation:
        return Evaluation(frames_checked=self.done, max_error=max(self._max_error, 0.0),
                          mismatch_frames=list(self._mismatches), max_offset=self._max_offset)

    def _check(self, row: int) -> None:
        spec, obj, solved = self.spec, self.obj, self.solved
        frame = int(solved.frames[row])
        self.scene.frame_set(frame)
        key = geometry_key(obj, spec.rig)
        rig = self.rigs.get(key)
        if rig is None:
            try:
                rig = self.rigs[key] = spec.read_rig(obj)
            except IKSolversError as error:
                raise error.about(spec.name, frame) from None
        root = root_matrices_world(obj, rig)
        local_tip = forward_kinematics(rig.chain, solved.q[row][None]).positions[0, -1]
        solved_tip = root[:3, :3] @ local_tip + root[:3, 3]
        tip = np.array(obj.matrix_world @ obj.pose.bones[spec.bone_names[-1]].tail, dtype=float)
        target = np.array(spec.target.matrix_world.translation, dtype=float)
        self._max_error = max(self._max_error, float(np.linalg.norm(tip - target)) - float(solved.bound[row]))
        offset = float(np.linalg.norm(tip - solved_tip))
        self._max_offset = max(self._max_offset, offset)
        if offset > _mismatch_threshold(spec, rig, root, tip):
            self._mismatches.append(frame)


def evaluate_baked(scene, obj, spec, rigs: dict, solved, flagged: np.ndarray) -> Evaluation:
    """:class:`BakedCheck` run to the end (the caller puts the current frame back)."""
    check = BakedCheck(scene, obj, spec, rigs, solved, flagged)
    check.advance()
    return check.result()

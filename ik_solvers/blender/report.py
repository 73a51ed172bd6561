"""The bake report: one typed record per baked chain and the one function that computes it, used by
the bake operator, the panel (through the chain's stored report) and ``scripts/ik_batch.py``."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import Status, flips_from_normals
from ..core.body import GoalStatus
from .frames import SolvedFrames

if TYPE_CHECKING:
    from ..core.key_reduction import ReducedKeys
    from .properties import IK_SOLVERS_PG_chain
    from .verify import Evaluation

NOT_REACHED_LISTED = 100
"""At most this many not-reached frames are listed (the counts hold them all)."""


@dataclass(frozen=True)
class BakeReport:
    """What one chain's bake did, frame statistics in scene units.

    Attributes
    ----------
    armature, chain, method : str
    frames : int
        Frames keyed.
    frame_start, frame_end, frame_step : int
    sampling : str
        ``'fcurves'`` (inputs read from F-curves) or ``'evaluated'`` (each frame evaluated).
    sampling_reasons : list of str
        Why F-curve sampling was not exact (at most five).
    status_counts : dict of str to int
        Frames per ``Status`` value, every status listed.
    max_error, median_error : float
        Tip-to-target distance over the frames.
    max_excess : float
        Largest error above the lower bound; ``max_excess_frame`` the frame of it.
    max_excess_frame : int
    not_reached_frames : list of int
        Frames neither converged nor at the lower bound of an unreachable target (first 100).
    flip_frames : list of dict
        HI solver-plane flips: frame, turn_degrees, pole_crossing, pole_distance_degrees, warned.
    pole_warning_frames : int or None
        HI frames with the pole warning on (None for other methods).
    min_pole_distance_degrees : float or None
        HI: the smallest angle between the EE axis and a pole (None for other methods).
    against_bend_frames : list of dict
        HI frames with a joint bent against its preferred sense (a target nearer the start joint
        than the chain reaches with every bend its preferred way): frame, and ``joints``, the
        joints' indices along the chain (0: the start joint); the first 100.
    against_bend_frame_count : int or None
        How many frames have such a joint (None for other methods).
    seconds : float
        Time spent solving and keying.
    evaluated_max_error : float
        Blender's own evaluation of the baked keys (:mod:`.verify`): max over the checked frames
        of |evaluated tip − target| minus the lower bound, clipped at 0.
    evaluated_mismatch_frames : list of int
        Checked frames where Blender's evaluated tip is not where the solve put it (more than the
        chain's tolerance away): a constraint, driver, NLA strip … changes the baked pose.
    evaluated_frames_checked : int
        Frames evaluated: where only the keys move the chain, about 32 spread over the bake and
        as many of the unreached ones; else every keyed frame up to 500, beyond that a dense sample
        plus every unreached frame (:mod:`.verify`). Reduced keys where only the keys move the
        chain: at most 32 frames set (kept keys, largest predicted offsets), every frame's
        F-curves evaluated besides.
    evaluated_max_offset : float
        Largest distance between Blender's evaluated tip and the solved tip over the checked frames.
    max_orientation_error_degrees : float or None
        With Rotation: the largest angle between the tip bone's and the target's orientation over
        the frames (None without Rotation).
    keys_before, keys_after : int or None
        With reduced keys (SPEC §9): rotation keys of the chain's bones before and after the
        reduction, all its rotation curves counted (None: keys not reduced).
    key_error : float or None
        The reduction's world-space bound (scene units).
    reduced_max_error, reduced_error_p99 : float or None
        The largest and the 99th percentile over the frames of the farthest joint's or tip's
        world distance (scene units) from the unreduced bake.
    goals : dict or None
        A body bake (SPEC §8): the chain's goal per frame (:func:`goals_section`); None for a chain baked alone.
    """

    armature: str
    chain: str
    method: str
    frames: int
    frame_start: int
    frame_end: int
    frame_step: int
    sampling: str
    sampling_reasons: list[str]
    status_counts: dict[str, int]
    max_error: float
    median_error: float
    max_excess: float
    max_excess_frame: int
    not_reached_frames: list[int]
    flip_frames: list[dict[str, Any]]
    pole_warning_frames: int | None
    min_pole_distance_degrees: float | None
    seconds: float
    evaluated_max_error: float = 0.0
    evaluated_mismatch_frames: list[int] = field(default_factory=list)
    evaluated_frames_checked: int = 0
    evaluated_max_offset: float = 0.0
    max_orientation_error_degrees: float | None = None
    keys_before: int | None = None
    keys_after: int | None = None
    key_error: float | None = None
    reduced_max_error: float | None = None
    reduced_error_p99: float | None = None
    against_bend_frames: list[dict[str, Any]] = field(default_factory=list)
    against_bend_frame_count: int | None = None
    goals: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> BakeReport:
        return cls(**json.loads(text))

    def sentence(self) -> str:
        """One line for ``self.report``: frames, statuses, worst excess, flips."""
        status_counts = self.status_counts if self.goals is None else self.goals["status_counts"]
        counts = ", ".join(f"{count} {status.lower().replace('_', ' ')}"
                           for status, count in status_counts.items() if count)
        text = (f"Baked '{self.chain}' over {self.frames} frames: {counts}; "
                f"max error over lower bound {self.max_excess:.3g}")
        if self.max_orientation_error_degrees is not None:
            text += f"; max orientation error {self.max_orientation_error_degrees:.3g}°"
        if self.flip_frames:
            text += f"; plane flips at frames {', '.join(str(f['frame']) for f in self.flip_frames[:5])}"
        if self.against_bend_frames:
            text += (f"; {self.against_bend_frame_count} frame(s) bend a joint against its preferred way "
                     f"(from frame {self.against_bend_frames[0]['frame']})")
        return text + "."

    def warning(self) -> str | None:
        """One sentence when Blender's evaluation of the keys differs from the solve, else None."""
        frames = self.evaluated_mismatch_frames
        if not frames:
            return None
        shown = ", ".join(str(f) for f in frames[:5]) + (", …" if len(frames) > 5 else "")
        return (f"'{self.chain}': Blender's evaluated tip differs from the solve at {len(frames)} frame(s) "
                f"({shown}), by up to {self.evaluated_max_offset:.3g}; a constraint, driver or NLA strip "
                f"on the chain changes the baked pose.")


def reached(status: np.ndarray) -> np.ndarray:
    """Frames that converged or ended at the lower bound of an unreachable target."""
    return (status == Status.CONVERGED) | (status == Status.UNREACHABLE)


def flip_frames(solved: SolvedFrames, warning_angle: float) -> list[dict[str, Any]]:
    """Solver-plane flips of an HI solve over its frames in order, within each chain shape.

    A shape is told by the sphere pole its frames were solved with; across two shapes the normals
    live in different spheres, and the shape change itself would count as a turn. Per flip: frame,
    turn (degrees), whether it crosses a pole, the pole distance (degrees) and whether the pole
    warning was on at either side of it.
    """
    hi = solved.hi
    if hi is None:
        return []
    flips = []
    poles = hi.poles[:1] if np.all(hi.poles == hi.poles[0]) else np.unique(hi.poles, axis=0)  # sorting is slow
    for pole in poles:
        rows = np.flatnonzero(np.all(hi.poles == pole, axis=1))
        found = flips_from_normals(
            hi.solver_normals[rows], hi.ee_axes_sphere[rows], pole, warning_angle=warning_angle,
            singular_directions=hi.singular_directions[rows],
        )
        for k, turn, crossing in zip(found.frames, found.turns, found.pole_crossing):
            before, after = rows[k - 1], rows[k]
            flips.append({
                "frame": int(solved.frames[after]),
                "turn_degrees": float(np.degrees(turn)),
                "pole_crossing": bool(crossing),
                "pole_distance_degrees": float(np.degrees(min(hi.pole_angles[before], hi.pole_angles[after]))),
                "warned": bool(hi.pole_warnings[before] or hi.pole_warnings[after]),
            })
    return sorted(flips, key=lambda flip: flip["frame"])


def against_bend_frames(solved: SolvedFrames) -> list[dict[str, Any]]:
    """HI frames (in order, the first ``NOT_REACHED_LISTED``) with a joint bent against its preferred
    sense: the frame, and the joints' indices along the chain."""
    hi = solved.hi
    if hi is None:
        return []
    rows = np.flatnonzero(hi.against_bend.any(axis=1))[:NOT_REACHED_LISTED]
    return [{"frame": int(solved.frames[k]), "joints": [int(j) for j in np.flatnonzero(hi.against_bend[k])]}
            for k in rows]


def bake_report(solved: SolvedFrames, *, armature: str, chain: str, method: str, frame_step: int,
                sampling_reasons: list[str], flip_threshold: float, seconds: float,
                evaluation: Evaluation | None = None, reduced: ReducedKeys | None = None) -> BakeReport:
    """The statistics of one chain's solved frames (``solved.frames`` in order, the bake's frames),
    with Blender's evaluation of the keys (a ``verify.Evaluation``) and the key reduction when given."""
    status, error = solved.status, solved.error
    excess = np.maximum(error - solved.bound, 0.0)
    worst = int(np.argmax(excess))
    hi = solved.hi
    return BakeReport(
        armature=armature,
        chain=chain,
        method=method,
        frames=int(len(solved.frames)),
        frame_start=int(solved.frames[0]),
        frame_end=int(solved.frames[-1]),
        frame_step=int(frame_step),
        sampling="evaluated" if sampling_reasons else "fcurves",
        sampling_reasons=list(sampling_reasons[:5]),
        status_counts={s.value: int(np.count_nonzero(status == s)) for s in Status},
        max_error=float(error.max()),
        median_error=float(np.median(error)),
        max_excess=float(excess[worst]),
        max_excess_frame=int(solved.frames[worst]),
        not_reached_frames=[int(f) for f in solved.frames[~reached(status)][:NOT_REACHED_LISTED]],
        flip_frames=flip_frames(solved, flip_threshold),
        pole_warning_frames=None if hi is None else int(np.asarray(hi.pole_warnings).sum()),
        min_pole_distance_degrees=None if hi is None else float(np.degrees(np.nanmin(hi.pole_angles))),
        seconds=float(seconds),
        evaluated_max_error=0.0 if evaluation is None else float(evaluation.max_error),
        evaluated_mismatch_frames=[] if evaluation is None else [int(f) for f in evaluation.mismatch_frames],
        evaluated_frames_checked=0 if evaluation is None else int(evaluation.frames_checked),
        evaluated_max_offset=0.0 if evaluation is None else float(evaluation.max_offset),
        max_orientation_error_degrees=None if solved.orientation_error is None
        else float(np.degrees(solved.orientation_error.max())),
        **reduction_fields(reduced),
        against_bend_frames=against_bend_frames(solved),
        against_bend_frame_count=None if hi is None else int(np.count_nonzero(hi.against_bend.any(axis=1))),
    )


def goals_section(frames: np.ndarray, status: np.ndarray, error: np.ndarray, bound: np.ndarray, weight: float,
                  priority: int) -> dict[str, Any]:
    """A body goal's record over the baked frames ``(N,)``: its weight and priority, frames per status
    (``REACHED`` / ``LIMITED`` / ``OUT_OF_REACH``), the largest error and bound (scene units), and per
    frame not reached its status, error and bound (the first 100)."""
    missed = np.flatnonzero(status != GoalStatus.REACHED)[:NOT_REACHED_LISTED]
    return {
        "weight": float(weight),
        "priority": int(priority),
        "status_counts": {s.value: int(np.count_nonzero(status == s)) for s in GoalStatus},
        "max_error": float(np.max(error)),
        "max_bound": float(np.max(bound)),
        "not_reached": [{"frame": int(frames[k]), "status": status[k].value, "error": float(error[k]),
                         "bound": float(bound[k])} for k in missed],
    }


def reduction_fields(reduced: ReducedKeys | None) -> dict[str, Any]:
    """The report's ``keys_before``, ``keys_after`` (every rotation curve of the chain counted),
    ``key_error``, ``reduced_max_error`` and ``reduced_error_p99``; all None without a reduction."""
    if reduced is None:
        return dict.fromkeys(("keys_before", "keys_after", "key_error", "reduced_max_error", "reduced_error_p99"))
    curves = sum(int(controls.shape[-1]) for controls in reduced.controls)
    return {"keys_before": reduced.keys_before * curves, "keys_after": reduced.keys_after * curves,
            "key_error": float(reduced.key_error), "reduced_max_error": reduced.max_error,
            "reduced_error_p99": reduced.error_p99}


def store_report(chain_settings: IK_SOLVERS_PG_chain, report: BakeReport) -> None:
    """Keep ``report`` on the chain's settings, where the panel draws it."""
    counts = report.status_counts
    chain_settings.last_bake_report = report.to_json()
    chain_settings.bake_frames = report.frames
    chain_settings.bake_converged = counts[Status.CONVERGED.value]
    chain_settings.bake_unreachable = counts[Status.UNREACHABLE.value]
    chain_settings.bake_budget_exhausted = counts[Status.BUDGET_EXHAUSTED.value]
    chain_settings.bake_stalled = counts[Status.STALLED.value]
    chain_settings.bake_diverged = counts[Status.DIVERGED.value]
    chain_settings.bake_max_excess = report.max_excess
    chain_settings.bake_flip_frames = len(report.flip_frames)
    chain_settings.bake_against_bend_frames = report.against_bend_frame_count or 0
    chain_settings.bake_solver_limit = counts[Status.SOLVER_LIMIT.value]
    chain_settings.bake_mismatch_frames = len(report.evaluated_mismatch_frames)
    chain_settings.bake_evaluated_error = report.evaluated_max_error
    chain_settings.bake_keys_before = report.keys_before or 0
    chain_settings.bake_keys_after = report.keys_after or 0
    chain_settings.bake_key_error = report.key_error or 0.0
    chain_settings.bake_reduced_max_error = report.reduced_max_error or 0.0
    chain_settings.bake_reduced_error_p99 = report.reduced_error_p99 or 0.0
    chain_settings.bake_max_orientation_error = (0.0 if report.max_orientation_error_degrees is None
                                                 else float(np.radians(report.max_orientation_error_degrees)))

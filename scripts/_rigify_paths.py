"""Target paths for chains on Rigify's rigs, from a chain's own rest joints (numpy only).

Paths are in the metarigs' character axes (up +Z, forward −Y, outward +X for the ``.L`` side), with
the distance from the chain's root stated as a ratio of the reach (sum of the segment lengths): every
path is reachable except ``out_of_reach`` (1.05–1.3 of the reach). Every rig also gets ``fold``
(:func:`fold_path`), down to the least distance the chain reaches with each joint bent its own way
(:func:`min_preferred_ratio`). The rigs themselves: ``_rigify_rigs.py``.
"""

from __future__ import annotations

import math

import numpy as np

UP = np.array([0.0, 0.0, 1.0])
FORWARD = np.array([0.0, -1.0, 0.0])
OUTWARD = np.array([1.0, 0.0, 0.0])
"""The metarigs' character axes: up, facing direction, and outward for the left (``.L``) side."""


def reference_joint(joints: np.ndarray) -> int:
    """Inner joint (1 … n-1) of rest joints ``(n + 1, 3)`` farthest from the root → tip axis: it spans the bend plane."""
    axis = joints[-1] - joints[0]
    axis = axis / np.linalg.norm(axis)
    off = joints[1:-1] - joints[0]
    dist = np.linalg.norm(off - np.outer(off @ axis, axis), axis=1)
    return 1 + int(np.argmax(dist))


def min_preferred_ratio(joints: np.ndarray, steps: int = 73) -> float:
    """Least root-to-tip distance / reach of the planar chain with each joint bent its rest way.

    Joint ``k`` bends by β ∈ [0, π] with the sign of its rest bend relative to the first joint's
    (from the world rest bend vectors); evaluated on a grid of ``steps`` per joint.
    """
    seg = np.diff(joints, axis=0)
    lengths = np.linalg.norm(seg, axis=1)
    bends = np.cross(seg[:-1], seg[1:])
    signs = np.sign(bends @ bends[0])
    signs[signs == 0] = 1.0
    betas = np.meshgrid(*[np.linspace(0.0, math.pi, steps)] * (len(lengths) - 1), indexing="ij")
    betas = np.stack([b.ravel() for b in betas], axis=1) * signs
    phi = np.concatenate([np.zeros((len(betas), 1)), np.cumsum(betas, axis=1)], axis=1)
    tip = np.stack([(lengths * np.cos(phi)).sum(1), (lengths * np.sin(phi)).sum(1)], axis=1)
    return float(np.linalg.norm(tip, axis=1).min() / lengths.sum())


def _directions(alpha: float | np.ndarray, beta: float | np.ndarray, a: np.ndarray, b: np.ndarray,
                c: np.ndarray, cone: bool = False) -> np.ndarray:
    """Unit directions ``cos β (cos α a + sin α b) + sin β c`` for arrays of angles (radians); with
    ``cone``, ``cos α a + sin α (cos β b + sin β c)`` (α from ``a``, β round it)."""
    alpha, beta = np.broadcast_arrays(np.atleast_1d(np.asarray(alpha, float)), np.atleast_1d(np.asarray(beta, float)))
    if cone:
        return np.cos(alpha)[:, None] * a + np.sin(alpha)[:, None] * (np.cos(beta)[:, None] * b + np.sin(beta)[:, None] * c)
    d = np.cos(alpha)[:, None] * a + np.sin(alpha)[:, None] * b
    return np.cos(beta)[:, None] * d + np.sin(beta)[:, None] * c


def leg_paths(root: np.ndarray, reach: float, frames: int, low_ratio: float, quadruped: bool = False) -> dict[str, np.ndarray]:
    """Foot-target paths of a leg hanging from ``root`` (hip): ratio of the reach in brackets.

    ``crouch`` (0.95 → ``low_ratio`` → 0.95): the foot rises toward the hip and moves forward of it
    (5° → 50° from straight down), as in a deep squat; ``kick`` (0.9): from 20° behind to 95° in front
    (a quadruped bucks: 10° in front to 70° behind); ``stride`` (0.85–0.96): ±25° fore and aft, the
    knee bending in the swing; ``cross`` (0.85): the foot crosses in front of the other leg (25°
    inward, 20° forward); ``out_of_reach`` (1.05–1.3): straight down to 60° forward.
    """
    t = np.linspace(0.0, 1.0, frames)
    rise = np.sin(math.pi * t)
    down = -UP
    deg = math.radians
    if quadruped:
        kick_alpha = deg(10.0) - deg(80.0) * rise
    else:
        kick_alpha = deg(-20.0) + deg(115.0) * rise
    swing = np.sin(2 * math.pi * t)
    paths = {
        "crouch": (0.95 - (0.95 - low_ratio) * rise,
                   _directions(deg(5.0) + deg(45.0) * rise, 0.0, down, FORWARD, OUTWARD)),
        "kick": (np.full(frames, 0.9), _directions(kick_alpha, deg(3.0), down, FORWARD, OUTWARD)),
        "stride": (0.96 - 0.11 * np.clip(swing, 0.0, None),
                   _directions(deg(25.0) * np.cos(2 * math.pi * t), deg(2.0), down, FORWARD, OUTWARD)),
        "cross": (np.full(frames, 0.85), _directions(deg(20.0), deg(5.0) - deg(30.0) * rise, down, FORWARD, OUTWARD)),
        "out_of_reach": (1.05 + 0.25 * rise, _directions(deg(60.0) * t, 0.0, down, FORWARD, OUTWARD)),
    }
    return {k: root + (reach * r)[:, None] * d for k, (r, d) in paths.items()}


def arm_paths(root: np.ndarray, reach: float, frames: int) -> dict[str, np.ndarray]:
    """Hand-target paths of an arm from ``root`` (shoulder); ratio of the reach in brackets.

    ``reach_across`` (0.8): from out to the side, through in front, across the chest past the other
    shoulder (azimuth 0° → 150° from outward toward forward, 20° below the shoulder); ``reach_behind``
    (0.75): from the side to behind the back (azimuth 0° → −150°, 40° below); ``curl`` (0.95 → 0.3 →
    0.95): the hand comes up to the shoulder as the elbow folds; ``overhead`` (0.9): from forward and
    level to 80° up; ``out_of_reach`` (1.05–1.3): sweeping from the side to the front.
    """
    t = np.linspace(0.0, 1.0, frames)
    rise = np.sin(math.pi * t)
    deg = math.radians
    paths = {
        "reach_across": (np.full(frames, 0.8), _directions(deg(150.0) * t, deg(-20.0), OUTWARD, FORWARD, UP)),
        "reach_behind": (np.full(frames, 0.75), _directions(deg(-150.0) * t, deg(-40.0), OUTWARD, FORWARD, UP)),
        "curl": (0.95 - 0.65 * rise, _directions(deg(60.0), deg(-70.0) + deg(110.0) * rise, OUTWARD, FORWARD, UP)),
        "overhead": (np.full(frames, 0.9), _directions(deg(70.0), deg(80.0) * t, OUTWARD, FORWARD, UP)),
        "out_of_reach": (1.05 + 0.25 * rise, _directions(deg(90.0) * t, deg(-10.0), OUTWARD, FORWARD, UP)),
    }
    return {k: root + (reach * r)[:, None] * d for k, (r, d) in paths.items()}


def spine_paths(root: np.ndarray, reach: float, frames: int) -> dict[str, np.ndarray]:
    """Chest-target paths of a spine from ``root`` (pelvis); ratio of the reach in brackets.

    ``bend_forward`` (0.97 → 0.9): 0° → 60° from up toward forward; ``side_bend`` (0.95): 30° to one
    side and to the other; ``lean_back`` (0.96): 0° → 20° backward; ``out_of_reach`` (1.05–1.2).
    """
    t = np.linspace(0.0, 1.0, frames)
    rise = np.sin(math.pi * t)
    deg = math.radians
    paths = {
        "bend_forward": (0.97 - 0.07 * t, _directions(deg(60.0) * t, 0.0, UP, FORWARD, OUTWARD)),
        "side_bend": (np.full(frames, 0.95),
                      _directions(deg(5.0), deg(30.0) * np.sin(2 * math.pi * t), UP, FORWARD, OUTWARD)),
        "lean_back": (np.full(frames, 0.96), _directions(deg(-20.0) * rise, 0.0, UP, FORWARD, OUTWARD)),
        "out_of_reach": (1.05 + 0.15 * rise, _directions(deg(40.0) * t, 0.0, UP, FORWARD, OUTWARD)),
    }
    return {k: root + (reach * r)[:, None] * d for k, (r, d) in paths.items()}


FOLD_MARGIN = 1.05
"""The ``fold`` path goes down to this multiple of the preferred-bend minimum distance."""


def fold_path(joints: np.ndarray, frames: int) -> np.ndarray:
    """The ``fold`` path: the target drawn in along the rest root → tip axis from 0.97 of the reach to
    ``FOLD_MARGIN`` × the preferred-bend minimum (:func:`min_preferred_ratio`) and back out.

    Not a motion anyone makes (near the minimum every joint is folded almost flat): it covers the
    whole depth of the set a chain reaches with each joint bent its own way, which is what issue 11
    asks HI to reach at any chain length.
    """
    seg = np.diff(joints, axis=0)
    reach = float(np.linalg.norm(seg, axis=1).sum())
    axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
    low = FOLD_MARGIN * min_preferred_ratio(joints)
    ratio = 0.97 - (0.97 - low) * np.sin(math.pi * np.linspace(0.0, 1.0, frames))
    return joints[0] + (reach * ratio)[:, None] * axis


def with_fold(paths: dict[str, np.ndarray], joints: np.ndarray, frames: int) -> dict[str, np.ndarray]:
    """``paths`` with ``fold`` inserted before ``out_of_reach`` (which stays last)."""
    out = {k: v for k, v in paths.items() if k != "out_of_reach"}
    out["fold"] = fold_path(joints, frames)
    out["out_of_reach"] = paths["out_of_reach"]
    return out



# --------------------------------------------------------------------------- issue 20's paths (compare_metarigs.py)
SWEEP_STEP = 0.0005
"""The preferred-distance sweep moves the target this far per frame (0.5 mm at the metarigs' metre scale)."""


def _rest_axis(joints: np.ndarray) -> tuple[np.ndarray, float, float]:
    """Unit rest root → tip axis, the rest root-to-tip distance and the reach (sum of segment lengths)."""
    axis = joints[-1] - joints[0]
    return axis / np.linalg.norm(axis), float(np.linalg.norm(axis)), float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())


def free_min_ratio(joints: np.ndarray) -> float:
    """Least root-to-tip distance / reach of the chain with free joints: ``max(0, 2·Lmax − ΣL) / ΣL``."""
    lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    return float(max(0.0, 2.0 * lengths.max() - lengths.sum()) / lengths.sum())


def sweep_path(joints: np.ndarray, frames: int, step: float = SWEEP_STEP) -> np.ndarray:
    """The target along the rest axis across the rest (preferred) root-to-tip distance, ``step`` per
    frame over ``frames`` frames centred on it (ending at most 1 mm short of the reach): where HI popped
    before issue 20 (a 0.5 mm move moved the human knee 93 mm)."""
    axis, distance, reach = _rest_axis(joints)
    far = min(distance + 0.5 * (frames - 1) * step, reach - 0.001)
    return joints[0] + (far - step * np.arange(frames)[::-1])[:, None] * axis


def near_root_path(joints: np.ndarray, frames: int, margin: float = 0.05) -> np.ndarray:
    """The target drawn in along the rest axis from 0.9 of the reach to ``margin`` (of the reach) above
    the free-joint least distance and back: below the least distance with every joint bent its own way
    (:func:`min_preferred_ratio`) on zigzag legs, reachable only by bending a joint the other way."""
    axis, _, reach = _rest_axis(joints)
    low = max(free_min_ratio(joints) + margin, 0.1)
    ratio = 0.9 - (0.9 - low) * np.sin(math.pi * np.linspace(0.0, 1.0, frames))
    return joints[0] + (reach * ratio)[:, None] * axis


def axis_paths(joints: np.ndarray, frames: int) -> dict[str, np.ndarray]:
    """Target paths of a chain with no body axes of its own (tails, necks, wings, fins), around its rest
    root → tip axis ``a`` (ratio of the reach in brackets): ``sway`` (0.9) round a 35° cone about ``a``;
    ``swing`` (0.85) 50° to one side of ``a`` and back through it to the other; ``out_of_reach``
    (1.05–1.3) along ``a`` to 40° off it."""
    axis, _, reach = _rest_axis(joints)
    helper = OUTWARD if abs(axis @ OUTWARD) < 0.9 else UP
    side = np.cross(axis, helper)
    side /= np.linalg.norm(side)
    other = np.cross(axis, side)
    t = np.linspace(0.0, 1.0, frames)
    rise = np.sin(math.pi * t)
    deg = math.radians
    paths = {
        "sway": (np.full(frames, 0.9), _directions(deg(35.0), 2 * math.pi * t, axis, side, other, cone=True)),
        "swing": (np.full(frames, 0.85), _directions(deg(50.0) * np.sin(2 * math.pi * t), 0.0, axis, side, other)),
        "out_of_reach": (1.05 + 0.25 * rise, _directions(deg(40.0) * t, 0.0, axis, side, other)),
    }
    return {k: joints[0] + (reach * r)[:, None] * d for k, (r, d) in paths.items()}

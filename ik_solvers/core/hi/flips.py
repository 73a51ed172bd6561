"""Flip reports: frames where the solver plane jumps, and whether the EE axis crossed a pole (SPEC §5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..errors import IKInputError
from ..vectors import cross, dot, norm
from .planes import DEFAULT_WARNING_ANGLE, pole_angles

if TYPE_CHECKING:
    from .solve import HISolveResult

DEFAULT_TURN_THRESHOLD = np.radians(30.0)
"""Solver-normal turn between consecutive frames reported as a flip (radians): well above what a
target moving a few degrees of EE axis per frame produces away from the poles."""


# ---------------------------------------------------------------- flips
@dataclass(frozen=True, eq=False)
class FlipReport:
    """Frames of a sequence where the solver plane jumps.

    Attributes
    ----------
    frames : ndarray of int, shape (F,)
        Index ``k`` of each flip: the normal turned between frames ``k − 1`` and ``k``.
    turns : ndarray, shape (F,)
        The turn (radians, ``[0, π]``) of the solver-plane normal there.
    pole_crossing : ndarray of bool, shape (F,)
        True where the EE axis passed within the warning angle of the map's
        singular points between the two frames (the sphere's poles for the default
        map, the pole target's line for the pole-object map); False for other
        causes (a swivel key, a parent-space rotation, a custom map's own discontinuity).
    """

    frames: np.ndarray
    turns: np.ndarray
    pole_crossing: np.ndarray


def _arc_pole_distances(u: np.ndarray, v: np.ndarray, pole: np.ndarray) -> np.ndarray:
    """Smallest angle ``(M,)`` between a pole (and its antipode) and the short arcs ``u → v`` on the sphere.

    ``pole`` is ``(3,)`` or one unit direction per arc ``(M, 3)``.
    """
    ends = np.minimum(pole_angles(u, pole), pole_angles(v, pole))
    normal = cross(u, v)
    length = norm(normal)
    normal = normal / np.maximum(length, 1e-300)[:, None]
    height = dot(normal, pole)
    foot = pole - height[:, None] * normal  # nearest point of the great circle (for the antipode: −foot)
    distance = np.arctan2(np.abs(height), norm(foot))
    inside = []
    for point in (foot, -foot):
        inside.append((dot(cross(u, point), normal) >= 0.0) & (dot(cross(point, v), normal) >= 0.0))
    on_arc = (inside[0] | inside[1]) & (length > 1e-12)
    return np.where(on_arc, np.minimum(ends, distance), ends)


def find_flips(
    solved: HISolveResult,
    turn_threshold: float = DEFAULT_TURN_THRESHOLD,
    warning_angle: float = DEFAULT_WARNING_ANGLE,
) -> FlipReport:
    """Frames where the solver-plane normal turns by more than ``turn_threshold`` from the previous frame.

    The batch order is the sequence order (frame ``k`` follows ``k − 1``); the
    solve itself never depends on it, this report alone does.
    """
    return flips_from_normals(
        solved.solver_normals, solved.ee_axes_sphere, solved.sphere.n0, turn_threshold, warning_angle,
        singular_directions=solved.singular_directions,
    )


def flips_from_normals(
    solver_normals: np.ndarray,
    ee_axes_sphere: np.ndarray,
    n0: np.ndarray,
    turn_threshold: float = DEFAULT_TURN_THRESHOLD,
    warning_angle: float = DEFAULT_WARNING_ANGLE,
    *,
    singular_directions: np.ndarray | None = None,
) -> FlipReport:
    """:func:`find_flips` on bare arrays: normals ``(N, 3)``, EE axes ``(N, 3)`` in sphere coordinates, pole ``n0 (3,)``.

    ``singular_directions (N, 3)``: the map's singular directions per frame
    (``HISolveResult.singular_directions``); default the sphere's poles ``±n0``.
    A flip is a pole crossing when the EE axis passed within ``warning_angle`` of
    them between the two frames (of either frame's direction when they move).
    For callers that stitch a sequence from several solves (e.g. a bake over chain shapes).
    """
    for name, value in (("turn_threshold", turn_threshold), ("warning_angle", warning_angle)):
        if not np.isfinite(value) or value < 0.0:
            raise IKInputError(name, f"must be a non-negative angle, got {value!r}")
    normals = np.asarray(solver_normals, dtype=float)
    axes = np.asarray(ee_axes_sphere, dtype=float)
    if normals.ndim != 2 or normals.shape[1] != 3 or axes.shape != normals.shape:
        raise IKInputError("solver_normals", f"expected normals and EE axes of one shape (N, 3), got {normals.shape}, {axes.shape}")
    before, after = normals[:-1], normals[1:]
    turns = np.arctan2(norm(cross(before, after)), dot(before, after))
    flips = np.flatnonzero(turns > turn_threshold)
    if singular_directions is None:
        closest = _arc_pole_distances(axes[flips], axes[flips + 1], np.asarray(n0, dtype=float))
    else:
        directions = np.asarray(singular_directions, dtype=float)
        if directions.shape != normals.shape:
            raise IKInputError("singular_directions", f"expected shape {normals.shape}, got {directions.shape}")
        closest = np.minimum(
            _arc_pole_distances(axes[flips], axes[flips + 1], directions[flips]),
            _arc_pole_distances(axes[flips], axes[flips + 1], directions[flips + 1]),
        )
    return FlipReport(frames=flips + 1, turns=turns[flips], pole_crossing=closest <= warning_angle)

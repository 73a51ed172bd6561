"""One target's HI solve on Python floats (live mode, issue 12): ``solve_hi``'s bits for N = 1.

``solve_hi`` is batch code: on one target its ~300 numpy calls on one-row arrays cost ~1 µs
each, far over live mode's budget. Here every step of the batch path runs on Python floats
in the same operations and the same order: +, −, ×, ÷ and ``math.sqrt`` are correctly
rounded IEEE operations in both, so each value has the batch's bits (signed zeros included:
``0.0 + x`` is kept where the batch adds to a zero). Transcendental functions are not: numpy's
SIMD ``cos``, ``arctan2``, ``hypot`` … round differently from ``math``'s, so they are numpy's
ufuncs, called on a Python float or on one contiguous array where the batch calls them on a
row (elementwise, so the same bits; tests/core/test_hi_one_target.py checks it all). The one
3×3 product (``vectors.matmul``) is BLAS's, which fuses multiply-adds on this machine, so it is
numpy's own call too.
"""

from __future__ import annotations

import itertools
import math
import weakref
from dataclasses import dataclass
from functools import reduce
from operator import add, mul
from typing import Any

import numpy as np

from ..chain import JointKind
from ..iteration import DISTANCE_ROUNDING, OBJECTIVE_RISE
from ..result import SolveOptions, Status
from ..rotations import _SMALL_ANGLE, quaternion_from_matrix, quaternion_product
from ..zero_plane import (
    DEGENERATE,
    NORMAL_TOLERANCE,
    ZERO_PLANE_MAPS,
    DefaultZeroPlaneMap,
    PoleObjectZeroPlaneMap,
    build_zero_plane_map,
    map_singular_directions,
)
from .parent_space import ROTATION_TOLERANCE
from .plane_chain import DISTANCE_TOLERANCE, path_parameter, plane_distance
from .sphere import PreferredPose

Vec = tuple[float, float, float]
Rows = tuple[Vec, Vec, Vec]

_DEFAULT_TOLERANCE = SolveOptions().tolerance


@dataclass(frozen=True, slots=True)
class OneTargetHI:
    """One target's HI solve, each field bit for bit ``solve_hi``'s row 0 (Python floats).

    Attributes
    ----------
    q : tuple of float, length n_dof
        Joint variables (``result.q[0]``).
    local_quaternions : tuple of (w, x, y, z), length n
        ``kinematics.local_quaternions(chain, result.q)[0]``: what a rig writer sets.
    error : float
        Tip-to-target distance (chain units).
    lower_bound : float
        Least tip error of the HI pose at this distance (``result.lower_bound[0]``).
    status : Status
    iterations : int
        Root-finding steps of the in-plane solve (1 for two bones).
    pole_angle : float
        Angle between the EE axis and the nearer singular point of the map (radians, ``[0, π/2]``).
    """

    q: tuple[float, ...]
    local_quaternions: tuple[tuple[float, float, float, float], ...]
    error: float
    lower_bound: float
    status: Status
    iterations: int
    pole_angle: float


def solve_hi_one(
    pref: PreferredPose,
    target: Any,
    *,
    swivel: float = 0.0,
    zero_plane_map: Any = "DEFAULT",
    pole: Any = None,
    sphere_rotation: Any = None,
    tolerance: float = _DEFAULT_TOLERANCE,
) -> OneTargetHI | None:
    """``solve_hi(pref.chain, [target], pref, ...)`` for one target, on Python floats, with its bits.

    Parameters
    ----------
    pref : PreferredPose
        From :func:`preferred_pose`; its chain is solved.
    target, pole : three floats
        Tip target and pole-target position in the solving frame (chain units), as one row of
        ``solve_hi``'s ``targets`` and ``poles``.
    swivel : float
        Swivel angle (radians).
    zero_plane_map : str
        ``"DEFAULT"`` or ``"POLE_OBJECT"`` (or another name for one of those two built-in maps).
    sphere_rotation : (3, 3) rotation, optional
        ``solve_hi``'s ``sphere_rotations`` for the one frame; default the chain's root rotation.
    tolerance : float
        ``SolveOptions.tolerance`` (positive: as ``SolveOptions`` checks it).

    Returns
    -------
    OneTargetHI, or None where the caller must run ``solve_hi`` instead: a custom zero-plane
    map (a factory, or a name registered for another map); the pole map without a pole; any
    input ``solve_hi`` would refuse or might (non-finite target, pole or swivel, a
    ``sphere_rotation`` not clearly a proper rotation, a map normal its check rejects) —
    ``solve_hi`` then raises its ``IKInputError`` or decides the borderline case.

    Thread safety: the per-pose constants are built on first use and kept in a weak
    dictionary; two threads may both build them (same values). Nothing else is shared.
    """
    factory = ZERO_PLANE_MAPS.get(zero_plane_map) if isinstance(zero_plane_map, str) else None
    if factory is not DefaultZeroPlaneMap and factory is not PoleObjectZeroPlaneMap:
        return None
    tx, ty, tz = (float(v) for v in target)
    swivel = float(swivel)
    if not (math.isfinite(tx) and math.isfinite(ty) and math.isfinite(tz) and math.isfinite(swivel)):
        return None
    k = _constants(pref)
    rotation = k.root if sphere_rotation is None else _checked_rotation(sphere_rotation)
    if sphere_rotation is not None and rotation is None:
        return None
    sx, sy, sz = k.start
    offset = (tx - sx, ty - sy, tz - sz)
    r = math.sqrt(_dot(offset, offset))
    if r <= k.centre_radius:  # no EE axis of its own: the preferred one (planes.solver_planes)
        axis_sphere = k.a0
        axis = k.a0 if rotation is None else _matvec(rotation, k.a0)
    else:
        axis = (offset[0] / r, offset[1] / r, offset[2] / r)
        axis_sphere = axis if rotation is None else _tmatvec(rotation, axis)
    pole_sphere = None
    if pole is not None:
        px, py, pz = (float(v) for v in pole)
        if not (math.isfinite(px) and math.isfinite(py) and math.isfinite(pz)):
            return None
        pole_sphere = (px - sx, py - sy, pz - sz)
        pole_sphere = pole_sphere if rotation is None else _tmatvec(rotation, pole_sphere)
    if factory is PoleObjectZeroPlaneMap:
        if pole_sphere is None:
            return None
        normal, singular_direction = _pole_map(k, axis_sphere, pole_sphere)
    else:
        normal, singular_direction = _default_map(k, axis_sphere), k.n0_unit
    # zero_plane.zero_plane_normals: the map's normal checked, then made exactly unit and ⟂ the axis.
    along = _dot(normal, axis_sphere)
    if not (abs(math.sqrt(_dot(normal, normal)) - 1.0) <= NORMAL_TOLERANCE and abs(along) <= NORMAL_TOLERANCE):
        return None
    zero_normal = _unit(tuple(n - along * a for n, a in zip(normal, axis_sphere)))
    turned = _cross(axis_sphere, zero_normal)
    c, s = float(np.cos(swivel)), float(np.sin(swivel))
    normal_sphere = tuple(c * n + s * t for n, t in zip(zero_normal, turned))
    plane_normal = normal_sphere if rotation is None else _matvec(rotation, normal_sphere)
    pole_angle = float(np.arctan2(_norm(_cross(axis_sphere, singular_direction)), abs(_dot(axis_sphere, singular_direction))))

    if k.two_bone is not None:
        bends, (x, h, y), tip_turn, iterations = _two_bone(k, r)
    else:
        bends, (x, h, y), tip_turn, iterations = _chain(k, r)
    tip, start_rotation = _placed(k, axis, plane_normal, bends[0], x, h, y, tip_turn)
    quats = _joint_quaternions(k, start_rotation, bends)
    q = _joint_variables(k, quats, bends)
    error = _norm((tip[0] - tx, tip[1] - ty, tip[2] - tz))
    lower = max(0.0, max(r - k.bound_total, k.bound_inner - r))
    # iteration.classify with the start error equal to the error and nothing stalled.
    status = Status.BUDGET_EXHAUSTED
    if error > error + OBJECTIVE_RISE:
        status = Status.DIVERGED
    if lower > 0.0 and error - lower <= tolerance + DISTANCE_ROUNDING * lower:
        status = Status.UNREACHABLE
    if error <= tolerance:
        status = Status.CONVERGED
    return OneTargetHI(tuple(q), _local_quaternions(k, q), error, lower, status, iterations, pole_angle)


# ------------------------------------------------------- per-pose constants
@dataclass(frozen=True, eq=False)
class _Constants:
    """What every one-target solve with a PreferredPose reads, as Python floats (computed as the batch does)."""

    start: Vec
    centre_radius: float
    a0: Vec
    n0: Vec
    n0_unit: Vec  # the default map's singular direction, unit(n0) as map_singular_directions gives it
    root: Rows | None  # the chain's root rotation; None for the identity (the batch skips its products)
    start_parent: Rows | None
    start_basis: np.ndarray  # (3, 3) for numpy's matmul
    two_bone: tuple[float, ...] | None  # l1, l2, l1², l2², 2·l1·l2, |l1 − l2|, l1 + l2, the two preferred angles
    lengths: tuple[float, ...]  # in-plane lengths (longer chains)
    turns: tuple[float, ...]  # preferred relative turns
    branches: tuple[tuple[Any, ...], tuple[Any, ...]]  # (bases, directions, distance ends) outside / inside
    distances: Vec  # curled, preferred distance, in-plane reach
    tip_height: float
    first_bend: float
    distance_tolerance: float
    pref_quats: tuple[tuple[float, float, float, float], ...]
    bend_axes: tuple[Vec, ...]
    q: tuple[float, ...]
    balls: tuple[tuple[int, int], ...]  # (joint, first variable)
    bent: tuple[tuple[int, int, float], ...]  # (joint, last variable, sign): placement.joint_variables
    angled: tuple[tuple[int, int, Vec, Vec | None], ...]  # hinge / universal: (joint, first, axis, second axis)
    bound_total: float
    bound_inner: float


_CONSTANTS: weakref.WeakKeyDictionary[PreferredPose, _Constants] = weakref.WeakKeyDictionary()


def _constants(pref: PreferredPose) -> _Constants:
    known = _CONSTANTS.get(pref)
    if known is None:
        known = _CONSTANTS[pref] = _derive_constants(pref)
    return known


def _derive_constants(pref: PreferredPose) -> _Constants:
    chain = pref.chain
    a0, n0 = pref.sphere.a0, pref.sphere.n0
    default_map = build_zero_plane_map("DEFAULT", a0, n0)  # checks the sphere frame as the batch does
    n0_unit = map_singular_directions(default_map, a0[None], n0)[0]
    lengths, preferred, curled = pref.in_plane_lengths, pref.relative_turns, pref.curled_turns
    branches = []
    for bases, directions in ((np.zeros_like(preferred), preferred), (preferred, curled - preferred)):
        ends = (plane_distance(lengths.tolist(), bases.tolist()), plane_distance(lengths.tolist(), (bases + directions).tolist()))
        branches.append((tuple(bases.tolist()), tuple(directions.tolist()), ends))
    two_bone = None
    if chain.n_joints == 2:
        l1, l2 = chain.segment_lengths[0], chain.segment_lengths[1]  # numpy scalars, as two_bone_planar gets them
        two_bone = tuple(float(v) for v in (l1, l2, l1**2, l2**2, 2.0 * l1 * l2, abs(l1 - l2), l1 + l2, *pref.two_bone_angles))
    balls, bent = pref.joint_layout
    angled = []
    for j, kind in enumerate(chain.kinds):
        if kind is not JointKind.BALL:
            first = int(chain.dof_start[j])
            second = _vec(chain.axes[first + 1]) if kind is JointKind.UNIVERSAL else None
            angled.append((j, first, _vec(chain.axes[first]), second))
    total, inner = pref._bound_ends
    return _Constants(
        start=_vec(pref.start),
        centre_radius=pref.centre_radius,
        a0=_vec(a0),
        n0=_vec(n0),
        n0_unit=_vec(n0_unit),
        root=None if pref.root_is_identity else _rows(chain.root_rotation),
        start_parent=None if pref.start_parent is None else _rows(pref.start_parent),
        start_basis=pref.start_basis,
        two_bone=two_bone,
        lengths=tuple(lengths.tolist()),
        turns=tuple(preferred.tolist()),
        branches=(branches[0], branches[1]),
        distances=(pref.curled_distance, pref.preferred_distance, pref.in_plane_reach),
        tip_height=float(np.add.accumulate(pref.bone_heights)[-1]),
        first_bend=float(-pref.bone_headings[0]),
        distance_tolerance=float(DISTANCE_TOLERANCE * lengths.sum()),  # np.sum's order, as the root finder's
        pref_quats=tuple((w, x, y, z) for w, x, y, z in pref.local_quaternions.tolist()),
        bend_axes=tuple(_vec(v) for v in pref.bend_axes),
        q=tuple(pref.q.tolist()),
        balls=tuple((j, int(chain.dof_start[j])) for j in balls),
        bent=tuple((j, last, float(sign)) for j, last, sign in bent),
        angled=tuple(angled),
        bound_total=float(total),
        bound_inner=float(inner),
    )


# ------------------------------------------------------------- the steps
def _default_map(k: _Constants, axis: Vec) -> Vec:
    """``DefaultZeroPlaneMap`` for one axis (sphere coordinates)."""
    sin_lat = _dot(axis, k.n0)
    horizontal = tuple(a - sin_lat * n for a, n in zip(axis, k.n0))
    cos_lat = _norm(horizontal)
    meridian = k.a0 if cos_lat <= DEGENERATE else tuple(v / cos_lat for v in horizontal)
    return tuple(cos_lat * n - sin_lat * m for n, m in zip(k.n0, meridian))  # type: ignore[return-value]


def _pole_map(k: _Constants, axis: Vec, pole: Vec) -> tuple[Vec, Vec]:
    """``PoleObjectZeroPlaneMap``'s normal and singular direction (``unit`` of it) for one axis and pole."""
    normal = _cross(pole, axis)
    length, scale = _norm(normal), _norm(pole)
    if length <= DEGENERATE * max(scale, 1e-300):
        normal = _default_map(k, axis)
    else:
        normal = (normal[0] / length, normal[1] / length, normal[2] / length)
    direction = tuple(p / max(scale, 1e-300) for p in pole) if scale > 0.0 else k.n0
    return normal, _unit(direction)  # type: ignore[arg-type]


def _two_bone(k: _Constants, r: float) -> tuple[list[float], Vec, float, int]:
    """``in_plane.two_bone_in_plane`` (``analytic.two_bone_planar``, branch 0) for one distance:
    bends, tip coordinates ``(x, h, y)`` in the plane basis, tip turn, steps."""
    l1, l2, l1_sq, l2_sq, twice, inner, outer, shoulder0, elbow0 = k.two_bone  # type: ignore[misc]
    # hypot(r, 0) = r and atan2(+0, r ≥ 0) = +0 exactly (C99 Annex F): the target (r, 0)'s length and heading.
    reach = min(max(r, inner), outer)
    cos2 = min(max((reach * reach - l1_sq - l2_sq) / twice, -1.0), 1.0)
    elbow = float(np.arccos(cos2))
    shoulder = 0.0 - float(np.arctan2(l2 * float(np.sin(elbow)), l1 + l2 * float(np.cos(elbow))))
    wrapped = complex(np.exp(1j * shoulder))  # np.angle(np.exp(1j θ)): wrapped to (−π, π]
    shoulder = float(np.arctan2(wrapped.imag, wrapped.real))
    heading = shoulder + elbow
    x1, y1 = l1 * float(np.cos(shoulder)), l1 * float(np.sin(shoulder))
    tip = (x1 + l2 * float(np.cos(heading)), 0.0, y1 + l2 * float(np.sin(heading)))
    return [shoulder - shoulder0, elbow - elbow0], tip, 0.0, 1


def _chain(k: _Constants, r: float) -> tuple[list[float], Vec, float, int]:
    """``in_plane.chain_in_plane`` for one distance (see :func:`_two_bone` for the outputs)."""
    curled, preferred_distance, reach = k.distances
    wanted = min(max(r, curled), reach)
    bases, directions, (d_lo, d_hi) = k.branches[0 if wanted >= preferred_distance else 1]
    t, steps = path_parameter(k.lengths, bases, directions, wanted, d_lo - wanted, d_hi - wanted, k.distance_tolerance)
    turns = [0.0] * len(bases) if r >= reach else [b + t * d for b, d in zip(bases, directions)]
    headings = np.array((0.0, *itertools.accumulate(turns)))
    x = reduce(add, map(mul, k.lengths, np.cos(headings).tolist()))
    y = reduce(add, map(mul, k.lengths, np.sin(headings).tolist()))
    tip_turn = float(np.arctan2(y, x))
    return [k.first_bend, *(a - p for a, p in zip(turns, k.turns))], (x, k.tip_height, y), tip_turn, steps


def _placed(
    k: _Constants, axis: Vec, normal: Vec, first_bend: float, x: float, h: float, y: float, tip_turn: float
) -> tuple[Vec, list[list[float]]]:
    """``placement.placed_pose`` for one target: the tip position and the start joint's local rotation rows."""
    side = _cross(normal, axis)
    # cos 0 = 1 and sin(+0) = +0 exactly: a two-bone chain's tip does not turn.
    c, s = (1.0, 0.0) if k.two_bone is not None else (float(np.cos(tip_turn)), float(np.sin(tip_turn)))
    along, across = c * x + s * y, c * y - s * x
    tip = tuple(along * a + h * n + across * d + p for a, n, d, p in zip(axis, normal, side, k.start))
    if k.start_parent is not None:
        axis, normal, side = (_tmatvec(k.start_parent, v) for v in (axis, normal, side))
    turn = first_bend - tip_turn
    c, s = float(np.cos(turn)), float(np.sin(turn))
    columns = [[c * a + s * d, n, c * d - s * a] for a, n, d in zip(axis, normal, side)]
    # vectors.matmul is BLAS (fused multiply-adds on AVX2 / AVX-512): numpy's call, for its bits.
    return tip, np.matmul(np.array(columns), k.start_basis).tolist()  # type: ignore[return-value]


def _joint_quaternions(k: _Constants, start_rotation: list[list[float]], bends: list[float]) -> list[tuple[float, ...]]:
    """``placement.joint_quaternions``: local rotations ``(w, x, y, z)``, ``w ≥ 0``."""
    quats: list[tuple[float, ...]] = [quaternion_from_matrix(start_rotation)]
    if len(bends) > 1:
        half = np.array([0.5 * b for b in bends[1:]])
        for j, (c, s) in enumerate(zip(np.cos(half).tolist(), np.sin(half).tolist()), start=1):
            ax, ay, az = k.bend_axes[j]
            w, x, y, z = quaternion_product(k.pref_quats[j], (c, s * ax, s * ay, s * az))
            quats.append((-w, -x, -y, -z) if w < 0.0 else (w, x, y, z))
    return quats


def _joint_variables(k: _Constants, quats: list[tuple[float, ...]], bends: list[float]) -> list[float]:
    """``placement.joint_variables``: ball joints' rotation vectors, the bend added to the others' last variable."""
    q = list(k.q)
    parts = [(_norm(quats[j][1:]), quats[j]) for j, _ in k.balls]
    # rotations.rotvecs_from_quaternions: every ball's arctan2 in one call, as the batch's row.
    angles = (2.0 * np.arctan2(np.array([s for s, _ in parts]), np.array([w[0] for _, w in parts]))).tolist()
    for (_, start), (s, (w, x, y, z)), angle in zip(k.balls, parts, angles):
        factor = 2.0 / max(w, 1e-300) if s < _SMALL_ANGLE else angle / s
        q[start : start + 3] = (x * factor, y * factor, z * factor)
    for j, last, sign in k.bent:
        q[last] = q[last] + sign * bends[j]
    return q


def _local_quaternions(k: _Constants, q: list[float]) -> tuple[tuple[float, float, float, float], ...]:
    """``kinematics.local_quaternions(chain, q)`` for one pose: each kind's cosines and sines in one call."""
    out: list[Any] = [None] * (len(k.balls) + len(k.angled))
    if k.angled:
        half = np.array([0.5 * q[first] for _, first, _, _ in k.angled])
        for (j, _, (ax, ay, az), _), c, s in zip(k.angled, np.cos(half).tolist(), np.sin(half).tolist()):
            out[j] = (c, s * ax, s * ay, s * az)
        universal = [(j, first, second) for j, first, _, second in k.angled if second is not None]
        if universal:
            half = np.array([0.5 * q[first + 1] for _, first, _ in universal])
            for (j, _, (ax, ay, az)), c, s in zip(universal, np.cos(half).tolist(), np.sin(half).tolist()):
                out[j] = quaternion_product(out[j], (c, s * ax, s * ay, s * az))
    if k.balls:
        vectors = [q[start : start + 3] for _, start in k.balls]
        angles = [math.sqrt(x * x + y * y + z * z) for x, y, z in vectors]
        halves = np.array(angles) / 2.0
        for (j, _), (x, y, z), angle, c, s in zip(k.balls, vectors, angles, np.cos(halves).tolist(), np.sin(halves).tolist()):
            # rotations.quaternions_from_rotvecs: the Taylor form below its small angle.
            half_sinc = 0.5 - angle * angle / 48.0 if angle < _SMALL_ANGLE else s / angle
            out[j] = (c, x * half_sinc, y * half_sinc, z * half_sinc)
    return tuple(out)


def _checked_rotation(rotation: Any) -> Rows | None:
    """``rotation``'s rows when ``parent_space.check_rotations`` surely accepts it (half its tolerance), else None."""
    m = np.asarray(rotation, dtype=float)
    if m.shape != (3, 3):
        return None
    rows = _rows(m)
    if not all(math.isfinite(v) for row in rows for v in row):
        return None
    for i in range(3):
        for j in range(3):
            if abs(_dot(rows[i], rows[j]) - (1.0 if i == j else 0.0)) > 0.5 * ROTATION_TOLERANCE:
                return None
    return rows if _dot(rows[0], _cross(rows[1], rows[2])) > 0.0 else None


# ------------------------------------------------- 3-vectors, vectors.* order
def _vec(v: Any) -> Vec:
    x, y, z = (float(c) for c in v)
    return (x, y, z)


def _rows(m: Any) -> Rows:
    return (_vec(m[0]), _vec(m[1]), _vec(m[2]))


def _dot(a: Any, b: Any) -> float:
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _norm(a: Any) -> float:
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


def _unit(a: Any) -> Vec:
    length = _norm(a)
    return (a[0] / length, a[1] / length, a[2] / length)


def _cross(a: Any, b: Any) -> Vec:
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _matvec(m: Rows, v: Any) -> Vec:
    return (_dot(m[0], v), _dot(m[1], v), _dot(m[2], v))


def _tmatvec(m: Rows, v: Any) -> Vec:
    return tuple(m[0][c] * v[0] + m[1][c] * v[1] + m[2][c] * v[2] for c in range(3))  # type: ignore[return-value]

"""One target's HI solve on Python floats (live mode, issue 12): ``solve_hi``'s bits for N = 1.

On one target ``solve_hi``'s ~300 numpy calls on one-row arrays cost ~1 µs each. Here each step
runs on Python floats in the batch's operations and order: +, −, ×, ÷ and sqrt are correctly
rounded IEEE operations in both, so the bits agree (signed zeros too: ``0.0 + x`` is kept where
the batch adds to a zero). Cosines and sines come from ``float_trig.cosines_sines`` (numpy's bits,
``math``'s speed where they agree); the other transcendental functions are numpy's ufuncs (on
this machine numpy's ``arctan2``, ``arccos`` and ``hypot`` round differently from ``math``'s),
and the one 3×3 product stays numpy's (BLAS fuses multiply-adds). tests/core/test_hi_one_target.py
checks every field.
"""

from __future__ import annotations

import itertools
import math
import weakref
from dataclasses import dataclass
from functools import reduce
from operator import add, mul, sub
from typing import Any

import numpy as np

from ..chain import JointKind
from ..float_trig import cosines_sines
from ..iteration import DISTANCE_ROUNDING, OBJECTIVE_RISE
from ..result import SolveOptions, Status
from ..rotations import _SMALL_ANGLE, quaternion_from_matrix, quaternion_product
from ..vectors import Rows3, Vec3, cross3, matvec3, norm3, rows3, tmatvec3, unit3, vec3
from ..zero_plane import (
    DEGENERATE,
    NORMAL_TOLERANCE,
    ZERO_PLANE_MAPS,
    DefaultZeroPlaneMap,
    PoleObjectZeroPlaneMap,
    build_zero_plane_map,
    map_singular_directions,
)
from .parent_space import rotation_rows
from .plane_chain import DISTANCE_TOLERANCE, path_parameter
from .sphere import PreferredPose


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
    tolerance: float = SolveOptions().tolerance,
) -> OneTargetHI | None:
    """``solve_hi(pref.chain, [target], pref, ...)`` for one target, on Python floats, with its bits.

    Parameters
    ----------
    pref : PreferredPose (its chain is solved)
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

    The per-pose constants are built on first use, kept while ``pref`` lives (weakly); threads
    may race to build them (the same values), nothing else is shared.
    """
    factory = ZERO_PLANE_MAPS.get(zero_plane_map) if isinstance(zero_plane_map, str) else None
    if factory is not DefaultZeroPlaneMap and factory is not PoleObjectZeroPlaneMap:
        return None
    tx, ty, tz, swivel = float(target[0]), float(target[1]), float(target[2]), float(swivel)
    if not (math.isfinite(tx) and math.isfinite(ty) and math.isfinite(tz) and math.isfinite(swivel)):
        return None
    k = _CONSTANTS.get(pref)
    if k is None:
        k = _CONSTANTS[pref] = _derive_constants(pref)
    rotation = k.root
    if sphere_rotation is not None:
        rotation = rotation_rows(sphere_rotation)
        if rotation is None:
            return None
    # planes.solver_planes: the EE axis, in the solving frame and in the sphere's coordinates.
    sx, sy, sz = k.start
    ox, oy, oz = tx - sx, ty - sy, tz - sz
    r = math.sqrt(ox * ox + oy * oy + oz * oz)
    if r <= k.centre_radius:  # no EE axis of its own: the preferred one
        axis_sphere = k.a0
        axis = k.a0 if rotation is None else matvec3(rotation, k.a0)
    else:
        axis = (ox / r, oy / r, oz / r)
        axis_sphere = axis if rotation is None else tmatvec3(rotation, axis)
    pole_sphere = None
    if pole is not None:
        px, py, pz = float(pole[0]) - sx, float(pole[1]) - sy, float(pole[2]) - sz
        if not (math.isfinite(px) and math.isfinite(py) and math.isfinite(pz)):
            return None
        pole_sphere = (px, py, pz) if rotation is None else tmatvec3(rotation, (px, py, pz))
    if factory is PoleObjectZeroPlaneMap:
        if pole_sphere is None:
            return None
        normal, singular_direction = _pole_map(k, axis_sphere, pole_sphere)
    else:
        normal, singular_direction = _default_map(k, axis_sphere), k.n0_unit
    # zero_plane.zero_plane_normals: the map's normal checked, then made exactly unit and ⟂ the axis.
    ax, ay, az = axis_sphere
    nx, ny, nz = normal
    along = nx * ax + ny * ay + nz * az
    if not (abs(math.sqrt(nx * nx + ny * ny + nz * nz) - 1.0) <= NORMAL_TOLERANCE and abs(along) <= NORMAL_TOLERANCE):
        return None
    zx, zy, zz = unit3((nx - along * ax, ny - along * ay, nz - along * az))
    bent = (_two_bone if k.two_bone else _chain)(k, r, swivel)  # the in-plane pose first: it takes the swivel's cos, sin
    bends, iterations, (c, s) = bent[0], bent[6], bent[4]  # zero_plane.swivel_normals
    plane_normal = (c * zx + s * (ay * zz - az * zy), c * zy + s * (az * zx - ax * zz), c * zz + s * (ax * zy - ay * zx))
    if rotation is not None:
        plane_normal = matvec3(rotation, plane_normal)
    dx, dy, dz = singular_direction  # planes.pole_angles
    across = norm3((ay * dz - az * dy, az * dx - ax * dz, ax * dy - ay * dx))
    pole_angle = float(np.arctan2(across, abs(ax * dx + ay * dy + az * dz)))

    tip, start_rotation = _placed(k, axis, plane_normal, bent)
    q, rotvecs = _joint_variables(k, _joint_quaternions(k, start_rotation, bent[5]), bends)
    error = norm3((tip[0] - tx, tip[1] - ty, tip[2] - tz))
    lower = max(0.0, max(r - k.bound_total, k.bound_inner - r))
    # iteration.classify with the start error equal to the error and nothing stalled.
    status = Status.BUDGET_EXHAUSTED
    if error > error + OBJECTIVE_RISE:
        status = Status.DIVERGED
    if lower > 0.0 and error - lower <= tolerance + DISTANCE_ROUNDING * lower:
        status = Status.UNREACHABLE
    if error <= tolerance:
        status = Status.CONVERGED
    return OneTargetHI(tuple(q), _local_quaternions(k, q, rotvecs), error, lower, status, iterations, pole_angle)


# ------------------------------------------------------- per-pose constants
@dataclass(frozen=True, eq=False)
class _Constants:
    """What every one-target solve with a PreferredPose reads, as Python floats (computed as the batch does)."""

    start: Vec3
    centre_radius: float
    a0: Vec3
    n0: Vec3
    n0_unit: Vec3  # the default map's singular direction, unit(n0) as map_singular_directions gives it
    root: Rows3 | None  # the chain's root rotation; None for the identity (the batch skips its products)
    start_parent: Rows3 | None
    start_basis: np.ndarray  # (3, 3) for numpy's matmul
    two_bone: tuple[float, ...]  # () for longer chains; l1, l2, l1², l2², 2·l1·l2, |l1 − l2|, l1 + l2, the two preferred angles
    lengths: tuple[float, ...]  # in-plane lengths (longer chains)
    turns: tuple[float, ...]  # preferred relative turns
    branches: tuple[tuple[Any, ...], tuple[Any, ...]]  # (bases, directions, path samples) outside / inside
    distances: Vec3  # curled, preferred distance, in-plane reach
    tip_height: float
    first_bend: float
    distance_tolerance: float
    bend_factors: tuple[tuple[float, ...], ...]  # per later joint: its preferred quaternion, its bend axis
    q: tuple[float, ...]
    balls: tuple[tuple[int, int], ...]  # (joint, first variable)
    bent: tuple[tuple[int, int, float], ...]  # (joint, last variable, sign): placement.joint_variables
    angled: tuple[tuple[int, int, Vec3, Vec3 | None], ...]  # hinge / universal: (joint, first, axis, second axis)
    bound_total: float
    bound_inner: float


_CONSTANTS: weakref.WeakKeyDictionary[PreferredPose, _Constants] = weakref.WeakKeyDictionary()


def _derive_constants(pref: PreferredPose) -> _Constants:
    chain = pref.chain
    a0, n0 = pref.sphere.a0, pref.sphere.n0
    default_map = build_zero_plane_map("DEFAULT", a0, n0)  # checks the sphere frame as the batch does
    n0_unit = map_singular_directions(default_map, a0[None], n0)[0]
    lengths, preferred, curled = pref.in_plane_lengths, pref.relative_turns, pref.curled_turns
    branches = []
    for bases, directions, samples in zip((np.zeros_like(preferred), preferred), (preferred, curled - preferred),
                                          pref.path_samples):
        branches.append((tuple(bases.tolist()), tuple(directions.tolist()), tuple(samples.tolist())))
    two_bone: tuple[float, ...] = ()
    if chain.n_joints == 2:
        l1, l2 = chain.segment_lengths[0], chain.segment_lengths[1]  # numpy scalars, as two_bone_planar gets them
        two_bone = tuple(float(v) for v in (l1, l2, l1**2, l2**2, 2.0 * l1 * l2, abs(l1 - l2), l1 + l2, *pref.two_bone_angles))
    balls, bent = pref.joint_layout
    angled = []
    for j, kind in enumerate(chain.kinds):
        if kind is not JointKind.BALL:
            first = int(chain.dof_start[j])
            second = vec3(chain.axes[first + 1]) if kind is JointKind.UNIVERSAL else None
            angled.append((j, first, vec3(chain.axes[first]), second))
    total, inner = pref._bound_ends
    return _Constants(
        start=vec3(pref.start),
        centre_radius=pref.centre_radius,
        a0=vec3(a0),
        n0=vec3(n0),
        n0_unit=vec3(n0_unit),
        root=None if pref.root_is_identity else rows3(chain.root_rotation),
        start_parent=None if pref.start_parent is None else rows3(pref.start_parent),
        start_basis=pref.start_basis,
        two_bone=two_bone,
        lengths=tuple(lengths.tolist()),
        turns=tuple(preferred.tolist()),
        branches=(branches[0], branches[1]),
        distances=(pref.curled_distance, pref.preferred_distance, pref.in_plane_reach),
        tip_height=float(np.add.accumulate(pref.bone_heights)[-1]),
        first_bend=float(-pref.bone_headings[0]),
        distance_tolerance=float(DISTANCE_TOLERANCE * lengths.sum()),  # np.sum's order, as the root finder's
        bend_factors=tuple((*a, *b) for a, b in zip(pref.local_quaternions[1:].tolist(), pref.bend_axes[1:].tolist())),
        q=tuple(pref.q.tolist()),
        balls=tuple((j, int(chain.dof_start[j])) for j in balls),
        bent=tuple((j, last, float(sign)) for j, last, sign in bent),
        angled=tuple(angled),
        bound_total=float(total),
        bound_inner=float(inner),
    )


# ------------------------------------------------------------- the steps
def _default_map(k: _Constants, axis: Vec3) -> Vec3:
    """``DefaultZeroPlaneMap`` for one axis (sphere coordinates)."""
    ax, ay, az = axis
    n0x, n0y, n0z = k.n0
    sin_lat = ax * n0x + ay * n0y + az * n0z
    hx, hy, hz = ax - sin_lat * n0x, ay - sin_lat * n0y, az - sin_lat * n0z
    cos_lat = math.sqrt(hx * hx + hy * hy + hz * hz)
    mx, my, mz = k.a0 if cos_lat <= DEGENERATE else (hx / cos_lat, hy / cos_lat, hz / cos_lat)
    return (cos_lat * n0x - sin_lat * mx, cos_lat * n0y - sin_lat * my, cos_lat * n0z - sin_lat * mz)


def _pole_map(k: _Constants, axis: Vec3, pole: Vec3) -> tuple[Vec3, Vec3]:
    """``PoleObjectZeroPlaneMap``'s normal and singular direction (``unit`` of it) for one axis and pole."""
    nx, ny, nz = cross3(pole, axis)
    length, scale = math.sqrt(nx * nx + ny * ny + nz * nz), norm3(pole)
    normal = _default_map(k, axis) if length <= DEGENERATE * max(scale, 1e-300) else (nx / length, ny / length, nz / length)
    if scale > 0.0:
        bounded = max(scale, 1e-300)
        return normal, unit3((pole[0] / bounded, pole[1] / bounded, pole[2] / bounded))
    return normal, unit3(k.n0)


# The in-plane solves: bends (n,), tip (x, h, y) in the plane basis, (cos, sin) of the tip turn, of
# the start joint's turn (bend − tip turn), of the swivel, of each later bend's half, and the steps.
# Each cosines_sines call takes every angle known by then (a numpy call where math's differ).
InPlane = tuple[list[float], Vec3, tuple[float, float], tuple[float, float], tuple[float, float], Any, int]


def _two_bone(k: _Constants, r: float, swivel: float) -> InPlane:
    """``in_plane.two_bone_in_plane`` (``analytic.two_bone_planar``, branch 0) for one distance."""
    l1, l2, l1_sq, l2_sq, twice, inner, outer, shoulder0, elbow0 = k.two_bone
    # hypot(r, 0) = r and atan2(+0, r ≥ 0) = +0 exactly (C99 Annex F): the target (r, 0)'s length and heading.
    reach = min(max(r, inner), outer)
    elbow = float(np.arccos(min(max((reach * reach - l1_sq - l2_sq) / twice, -1.0), 1.0)))
    (c_elbow, c_swivel, c_half), (s_elbow, s_swivel, s_half) = cosines_sines((elbow, swivel, 0.5 * (elbow - elbow0)))
    shoulder = 0.0 - float(np.arctan2(l2 * s_elbow, l1 + l2 * c_elbow))
    wrapped = complex(np.exp(1j * shoulder))  # np.angle(np.exp(1j θ)): wrapped to (−π, π]
    shoulder = float(np.arctan2(wrapped.imag, wrapped.real))
    bend = shoulder - shoulder0
    # The last angle: the bend less the tip turn 0.
    (c1, c2, c_turn), (s1, s2, s_turn) = cosines_sines((shoulder, shoulder + elbow, bend - 0.0))
    tip = (l1 * c1 + l2 * c2, 0.0, l1 * s1 + l2 * s2)
    # cos 0 = 1 and sin(+0) = +0 exactly: a two-bone chain's tip does not turn.
    return [bend, elbow - elbow0], tip, (1.0, 0.0), (c_turn, s_turn), (c_swivel, s_swivel), [(c_half, s_half)], 1


def _chain(k: _Constants, r: float, swivel: float) -> InPlane:
    """``in_plane.chain_in_plane`` for one distance."""
    curled, preferred_distance, reach = k.distances
    wanted = min(max(r, curled), reach)
    outer = wanted >= preferred_distance
    bases, directions, samples = k.branches[0 if outer else 1]
    t, steps = path_parameter(k.lengths, bases, directions, wanted, samples, k.distance_tolerance, outer)
    turns = [0.0] * len(bases) if r >= reach else [b + t * d for b, d in zip(bases, directions)]
    bends = [k.first_bend, *map(sub, turns, k.turns)]
    cos, sin = cosines_sines((0.0, *itertools.accumulate(turns), swivel, *[0.5 * b for b in bends[1:]]))
    x = reduce(add, map(mul, k.lengths, cos))  # the headings' terms: map stops at the last length
    y = reduce(add, map(mul, k.lengths, sin))
    n = len(k.lengths)
    tip_turn = float(np.arctan2(y, x))
    (c_tip, c_turn), (s_tip, s_turn) = cosines_sines((tip_turn, k.first_bend - tip_turn))
    halves = zip(cos[n + 1 :], sin[n + 1 :])
    return bends, (x, k.tip_height, y), (c_tip, s_tip), (c_turn, s_turn), (cos[n], sin[n]), halves, steps


def _placed(k: _Constants, axis: Vec3, normal: Vec3, bent: InPlane) -> tuple[Vec3, Any]:
    """``placement.placed_pose`` for one target: the tip position and the start joint's local rotation rows."""
    (ax, ay, az), (nx, ny, nz), (x, h, y) = axis, normal, bent[1]
    dx, dy, dz = ny * az - nz * ay, nz * ax - nx * az, nx * ay - ny * ax  # the side n × a
    (c, s), sx, sy, sz = bent[2], *k.start
    along, across = c * x + s * y, c * y - s * x
    tip = (along * ax + h * nx + across * dx + sx, along * ay + h * ny + across * dy + sy, along * az + h * nz + across * dz + sz)
    if k.start_parent is not None:
        (ax, ay, az), (nx, ny, nz), (dx, dy, dz) = (tmatvec3(k.start_parent, v) for v in (axis, normal, (dx, dy, dz)))
    c, s = bent[3]
    columns = ((c * ax + s * dx, nx, c * dx - s * ax), (c * ay + s * dy, ny, c * dy - s * ay), (c * az + s * dz, nz, c * dz - s * az))
    # vectors.matmul is BLAS (fused multiply-adds with AVX2 / AVX-512 kernels): numpy's call, for its bits.
    return tip, np.matmul(np.array(columns), k.start_basis).tolist()


def _joint_quaternions(k: _Constants, start_rotation: Any, halves: Any) -> list[tuple[float, float, float, float]]:
    """``placement.joint_quaternions``: local rotations ``(w, x, y, z)``, ``w ≥ 0``, from the half bends' cos and sin."""
    quats = [quaternion_from_matrix(start_rotation)]
    for (aw, ax, ay, az, ex, ey, ez), (bw, s) in zip(k.bend_factors, halves):
        bx, by, bz = s * ex, s * ey, s * ez  # rotations.quaternion_product, inline
        w, x, y, z = (aw * bw - ax * bx - ay * by - az * bz, ax * bw + aw * bx - az * by + ay * bz,
                      ay * bw + az * bx + aw * by - ax * bz, az * bw - ay * bx + ax * by + aw * bz)
        quats.append((-w, -x, -y, -z) if w < 0.0 else (w, x, y, z))
    return quats


def _joint_variables(k: _Constants, quats: list[tuple[float, float, float, float]], bends: list[float]) -> tuple[list[float], Any]:
    """``placement.joint_variables``: ball joints' rotation vectors, the bend added to the others' last
    variable; and the rotation vectors, with their lengths, for :func:`_local_quaternions`."""
    q = list(k.q)
    balls = [quats[j] for j, _ in k.balls]
    lengths = [math.sqrt(x * x + y * y + z * z) for _, x, y, z in balls]
    # rotations.rotvecs_from_quaternions, every ball's arctan2 in one call as the batch's row.
    halves = np.arctan2(np.array(lengths), np.array([w for w, _, _, _ in balls])).tolist()
    rotvecs = []
    for (_, start), (w, x, y, z), s, half in zip(k.balls, balls, lengths, halves):
        factor = 2.0 / max(w, 1e-300) if s < _SMALL_ANGLE else 2.0 * half / s
        q[start] = x = x * factor
        q[start + 1] = y = y * factor
        q[start + 2] = z = z * factor
        rotvecs.append((x, y, z, math.sqrt(x * x + y * y + z * z)))
    for j, last, sign in k.bent:
        q[last] = q[last] + sign * bends[j]
    return q, rotvecs


def _local_quaternions(k: _Constants, q: list[float], rotvecs: Any) -> tuple[tuple[float, float, float, float], ...]:
    """``kinematics.local_quaternions(chain, q)`` for one pose (``rotvecs``: the ball joints' part of ``q``
    with each length): each kind's cosines and sines in one call."""
    out: list[Any] = [None] * (len(k.balls) + len(k.angled))
    if k.angled:
        for (j, _, (ax, ay, az), _), c, s in zip(k.angled, *cosines_sines([0.5 * q[first] for _, first, _, _ in k.angled])):
            out[j] = (c, s * ax, s * ay, s * az)
        universal = [(j, first, second) for j, first, _, second in k.angled if second is not None]
        if universal:
            for (j, _, (ax, ay, az)), c, s in zip(universal, *cosines_sines([0.5 * q[first + 1] for _, first, _ in universal])):
                out[j] = quaternion_product(out[j], (c, s * ax, s * ay, s * az))
    for (j, _), (x, y, z, angle), c, s in zip(k.balls, rotvecs, *cosines_sines([angle / 2.0 for _, _, _, angle in rotvecs])):
        # rotations.quaternions_from_rotvecs: the Taylor form below its small angle.
        half_sinc = 0.5 - angle * angle / 48.0 if angle < _SMALL_ANGLE else s / angle
        out[j] = (c, x * half_sinc, y * half_sinc, z * half_sinc)
    return tuple(out)

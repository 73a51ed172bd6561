"""The HI solver's sphere frame, read off the preferred pose once (SPEC §5): EE axis a0, normal n0, in-plane data."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np
from numpy.typing import ArrayLike

from ..array_ops import NUMPY_OPS, SCALAR_OPS, ArrayOps, Real
from ..chain import Chain, JointKind
from ..errors import IKInputError
from ..kinematics import forward_kinematics, local_quaternions
from ..vectors import Rows3, cross, dot, matvec, norm, ordered_sum, rows3, tmatvec, unit, unit3, vec3
from .in_plane_constants import InPlaneConstants
from .path import monotone_path
from .plane_chain import curled_turns, plane_distances
from .reach import bound_ends, folded_turns
from .straight import straight_pose_normal, turn_box

# A preferred pose whose joints all lie within this fraction of the reach from
# the EE axis spans no plane: a bend of ~1e-6 rad is below what a rig shows and
# would make the sphere's frame (and every solve) hinge on rounding noise.
STRAIGHT_TOLERANCE = 1e-6
# How far from parallel (|cross| of unit vectors) a hinge axis may be from the
# solver-plane normal and still count as turning in the plane.
AXIS_PARALLEL_TOLERANCE = 1e-9


def pose_plane_normals(positions: np.ndarray) -> np.ndarray:
    """Solver-plane normals ``(N, 3)`` of poses given by joint positions ``(N, n + 1, 3)`` (tip last).

    The plane passes through the start joint and the tip (seed rule A) and is
    the one nearest the other joints (rule B): its in-plane direction ⟂ the EE
    axis is the principal direction of the joints' offsets from that axis. The
    normal's sign makes the chain bulge toward ``a × n`` (``a`` the EE axis),
    so a two-bone chain bends positively about it: ``n ∝ (p1 − p0) × (p2 − p1)``.
    Rows without a plane (straight chains, tip on the start joint) are NaN.
    """
    positions = np.asarray(positions, dtype=float)
    offsets = positions - positions[:, :1]
    reach = ordered_sum(norm(np.diff(positions, axis=1)), 1)
    axis_length = norm(offsets[:, -1])
    axes = offsets[:, -1] / np.maximum(axis_length, 1e-300)[:, None]
    inner = offsets[:, 1:-1]
    across = inner - dot(inner, axes[:, None])[..., None] * axes[:, None]
    # Principal direction of the offsets in the plane ⟂ a, in closed form (a 2×2 eigenproblem
    # in a basis (u, v) of that plane): elementwise, so the same bits in any batch.
    helper = np.where(np.abs(axes[:, :1]) < 0.9, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    u = unit(cross(axes, helper))
    v = cross(axes, u)
    x, y = dot(across, u[:, None]), dot(across, v[:, None])
    angle = 0.5 * np.arctan2(2.0 * ordered_sum(x * y, 1), ordered_sum(x * x, 1) - ordered_sum(y * y, 1))
    side = np.cos(angle)[:, None] * u + np.sin(angle)[:, None] * v
    normals = cross(side, axes)
    bulge = ordered_sum(cross(inner, offsets[:, -1:]), 1)
    normals = np.where(dot(normals, bulge)[:, None] < 0.0, -normals, normals)
    spread = norm(across).max(axis=1, initial=0.0)
    flat = (spread <= STRAIGHT_TOLERANCE * reach) | (axis_length <= STRAIGHT_TOLERANCE * reach)
    return np.where(flat[:, None], np.nan, unit(normals))


@dataclass(frozen=True, eq=False)
class SphereFrame:
    """The zero-plane sphere's intrinsic frame, read off the preferred pose (SPEC §5).

    Vectors are in the chain root frame's own coordinates (the start joint's parent).

    Attributes
    ----------
    a0 : ndarray, shape (3,)
        EE axis of the preferred pose (start joint → tip, unit): the zero meridian.
    n0 : ndarray, shape (3,)
        Solver-plane normal of the preferred pose (unit, ⟂ ``a0``): the poles are ``±n0``
        and the horizontal plane (equator) is ⟂ ``n0``.
    """

    a0: np.ndarray
    n0: np.ndarray


@dataclass(frozen=True, eq=False)
class PreferredPose:
    """A chain's preferred pose and everything the HI solve derives from it once.

    Attributes
    ----------
    chain : Chain
    q : ndarray, shape (n_dof,)
        Preferred joint variables.
    positions : ndarray, shape (n + 1, 3)
        Preferred joint and tip positions in the solving frame.
    frames : ndarray, shape (n + 1, 3, 3)
        Preferred world frames (index 0: the root).
    sphere : SphereFrame
    bend_axes : ndarray, shape (n, 3)
        The solver-plane normal in each joint's preferred frame: the axis an
        in-plane bend turns that joint about.
    bone_headings : ndarray, shape (n,)
        Angle of each bone's in-plane part about ``n0`` from ``a0`` in the preferred pose.
    in_plane_lengths : ndarray, shape (n,)
        Length of each bone's part in the preferred plane (its full length for a planar chain).
    bone_heights : ndarray, shape (n,)
        Each bone's part along ``n0`` (they sum to 0: the tip lies on ``a0``).
    relative_turns : ndarray, shape (n − 1,)
        Preferred turn of each bone's in-plane part from the previous one's (radians, ``(−π, π]``).
    turn_lower, turn_upper : ndarray, shape (n − 1,)
        The box the in-plane solve keeps the turns in: ``[0, π]`` or ``[−π, 0]`` for a
        joint bent in the preferred pose (it keeps its bend sense), ``[−π, π]`` otherwise.
    curled_turns : ndarray, shape (n − 1,)
        Turns in that box bringing the tip nearest the start joint (see ``plane_chain``).
    preferred_distance, curled_distance : float
        Start joint to tip in the preferred and in the curled pose: the in-plane solve
        reaches every distance from ``curled_distance`` to ``in_plane_reach`` with every
        bent joint keeping its sense, and on to the folded pose's distance
        bending joints against it (``reach.least_distance``; flagged: ``HISolveResult.against_bend``).
    """

    chain: Chain
    q: np.ndarray
    positions: np.ndarray
    frames: np.ndarray
    sphere: SphereFrame
    bend_axes: np.ndarray
    bone_headings: np.ndarray
    in_plane_lengths: np.ndarray
    bone_heights: np.ndarray
    relative_turns: np.ndarray
    turn_lower: np.ndarray
    turn_upper: np.ndarray
    curled_turns: np.ndarray
    preferred_distance: float
    curled_distance: float
    zero_plane_maps: dict = field(default_factory=dict, repr=False)
    """Zero-plane maps built for this pose's sphere frame, by factory, and the default map's
    singular direction row (``planes.solver_planes``)."""

    # Constants of every solve with this pose, computed once (a live chain solves one frame at a
    # time with the same PreferredPose): the same operations as computing them per solve.
    @cached_property
    def plane_basis(self) -> np.ndarray:
        """Rows ``(3, 3)``: ``a0``, ``n0``, ``n0 × a0`` in the solving frame (read-only)."""
        return _read_only(np.stack([self.a0_world, self.n0_world, cross(self.n0_world, self.a0_world)]))

    @cached_property
    def start_basis(self) -> np.ndarray:
        """``plane_basis @ frames[1]`` ``(3, 3)``: the start joint's preferred frame in the plane basis."""
        return _read_only(self.plane_basis @ self.frames[1])

    @cached_property
    def two_bone_angles(self) -> np.ndarray:
        """Shoulder heading and elbow turn ``(2,)`` of a two-bone preferred pose in its plane (radians)."""
        upper, lower = matvec(self.plane_basis, np.diff(self.positions, axis=0))
        shoulder = np.arctan2(upper[2], upper[0])
        elbow = np.arctan2(upper[0] * lower[2] - upper[2] * lower[0], upper[0] * lower[0] + upper[2] * lower[2])
        return _read_only(np.array([shoulder, elbow]))

    @cached_property
    def local_quaternions(self) -> np.ndarray:
        """The preferred pose's local joint rotations ``(n, 4)`` ``(w, x, y, z)`` (read-only)."""
        return _read_only(local_quaternions(self.chain, self.q[None])[0])

    @cached_property
    def in_plane_reach(self) -> float:
        """Farthest the tip gets from the start joint with every joint turning about ``n0`` alone."""
        return float(self.in_plane_lengths.sum())

    @cached_property
    def path(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """The in-plane solve's path (``path.monotone_path``): its vertices ``(K + 1, n − 1)`` (relative
        turns, straight first, the curled pose, then folded last), each segment's step ``(K, n − 1)`` to
        the next vertex, the vertices' distances ``(K + 1,)`` and the preferred vertex's index (read-only)."""
        folded = folded_turns(self)
        vertices, preferred = monotone_path(self.in_plane_lengths, self.turn_lower, self.turn_upper,
                                            self.relative_turns, self.curled_turns, folded)
        distances = plane_distances(self.in_plane_lengths, vertices)
        # The path's ends and the preferred vertex have the distances every other test reads.
        distances[preferred] = self.preferred_distance
        if folded is self.curled_turns and np.array_equal(vertices[-1], self.curled_turns):
            # (A close onto the root ends on a pose of its own, nearer the root: its distance stands.)
            distances[-1] = self.curled_distance
        return (_read_only(vertices), _read_only(np.ascontiguousarray(np.diff(vertices, axis=0))),
                _read_only(distances), preferred)

    @cached_property
    def centre_radius(self) -> float:
        """``1e-12 · reach``: targets this near the start joint have no EE axis of their own."""
        return 1e-12 * self.chain.reach

    @cached_property
    def _bound_ends(self) -> tuple[float, float, float, float]:
        """The geometric bound's ends, then the HI pose's own (``reach.bound_ends``)."""
        return bound_ends(self)

    @cached_property
    def start_parent(self) -> np.ndarray | None:
        """The start joint's parent frame ``root · rest₀`` ``(3, 3)``, None when it is the identity
        (then the placement skips the products: exact)."""
        parent = self.chain.root_rotation @ self.chain.rest_rotations[0]
        return None if np.array_equal(parent, np.eye(3)) else _read_only(parent)

    @cached_property
    def joint_layout(self) -> tuple[list[int], list[tuple[int, int, np.floating]]]:
        """The ball joints, and per other joint ``(joint, its last variable, sign)``: the variable the
        in-plane bend adds to, with the sign of its axis along the bend axis (placement.joint_variables)."""
        chain = self.chain
        balls = [j for j, kind in enumerate(chain.kinds) if kind is JointKind.BALL]
        bent = []
        for j, kind in enumerate(chain.kinds):
            if kind is not JointKind.BALL:
                last = int(chain.dof_start[j]) + kind.value - 1
                bent.append((j, last, np.sign(chain.axes[last] @ self.bend_axes[j])))
        return balls, bent

    @cached_property
    def root_is_identity(self) -> bool:
        """Whether the chain's root rotation is exactly the identity (the solver planes skip its products)."""
        return bool(np.array_equal(self.chain.root_rotation, np.eye(3)))

    @cached_property
    def in_plane_constants(self) -> InPlaneConstants:
        """What every in-plane solve with this pose reads, as Python floats (``in_plane``)."""
        return InPlaneConstants.of(self)

    @cached_property
    def bend_factors(self) -> tuple[tuple[tuple[float, float, float, float], ...], tuple[tuple[float, float, float], ...]]:
        """The joints after the start joint's preferred local quaternions and bend axes (floats)."""
        return (tuple(tuple(quat) for quat in self.local_quaternions[1:].tolist()),
                tuple(tuple(axis) for axis in self.bend_axes[1:].tolist()))

    # The same constants as Python floats, for the one-target solve (one_target).
    @cached_property
    def start_floats(self) -> tuple[float, float, float]:
        return vec3(self.start)

    @cached_property
    def sphere_floats(self) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """``a0``, ``n0`` (sphere coordinates)."""
        return vec3(self.sphere.a0), vec3(self.sphere.n0)

    @cached_property
    def unit_n0_floats(self) -> tuple[float, float, float]:
        """``unit(n0)``: the default map's singular direction, as the one-target solve computes it."""
        return unit3(SCALAR_OPS, self.sphere_floats[1])

    @cached_property
    def root_rows(self) -> Rows3 | None:
        """The chain's root rotation as rows, None for the identity (the products skipped)."""
        return None if self.root_is_identity else rows3(self.chain.root_rotation)

    @cached_property
    def start_parent_rows(self) -> Rows3 | None:
        return None if self.start_parent is None else rows3(self.start_parent)

    @cached_property
    def start_basis_rows(self) -> Rows3:
        return rows3(self.start_basis)

    @cached_property
    def q_floats(self) -> tuple[float, ...]:
        return tuple(self.q.tolist())

    @cached_property
    def variable_layout(self) -> tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int, float], ...]]:
        """:attr:`joint_layout` as Python numbers: ``(joint, first variable)`` per ball joint, and
        ``(joint, last variable, sign)`` per other joint."""
        balls, bent = self.joint_layout
        dof_start = self.chain.dof_start.tolist()
        return (tuple((j, dof_start[j]) for j in balls), tuple((j, last, float(sign)) for j, last, sign in bent))

    @cached_property
    def joint_kinds(self) -> tuple[tuple[JointKind, int], ...]:
        """Per joint: its kind and its first variable."""
        return tuple(zip(self.chain.kinds, self.chain.dof_start.tolist()))

    @cached_property
    def joint_axes(self) -> tuple[tuple[float, float, float], ...]:
        """The chain's joint axes ``(n_dof)`` as floats."""
        return tuple(vec3(axis) for axis in self.chain.axes)

    @cached_property
    def bend_factor_columns(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                                           tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """:attr:`bend_factors` by component: four ``(n − 1,)`` quaternion columns and three axis columns."""
        q, a = self.local_quaternions[1:].T.copy(), self.bend_axes[1:].T.copy()
        return (q[0], q[1], q[2], q[3]), (a[0], a[1], a[2])

    def lower_bounds(self, r: np.ndarray) -> np.ndarray:
        """The geometric lower bound ``(N,)`` on the tip error at distances ``r`` (SPEC §3.3, free joints)."""
        return self.lower_bound(NUMPY_OPS, r)

    def lower_bound(self, xp: ArrayOps, r: Real) -> Real:
        """:meth:`lower_bounds` in an array namespace (one distance, or ``(N,)``)."""
        total, inner, _, _ = self._bound_ends
        return xp.maximum(0.0, xp.maximum(r - total, inner - r))

    @property
    def start(self) -> np.ndarray:
        """Start joint position ``(3,)`` (the sphere's centre) in the solving frame."""
        return self.positions[0]

    @property
    def a0_world(self) -> np.ndarray:
        return matvec(self.chain.root_rotation, self.sphere.a0)

    @property
    def n0_world(self) -> np.ndarray:
        return matvec(self.chain.root_rotation, self.sphere.n0)


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


_PREFERRED_CACHE: dict[tuple[bytes, bytes, bytes, bool], PreferredPose] = {}
# Live solving calls the solver once per frame with the same chain and preferred pose, and every
# bake reads the rig again (an equal chain): deriving the pose again costs more than a two-bone
# solve, and the curled-pose search of a 10-bone chain ~2 ms.
_PREFERRED_CACHE_SIZE = 64


def preferred_pose(chain: Chain, preferred: np.ndarray, bend_direction: ArrayLike | None = None, *,
                   any_plane: bool = False) -> PreferredPose:
    """Check a chain and its preferred pose for the HI solve and derive the sphere frame.

    A bent preferred pose gives the plane (:func:`pose_plane_normals`) and ignores ``bend_direction``;
    a straight one takes it from ``bend_direction`` ``(3,)`` or ``any_plane`` (:mod:`.straight`).
    Cached per (chain content, preferred pose, bend direction, ``any_plane``); a ``Chain`` is
    immutable. For an equal chain read again, the cached derivation comes back holding the given chain.

    Raises
    ------
    IKInputError
        ``preferred`` or ``bend_direction`` mis-shaped or non-finite; the start joint not a ball
        joint (the swivel turns it freely); a later joint with no variable turning about the
        solver-plane normal; a straight preferred pose without a plane (:mod:`.straight`).
    """
    q = np.asarray(preferred, dtype=float)
    if q.shape != (chain.n_dof,) or not np.all(np.isfinite(q)):
        raise IKInputError("preferred", f"expected a finite pose of shape ({chain.n_dof},), got {q.shape}")
    direction = None if bend_direction is None else np.asarray(bend_direction, dtype=float)
    if direction is not None and (direction.shape != (3,) or not np.all(np.isfinite(direction))):
        raise IKInputError("bend_direction", f"expected a finite vector of shape (3,), got {direction.shape}")
    key = (chain.content_key, q.tobytes(), b"" if direction is None else direction.tobytes(), any_plane)
    cached = _PREFERRED_CACHE.get(key)
    if cached is not None and cached.chain is chain:
        return cached
    derived = _derive_preferred_pose(chain, q, direction, any_plane) if cached is None else replace(cached, chain=chain)
    if cached is not None:  # what it derived lazily (the in-plane path: 15–60 ms) depends on content alone
        derived.__dict__.update({name: value for name, value in cached.__dict__.items() if name not in derived.__dict__})
    if len(_PREFERRED_CACHE) >= _PREFERRED_CACHE_SIZE:
        _PREFERRED_CACHE.clear()
    _PREFERRED_CACHE[key] = derived
    return derived


def _derive_preferred_pose(chain: Chain, q: np.ndarray, bend_direction: np.ndarray | None,
                           any_plane: bool) -> PreferredPose:
    q = q.copy()
    q.setflags(write=False)
    if chain.kinds[0] is not JointKind.BALL:
        raise IKInputError("kinds", "the HI solver needs a ball start joint: the swivel turns it about any axis")
    pose = forward_kinematics(chain, q[None])
    positions, frames = pose.positions[0], pose.frames[0]
    n0_world = pose_plane_normals(positions[None])[0]
    straight = not np.all(np.isfinite(n0_world))
    if straight:
        n0_world = straight_pose_normal(chain, positions, frames, bend_direction, any_plane)
    a0_world = unit(positions[-1] - positions[0])
    root = chain.root_rotation
    sphere = SphereFrame(a0=matvec(root.T, a0_world), n0=matvec(root.T, n0_world))
    bend_axes = tmatvec(frames[1:], n0_world)
    for j, kind in enumerate(chain.kinds[1:], start=1):
        if kind is JointKind.BALL:
            continue
        last = chain.dof_start[j] + kind.value - 1
        if norm(cross(chain.axes[last], bend_axes[j])) > AXIS_PARALLEL_TOLERANCE:
            raise IKInputError(
                "kinds",
                f"joint {j} cannot bend in the solver plane: its last axis is not the plane's normal "
                "(make it a ball joint, or a hinge about the normal)",
            )
    basis = np.stack([a0_world, n0_world, cross(n0_world, a0_world)])
    bones = matvec(basis, np.diff(positions, axis=0))
    along, height, across = bones.T.copy()  # unit-stride rows for arctan2 (vectors.unit_stride)
    headings = np.arctan2(across, along)
    relative = np.angle(np.exp(1j * np.diff(headings)))
    in_plane_lengths = np.hypot(along, across)
    in_plane = in_plane_lengths > STRAIGHT_TOLERANCE * chain.reach
    relative, lower, upper = turn_box(relative, in_plane[1:] & in_plane[:-1], straight, STRAIGHT_TOLERANCE)
    curled = curled_turns(in_plane_lengths, lower, upper, relative)
    return PreferredPose(
        chain, q, positions, frames, sphere, bend_axes, headings, in_plane_lengths, height, relative, lower, upper,
        curled, float(plane_distances(in_plane_lengths, relative[None])[0]),
        float(plane_distances(in_plane_lengths, curled[None])[0]),
    )

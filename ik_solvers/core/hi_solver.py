"""The history-independent (HI) solver: swivel angle, zero-plane map, parent space, flips (SPEC §5).

Entry point for callers (the Blender layer, the batch baker)
------------------------------------------------------------
``solve_hi(chain, targets, preferred, swivel=..., zero_plane_map=..., poles=...,
sphere_rotations=..., options=...) -> HISolveResult``: one batch of frames;
``HISolveResult.result`` is the core's ``SolveResult`` (method ``Method.HI``),
the other fields are the HI extras (EE axes, zero-plane and solver-plane
normals, pole angles and warnings, map singularities). ``find_flips(...)`` lists
the frames of a sequence where the solver plane jumps. The plain core entry
``solve(chain, targets, Method.HI, options, initial=preferred, swivel=...)``
runs the same solve and returns only the ``SolveResult``.

Coordinates
-----------
The *solving frame* is the frame of ``chain.root_position`` / ``root_rotation``
and of ``targets`` (world for a live solve, or the start joint's parent space
when baking with an identity root). The chain's root frame is the start joint's
parent. The sphere's intrinsic frame (``SphereFrame``) is read off the preferred
pose in that root frame's own coordinates; ``sphere_rotations (N, 3, 3)`` place
it in the solving frame per frame — the parent space (SPEC §5). By default the
sphere rides with the root (``START_JOINT``); ``sphere_rotations_for_parent_space``
computes the rotations for either choice from the parents' world rotations.

History independence
--------------------
Every frame is computed from its own target, swivel, pole and sphere rotation
and the preferred pose alone: two bones in closed form, longer chains by an
in-plane solve that starts from the preferred angles every time. Solving the
frames in any order or in any chunks gives bit-identical poses.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace

import numpy as np

from .analytic import two_bone_planar
from .chain import Chain, JointKind
from .errors import IKInputError
from .iteration import classify
from .kinematics import (
    Pose,
    bone_length_errors,
    forward_kinematics,
    local_quaternions,
)
from .result import Method, SolveOptions, SolveResult, Status
from .rotations import canonical_quaternions, quaternion_products, quaternions_from_matrices, rotvecs_from_quaternions
from .solve import register_solver, solve, validated_targets
from .zero_plane import (
    ZeroPlaneMapFactory,
    build_zero_plane_map,
    map_singular_directions,
    map_singularities,
    swivel_angles,
    swivel_normals,
    zero_plane_normals,
)

# A preferred pose whose joints all lie within this fraction of the reach from
# the EE axis spans no plane: a bend of ~1e-6 rad is below what a rig shows and
# would make the sphere's frame (and every solve) hinge on rounding noise.
STRAIGHT_TOLERANCE = 1e-6
# How far from parallel (|cross| of unit vectors) a hinge axis may be from the
# solver-plane normal and still count as turning in the plane.
AXIS_PARALLEL_TOLERANCE = 1e-9
# Orthonormality slack accepted in caller-supplied sphere rotations (as Chain's rotations).
ROTATION_TOLERANCE = 1e-6
# Damping (fraction of the reach) of the in-plane DLS solve of longer chains: small enough
# to converge like Gauss–Newton (measured 4–6 iterations to 1e-6 on a 4-bone arm), large
# enough to bound the step where the chain straightens. The caller's own damping is for DLS proper.
IN_PLANE_DAMPING = 1e-3
DEFAULT_WARNING_ANGLE = np.radians(10.0)
"""Pole-distance warning threshold of SPEC §5 (radians)."""
DEFAULT_TURN_THRESHOLD = np.radians(30.0)
"""Solver-normal turn between consecutive frames reported as a flip (radians): well above what a
target moving a few degrees of EE axis per frame produces away from the poles."""


class ParentSpace(enum.Enum):
    """Which transform the zero-plane sphere rides with (SPEC §5); values are the Blender enum ids."""

    START_JOINT = "START_JOINT"
    """The start joint's parent: rotate it and the whole chain turns with it."""
    IK_TARGET = "IK_TARGET"
    """The target's parent: rotate the start joint's parent and the chain holds still in world."""


def _unit(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def _dots(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("...i,...i->...", a, b)


def _rotated(matrix: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """``matrix (3, 3) @ v`` for vectors ``(..., 3)``.

    Every product in this module goes through einsum, never matmul: BLAS rounds a
    product differently with the memory alignment of its operands, so a frame's
    result would depend on where its arrays happened to land (measured with the
    core's stacked world-axis products: a 4-bone chain in a tilted root frame gave
    different last bits when its batch was reversed).
    """
    return np.einsum("ij,...j->...i", matrix, vectors)


# --------------------------------------------------------------- the plane
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
    reach = np.linalg.norm(np.diff(positions, axis=1), axis=-1).sum(axis=1)
    axis_length = np.linalg.norm(offsets[:, -1], axis=-1)
    axes = offsets[:, -1] / np.maximum(axis_length, 1e-300)[:, None]
    inner = offsets[:, 1:-1]
    across = inner - _dots(inner, axes[:, None])[..., None] * axes[:, None]
    # Principal direction of the offsets in the plane ⟂ a, in closed form (a 2×2 eigenproblem
    # in a basis (u, v) of that plane): elementwise, so the same bits in any batch.
    helper = np.where(np.abs(axes[:, :1]) < 0.9, [1.0, 0.0, 0.0], [0.0, 1.0, 0.0])
    u = _unit(np.cross(axes, helper))
    v = np.cross(axes, u)
    x, y = _dots(across, u[:, None]), _dots(across, v[:, None])
    angle = 0.5 * np.arctan2(2.0 * np.sum(x * y, axis=1), np.sum(x * x, axis=1) - np.sum(y * y, axis=1))
    side = np.cos(angle)[:, None] * u + np.sin(angle)[:, None] * v
    normals = np.cross(side, axes)
    bulge = np.cross(inner, offsets[:, -1:]).sum(axis=1)
    normals = np.where(_dots(normals, bulge)[:, None] < 0.0, -normals, normals)
    spread = np.linalg.norm(across, axis=-1).max(axis=1, initial=0.0)
    flat = (spread <= STRAIGHT_TOLERANCE * reach) | (axis_length <= STRAIGHT_TOLERANCE * reach)
    return np.where(flat[:, None], np.nan, _unit(normals))


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
    plane_chain : Chain
        The chain frozen in its preferred pose, in plane coordinates (x = ``a0``,
        y = ``n0 × a0``, z = ``n0``, start joint at the origin), with one hinge per
        joint about z: its variables are the in-plane bends from the preferred
        angles, limited so that no joint bends through straight to the other side.
    bone_headings : ndarray, shape (n,)
        Angle of each bone's in-plane part about ``n0`` from ``a0`` in the preferred pose.
    in_plane_lengths : ndarray, shape (n,)
        Length of each bone's part in the preferred plane (its full length for a planar chain).
    """

    chain: Chain
    q: np.ndarray
    positions: np.ndarray
    frames: np.ndarray
    sphere: SphereFrame
    bend_axes: np.ndarray
    plane_chain: Chain
    bone_headings: np.ndarray
    in_plane_lengths: np.ndarray

    @property
    def in_plane_reach(self) -> float:
        """Farthest the tip gets from the start joint with every joint turning about ``n0`` alone."""
        return float(self.in_plane_lengths.sum())

    def lower_bounds(self, r: np.ndarray) -> np.ndarray:
        """Least tip error ``(N,)`` of the HI pose for targets at distance ``r`` from the start joint.

        The bones' in-plane parts turn freely about ``n0`` and their heights along it
        cancel at the tip, so the tip reaches exactly the annulus
        ``[max(0, 2·max(L) − ΣL), ΣL]`` of the in-plane lengths ``L`` — the core's
        free-joint bound (SPEC §3.3) when the chain is planar, tighter when it is not.
        """
        lengths = self.in_plane_lengths
        inner = max(0.0, 2.0 * lengths.max() - lengths.sum())
        return np.maximum(0.0, np.maximum(r - lengths.sum(), inner - r))

    @property
    def start(self) -> np.ndarray:
        """Start joint position ``(3,)`` (the sphere's centre) in the solving frame."""
        return self.positions[0]

    @property
    def a0_world(self) -> np.ndarray:
        return _rotated(self.chain.root_rotation, self.sphere.a0)

    @property
    def n0_world(self) -> np.ndarray:
        return _rotated(self.chain.root_rotation, self.sphere.n0)


_PREFERRED_CACHE: dict[tuple[int, bytes], PreferredPose] = {}
# Live solving calls the solver once per frame with the same chain and preferred pose;
# deriving them again costs more than a two-bone solve itself.
_PREFERRED_CACHE_SIZE = 64


def preferred_pose(chain: Chain, preferred: np.ndarray) -> PreferredPose:
    """Check a chain and its preferred pose for the HI solve and derive the sphere frame.

    The result is cached per (chain object, preferred pose); a ``Chain`` is immutable.

    Raises
    ------
    IKInputError
        ``preferred`` mis-shaped or non-finite; the start joint not a ball joint
        (the swivel turns it freely); a later joint with no variable turning about
        the solver-plane normal; or a straight preferred pose (no plane).
    """
    q = np.asarray(preferred, dtype=float)
    if q.shape != (chain.n_dof,) or not np.all(np.isfinite(q)):
        raise IKInputError("preferred", f"expected a finite pose of shape ({chain.n_dof},), got {q.shape}")
    key = (id(chain), q.tobytes())
    cached = _PREFERRED_CACHE.get(key)
    if cached is not None and cached.chain is chain:
        return cached
    derived = _derive_preferred_pose(chain, q)
    if len(_PREFERRED_CACHE) >= _PREFERRED_CACHE_SIZE:
        _PREFERRED_CACHE.clear()
    _PREFERRED_CACHE[key] = derived
    return derived


def _derive_preferred_pose(chain: Chain, q: np.ndarray) -> PreferredPose:
    q = q.copy()
    q.setflags(write=False)
    if chain.kinds[0] is not JointKind.BALL:
        raise IKInputError("kinds", "the HI solver needs a ball start joint: the swivel turns it about any axis")
    pose = forward_kinematics(chain, q[None])
    positions, frames = pose.positions[0], pose.frames[0]
    n0_world = pose_plane_normals(positions[None])[0]
    if not np.all(np.isfinite(n0_world)):
        raise IKInputError(
            "preferred",
            "the preferred pose is straight, so it defines no solver plane: bend the chain "
            "(e.g. the elbow or knee a little in its natural direction) and capture the preferred pose again",
        )
    a0_world = _unit(positions[-1] - positions[0])
    root = chain.root_rotation
    sphere = SphereFrame(a0=_rotated(root.T, a0_world), n0=_rotated(root.T, n0_world))
    bend_axes = np.einsum("nji,j->ni", frames[1:], n0_world)
    for j, kind in enumerate(chain.kinds[1:], start=1):
        if kind is JointKind.BALL:
            continue
        last = chain.dof_start[j] + kind.value - 1
        if np.linalg.norm(np.cross(chain.axes[last], bend_axes[j])) > AXIS_PARALLEL_TOLERANCE:
            raise IKInputError(
                "kinds",
                f"joint {j} cannot bend in the solver plane: its last axis is not the plane's normal "
                "(make it a ball joint, or a hinge about the normal)",
            )
    n = chain.n_joints
    basis = np.stack([a0_world, n0_world, np.cross(n0_world, a0_world)])
    bones = _rotated(basis, np.diff(positions, axis=0))
    along, height, across = bones.T.copy()  # see _unit_stride_inputs
    headings = np.arctan2(across, along)
    relative = np.angle(np.exp(1j * np.diff(headings)))
    in_plane_lengths = np.hypot(along, across)
    in_plane = in_plane_lengths > STRAIGHT_TOLERANCE * chain.reach
    # Each bent joint keeps its sense (the seed: bend as the preferred pose does); a joint
    # straight in the preferred pose, or with a bone out of the plane, may go either way.
    bent = (np.abs(relative) > STRAIGHT_TOLERANCE) & in_plane[1:] & in_plane[:-1]
    lower, upper = np.full(n, -np.inf), np.full(n, np.inf)
    lower[1:] = np.where(bent, np.where(relative > 0.0, -relative, -np.pi - relative), -np.inf)
    upper[1:] = np.where(bent, np.where(relative > 0.0, np.pi - relative, -relative), np.inf)
    # The plane chain lives in plane coordinates (x = a0, y = n0 × a0, z = n0, start joint at
    # the origin): its joints turn about z alone, so every world axis is exactly (0, 0, 1).
    # With general rotations the core's world axes (stacked BLAS products, rounded differently
    # with each block's memory alignment) made a frame's in-plane solve depend on its place in
    # the batch: measured, a 4-bone chain in a tilted root frame differed in the last bits
    # between a batch and the same batch reversed.
    turns = np.diff(np.concatenate([[0.0], headings]))
    c, s = np.cos(turns), np.sin(turns)
    rest = np.zeros((n, 3, 3))
    rest[:, 0, 0], rest[:, 0, 1], rest[:, 1, 0], rest[:, 1, 1], rest[:, 2, 2] = c, -s, s, c, 1.0
    segments = np.stack([in_plane_lengths, np.zeros(n), height], -1)
    plane_chain = Chain(
        kinds=(JointKind.HINGE,) * n,
        offsets=np.concatenate([np.zeros((1, 3)), segments[:-1]]),
        rest_rotations=rest,
        axes=np.broadcast_to([0.0, 0.0, 1.0], (n, 3)),
        lower=lower,
        upper=upper,
        weights=np.ones(n),
        tip_offset=segments[-1],
    )
    return PreferredPose(chain, q, positions, frames, sphere, bend_axes, plane_chain, headings, segments[:, 0])


# ---------------------------------------------------------- parent space
def sphere_rotations_for_parent_space(
    parent_space: ParentSpace | str,
    start_parent_rotations: np.ndarray,
    target_parent_rotations: np.ndarray,
    solving_rotations: np.ndarray | None = None,
) -> np.ndarray:
    """Rotations ``(N, 3, 3)`` placing the sphere in the solving frame, per frame.

    The sphere's frame is fixed in the parent space's own coordinates — the same
    numbers as the preferred pose has in the start joint's parent — so
    ``sphere_rotations = W_kᵀ P_k`` with ``P_k`` the parent space's world rotation
    at frame ``k`` and ``W_k`` the solving frame's. No capture-time rotation
    enters: with ``IK_TARGET`` a start parent already rotated when the solver
    was assigned tilts the sphere against the chain (the seed's example 2).

    Parameters
    ----------
    parent_space : ParentSpace or its name
    start_parent_rotations, target_parent_rotations : ndarray, shape (N, 3, 3) or (3, 3)
        World rotations of the start joint's parent (the chain's root) and of the target's parent.
    solving_rotations : ndarray, shape (N, 3, 3) or (3, 3), optional
        World rotation of the solving frame; default identity (solving in world). Pass the
        start parent's rotations when the chain's root is the identity and targets are given in
        its space (then ``START_JOINT`` yields identities).
    """
    try:
        parent_space = ParentSpace(parent_space)
    except ValueError:
        raise IKInputError("parent_space", f"expected one of {[p.value for p in ParentSpace]}, got {parent_space!r}") from None
    parent = start_parent_rotations if parent_space is ParentSpace.START_JOINT else target_parent_rotations
    parent = np.asarray(parent, dtype=float)
    if solving_rotations is None:
        return np.array(parent if parent.ndim == 3 else parent[None])
    solving = np.asarray(solving_rotations, dtype=float)
    product = np.einsum("...ji,...jk->...ik", solving, parent)  # einsum: see _rotated
    return np.array(product.reshape(-1, 3, 3))


def _check_rotations(rotations: np.ndarray, n_frames: int) -> np.ndarray:
    rotations = np.asarray(rotations, dtype=float)
    if rotations.shape == (3, 3):
        rotations = rotations[None]
    if rotations.ndim != 3 or rotations.shape[1:] != (3, 3) or rotations.shape[0] not in (1, n_frames):
        raise IKInputError("sphere_rotations", f"expected shape ({n_frames}, 3, 3) or (3, 3), got {rotations.shape}")
    if not np.all(np.isfinite(rotations)):
        raise IKInputError("sphere_rotations", "must be finite")
    gram = rotations @ np.swapaxes(rotations, 1, 2)
    if np.abs(gram - np.eye(3)).max() > ROTATION_TOLERANCE or np.any(np.linalg.det(rotations) < 0.0):
        raise IKInputError("sphere_rotations", "must be proper rotation matrices")
    return np.broadcast_to(rotations, (n_frames, 3, 3))


def _per_frame(value: np.ndarray | float, n_frames: int, field: str) -> np.ndarray:
    value = np.asarray(value, dtype=float)
    if value.ndim > 1 or value.size not in (1, n_frames):
        raise IKInputError(field, f"expected a number or shape ({n_frames},), got {value.shape}")
    if not np.all(np.isfinite(value)):
        raise IKInputError(field, "must be finite")
    return np.broadcast_to(value.reshape(-1), (n_frames,))


# ------------------------------------------------------------ the sphere
@dataclass(frozen=True, eq=False)
class _Plane:
    """EE axes and normals of a batch, in the solving frame and in sphere coordinates."""

    r: np.ndarray
    to_solving: np.ndarray
    axes: np.ndarray
    axes_sphere: np.ndarray
    zero_normals_sphere: np.ndarray
    normals: np.ndarray
    swivel: np.ndarray
    singular: np.ndarray
    singular_directions: np.ndarray


def _solver_planes(
    pref: PreferredPose,
    targets: np.ndarray,
    swivel: np.ndarray | float,
    zero_plane_map: str | ZeroPlaneMapFactory,
    poles: np.ndarray | None,
    map_data: dict | None,
    sphere_rotations: np.ndarray | None,
) -> _Plane:
    n_frames = targets.shape[0]
    swivel = _per_frame(swivel, n_frames, "swivel")
    offsets = targets - pref.start
    r = np.linalg.norm(offsets, axis=-1)
    # A target on the start joint has no EE axis; the preferred one stands in (direction_unique is False there).
    at_centre = r <= 1e-12 * pref.chain.reach
    axes_local_default = pref.sphere.a0
    if sphere_rotations is None:
        root = pref.chain.root_rotation
        to_solving = np.broadcast_to(root, (n_frames, 3, 3))
        if np.array_equal(root, np.eye(3)):  # the common case, and exact: skip the products
            to_sphere_vectors = to_solving_vectors = lambda vectors: vectors  # noqa: E731
        else:
            to_sphere_vectors = lambda vectors: np.einsum("ji,nj->ni", root, vectors)  # noqa: E731
            to_solving_vectors = lambda vectors: np.einsum("ij,nj->ni", root, vectors)  # noqa: E731
    else:
        to_solving = _check_rotations(sphere_rotations, n_frames)
        to_sphere_vectors = lambda vectors: np.einsum("nji,nj->ni", to_solving, vectors)  # noqa: E731
        to_solving_vectors = lambda vectors: np.einsum("nij,nj->ni", to_solving, vectors)  # noqa: E731
    axes = offsets / np.where(at_centre, 1.0, r)[:, None]
    axes_sphere = np.where(at_centre[:, None], axes_local_default, to_sphere_vectors(axes))
    axes = np.where(at_centre[:, None], to_solving_vectors(axes_sphere), axes)
    data = dict(map_data or {})
    if poles is not None:
        poles = np.asarray(poles, dtype=float)
        poles = np.broadcast_to(poles, targets.shape) if poles.ndim == 1 else poles
        if poles.shape != targets.shape or not np.all(np.isfinite(poles)):
            raise IKInputError("poles", f"expected finite pole positions of shape {targets.shape}")
        data["poles"] = to_sphere_vectors(poles - pref.start)
    zero_map = build_zero_plane_map(zero_plane_map, pref.sphere.a0, pref.sphere.n0)
    zero_normals = zero_plane_normals(zero_map, axes_sphere, **data)
    normals_sphere = swivel_normals(axes_sphere, zero_normals, swivel)
    normals = to_solving_vectors(normals_sphere)
    return _Plane(
        r=r,
        to_solving=to_solving,
        axes=axes,
        axes_sphere=axes_sphere,
        zero_normals_sphere=zero_normals,
        normals=normals,
        swivel=swivel,
        singular=map_singularities(zero_map, axes_sphere, **data),
        singular_directions=map_singular_directions(zero_map, axes_sphere, pref.sphere.n0, **data),
    )


def pole_angles(axes_sphere: np.ndarray, poles: np.ndarray) -> np.ndarray:
    """Angle ``(N,)`` (radians, ``[0, π/2]``) between EE axes and the nearer end of ``poles`` (``(3,)`` or ``(N, 3)``)."""
    along = np.abs(_dots(axes_sphere, poles))
    across = np.linalg.norm(np.cross(axes_sphere, poles), axis=-1)
    return np.arctan2(across, along)


# -------------------------------------------------------- in-plane solve
# _unit_stride_inputs: a transcendental ufunc (arctan2, sin, …) given a strided operand goes
# through numpy's buffered loop, and there an element's last bit depends on where the buffer
# lands in memory: the same call on the same values gave results an ULP apart from one call to
# the next (measured on numpy 1.26 / AVX-512). Column slices of a batch are strided, and a
# one-row slice keeps its parent's stride although numpy calls it contiguous (so
# ``np.ascontiguousarray`` does not copy it): a lone frame's rotation vectors differed in the
# last bit from the same frame's in a batch. Such operands are therefore fresh unit-stride
# copies, which the ufuncs read directly, the same way for every batch size.
@dataclass(frozen=True, eq=False)
class _InPlane:
    """A batch of in-plane poses: the preferred pose with each joint bent about ``n0``.

    Attributes
    ----------
    bends : ndarray, shape (N, n)
        Turn of each joint about ``n0`` from its preferred angle (radians).
    coordinates : ndarray, shape (N, n + 1, 3)
        Joint and tip positions relative to the start joint in the basis
        ``(a0, n0, n0 × a0)`` of the preferred plane.
    tip_turns : ndarray, shape (N,)
        Angle about ``n0`` from ``a0`` to the bent chain's tip.
    status, iterations, objective_increases, sigma_min : ndarray, shape (N,)
        From the in-plane solve; for closed-form frames ``status`` is None
        (judged by the final error alone), one iteration, σ_min NaN.
    """

    bends: np.ndarray
    coordinates: np.ndarray
    tip_turns: np.ndarray
    status: np.ndarray
    iterations: np.ndarray
    objective_increases: np.ndarray
    sigma_min: np.ndarray

    @classmethod
    def closed_form(cls, bends: np.ndarray, coordinates: np.ndarray, tip_turns: np.ndarray) -> "_InPlane":
        n_frames = bends.shape[0]
        return cls(
            bends, coordinates, tip_turns, np.full(n_frames, None, dtype=object), np.ones(n_frames, dtype=int),
            np.zeros(n_frames, dtype=int), np.full(n_frames, np.nan),
        )


def _plane_basis(pref: PreferredPose) -> np.ndarray:
    """Rows ``(3, 3)``: ``a0``, ``n0``, ``n0 × a0`` in the solving frame."""
    return np.stack([pref.a0_world, pref.n0_world, np.cross(pref.n0_world, pref.a0_world)])


def _two_bone_in_plane(pref: PreferredPose, r: np.ndarray) -> _InPlane:
    """Closed-form bends putting the tip at distance ``r`` along ``a0``, bending as the preferred pose."""
    upper, lower = _rotated(_plane_basis(pref), np.diff(pref.positions, axis=0))
    shoulder = np.arctan2(upper[2], upper[0])
    elbow = np.arctan2(upper[0] * lower[2] - upper[2] * lower[0], upper[0] * lower[0] + upper[2] * lower[2])
    lengths = pref.chain.segment_lengths
    planar = np.stack([r, np.zeros_like(r)], -1)
    angles = two_bone_planar(lengths[0], lengths[1], planar).branches[:, 0]  # θ2 ≥ 0 bends as preferred (elbow > 0)
    coordinates = np.zeros((r.size, 3, 3))
    heading = angles[:, 0] + angles[:, 1]
    shoulder_angles = angles[:, 0].copy()  # see _unit_stride_inputs
    coordinates[:, 1, 0] = lengths[0] * np.cos(shoulder_angles)
    coordinates[:, 1, 2] = lengths[0] * np.sin(shoulder_angles)
    coordinates[:, 2, 0] = coordinates[:, 1, 0] + lengths[1] * np.cos(heading)
    coordinates[:, 2, 2] = coordinates[:, 1, 2] + lengths[1] * np.sin(heading)
    # two_bone_planar puts the tip on the heading of (r, 0): along a0, no tip turn.
    return _InPlane.closed_form(angles - np.array([shoulder, elbow]), coordinates, np.zeros_like(r))


def _chain_in_plane(pref: PreferredPose, r: np.ndarray, options: SolveOptions, method: Method) -> _InPlane:
    """Bends of a longer chain putting the tip at distance ``r`` along ``a0`` (or as near as it gets).

    Beyond the in-plane reach the answer is the chain straightened in the plane
    (every bone's in-plane part along ``a0``), in closed form; every other frame
    gets an in-plane solve of the plane chain from the preferred angles (bends 0).
    """
    n_frames, n = r.size, pref.chain.n_joints
    out = _InPlane.closed_form(np.empty((n_frames, n)), np.zeros((n_frames, n + 1, 3)), np.zeros(n_frames))
    straight = r >= pref.in_plane_reach
    out.bends[straight] = -np.concatenate([pref.bone_headings[:1], np.angle(np.exp(1j * np.diff(pref.bone_headings)))])
    out.coordinates[straight, 1:, 0] = np.cumsum(pref.in_plane_lengths)
    out.coordinates[straight, 1:, 1] = np.cumsum(pref.plane_chain.segment_vectors[:, 2])
    rows = np.flatnonzero(~straight)
    if rows.size:
        planar_targets = np.zeros((rows.size, 3))
        planar_targets[:, 0] = r[rows]
        options = replace(options, damping=IN_PLANE_DAMPING * pref.chain.reach)
        inner = solve(pref.plane_chain, planar_targets, method, options, initial=np.zeros((rows.size, n)))
        coordinates = inner.positions[..., [0, 2, 1]]  # to the (a0, n0, n0 × a0) order used here
        out.bends[rows] = inner.q
        out.coordinates[rows] = coordinates
        tips = coordinates[:, -1].T.copy()  # see _unit_stride_inputs
        out.tip_turns[rows] = np.arctan2(tips[2], tips[0])
        out.status[rows] = inner.status
        out.iterations[rows] = inner.iterations
        out.objective_increases[rows] = inner.objective_increases
        out.sigma_min[rows] = inner.sigma_min
    return out


def _placed_pose(pref: PreferredPose, plane: _Plane, bent: _InPlane) -> tuple[np.ndarray, np.ndarray]:
    """Start-joint local rotations ``(N, 3, 3)`` and positions ``(N, n + 1, 3)`` of the HI pose.

    The in-plane pose turned rigidly about the start joint so that its tip
    direction goes onto the EE axis ``a`` and ``n0`` onto the solver normal ``n``:
    the basis ``(a0, n0, n0 × a0)`` turned by ``−tip_turn`` about ``n0`` maps to
    ``(a, n, n × a)``.
    """
    a, nrm = plane.axes, plane.normals
    side = np.cross(nrm, a)
    c, s = np.cos(bent.tip_turns)[:, None], np.sin(bent.tip_turns)[:, None]
    x, h, y = np.moveaxis(bent.coordinates, -1, 0)
    along, across = c * x + s * y, c * y - s * x
    positions = (
        along[..., None] * a[:, None] + h[..., None] * nrm[:, None] + across[..., None] * side[:, None] + pref.start
    )
    # Q0 = G · Rot(n0, bend0) · Q0_pref with Q0_pref = F · (Fᵀ Q0_pref), F = [a0, n0, n0 × a0];
    # the local rotation is Pᵀ Q0 for the start joint's parent frame P (root · rest).
    parent = np.einsum("ij,jk->ik", pref.chain.root_rotation, pref.chain.rest_rotations[0])
    if not np.array_equal(parent, np.eye(3)):
        a, nrm, side = (_rotated(parent.T, vectors) for vectors in (a, nrm, side))
    turn = bent.bends[:, 0] - bent.tip_turns
    c, s = np.cos(turn)[:, None], np.sin(turn)[:, None]
    columns = np.stack([c * a + s * side, nrm, c * side - s * a], -1)
    # einsum, not matmul: see _rotated.
    in_plane_basis = np.einsum("ij,jk->ik", _plane_basis(pref), pref.frames[1])
    return np.einsum("nij,jk->nik", columns, in_plane_basis), positions


def _joint_quaternions(pref: PreferredPose, start_rotations: np.ndarray, bends: np.ndarray) -> np.ndarray:
    """Local rotations ``(N, n, 4)`` ``(w, x, y, z)``, ``w ≥ 0``, of the HI pose.

    Start joint from its local rotation matrices; joint ``j ≥ 1``:
    ``R_j = R_j^pref · Rot(bend_axes[j], bends[j])``.
    """
    n_frames, n = bends.shape
    quats = np.empty((n_frames, n, 4))
    quats[:, 0] = quaternions_from_matrices(start_rotations)
    if n > 1:
        pref_quats = local_quaternions(pref.chain, pref.q[None])[0]
        half = 0.5 * bends[:, 1:]
        bend_quats = np.concatenate([np.cos(half)[..., None], np.sin(half)[..., None] * pref.bend_axes[1:]], -1)
        quats[:, 1:] = canonical_quaternions(quaternion_products(pref_quats[1:], bend_quats))
    return quats


def _joint_variables(pref: PreferredPose, quats: np.ndarray, bends: np.ndarray) -> np.ndarray:
    """Joint variables ``(N, n_dof)``: ball joints from their quaternions, hinge-like joints by adding the bend."""
    chain = pref.chain
    q = np.broadcast_to(pref.q, (quats.shape[0], chain.n_dof)).copy()
    for j, kind in enumerate(chain.kinds):
        start = chain.dof_start[j]
        if kind is JointKind.BALL:
            q[:, start : start + 3] = rotvecs_from_quaternions(quats[:, j])
        else:
            last = start + kind.value - 1
            q[:, last] += np.sign(chain.axes[last] @ pref.bend_axes[j]) * bends[:, j]
    return q


# ---------------------------------------------------------------- solve
@dataclass(frozen=True, eq=False)
class HISolveResult:
    """An HI solve's outcome: the core result plus the swivel-sphere extras, batch axis ``N`` first.

    Attributes
    ----------
    result : SolveResult
        Pose, status, errors (``method`` is ``Method.HI``).
    ee_axes : ndarray, shape (N, 3)
        Unit EE axes (start joint → target) in the solving frame.
    ee_axes_sphere : ndarray, shape (N, 3)
        The same in the sphere's coordinates (where the zero-plane map works).
    zero_plane_normals : ndarray, shape (N, 3)
        Zero-plane normals in the solving frame.
    solver_normals : ndarray, shape (N, 3)
        Solver-plane normals in the solving frame (the zero plane turned by the swivel).
    swivel : ndarray, shape (N,)
        Swivel angle used per frame (radians).
    pole_angles : ndarray, shape (N,)
        Angle between the EE axis and the nearer singular point of the zero-plane map —
        the sphere's poles ``±n0`` for the default map, the pole target's line for the
        pole-object map (radians, ``[0, π/2]``).
    pole_warnings : ndarray of bool, shape (N,)
        ``pole_angles`` below the warning angle: the solver plane may flip here.
    map_singular : ndarray of bool, shape (N,)
        Where the zero-plane map itself says it is singular.
    sphere : SphereFrame
    singular_directions : ndarray, shape (N, 3), or None
        Per frame, the unit direction (sphere coordinates) whose ends are the map's
        singular points; None means the sphere's poles ``±n0``.
    """

    result: SolveResult
    ee_axes: np.ndarray
    ee_axes_sphere: np.ndarray
    zero_plane_normals: np.ndarray
    solver_normals: np.ndarray
    swivel: np.ndarray
    pole_angles: np.ndarray
    pole_warnings: np.ndarray
    map_singular: np.ndarray
    sphere: SphereFrame
    singular_directions: np.ndarray | None = None


def solve_hi(
    chain: Chain,
    targets: np.ndarray,
    preferred: np.ndarray | PreferredPose,
    *,
    swivel: np.ndarray | float = 0.0,
    zero_plane_map: str | ZeroPlaneMapFactory = "DEFAULT",
    poles: np.ndarray | None = None,
    map_data: dict | None = None,
    sphere_rotations: np.ndarray | None = None,
    options: SolveOptions | None = None,
    warning_angle: float = DEFAULT_WARNING_ANGLE,
    in_plane_method: Method | str = Method.DLS,
) -> HISolveResult:
    """Solve a batch of frames with the HI solver.

    Parameters
    ----------
    chain : Chain
        Ball start joint; later joints ball joints or hinges about the preferred plane's normal.
    targets : array_like, shape (N, 3)
        Tip targets in the solving frame (chain units).
    preferred : array_like, shape (n_dof,), or PreferredPose
        The preferred pose (joint variables), or one already checked by :func:`preferred_pose`.
    swivel : float or array_like, shape (N,)
        Swivel angle ψ per frame, radians: the solver plane is the zero plane turned by ψ
        about the EE axis (right-handed).
    zero_plane_map : str or factory
        A name registered with ``register_zero_plane_map`` or a factory ``(a0, n0) -> map``.
    poles : array_like, shape (N, 3) or (3,), optional
        Pole-target positions in the solving frame; passed to the map (as vectors from the
        start joint in sphere coordinates, keyword ``poles``). ``"POLE_OBJECT"`` needs them.
    map_data : dict of arrays, optional
        Further per-frame keywords for a custom map, passed as given.
    sphere_rotations : array_like, shape (N, 3, 3) or (3, 3), optional
        The parent space (see :func:`sphere_rotations_for_parent_space`); default the chain's
        root rotation every frame (``START_JOINT``).
    options : SolveOptions, optional
        Tolerance (status) and, for chains longer than two bones, the in-plane solve's budget
        and step clamp (its damping is ``IN_PLANE_DAMPING`` of the reach, not ``options.damping``).
    warning_angle : float
        Pole distance (radians) under which ``pole_warnings`` is set; default 10°.
    in_plane_method : Method
        Core method of the in-plane solve for longer chains (two bones are closed-form);
        it starts from the preferred angles every frame.
    """
    options = SolveOptions() if options is None else options
    pref = preferred if isinstance(preferred, PreferredPose) else preferred_pose(chain, preferred)
    if pref.chain is not chain:
        raise IKInputError("preferred", "the PreferredPose was made for another chain")
    if not np.isfinite(warning_angle) or warning_angle < 0.0:
        raise IKInputError("warning_angle", f"must be a non-negative angle, got {warning_angle!r}")
    targets = validated_targets(targets)
    in_plane_method = Method(in_plane_method)
    chain = pref.chain
    plane = _solver_planes(pref, targets, swivel, zero_plane_map, poles, map_data, sphere_rotations)

    n_frames = targets.shape[0]
    if chain.n_joints == 2:
        bent = _two_bone_in_plane(pref, plane.r)
    else:
        bent = _chain_in_plane(pref, plane.r, options, in_plane_method)
    start_rotations, positions = _placed_pose(pref, plane, bent)
    quats = _joint_quaternions(pref, start_rotations, bent.bends)
    q = _joint_variables(pref, quats, bent.bends)
    pose = Pose(frames=np.empty((n_frames, 0, 3, 3)), positions=positions)  # only positions are read below
    error = np.linalg.norm(pose.tips - targets, axis=-1)
    lower = pref.lower_bounds(plane.r)
    status = classify(error, error, lower, np.zeros(n_frames, dtype=bool), options.tolerance)
    # The closed forms cannot fail; an in-plane solve can stall or run out of budget, and says so.
    failed = (status != Status.CONVERGED) & (status != Status.UNREACHABLE) & (bent.status != None)  # noqa: E711
    status = np.where(failed, bent.status, status)
    result = SolveResult(
        method=Method.HI,
        q=q,
        rotations=quats,
        positions=pose.positions,
        status=status,
        error=error,
        lower_bound=lower,
        iterations=bent.iterations,
        length_error=bone_length_errors(chain, pose),
        objective_increases=bent.objective_increases,
        sigma_min=bent.sigma_min,
        direction_unique=plane.r > 1e-12 * chain.reach,
    )
    angles = pole_angles(plane.axes_sphere, plane.singular_directions)
    return HISolveResult(
        result=result,
        ee_axes=plane.axes,
        ee_axes_sphere=plane.axes_sphere,
        zero_plane_normals=np.einsum("nij,nj->ni", plane.to_solving, plane.zero_normals_sphere),
        solver_normals=plane.normals,
        swivel=plane.swivel,
        pole_angles=angles,
        pole_warnings=angles < warning_angle,
        map_singular=plane.singular,
        sphere=pref.sphere,
        singular_directions=plane.singular_directions,
    )


def _solve_hi_registered(
    chain: Chain, targets: np.ndarray, q0: np.ndarray, options: SolveOptions, **hi_args: object
) -> SolveResult:
    """``solve(..., Method.HI, initial=preferred, **hi_args)``: the initial pose is the preferred pose.

    The result carries the HI diagnostics in ``result.hi``.
    """
    if np.any(q0 != q0[:1]):
        raise IKInputError("initial", "the HI solver takes one preferred pose for the whole batch (all rows equal)")
    solved = solve_hi(chain, targets, q0[0], options=options, **hi_args)
    return replace(solved.result, hi=solved)


register_solver(Method.HI, _solve_hi_registered)


# ------------------------------------------------------- swivel helpers
def swivel_for_plane(
    chain: Chain,
    targets: np.ndarray,
    preferred: np.ndarray | PreferredPose,
    plane_normals: np.ndarray,
    *,
    zero_plane_map: str | ZeroPlaneMapFactory = "DEFAULT",
    poles: np.ndarray | None = None,
    map_data: dict | None = None,
    sphere_rotations: np.ndarray | None = None,
) -> np.ndarray:
    """Swivel angles ``(N,)`` whose solver plane has the given normals ``(N, 3)`` (solving frame).

    Creating a new chain uses this so the solver plane stays where it is in the
    viewport: pass the current pose's normals (:func:`pose_plane_normals`) and
    the current tip as the target. (Re-assigning the start joint instead keeps ψ.)
    Only the part of each normal ⟂ the EE axis counts.
    """
    pref = preferred if isinstance(preferred, PreferredPose) else preferred_pose(chain, preferred)
    targets = validated_targets(targets)
    normals = np.asarray(plane_normals, dtype=float)
    normals = np.broadcast_to(normals, targets.shape) if normals.ndim == 1 else normals
    if normals.shape != targets.shape or not np.all(np.isfinite(normals)):
        raise IKInputError("plane_normals", f"expected finite normals of shape {targets.shape}")
    plane = _solver_planes(pref, targets, 0.0, zero_plane_map, poles, map_data, sphere_rotations)
    return swivel_angles(plane.axes, plane.normals, normals)


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
    normal = np.cross(u, v)
    length = np.linalg.norm(normal, axis=-1)
    normal = normal / np.maximum(length, 1e-300)[:, None]
    height = _dots(normal, pole)
    foot = pole - height[:, None] * normal  # nearest point of the great circle (for the antipode: −foot)
    distance = np.arctan2(np.abs(height), np.linalg.norm(foot, axis=-1))
    inside = []
    for point in (foot, -foot):
        inside.append((_dots(np.cross(u, point), normal) >= 0.0) & (_dots(np.cross(point, v), normal) >= 0.0))
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
    turns = np.arctan2(np.linalg.norm(np.cross(before, after), axis=-1), _dots(before, after))
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

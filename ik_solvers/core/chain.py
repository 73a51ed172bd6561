"""The kinematic chain model: joints, offsets, rest orientations, limits and weights."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property

import numpy as np

from .errors import IKInputError

# A segment shorter than this fraction of the chain's total length is refused:
# its direction is numerically meaningless and it would turn Jacobian columns
# and FABRIK directions into noise (SPEC §3.1).
MIN_RELATIVE_LENGTH = 1e-9


class JointKind(enum.Enum):
    """Degrees of freedom of a joint; the value is the number of joint variables."""

    HINGE = 1
    """One angle about ``axes[k]`` (radians)."""
    UNIVERSAL = 2
    """Two angles: about the first axis, then about the second (already rotated by the first)."""
    BALL = 3
    """A rotation vector (axis × angle, radians) in the joint's rest frame."""


@dataclass(frozen=True, eq=False)
class Chain:
    """A serial chain of ``n`` joints hanging from a fixed root frame.

    Joint ``i``'s world frame is ``Q_i = Q_{i-1} @ rest_rotations[i] @ R_i(q)``
    with ``Q_{-1} = root_rotation``; its origin is
    ``p_i = p_{i-1} + Q_{i-1} @ offsets[i]`` with ``p_{-1} = root_position``.
    The end effector (tip) is ``p_{n-1} + Q_{n-1} @ tip_offset``.

    Attributes
    ----------
    kinds : tuple of JointKind, length n
        Joint types; the chain has ``n_dof = sum(kind.value)`` variables.
    offsets : ndarray, shape (n, 3)
        Origin of joint ``i`` in joint ``i-1``'s frame (joint 0: in the root
        frame), in chain units (Blender units in the add-on).
    rest_rotations : ndarray, shape (n, 3, 3)
        Rest orientation of joint ``i`` relative to its parent frame.
    axes : ndarray, shape (n_dof, 3)
        Unit axis of each hinge / universal variable, in the joint's rest
        frame. Ball-joint variables use the rest frame's x, y, z (stored here).
    lower, upper : ndarray, shape (n_dof,)
        Limits per variable in radians (``-inf`` / ``inf`` when free). For a
        ball joint they bound the rotation-vector components.
    weights : ndarray, shape (n_dof,)
        Per-variable weight in ``(0, 1]`` (``1 - stiffness`` in Blender terms):
        how readily the solvers move that variable.
    tip_offset : ndarray, shape (3,)
        End effector in the last joint's frame (the last bone's tail).
    root_position : ndarray, shape (3,)
        World position of the root frame.
    root_rotation : ndarray, shape (3, 3)
        World orientation of the root frame (``T_world_root``'s rotation).
    """

    kinds: tuple[JointKind, ...]
    offsets: np.ndarray
    rest_rotations: np.ndarray
    axes: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    weights: np.ndarray
    tip_offset: np.ndarray
    root_position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    root_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))

    def __post_init__(self) -> None:
        kinds = tuple(self.kinds)
        if not kinds:
            raise IKInputError("kinds", "a chain needs at least one joint")
        if not all(isinstance(k, JointKind) for k in kinds):
            raise IKInputError("kinds", "every joint kind must be a JointKind")
        n = len(kinds)
        n_dof = sum(k.value for k in kinds)
        object.__setattr__(self, "kinds", kinds)
        for name, shape in (
            ("offsets", (n, 3)),
            ("rest_rotations", (n, 3, 3)),
            ("axes", (n_dof, 3)),
            ("lower", (n_dof,)),
            ("upper", (n_dof,)),
            ("weights", (n_dof,)),
            ("tip_offset", (3,)),
            ("root_position", (3,)),
            ("root_rotation", (3, 3)),
        ):
            value = np.array(getattr(self, name), dtype=float)
            if value.shape != shape:
                raise IKInputError(name, f"expected shape {shape}, got {value.shape}")
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        for name in ("offsets", "rest_rotations", "axes", "weights", "tip_offset", "root_position", "root_rotation"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise IKInputError(name, "must be finite")
        if np.any(np.isnan(self.lower)) or np.any(np.isnan(self.upper)):
            raise IKInputError("lower", "limits must not be NaN")
        bad = np.flatnonzero(self.lower > self.upper)
        if bad.size:
            raise IKInputError("lower", f"min > max for variable {int(bad[0])}")
        if np.any(self.weights <= 0.0) or np.any(self.weights > 1.0):
            raise IKInputError("weights", "must lie in (0, 1] (stiffness below 1)")
        for name in ("rest_rotations", "root_rotation"):
            r = getattr(self, name)
            if not np.allclose(r @ np.swapaxes(r, -1, -2), np.eye(3), atol=1e-6) or np.any(np.linalg.det(r) < 0):
                raise IKInputError(name, "must be proper rotation matrices")
        if not np.allclose(np.linalg.norm(self.axes, axis=-1), 1.0, atol=1e-9):
            raise IKInputError("axes", "must be unit vectors")
        lengths = self.segment_lengths
        scale = max(float(lengths.sum()), float(np.abs(self.offsets).max(initial=0.0)))
        short = np.flatnonzero(lengths <= MIN_RELATIVE_LENGTH * max(scale, 1e-300))
        if short.size or scale <= 0.0:
            segment = int(short[0]) if short.size else 0
            name = "tip_offset" if segment == n - 1 else "offsets"
            raise IKInputError(name, f"segment {segment} has zero or too small length {lengths[segment]:.3g}")

    @cached_property
    def content_key(self) -> bytes:
        """Every field's value as bytes: chains with equal keys are the same chain (for caches of
        what is derived from a chain, such as the HI preferred pose, across re-reads of one rig)."""
        arrays = (getattr(self, f.name) for f in fields(self) if f.name != "kinds")
        return bytes(k.value for k in self.kinds) + b"".join(a.tobytes() for a in arrays)

    # ----------------------------------------------------------------- sizes
    @property
    def n_joints(self) -> int:
        return len(self.kinds)

    @cached_property
    def n_dof(self) -> int:
        return sum(k.value for k in self.kinds)

    @cached_property
    def segment_lengths(self) -> np.ndarray:
        """Lengths ``(n,)`` from joint ``i`` to joint ``i+1`` (the last one to the tip)."""
        return np.linalg.norm(self.segment_vectors, axis=-1)

    @cached_property
    def segment_vectors(self) -> np.ndarray:
        """Segment vectors ``(n, 3)``: joint ``i`` → joint ``i + 1`` (last: → tip), in joint ``i``'s frame."""
        vectors = np.concatenate([self.offsets[1:], self.tip_offset[None]], 0)
        vectors.setflags(write=False)
        return vectors

    @cached_property
    def reach(self) -> float:
        """Largest distance from joint 0 to the tip: the sum of segment lengths."""
        return float(self.segment_lengths.sum())

    # ------------------------------------------------- variable bookkeeping
    @cached_property
    def dof_joint(self) -> np.ndarray:
        """Joint index ``(n_dof,)`` of each variable."""
        return np.repeat(np.arange(self.n_joints), [k.value for k in self.kinds])

    @cached_property
    def dof_start(self) -> np.ndarray:
        """Index ``(n,)`` of each joint's first variable."""
        return np.concatenate([[0], np.cumsum([k.value for k in self.kinds])[:-1]]).astype(int)

    @cached_property
    def dof_frame_index(self) -> np.ndarray:
        """Frame (``0`` = root, ``i + 1`` = joint ``i``) in which each variable's world axis is fixed."""
        idx = np.empty(self.n_dof, dtype=int)
        for j, (kind, start) in enumerate(zip(self.kinds, self.dof_start)):
            if kind is JointKind.BALL:
                idx[start : start + 3] = j + 1
            else:
                idx[start] = j  # parent frame (rest rotation folded into the vector)
                if kind is JointKind.UNIVERSAL:
                    idx[start + 1] = j + 1  # the second axis is fixed in the joint's own frame
        return idx

    @cached_property
    def dof_frame_vectors(self) -> np.ndarray:
        """Axis ``(n_dof, 3)`` of each variable expressed in its ``dof_frame_index`` frame."""
        vectors = self.axes.copy()
        for j, (kind, start) in enumerate(zip(self.kinds, self.dof_start)):
            if kind is not JointKind.BALL:
                vectors[start] = self.rest_rotations[j] @ self.axes[start]
        return vectors

    @cached_property
    def frame_axis_columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Where every variable's axis is ± a coordinate axis of its frame: (frame, column, sign) per variable.

        Then the world axes are columns of the world frames, read by one gather
        instead of a product (always so for ball joints, and for hinges whose
        axis lies along a bone axis). None when some axis is oblique.
        """
        vectors = self.dof_frame_vectors
        column = np.argmax(np.abs(vectors), axis=1)
        sign = vectors[np.arange(self.n_dof), column]
        exact = np.zeros_like(vectors)
        exact[np.arange(self.n_dof), column] = sign
        if not np.array_equal(exact, vectors) or not np.all(np.abs(sign) == 1.0):
            return None
        return self.dof_frame_index, column, sign

    @cached_property
    def root_weights(self) -> np.ndarray | None:
        """``sqrt(weights) (n_dof,)``, or None when every weight is 1 (nothing to scale)."""
        return None if np.all(self.weights == 1.0) else np.sqrt(self.weights)

    @cached_property
    def ball_joints(self) -> np.ndarray:
        """Indices of the ball joints."""
        return np.flatnonzero([k is JointKind.BALL for k in self.kinds])

    @cached_property
    def dof_stride_joints(self) -> np.ndarray:
        """Per-joint kind code ``(n,)`` (1, 2, 3) as an array, for vectorised dispatch."""
        return np.array([k.value for k in self.kinds])

    # -------------------------------------------------------- constructors
    @classmethod
    def planar(
        cls,
        lengths: Sequence[float] | np.ndarray,
        lower: Sequence[float] | None = None,
        upper: Sequence[float] | None = None,
    ) -> Chain:
        """A chain of hinges about +z in the xy plane; bones along +x; joint 0 at the origin."""
        lengths = np.asarray(lengths, dtype=float)
        return cls.straight(lengths, JointKind.HINGE, lower=lower, upper=upper)

    @classmethod
    def straight(
        cls,
        lengths: Sequence[float] | np.ndarray,
        kinds: JointKind | Sequence[JointKind] = JointKind.BALL,
        *,
        lower: Sequence[float] | None = None,
        upper: Sequence[float] | None = None,
        weights: Sequence[float] | None = None,
        root_position: Sequence[float] = (0.0, 0.0, 0.0),
        root_rotation: np.ndarray | None = None,
    ) -> Chain:
        """A straight chain along +x from bone ``lengths (n,)``.

        Hinges turn about +z; universal joints about +z then +y; ball joints freely.
        """
        lengths = np.asarray(lengths, dtype=float)
        if lengths.ndim != 1 or lengths.size == 0:
            raise IKInputError("lengths", "need a non-empty 1-D sequence of bone lengths")
        if not np.all(np.isfinite(lengths)):
            raise IKInputError("lengths", "must be finite")
        if np.any(lengths <= 0.0):
            raise IKInputError("lengths", "must be positive")
        n = lengths.size
        kinds = (kinds,) * n if isinstance(kinds, JointKind) else tuple(kinds)
        if len(kinds) != n:
            raise IKInputError("kinds", f"expected {n} joint kinds, got {len(kinds)}")
        axes = []
        for kind in kinds:
            axes += {
                JointKind.HINGE: [[0, 0, 1]],
                JointKind.UNIVERSAL: [[0, 0, 1], [0, 1, 0]],
                JointKind.BALL: [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
            }[kind]
        n_dof = len(axes)
        offsets = np.zeros((n, 3))
        offsets[1:, 0] = lengths[:-1]
        return cls(
            kinds=kinds,
            offsets=offsets,
            rest_rotations=np.broadcast_to(np.eye(3), (n, 3, 3)),
            axes=np.array(axes, dtype=float),
            lower=np.full(n_dof, -np.inf) if lower is None else np.asarray(lower),
            upper=np.full(n_dof, np.inf) if upper is None else np.asarray(upper),
            weights=np.ones(n_dof) if weights is None else np.asarray(weights),
            tip_offset=np.array([lengths[-1], 0.0, 0.0]),
            root_position=np.asarray(root_position),
            root_rotation=np.eye(3) if root_rotation is None else root_rotation,
        )

    def zero_pose(self, batch: int = 1) -> np.ndarray:
        """Joint variables ``(batch, n_dof)`` of the rest pose (all zero)."""
        return np.zeros((batch, self.n_dof))

"""Parent space (SPEC §5): which transform the zero-plane sphere rides with, as per-frame rotations."""

from __future__ import annotations

import enum
import math
from typing import Any

import numpy as np

from ..errors import IKInputError
from ..vectors import Rows3, cross3, dot3, matmul, rows3

# Orthonormality slack accepted in caller-supplied sphere rotations (as Chain's rotations).
ROTATION_TOLERANCE = 1e-6


class ParentSpace(enum.Enum):
    """Which transform the zero-plane sphere rides with (SPEC §5); values are the Blender enum ids."""

    START_JOINT = "START_JOINT"
    """The start joint's parent: rotate it and the whole chain turns with it."""
    IK_TARGET = "IK_TARGET"
    """The target's parent: rotate the start joint's parent and the chain holds still in world."""



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
    product = matmul(np.swapaxes(solving, -1, -2), parent)
    return np.array(product.reshape(-1, 3, 3))


def check_rotations(rotations: np.ndarray, n_frames: int) -> np.ndarray:
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


def rotation_rows(rotation: Any) -> Rows3 | None:
    """A (3, 3) rotation as rows of Python floats when :func:`check_rotations` surely accepts it, else None.

    "Surely": within half its tolerance (this sums in another order); None leaves the decision,
    and the error, to ``check_rotations`` (the one-target HI solve then defers to ``solve_hi``).
    """
    m = np.asarray(rotation, dtype=float)
    if m.shape != (3, 3):
        return None
    rows = rows3(m.tolist())
    if not all(map(math.isfinite, (*rows[0], *rows[1], *rows[2]))):
        return None
    if max(abs(dot3(a, b) - (i == j)) for i, a in enumerate(rows) for j, b in enumerate(rows)) > 0.5 * ROTATION_TOLERANCE:
        return None
    return rows if dot3(rows[0], cross3(rows[1], rows[2])) > 0.0 else None

"""The chain's root space in the world: its frame as Blender evaluates it, points mapped into it, its scale.

The root space is the armature space of the chain's start bone's parent (``rig`` module docstring).
Live mode maps every target move through the same root frame, so one frame's inverse is kept
between calls (:class:`KeptResults`), and one point can be mapped on Python floats with the bits
the batch mapping gives (:func:`point_to_root`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .errors import IKSolversError

if TYPE_CHECKING:
    import bpy
    from mathutils import Matrix

    from .rig_chain import RigChain

UNIFORM_SCALE_TOLERANCE = 1e-4
"""Relative spread of the root frame's axis lengths accepted as uniform scale. float32 matrices
carry about 1e-7 relative noise; a deliberate non-uniform scale is far above 1e-4."""


def _matrix(m: Matrix) -> np.ndarray:
    return np.array(m, dtype=float)


def root_matrices_world(obj: bpy.types.Object, rig: RigChain, depsgraph: bpy.types.Depsgraph | None = None,
                        ) -> np.ndarray:
    """World matrix ``(4, 4)`` of the chain's root space as currently evaluated.

    ``obj.matrix_world @ parent_pose_bone.matrix`` (or just ``matrix_world`` without a parent
    bone); with ``depsgraph`` the evaluated copy of ``obj`` is read.
    """
    source = obj.evaluated_get(depsgraph) if depsgraph is not None else obj
    world = _matrix(source.matrix_world)
    if rig.parent_bone is None:
        return world
    assert source.pose is not None  # the chain was read from this armature's pose
    parent = source.pose.bones.get(rig.parent_bone)
    if parent is None:
        raise IKSolversError(f"Bone '{rig.parent_bone}' no longer exists in armature '{obj.name}'.")
    return world @ _matrix(parent.matrix)


def world_to_root(points_world: np.ndarray, root_world: np.ndarray) -> np.ndarray:
    """Points ``(N, 3)`` in world space → root space, given root frames ``(N, 4, 4)`` or ``(4, 4)``.

    The full inverse is used, so a uniformly scaled root maps world distances to armature units.
    """
    points = np.asarray(points_world, dtype=float)
    root_world = np.asarray(root_world, dtype=float)
    if root_world.ndim == 3 and len(root_world) > 1 and np.all(root_world == root_world[0]):
        # One frame for the whole batch (F-curve sampling): inverted once, the same bits per row.
        inverse = np.repeat(np.linalg.inv(root_world[0])[None], len(root_world), axis=0)
    elif root_world.shape[:-2] in ((), (1,)):
        inverse = single_inverse(root_world)
    else:
        inverse = np.linalg.inv(root_world)
    return points_to_root(points, inverse)


def points_to_root(points: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """Points ``(N, 3)`` in world space → root space, given the root frames' inverses ``(N, 4, 4)``.

    Each coordinate is ``((m₀·x + m₁·y) + m₂·z) + t`` in that order, elementwise: the same bits for
    any batch, and as :func:`point_to_root` computes one point on Python floats.
    """
    matrices, offsets = inverse[..., :3, :3], inverse[..., :3, 3]
    x, y, z = points[..., 0], points[..., 1], points[..., 2]
    out = np.empty(np.broadcast_shapes(points.shape, offsets.shape))
    for i in range(3):
        out[..., i] = ((matrices[..., i, 0] * x + matrices[..., i, 1] * y) + matrices[..., i, 2] * z) + offsets[..., i]
    return out


def point_to_root(point: tuple[float, float, float], inverse_rows: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """:func:`points_to_root` of one point (three floats), given the inverse's rows as floats, with its bits."""
    x, y, z = point
    return tuple(((m0 * x + m1 * y) + m2 * z) + t for m0, m1, m2, t in inverse_rows[:3])


class KeptResults:
    """A function of one array, with its results for the last few distinct arguments kept (read-only).

    Live mode maps every target move through the same root frame: inverting or checking it again
    costs more than the rest of preparing the solve. A call that raises keeps nothing.
    """

    def __init__(self, compute: Callable[[np.ndarray], np.ndarray], size: int = 16) -> None:
        self.compute, self.size = compute, size
        self.kept: dict[bytes, np.ndarray] = {}

    def __call__(self, argument: np.ndarray) -> np.ndarray:
        key = repr(argument.shape).encode() + np.ascontiguousarray(argument).tobytes()
        result = self.kept.get(key)
        if result is None:
            result = np.asarray(self.compute(argument))
            result.setflags(write=False)
            if len(self.kept) >= self.size:
                self.kept.clear()
            self.kept[key] = result
        return result


single_inverse = KeptResults(np.linalg.inv)
"""``np.linalg.inv`` of one root frame ``(4, 4)`` or ``(1, 4, 4)``: the same bits, kept."""


def uniform_scale(matrix: np.ndarray) -> float:
    """The uniform scale of a 4×4 (or 3×3) transform; IKSolversError for shear / non-uniform scale."""
    linear = np.asarray(matrix, dtype=float)[:3, :3]
    singular = np.linalg.svd(linear, compute_uv=False)
    if not np.all(np.isfinite(singular)) or singular[-1] <= 0.0 or np.linalg.det(linear) <= 0.0:
        raise IKSolversError("The armature's world transform is degenerate or mirrored.")
    if singular[0] - singular[-1] > UNIFORM_SCALE_TOLERANCE * singular[0]:
        raise IKSolversError("The armature (or its parents) has non-uniform scale; apply the scale first.")
    return float(np.cbrt(np.linalg.det(linear)))

"""Blender's rotation channels as a key reduction reads them (SPEC §9): a bone's channel values → its rotation
matrices, as Blender forms them, and for quaternions their local turns per channel in closed form (the merge's
chain Jacobian, :mod:`.free_segments`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .free_segments import ANALYTIC_TURNS
from .rotations import matrices_from_axis_angles

RotationsOf = Callable[[np.ndarray], np.ndarray]
"""Channel values ``(M, k)`` of one bone → its rotation matrices ``(M, 3, 3)`` as Blender forms them."""


def quaternion_rotations(values: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(M, 3, 3)`` of quaternion channels ``(M, 4)`` (w, x, y, z), normalised as
    Blender does before use; a zero quaternion is the identity."""
    values = np.asarray(values, dtype=float)
    w, x, y, z = values.reshape(-1, 4).T  # (not moveaxis: it costs more than the rest at a few rows)
    squared = w * w + x * x + y * y + z * z
    s = np.divide(2.0, squared, out=np.zeros_like(squared), where=squared > 0.0)  # 2 / |q|²: normalised
    xs, ys, zs = x * s, y * s, z * s
    wx, wy, wz, xx, xy, xz, yy, yz, zz = w * xs, w * ys, w * zs, x * xs, x * ys, x * zs, y * ys, y * zs, z * zs
    return np.stack([1.0 - (yy + zz), xy - wz, xz + wy, xy + wz, 1.0 - (xx + zz), yz - wx,
                     xz - wy, yz + wx, 1.0 - (xx + yy)], axis=-1).reshape(values.shape[:-1] + (3, 3))


def quaternion_turns(values: np.ndarray) -> np.ndarray:
    """Local turns ``(M, 4, 3)`` of quaternion channels ``(M, 4)`` (w, x, y, z; normalised as
    Blender does) per unit of each channel: ``2 vec(q* ⊗ e_c) / |q|²``."""
    w, x, y, z = np.moveaxis(values, -1, 0)
    scale = 2.0 / np.maximum(w * w + x * x + y * y + z * z, 1e-300)
    rows = [(-x, -y, -z), (w, -z, y), (z, w, -x), (-y, x, w)]
    return np.stack([np.stack(row, axis=-1) for row in rows], axis=1) * scale[:, None, None]


ANALYTIC_TURNS[quaternion_rotations] = quaternion_turns  # the merge's chain Jacobian in closed form


def axis_angle_rotations(values: np.ndarray) -> np.ndarray:
    """Rotation matrices ``(M, 3, 3)`` of axis-angle channels ``(M, 4)`` (angle, x, y, z); the axis
    is normalised, a zero axis is the identity (as Blender)."""
    values = np.asarray(values, dtype=float)
    norms = np.linalg.norm(values[:, 1:], axis=-1, keepdims=True)
    axes = np.where(norms > 0.0, values[:, 1:] / np.where(norms > 0.0, norms, 1.0), np.array([1.0, 0.0, 0.0]))
    return matrices_from_axis_angles(axes, np.where(norms[:, 0] > 0.0, values[:, 0], 0.0))

"""The goals' residual rows for the trunk solve: a limb's reach (an inequality), a trunk chain's tip (SPEC §8)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..rotations import rotvecs_from_matrices
from ..vectors import matmul, matvec, norm, tmatvec
from .forward import BodyPose, VariableColumns


@dataclass(frozen=True, eq=False)
class Rows:
    """A goal's residual rows in one pose: ``residuals (n, r)`` and Jacobian ``(n, r, m)``.

    Inequality rows (a limb's reach) also carry what a step needs to see whether it would cross the
    edge from inside: ``edge_jacobian (n, r, m)`` (the row whether met or not), ``edge_residual (n, r)``
    (the residual that puts the row exactly on its nearer edge) and ``edge_sign (n, r)`` (+1 outer edge,
    −1 inner): a step ``dx`` crosses where ``sign · (J dx) < sign · residual``.
    """

    residuals: np.ndarray
    jacobian: np.ndarray
    edge_jacobian: np.ndarray | None = None
    edge_residual: np.ndarray | None = None
    edge_sign: np.ndarray | None = None


RowsFunction = Callable[[BodyPose, VariableColumns, np.ndarray], Rows]
"""``rows(pose, columns, frames)``: a goal's rows at the pose of the batch rows ``frames (n,)``."""


def limb_reach_rows(start: Callable[[BodyPose], np.ndarray], heads: np.ndarray, inner: float, total: float, mask: np.ndarray,
                    weight: float) -> RowsFunction:
    """A limb's reach row: its goal's head ``heads (N, 3)`` (world) against the distances ``[inner, total]``
    the HI solve reaches from the limb's start joint (``start(pose) -> (n, 3)``, world), moved by the
    variables where ``mask (m,)`` is set."""

    def rows(pose: BodyPose, columns: VariableColumns, frames: np.ndarray) -> Rows:
        s = start(pose)
        d = heads[frames] - s
        r = norm(d)
        outside = r - np.clip(r, inner, total)
        direction = d / np.maximum(r, 1e-300)[:, None]
        jacobian = tmatvec(columns.position_rows(s, mask), direction)
        on = (outside != 0.0)[:, None]
        edge = np.where(r > 0.5 * (inner + total), total, inner)
        return Rows((weight * outside)[:, None], np.where(on, weight * jacobian, 0.0)[:, None, :],
                    (weight * jacobian)[:, None, :], (weight * (r - edge))[:, None],
                    np.where(edge == total, 1.0, -1.0)[:, None])

    return rows


def tip_goal_rows(tip: int, tail: np.ndarray, positions: np.ndarray, rotations: np.ndarray | None, length: float,
                  mask: np.ndarray, weight: float) -> RowsFunction:
    """A trunk chain's rows: the tail ``tail (3,)`` of bone ``tip`` toward ``positions (N, 3)`` and, with
    ``rotations (N, 3, 3)``, its frame toward them (angles × ``length``, chain units)."""
    def rows(pose: BodyPose, columns: VariableColumns, frames: np.ndarray) -> Rows:
        frame = np.ascontiguousarray(pose.frames[:, tip])
        point = pose.heads[:, tip] + matvec(frame, tail)
        residuals = [positions[frames] - point]
        jacobians = [columns.position_rows(point, mask)]
        if rotations is not None:
            turn = rotvecs_from_matrices(matmul(rotations[frames], np.swapaxes(frame, 1, 2)))
            residuals.append(length * turn)
            jacobians.append(length * columns.angle_rows(mask))
        return Rows(weight * np.concatenate(residuals, 1), weight * np.concatenate(jacobians, 1))

    return rows

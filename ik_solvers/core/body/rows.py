"""The goals' residual rows for the trunk solve: a limb's reach (an inequality), a trunk chain's tip (SPEC §8).

Every limb's reach rows are evaluated together, once a step for all levels (:class:`LimbReach`: one
set of array operations, whatever the number of limbs; live mode solves one frame, where a step's
cost is its numpy calls), each trunk chain on its own, and each level's rows stacked in its goal order
(:class:`LevelRows`, :class:`GoalRows`). Each row's values are the same elementwise operations, in the
same order, as one goal alone would take: the bits do not depend on which goals share the arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np

from ..rotations import rotvecs_from_matrices
from ..vectors import cross, dot, matmul, matvec, norm
from .forward import BodyPose, VariableColumns


@dataclass(frozen=True, eq=False)
class Rows:
    """A goal's residual rows in one pose: ``residuals (n, r)`` and Jacobian ``(n, r, m)``."""

    residuals: np.ndarray
    jacobian: np.ndarray


@dataclass(frozen=True, eq=False)
class LevelValues:
    """A level's stacked rows in one pose, goals in order.

    Inequality rows (the limbs' reach, at the row positions ``edge_rows (E,)``) also carry what a step
    needs to see whether it would cross the edge from inside: ``edge_jacobian (n, E, m)`` (the row
    whether met or not), ``edge_residual (n, E)`` (the residual that puts the row exactly on its
    nearer edge) and ``edge_sign (n, E)`` (+1 outer edge, −1 inner): a step ``dx`` crosses where
    ``sign · (J dx) < sign · residual``.
    """

    residuals: np.ndarray
    jacobian: np.ndarray
    edge_rows: np.ndarray
    edge_jacobian: np.ndarray
    edge_residual: np.ndarray
    edge_sign: np.ndarray

    def released(self) -> LevelValues:
        """The rows with every reach row that lies outside its edge released (zeros), for a pulled step.

        A reach is an inequality: the levels below and the pull may bring the limb back inside by themselves
        (a crouch lowers the hips, which brings a stepping foot back within its leg's reach), and the trunk's
        step (``trunk._guarded``) makes the row an equality on its edge again where the step leaves it
        outside. Held on its edge from the start, a foot just beyond its leg at the reference kept the crouch
        from lowering the hips and turned the whole body another way, 15-20× the goals' step from the
        neighbouring frames (``test_continuity_on_a_step_while_crouching``). The plain steps keep the rows: a
        limb held at its edge by a goal out of reach settles on it (released there too, the look path's head
        ended 14.5 mm off instead of 9.5)."""
        rows = self.edge_rows
        if not rows.size:
            return self
        outside = self.residuals[:, rows] != 0.0
        if not outside.any():
            return self
        residuals, jacobian = self.residuals.copy(), self.jacobian.copy()
        residuals[:, rows] = np.where(outside, 0.0, residuals[:, rows])
        jacobian[:, rows] = np.where(outside[:, :, None], 0.0, jacobian[:, rows])
        return replace(self, residuals=residuals, jacobian=jacobian)


# Up to this many Jacobian entries, LimbReach forms every limb's rows on every variable at once (fewer calls;
# above, each group of limbs on its own variables costs less: a leg moves with the hips' six, not the 24).
_ONE_PASS = 1024


def _reach_rows(columns: VariableColumns, starts: np.ndarray, directions: np.ndarray,
                variables: np.ndarray | slice) -> np.ndarray:
    """How far each of ``starts (n, L, 3)`` moves along its ``directions (n, L, 3)`` per unit of each of the
    ``variables`` ``(n, L, c)``: ``(a × (s − pivot) + move) · direction``, as the limbs' rows always were."""
    lever = starts[:, :, None, :] - columns.pivots[:, None, variables, :]
    moved = cross(columns.axes[:, None, variables], lever) + columns.moves[:, None, variables]
    return dot(moved, directions[:, :, None, :])


@dataclass(frozen=True, eq=False)
class LimbReach:
    """The reach rows of ``L`` limbs: each limb's goal head ``heads (N, L, 3)`` (world) against the
    distances ``[inner, total] (L,)`` its HI solve reaches from its start joint, ``offsets (L, 3)`` in
    the frame of bone ``parents (L,)`` (-1: the body's root frame), moved by the variables where
    ``masks (L, m)`` is set; ``weights (L,)``."""

    parents: np.ndarray
    offsets: np.ndarray
    heads: np.ndarray
    inner: np.ndarray
    total: np.ndarray
    masks: np.ndarray
    weights: np.ndarray
    root_position: np.ndarray
    root_rotation: np.ndarray

    @cached_property
    def _hanging(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The limbs hung from a bone, those bones and the limbs' offsets; the limbs hung from the root
        frame."""
        hanging = np.flatnonzero(self.parents >= 0)
        return hanging, self.parents[hanging], self.offsets[hanging], np.flatnonzero(self.parents < 0)

    @cached_property
    def _groups(self) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
        """The limbs grouped by the variables that move them: each group's limbs ``(g,)``, those variables
        ``(c,)`` and the limbs' weights ``(g, 1)`` (rows are formed on those columns alone: a leg moves with
        the hips' six variables, not the spine's)."""
        groups = []
        for mask in np.unique(self.masks != 0.0, axis=0):
            limbs = np.flatnonzero(np.all((self.masks != 0.0) == mask, axis=1))
            groups.append((limbs, np.flatnonzero(mask), self.weights[limbs][:, None]))
        return tuple(groups)

    def starts(self, pose: BodyPose) -> np.ndarray:
        """The limbs' start joints ``(n, L, 3)`` (world)."""
        hanging, parents, offsets, fixed = self._hanging
        if fixed.size == 0:  # every limb hangs from a bone (a body's limbs do)
            return pose.heads[:, parents] + matvec(pose.frames[:, parents], offsets)
        out = np.empty((pose.heads.shape[0], self.parents.size, 3))
        if hanging.size:
            out[:, hanging] = pose.heads[:, parents] + matvec(pose.frames[:, parents], offsets)
        for j in fixed:
            out[:, j] = self.root_position + self.root_rotation @ self.offsets[j]
        return out

    def values(self, pose: BodyPose, columns: VariableColumns, frames: np.ndarray) -> tuple[np.ndarray, ...]:
        """Residuals, Jacobians and edges ``(n, L)``, ``(n, L, m)``, ``(n, L, m)``, ``(n, L)``, ``(n, L)``."""
        s = self.starts(pose)
        d = self.heads[frames] - s
        r = norm(d)
        outside = r - np.clip(r, self.inner, self.total)
        direction = d / np.maximum(r, 1e-300)[..., None]
        # Column k of limb j: a_k × (s_j − pivot_k) + move_k, masked; dotted with its direction.
        weights = self.weights
        if s.shape[0] * self.masks.size <= _ONE_PASS:  # a few frames: every limb and variable at once (fewer calls)
            full = weights[:, None] * _reach_rows(columns, s, direction, slice(None)) * self.masks
        else:  # each group of limbs on the variables that move it alone (the masked-out entries are zeros)
            full = np.zeros((s.shape[0],) + self.masks.shape)
            for limbs, variables, limb_weights in self._groups:
                if variables.size:
                    full[:, limbs[:, None], variables] = limb_weights * _reach_rows(
                        columns, s[:, limbs], direction[:, limbs], variables)
        edge = np.where(r > 0.5 * (self.inner + self.total), self.total, self.inner)
        return (weights * outside, np.where((outside != 0.0)[..., None], full, 0.0), full, weights * (r - edge),
                np.where(edge == self.total, 1.0, -1.0))


@dataclass(frozen=True, eq=False)
class LevelRows:
    """One priority level: its goals in order, a limb as its index in the problem's :class:`LimbReach`,
    a trunk chain as its :class:`TipGoalRows`."""

    slots: tuple[int | TipGoalRows, ...]

    def __len__(self) -> int:
        return len(self.slots)

    @property
    def row_counts(self) -> tuple[int, ...]:
        """Rows per goal."""
        return tuple(1 if isinstance(slot, int) else slot.size for slot in self.slots)

    @cached_property
    def limb_indices(self) -> np.ndarray:
        """The level's limbs (indices in the problem's :class:`LimbReach`), in order."""
        return np.array([slot for slot in self.slots if isinstance(slot, int)], dtype=int)

    @cached_property
    def _limb_take(self) -> np.ndarray | slice:
        """:attr:`limb_indices` as a slice where they run on (a view, not a gathered copy)."""
        order = self.limb_indices
        if order.size and np.array_equal(order, np.arange(order[0], order[0] + order.size)):
            return slice(int(order[0]), int(order[0]) + order.size)
        return order

    @cached_property
    def edge_rows(self) -> np.ndarray:
        """The row positions of the level's limbs (its inequality rows)."""
        return np.cumsum((0,) + self.row_counts[:-1])[[isinstance(slot, int) for slot in self.slots]].astype(int)

    def values(self, limb: tuple[np.ndarray, ...] | None, pose: BodyPose, columns: VariableColumns,
               frames: np.ndarray) -> LevelValues:
        """The level's rows, given every limb's :meth:`LimbReach.values` ``limb``."""
        order = self._limb_take
        if self.limb_indices.size == len(self.slots):  # limbs alone: one view or gather each
            assert limb is not None
            return LevelValues(limb[0][:, order], limb[1][:, order], self.edge_rows, limb[2][:, order],
                               limb[3][:, order], limb[4][:, order])
        residuals: list[np.ndarray] = []
        jacobians: list[np.ndarray] = []
        for slot in self.slots:
            if isinstance(slot, int):
                assert limb is not None
                residuals.append(limb[0][:, slot:slot + 1])
                jacobians.append(limb[1][:, slot:slot + 1])
            else:
                values = slot(pose, columns, frames)
                residuals.append(values.residuals)
                jacobians.append(values.jacobian)
        if len(residuals) == 1:
            stacked_residuals, stacked_jacobian = residuals[0], jacobians[0]
        else:
            stacked_residuals, stacked_jacobian = np.concatenate(residuals, 1), np.concatenate(jacobians, 1)
        if not self.limb_indices.size:
            n, m = stacked_jacobian.shape[0], stacked_jacobian.shape[2]
            return LevelValues(stacked_residuals, stacked_jacobian, self.edge_rows, np.zeros((n, 0, m)),
                               np.zeros((n, 0)), np.zeros((n, 0)))
        assert limb is not None
        return LevelValues(stacked_residuals, stacked_jacobian, self.edge_rows, limb[2][:, order],
                           limb[3][:, order], limb[4][:, order])


@dataclass(frozen=True, eq=False)
class GoalRows:
    """Every goal's rows by priority level, highest first; every limb's reach in one :class:`LimbReach`."""

    levels: tuple[LevelRows, ...]
    limbs: LimbReach | None

    def __call__(self, pose: BodyPose, columns: VariableColumns, frames: np.ndarray,
                 asked: list[bool] | None = None) -> list[LevelValues]:
        """Each level's rows at the pose of the batch rows ``frames (n,)`` (only the levels ``asked``)."""
        limb = None if self.limbs is None else self.limbs.values(pose, columns, frames)
        return [level.values(limb, pose, columns, frames) for k, level in enumerate(self.levels)
                if asked is None or asked[k]]


@dataclass(frozen=True, eq=False)
class TipGoalRows:
    """A trunk chain's rows: the tail ``tail (3,)`` of bone ``tip`` toward ``positions (N, 3)`` and, with
    ``rotations (N, 3, 3)``, its frame toward them (angles × ``length``, chain units)."""

    tip: int
    tail: np.ndarray
    positions: np.ndarray
    rotations: np.ndarray | None
    length: float
    mask: np.ndarray
    weight: float

    @property
    def size(self) -> int:
        """Rows: 3, and 3 more with rotations."""
        return 3 if self.rotations is None else 6

    def __call__(self, pose: BodyPose, columns: VariableColumns, frames: np.ndarray) -> Rows:
        frame = np.ascontiguousarray(pose.frames[:, self.tip])
        point = pose.heads[:, self.tip] + matvec(frame, self.tail)
        residuals = [self.positions[frames] - point]
        jacobians = [columns.position_rows(point, self.mask)]
        if self.rotations is not None:
            turn = rotvecs_from_matrices(matmul(self.rotations[frames], np.swapaxes(frame, 1, 2)))
            residuals.append(self.length * turn)
            jacobians.append(self.length * columns.angle_rows(self.mask))
        if len(residuals) == 1:  # position alone: the arrays as they are (no copy)
            residual, jacobian = residuals[0], jacobians[0]
        else:
            residual, jacobian = np.concatenate(residuals, 1), np.concatenate(jacobians, 1)
        if self.weight == 1.0:  # x · 1 is x
            return Rows(residual, jacobian)
        return Rows(self.weight * residual, self.weight * jacobian)

"""The body solve's entry: trunk by prioritised Gauss-Newton, limbs by HI, statuses and bounds per goal (SPEC §8)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import IKInputError
from ..hi.orientation import solve_hi_oriented, without_last_joint
from ..hi.solve import HISolveResult, solve_hi
from ..hi.sphere import preferred_pose
from ..kinematics import local_quaternions
from ..result import SolveOptions
from ..solve import checked_rotations, orientation_errors, validated_targets
from ..vectors import matmul, matvec, norm, tmatvec
from .bounds import goal_bounds
from .forward import BodyPose, body_pose, body_variables, variable_chain, variable_columns
from .model import Body, BodyChain, ChainLayout, GoalStatus, lay_out
from .rows import GoalRows, LevelRows, LimbReach, TipGoalRows
from .staged import STAGES, retry_in_stages
from .trunk import PULL_ITERATIONS, TrunkProblem, solve_trunk

DEFAULT_TOLERANCE = 1e-6
"""Position tolerance (chain units) for "reached": 1 µm on a metre-scale rig."""
DEFAULT_ANGLE_TOLERANCE = 1e-6
"""Orientation tolerance (radians) for "reached"."""


@dataclass(frozen=True, eq=False)
class GoalResult:
    """One chain's goal after a body solve, per frame.

    Attributes
    ----------
    name : str
    status : ndarray of GoalStatus, shape (N,)
    error : ndarray, shape (N,)
        Tip-to-goal distance (chain units).
    orientation_error : ndarray, shape (N,), or None
        Angle (radians) between the last bone's frame and the wanted one (``use_rotation`` goals).
    bound : ndarray, shape (N,)
        A lower bound on ``error`` (chain units): no pose of the body meeting the higher-priority goals
        reached this frame brings the tip nearer (triangle inequalities along the bones, from the fixed
        root or from those goals). ``OUT_OF_REACH`` where the error is at it, ``LIMITED`` above it.
    limb : bool
        Solved by HI (nothing hangs below the chain); False: a trunk chain.
    hi : HISolveResult or None
        The limb's HI diagnostics (pole warnings, solver planes; in its start bone's parent frame).
    """

    name: str
    status: np.ndarray
    error: np.ndarray
    orientation_error: np.ndarray | None
    bound: np.ndarray
    limb: bool
    hi: HISolveResult | None

    def reached(self) -> np.ndarray:
        """True ``(N,)`` where the goal was reached."""
        return self.status == GoalStatus.REACHED

    def within(self, position: float, angle: float) -> np.ndarray:
        """True ``(N,)`` where the error is at most ``position`` (chain units) and, for an orientation
        goal, the orientation error at most ``angle`` (radians)."""
        ok = self.error <= position
        return ok if self.orientation_error is None else ok & (self.orientation_error <= angle)


@dataclass(frozen=True, eq=False)
class BodyResult:
    """A body solve's outcome, batch axis ``N`` first.

    Attributes
    ----------
    q : ndarray, shape (N, n_dof)
        Every bone's joint variables (radians; ball joints as rotation vectors).
    rotations : ndarray, shape (N, B, 4)
        Each bone's rotation relative to its rest orientation, quaternions ``(w, x, y, z)``
        (Blender's pose-bone ``rotation_quaternion``); the body root's is its solved rotation.
    root_location : ndarray, shape (N, 3)
        The body root's location in its rest frame (Blender's pose-bone ``location``); zero without a root.
    pose : BodyPose
        World frames and heads of every bone.
    goals : tuple of GoalResult
        One per chain, in the order given.
    trunk_steps : ndarray of int, shape (N,)
        Gauss-Newton steps the trunk took (0: nothing to move).
    """

    q: np.ndarray
    rotations: np.ndarray
    root_location: np.ndarray
    pose: BodyPose
    goals: tuple[GoalResult, ...]
    trunk_steps: np.ndarray

    def all_within(self, position: float, angle: float) -> np.ndarray:
        """True ``(N,)`` where every goal is :meth:`GoalResult.within` the tolerances."""
        ok = np.ones(self.q.shape[0], dtype=bool)
        for goal in self.goals:
            ok &= goal.within(position, angle)
        return ok

    def goal(self, name: str) -> GoalResult:
        """The goal of the chain called ``name``."""
        for goal in self.goals:
            if goal.name == name:
                return goal
        raise KeyError(name)


def solve_body(
    body: Body,
    chains: tuple[BodyChain, ...] | list[BodyChain],
    *,
    body_root: str | int | None = None,
    reference: np.ndarray | None = None,
    reference_root_location: np.ndarray | None = None,
    root_location_weight: float = 1.0,
    pull_steps: int = PULL_ITERATIONS,
    reach_margin: float = 0.0,
    tolerance: float = DEFAULT_TOLERANCE,
    angle_tolerance: float = DEFAULT_ANGLE_TOLERANCE,
    retry_stages: int = STAGES,
) -> BodyResult:
    """Pose a body so its chains' goals are met by priority, every frame from the reference pose alone.

    Parameters
    ----------
    body : Body
    chains : sequence of BodyChain
        Chains sharing no bone; each chain's goal ``positions (N, 3)`` fixes the batch size N.
    body_root : str or int, optional
        A ball-joint bone whose location and rotation the solve may move (Rigify's hips ``spine``); it
        belongs to no chain. None: the tree's roots stay where the reference puts them.
    reference : ndarray, shape (n_dof,) or (N, n_dof), optional
        The pose every frame starts from and is pulled toward where the goals leave freedom; bones in
        no chain keep it (fixed links such as a shoulder). Default: the rest pose (all zero).
    reference_root_location : ndarray, shape (3,) or (N, 3), optional
        The body root's reference location (its rest frame); default zero.
    root_location_weight : float
        In ``(0, 1]``: how readily the root moves, against the joints' weights (``1 − stiffness``).
    pull_steps : int
        Trunk steps that also pull toward the reference in what the goals leave free, before the plain
        minimum-norm steps: toward the pose nearest the reference (not necessarily reached in these steps);
        0 skips it (where the goals leave freedom the result then depends on the steps' path: pops).
    reach_margin : float
        In ``[0, 0.5)``: the fraction of a limb's reach the trunk keeps it short of when it carries the limb's
        goal (0: the limb straight; 0.01: a knee or elbow a little bent); HI still reaches to its full length.
    tolerance, angle_tolerance : float
        What counts as reached (chain units, radians).
    retry_stages : int
        Frames left with a goal unmet are solved again in this many stages (:mod:`.staged`; 1: not)."""
    chains = tuple(chains)
    if not chains:
        raise IKInputError("chains", "a body solve needs at least one chain with a goal")
    root = None if body_root is None else body.bone_index(body_root)
    if root is not None and body.kinds[root].value != 3:
        raise IKInputError("body_root", f"the body root {body.names[root]!r} must turn freely (a ball joint)")
    for name, least, count in (("pull_steps", 0, pull_steps), ("retry_stages", 1, retry_stages)):
        if not isinstance(count, (int, np.integer)) or count < least:
            raise IKInputError(name, f"must be an integer of at least {least}")
    if not 0.0 < root_location_weight <= 1.0:
        raise IKInputError("root_location_weight", "must lie in (0, 1]")
    if not 0.0 <= reach_margin < 0.5:
        raise IKInputError("reach_margin", "must lie in [0, 0.5)")
    for name, value in (("tolerance", tolerance), ("angle_tolerance", angle_tolerance)):
        if not np.isfinite(value) or value <= 0.0:
            raise IKInputError(name, f"must be positive and finite, got {value!r}")
    goals = [_checked_goal(c) for c in chains]
    n = goals[0][0].shape[0]
    if any(g[0].shape[0] != n for g in goals):
        raise IKInputError("positions", "every goal needs the same number of frames")
    layouts = lay_out(body, chains, root)
    q_ref = _per_frame(reference, (body.n_dof,), n, "reference")
    loc_ref = _per_frame(reference_root_location, (3,), n, "reference_root_location")
    variables = body_variables(body)
    rest = body_pose(body, variables, np.zeros((1, body.n_dof)))
    points = np.concatenate([rest.heads[0], rest.tails(body, list(range(body.n_bones)))[0]])
    scale = float(norm(points.max(axis=0) - points.min(axis=0)))
    limbs = {lay.index: _limb_setup(lay, goals[lay.index], reference, reach_margin) for lay in layouts if lay.limb}

    trunk_bones = sorted(([root] if root is not None else []) + [b for lay in layouts if not lay.limb for b in lay.bones])
    dofs = body.dofs(trunk_bones)
    t = 3 if root is not None else 0
    q = q_ref.copy()
    root_location = loc_ref.copy() if root is not None else np.zeros((n, 3))
    steps = np.zeros(n, dtype=int)
    if dofs.size:
        problem = _trunk_problem(body, layouts, goals, limbs, root, dofs, q_ref, scale, root_location_weight)
        x_ref = np.concatenate([loc_ref[:, :t], q_ref[:, dofs]], 1)
        x, steps = solve_trunk(problem, x_ref, pull_steps)

        def problem_for(rows: np.ndarray, staged: list[Goal]) -> TrunkProblem:
            staged_limbs = {i: _limb_setup(layouts[i], staged[i], reference, reach_margin) for i in limbs}
            return _trunk_problem(body, layouts, staged, staged_limbs, root, dofs, q_ref[rows], scale, root_location_weight)
        x, steps = retry_in_stages(problem, x, x_ref, steps, body, lambda rows: body_pose(
            body, variables, q_ref[rows], root, loc_ref[rows] if t else None), [lay.bones[-1] for lay in layouts], goals,
            problem_for, pull_steps, retry_stages)
        q[:, dofs] = x[:, t:]
        root_location[:, :t] = x[:, :t]
    pose = body_pose(body, variables, q, root, root_location)
    his: dict[int, HISolveResult] = {}
    for index, setup in limbs.items():
        lay = layouts[index]
        q[:, lay.dofs], his[index] = _solve_limb(body, pose, lay, goals[index], setup, tolerance)
    pose = body_pose(body, variables, q, root, root_location)
    results = _goal_results(body, pose, layouts, goals, his, root, tolerance, angle_tolerance, scale)
    return BodyResult(q=q, rotations=local_quaternions(variables, q), root_location=root_location, pose=pose,
                      goals=results, trunk_steps=steps)


Goal = tuple[np.ndarray, np.ndarray | None, float, int]
_STATUSES = np.array([GoalStatus.REACHED, GoalStatus.LIMITED, GoalStatus.OUT_OF_REACH], dtype=object)


def _checked_goal(chain: BodyChain) -> Goal:
    goal = chain.goal
    positions = validated_targets(goal.positions)
    rotations = None if goal.rotations is None else checked_rotations(goal.rotations, positions.shape[0])
    if not 0.0 <= goal.weight <= 1.0:
        raise IKInputError("weight", f"chain {chain.name!r}: a goal's weight must lie in [0, 1]")
    if not isinstance(goal.priority, (int, np.integer)):
        raise IKInputError("priority", f"chain {chain.name!r}: a goal's priority must be an integer")
    return positions, rotations, float(goal.weight), int(goal.priority)


def _per_frame(value: np.ndarray | None, shape: tuple[int, ...], n: int, name: str) -> np.ndarray:
    if value is None:
        return np.zeros((n,) + shape)
    value = np.asarray(value, dtype=float)
    if value.shape not in (shape, (n,) + shape) or not np.all(np.isfinite(value)):
        raise IKInputError(name, f"expected finite values of shape {shape} or {(n,) + shape}, got {value.shape}")
    return np.broadcast_to(value, (n,) + shape).copy()


@dataclass(frozen=True, eq=False)
class _Limb:
    preferred: np.ndarray
    inner: float
    total: float
    heads: np.ndarray  # (N, 3) world: where the HI part's tip must be (the goal, or the last bone's head)


def _limb_setup(lay: ChainLayout, goal: Goal, reference: np.ndarray | None, margin: float) -> _Limb:
    """The limb's preferred pose and the distances ``[inner, total]`` from its start joint the trunk keeps
    its goal within: HI's reach, less ``margin`` of it at the far end."""
    assert lay.core is not None
    chain = lay.chain
    if chain.preferred is not None:
        preferred = np.asarray(chain.preferred, dtype=float)
    elif reference is None or np.ndim(reference) == 1:
        preferred = np.zeros(lay.dofs.size) if reference is None else np.asarray(reference, float)[lay.dofs]
    else:
        raise IKInputError("preferred", f"chain {chain.name!r}: give a preferred pose when the reference "
                           "changes per frame (the HI limb needs one for every frame)")
    positions, rotations, _, _ = goal
    core, heads = lay.core, positions
    if rotations is not None:
        core = without_last_joint(lay.core)
        heads = positions - matvec(rotations, lay.core.tip_offset)
        preferred_head = preferred[: core.n_dof]
    else:
        preferred_head = preferred
    pref = preferred_pose(core, preferred_head)
    inner = float(pref.lower_bounds(np.zeros(1))[0])  # max(0, −ΣL, inner): the nearest distance reached
    total = pref.in_plane_reach
    return _Limb(preferred, inner, max(inner, total - margin * total), heads)


def _mask(body: Body, moved: set[int], dofs: np.ndarray, root: int | None) -> np.ndarray:
    """Which trunk variables move a point hanging from the bones ``moved``."""
    bone_of = np.searchsorted(body.dof_start, dofs, side="right") - 1
    rotational = np.array([b in moved for b in bone_of], dtype=float)
    if root is None:
        return rotational
    return np.concatenate([np.full(3, float(root in moved)), rotational])


def _trunk_problem(body: Body, layouts: tuple[ChainLayout, ...], goals: list[Goal], limbs: dict[int, _Limb],
                   root: int | None, dofs: np.ndarray, q_ref: np.ndarray, scale: float,
                   root_location_weight: float) -> TrunkProblem:
    """The trunk solve on the bones it moves or reads alone (the limbs' parents and the trunk chains, with
    their ancestors), renumbered as a smaller body."""
    reads = [body.parents[lay.bones[0]] for lay in layouts if lay.limb] + [lay.bones[-1] for lay in layouts if not lay.limb]
    needed = sorted({a for bone in reads + ([root] if root is not None else []) if bone >= 0 for a in body.ancestors(bone)})
    sub = body.restricted(needed)
    index = {b: i for i, b in enumerate(needed)}
    sub_root = None if root is None else index[root]
    bone_of = np.searchsorted(body.dof_start, dofs, side="right") - 1
    trunk_bones = sorted(set(bone_of.tolist()))
    sub_dofs = sub.dofs([index[b] for b in trunk_bones])
    by_priority: dict[int, list] = {}
    for lay in layouts:
        positions, rotations, weight, priority = goals[lay.index]
        if weight == 0.0:
            continue
        if lay.limb:
            limb, parent = limbs[lay.index], body.parents[lay.bones[0]]
            mask = _mask(sub, set(sub.ancestors(index[parent])) if parent >= 0 else set(), sub_dofs, sub_root)
            by_priority.setdefault(priority, []).append(("limb", (index.get(parent, -1), body.offsets[lay.bones[0]],
                                                                  limb, mask, weight)))
        else:
            tip = lay.bones[-1]
            mask = _mask(sub, set(sub.ancestors(index[tip])), sub_dofs, sub_root)
            length = float(norm(body.tails[tip]) + sum(norm(body.offsets[b]) for b in lay.bones[1:]))
            by_priority.setdefault(priority, []).append(
                ("tip", TipGoalRows(index[tip], body.tails[tip], positions, rotations, length, mask, weight)))
    rows = _goal_rows(sub, [by_priority[p] for p in sorted(by_priority, reverse=True)])
    t = 3 if root is not None else 0
    rotations_chain = body.kept(("trunk variables", tuple(trunk_bones)), lambda: variable_chain(
        tuple(body.kinds[b] for b in trunk_bones), np.broadcast_to(np.eye(3), (len(trunk_bones), 3, 3)),
        body.axes[dofs], body.lower[dofs], body.upper[dofs], body.weights[dofs]))
    sub_variables = body_variables(sub)
    sub_ref = np.ascontiguousarray(q_ref[:, body.dofs(needed)])

    def pose(x: np.ndarray, frames: np.ndarray) -> tuple[BodyPose, Any]:
        q = sub_ref[frames]
        q[:, sub_dofs] = x[:, t:]
        at = body_pose(sub, sub_variables, q, sub_root, x[:, :3] if t else None)
        return at, variable_columns(sub, at, sub_dofs, sub_root, bool(t))

    scales = np.sqrt(np.concatenate([np.full(t, root_location_weight), body.weights[dofs]]))
    return TrunkProblem(rows, pose, rotations_chain, t, scales, scale)


def _goal_rows(sub: Body, levels: list[list[tuple[str, Any]]]) -> GoalRows:
    """The levels' goals in order, every limb's reach rows stacked (one set of array operations for all)."""
    limbs = [value for level in levels for kind, value in level if kind == "limb"]
    slotted: list[LevelRows] = []
    count = 0
    for level in levels:
        slots: list[int | TipGoalRows] = []
        for kind, value in level:
            slots.append(count if kind == "limb" else value)
            count += kind == "limb"
        slotted.append(LevelRows(tuple(slots)))
    reach = None
    if limbs:
        reach = LimbReach(parents=np.array([parent for parent, *_ in limbs], dtype=int),
                          offsets=np.array([offset for _, offset, *_ in limbs], dtype=float),
                          heads=np.stack([limb.heads for _, _, limb, *_ in limbs], 1),
                          inner=np.array([limb.inner for _, _, limb, *_ in limbs]),
                          total=np.array([limb.total for _, _, limb, *_ in limbs]),
                          masks=np.array([mask for *_, mask, _ in limbs]),
                          weights=np.array([weight for *_, weight in limbs]),
                          root_position=sub.root_position, root_rotation=sub.root_rotation)
    return GoalRows(tuple(slotted), reach)


def _solve_limb(body: Body, pose: BodyPose, lay: ChainLayout, goal: Goal, limb: _Limb,
                tolerance: float) -> tuple[np.ndarray, HISolveResult]:
    """The limb's joint variables ``(N, n_dof)`` by HI, in its start bone's parent frame on this pose."""
    assert lay.core is not None
    parent, origin = pose.parent_frame(body, lay.bones[0])
    positions, rotations, _, _ = goal
    chain = lay.chain
    local_targets = tmatvec(parent, positions - origin)
    poles = None
    if chain.poles is not None:
        world = np.broadcast_to(np.asarray(chain.poles, dtype=float), positions.shape)
        poles = tmatvec(parent, world - origin)
    hi_args: dict[str, Any] = {"swivel": chain.swivel, "zero_plane_map": chain.zero_plane_map, "poles": poles}
    options = SolveOptions(tolerance=tolerance)
    if rotations is not None:
        local_rotations = matmul(np.swapaxes(parent, 1, 2), rotations)
        result, hi = solve_hi_oriented(lay.core, local_targets, limb.preferred, local_rotations, options=options,
                                       **hi_args)
        return result.q, hi
    solved = solve_hi(lay.core, local_targets, limb.preferred, options=options, **hi_args)
    return solved.result.q, solved


def _goal_results(body: Body, pose: BodyPose, layouts: tuple[ChainLayout, ...], goals: list[Goal],
                  his: dict[int, HISolveResult], root: int | None, tolerance: float, angle_tolerance: float,
                  scale: float) -> tuple[GoalResult, ...]:
    errors, turns, reached = [], [], []
    for lay in layouts:
        positions, rotations, _, _ = goals[lay.index]
        tip = lay.bones[-1]
        error = norm(positions - pose.tails(body, [tip])[:, 0])
        turn = None if rotations is None else orientation_errors(np.ascontiguousarray(pose.frames[:, tip]), rotations)
        errors.append(error)
        turns.append(turn)
        reached.append((error <= tolerance) & (True if turn is None else turn <= angle_tolerance))
    tips = [lay.bones[-1] for lay in layouts]
    priorities = [goals[lay.index][3] for lay in layouts]
    targets = [goals[lay.index][0] for lay in layouts]
    moving = {b for lay in layouts for b in lay.bones} | ({root} if root is not None else set())
    bounds = goal_bounds(body, tips, targets, priorities, reached, root, moving, pose.heads, tolerance)
    out = []
    for lay, error, turn, done, bound in zip(layouts, errors, turns, reached, bounds):
        at_bound = error <= bound + tolerance + 1e-12 * scale
        status = _STATUSES[np.where(done, 0, np.where(at_bound, 2, 1))]
        out.append(GoalResult(lay.chain.name, status, error, turn, bound, lay.limb,
                              his.get(lay.index)))
    return tuple(out)

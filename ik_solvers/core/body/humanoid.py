"""A synthetic humanoid with Rigify metarig proportions, its five goals, and random reachable goal sets.

For tests, benchmarks and demos of the body solve: hips (the body root), a three-joint spine to the
head, legs of thigh, shin (hinge knee) and foot, shoulders (fixed links) and arms of upper arm and
forearm (hinge elbow). Metres, Z up, the character facing −Y as in Blender; bones point along their
local +Y. Knees and elbows are bent a little at rest (their preferred bend).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..chain import JointKind
from ..vectors import cross, unit
from .forward import body_pose, body_variables
from .model import Body, BodyChain, BodyGoal

BALL, HINGE = JointKind.BALL, JointKind.HINGE

# name, parent, head, tail, kind (world rest positions, metres).
_BONES = (
    ("hips", None, (0.0, 0.02, 1.00), (0.0, 0.0, 1.12), BALL),
    ("spine", "hips", (0.0, 0.0, 1.12), (0.0, 0.01, 1.30), BALL),
    ("chest", "spine", (0.0, 0.01, 1.30), (0.0, 0.02, 1.50), BALL),
    ("head", "chest", (0.0, 0.02, 1.50), (0.0, 0.0, 1.78), BALL),
    ("thigh.L", "hips", (0.10, 0.0, 0.98), (0.10, -0.02, 0.54), BALL),
    ("shin.L", "thigh.L", (0.10, -0.02, 0.54), (0.10, 0.03, 0.10), HINGE),
    ("foot.L", "shin.L", (0.10, 0.03, 0.10), (0.10, -0.11, 0.02), BALL),
    ("thigh.R", "hips", (-0.10, 0.0, 0.98), (-0.10, -0.02, 0.54), BALL),
    ("shin.R", "thigh.R", (-0.10, -0.02, 0.54), (-0.10, 0.03, 0.10), HINGE),
    ("foot.R", "shin.R", (-0.10, 0.03, 0.10), (-0.10, -0.11, 0.02), BALL),
    ("shoulder.L", "chest", (0.02, 0.0, 1.45), (0.18, 0.03, 1.45), BALL),
    ("upper_arm.L", "shoulder.L", (0.18, 0.03, 1.45), (0.44, 0.06, 1.30), BALL),
    ("forearm.L", "upper_arm.L", (0.44, 0.06, 1.30), (0.68, 0.02, 1.15), HINGE),
    ("shoulder.R", "chest", (-0.02, 0.0, 1.45), (-0.18, 0.03, 1.45), BALL),
    ("upper_arm.R", "shoulder.R", (-0.18, 0.03, 1.45), (-0.44, 0.06, 1.30), BALL),
    ("forearm.R", "upper_arm.R", (-0.44, 0.06, 1.30), (-0.68, 0.02, 1.15), HINGE),
)
LONG_SPINE_BONES = (
    ("hips", None, (0.0, 0.02, 1.00), (0.0, 0.0, 1.10), BALL),
    ("spine.001", "hips", (0.0, 0.0, 1.10), (0.0, 0.0, 1.20), BALL),
    ("spine.002", "spine.001", (0.0, 0.0, 1.20), (0.0, 0.01, 1.31), BALL),
    ("spine.003", "spine.002", (0.0, 0.01, 1.31), (0.0, 0.02, 1.44), BALL),
    ("spine.004", "spine.003", (0.0, 0.02, 1.44), (0.0, 0.01, 1.53), BALL),
    ("spine.005", "spine.004", (0.0, 0.01, 1.53), (0.0, 0.0, 1.60), BALL),
    ("spine.006", "spine.005", (0.0, 0.0, 1.60), (0.0, 0.0, 1.80), BALL),
) + tuple((name, "spine.003" if parent == "chest" else parent, head, tail, kind)
          for name, parent, head, tail, kind in _BONES[4:])
"""As Rigify's human metarig: a six-joint trunk from the hips to the top of the head (``spine.001`` …
``spine.006``, no limits), the arms hanging from its third bone (``spine.003``, the chest) inside it."""
SPINE_LIMIT = 0.6
"""Limits of each spine and head ball-joint component (radians)."""
KNEE_RANGE = (-0.15, 2.4)
ELBOW_RANGE = (-0.15, 2.4)
"""Hinge ranges (radians from the rest bend, which is about 0.2 rad)."""


def _frame(direction: np.ndarray, bend_normal: np.ndarray | None) -> np.ndarray:
    """A bone frame: +Y along the bone, +X along the bend normal (or world X made perpendicular)."""
    y = unit(direction)
    x = np.array([1.0, 0.0, 0.0]) if bend_normal is None else bend_normal
    x = unit(x - (x @ y) * y)
    return np.stack([x, y, cross(x, y)], axis=1)


def humanoid_body(bones: tuple[tuple, ...] | None = None) -> Body:
    """The humanoid as a :class:`Body` (knee and elbow hinges about their bend normals); ``bones``: a table
    like ``_BONES`` (default), :data:`LONG_SPINE_BONES` for the metarig's six-joint trunk."""
    bones = _BONES if bones is None else bones
    names = [b[0] for b in bones]
    heads = {b[0]: np.array(b[2]) for b in bones}
    tails = {b[0]: np.array(b[3]) for b in bones}
    frames: dict[str, np.ndarray] = {}
    for name, _, _, _, kind in bones:
        normal = None
        child = next((b[0] for b in bones if b[1] == name and b[4] is HINGE), None)
        hinge_of = name if kind is HINGE else child
        if hinge_of is not None:  # the bend plane of this bone and its hinge child (or its hinge parent)
            upper = bones[names.index(hinge_of)][1]
            assert upper is not None
            normal = unit(cross(tails[upper] - heads[upper], tails[hinge_of] - heads[hinge_of]))
        frames[name] = _frame(tails[name] - heads[name], normal)
    parents, offsets, rests, bone_tails, axes, lower, upper_limits = [], [], [], [], [], [], []
    for name, parent, _, _, kind in bones:
        parent_frame = np.eye(3) if parent is None else frames[parent]
        parent_head = np.zeros(3) if parent is None else heads[parent]
        parents.append(-1 if parent is None else names.index(parent))
        offsets.append(parent_frame.T @ (heads[name] - parent_head))
        rests.append(parent_frame.T @ frames[name])
        bone_tails.append([0.0, float(np.linalg.norm(tails[name] - heads[name])), 0.0])
        if kind is HINGE:
            axes.append([1.0, 0.0, 0.0])
            low, high = KNEE_RANGE if name.startswith("shin") else ELBOW_RANGE
            lower.append(low)
            upper_limits.append(high)
        else:
            axes += [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
            limit = SPINE_LIMIT if name in ("spine", "chest", "head") else np.inf  # the long spine: none
            lower += [-limit] * 3
            upper_limits += [limit] * 3
    n_dof = len(axes)
    return Body(names=tuple(names), parents=tuple(parents), kinds=tuple(b[4] for b in bones),
                offsets=np.array(offsets), rest_rotations=np.array(rests), tails=np.array(bone_tails),
                axes=np.array(axes), lower=np.array(lower), upper=np.array(upper_limits), weights=np.ones(n_dof))


CHAIN_BONES = {
    "leg.L": ("thigh.L", "foot.L"),
    "leg.R": ("thigh.R", "foot.R"),
    "spine": ("spine", "head"),
    "arm.L": ("upper_arm.L", "forearm.L"),
    "arm.R": ("upper_arm.R", "forearm.R"),
}
"""The five chains: legs and head with orientation goals, arms with position goals."""
LONG_SPINE_CHAIN_BONES = {**CHAIN_BONES, "spine": ("spine.001", "spine.006")}
"""The five chains of :data:`LONG_SPINE_BONES`: the head's from the hips' child to the top of the head."""
ORIENTED = ("leg.L", "leg.R", "spine")
DEFAULT_PRIORITIES = {"leg.L": 2, "leg.R": 2, "spine": 1, "arm.L": 0, "arm.R": 0}
"""Feet over the head over the hands."""


def humanoid_chains(goals: dict[str, tuple[np.ndarray, np.ndarray | None]],
                    priorities: dict[str, int] | None = None,
                    weights: dict[str, float] | None = None,
                    bones: dict[str, tuple[str, str]] | None = None) -> tuple[BodyChain, ...]:
    """The five chains toward ``goals[name] = (positions (N, 3), rotations (N, 3, 3) or None)`` (``bones``:
    each chain's first and last bone, default :data:`CHAIN_BONES`)."""
    priorities = DEFAULT_PRIORITIES if priorities is None else priorities
    weights = {} if weights is None else weights
    return tuple(BodyChain(name, start, tip, BodyGoal(goals[name][0], goals[name][1], weights.get(name, 1.0),
                                                      priorities.get(name, 0)))
                 for name, (start, tip) in (CHAIN_BONES if bones is None else bones).items() if name in goals)


@dataclass(frozen=True, eq=False)
class GoalSets:
    """Random reachable goal sets: the poses they were made from and the goals, per frame."""

    q: np.ndarray  # (N, n_dof)
    root_location: np.ndarray  # (N, 3)
    goals: dict[str, tuple[np.ndarray, np.ndarray | None]]


def random_poses(body: Body, rng: np.random.Generator, n: int, root_offset: float = 0.15,
                 root_turn: float = 0.3, trunk: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Random poses within the limits ``(n, n_dof)`` and root locations ``(n, 3)`` (``trunk`` False: the
    hips, spine and head stay at rest)."""
    q = np.zeros((n, body.n_dof))
    for b, name in enumerate(body.names):
        start = body.dof_start[b]
        if body.kinds[b] is HINGE:
            q[:, start] = rng.uniform(0.0, 0.8 * body.upper[start], n)
        elif name == "hips":
            q[:, start:start + 3] = rng.uniform(-root_turn, root_turn, (n, 3)) if trunk else 0.0
        elif name in ("spine", "chest", "head"):
            q[:, start:start + 3] = rng.uniform(-0.5, 0.5, (n, 3)) * SPINE_LIMIT if trunk else 0.0
        elif not name.startswith("shoulder"):
            q[:, start:start + 3] = rng.uniform(-0.6, 0.6, (n, 3))
    location = rng.uniform(-root_offset, root_offset, (n, 3)) if trunk else np.zeros((n, 3))
    return q, location


def goals_of_poses(body: Body, q: np.ndarray, root_location: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """The five chains' goals met by the poses ``q (N, n_dof)`` with the hips at ``root_location (N, 3)``."""
    pose = body_pose(body, body_variables(body), q, body.names.index("hips"), root_location)
    goals: dict[str, tuple[np.ndarray, np.ndarray | None]] = {}
    for name, (_, tip) in CHAIN_BONES.items():
        bone = body.names.index(tip)
        rotation = pose.frames[:, bone].copy() if name in ORIENTED else None
        goals[name] = (pose.tails(body, [bone])[:, 0], rotation)
    return goals


def random_goal_sets(body: Body, seed: int, n: int, trunk: bool = True) -> GoalSets:
    """Goals made by forward kinematics from random poses and a random hips offset: a solution exists."""
    q, location = random_poses(body, np.random.default_rng(seed), n, trunk=trunk)
    return GoalSets(q, location, goals_of_poses(body, q, location))

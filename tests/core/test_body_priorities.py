"""Priorities that hold on a metarig-like trunk (issue 22): six spine joints from the hips to the top of
the head, the arms hanging from the third of them, so a hand out of reach pulls on the bones the
head's goal is met with. The feet and head (higher priorities) must still be met whenever they can be,
to the last bits; the hands work in what is left and are reported LIMITED, never under their bound."""

from __future__ import annotations

import numpy as np

from ik_solvers.core.body import GoalStatus, solve_body
from ik_solvers.core.body.forward import body_pose, body_variables
from ik_solvers.core.body.humanoid import LONG_SPINE_BONES, LONG_SPINE_CHAIN_BONES, humanoid_body, humanoid_chains

POSITION = 1e-5  # 0.01 mm
BODY = humanoid_body(LONG_SPINE_BONES)


def _goals(n: int, away: np.ndarray) -> dict[str, tuple[np.ndarray, None]]:
    """Feet and head goals met by random trunk poses with a random hips offset (reachable); the hands'
    goals the same poses' hands moved by ``away`` (metres): beyond the arms with the head held."""
    rng = np.random.default_rng(22)
    q = np.zeros((n, BODY.n_dof))
    for b, name in enumerate(BODY.names):
        if name.startswith("spine") or name == "hips":
            q[:, BODY.dof_start[b]:BODY.dof_start[b] + 3] = rng.uniform(-0.15, 0.15, (n, 3))
    pose = body_pose(BODY, body_variables(BODY), q, BODY.names.index("hips"), rng.uniform(-0.05, 0.05, (n, 3)))
    goals = {}
    for name, (_, tip) in LONG_SPINE_CHAIN_BONES.items():
        bone = BODY.names.index(tip)
        goals[name] = (pose.tails(BODY, [bone])[:, 0] + (away if name.startswith("arm") else 0.0), None)
    return goals


def test_feet_and_head_hold_when_the_hands_are_out_of_reach_on_a_six_joint_trunk():
    goals = _goals(24, np.array([0.0, -1.0, 0.2]))
    result = solve_body(BODY, humanoid_chains(goals, bones=LONG_SPINE_CHAIN_BONES), body_root="hips")
    for name in ("leg.L", "leg.R", "spine"):
        goal = result.goal(name)
        assert goal.error.max() <= POSITION, (name, goal.error.max())
        assert np.all(goal.status == GoalStatus.REACHED), name
    for name in ("arm.L", "arm.R"):
        hand = result.goal(name)
        assert np.all(hand.status == GoalStatus.LIMITED), (name, hand.status)
        assert np.all(hand.error > hand.bound), name


def test_six_joint_trunk_with_hands_out_of_reach_is_history_independent():
    """The level-by-level polish runs on the frames that need it: the same bits in chunks and in reverse."""
    n = 12
    goals = _goals(n, np.array([0.0, -1.0, 0.2]))
    arm = goals["arm.L"][0].copy()
    arm[::2] -= np.array([0.0, -1.0, 0.2])  # every other frame reachable: batches mix both kinds
    goals["arm.L"] = (arm, None)
    whole = solve_body(BODY, humanoid_chains(goals, bones=LONG_SPINE_CHAIN_BONES), body_root="hips")
    for rows in (np.arange(n)[::-1], np.arange(0, 5), np.arange(5, n)):
        part = solve_body(BODY, humanoid_chains({k: (v[0][rows], None) for k, v in goals.items()},
                                                bones=LONG_SPINE_CHAIN_BONES), body_root="hips")
        assert np.array_equal(part.q, whole.q[rows]) and np.array_equal(part.root_location, whole.root_location[rows])

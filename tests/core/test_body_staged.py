"""The staged second way of the body solve (core.body.staged): way points between the reference tips and the
goals, and frames left as they are where the first way met every goal."""

import numpy as np

from ik_solvers.core.body import solve_body
from ik_solvers.core.body.humanoid import humanoid_body, humanoid_chains, random_goal_sets
from ik_solvers.core.body.staged import staged_goals
from ik_solvers.core.rotations import matrices_from_rotvecs, rotvecs_from_matrices


def test_way_points_run_from_the_reference_tip_to_the_goal_along_the_line_and_the_shortest_turn():
    rng = np.random.default_rng(4)
    positions, turns = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    rotations = matrices_from_rotvecs(turns)
    tip, frame = rng.normal(size=(3, 3)), matrices_from_rotvecs(rng.normal(size=(3, 3)))
    rows = np.array([0, 2, 4])
    goal = (positions, rotations, 1.0, 2)
    start, turned, weight, priority = staged_goals(goal, tip, frame, rows, 0.0)
    np.testing.assert_allclose(start, tip)
    np.testing.assert_allclose(turned, frame, atol=1e-12)
    end, at_end, _, _ = staged_goals(goal, tip, frame, rows, 1.0)
    np.testing.assert_allclose(end, positions[rows])
    np.testing.assert_allclose(at_end, rotations[rows], atol=1e-12)
    half, at_half, _, _ = staged_goals(goal, tip, frame, rows, 0.5)
    np.testing.assert_allclose(half, 0.5 * (tip + positions[rows]))
    whole = rotvecs_from_matrices(np.swapaxes(frame, 1, 2) @ rotations[rows])
    np.testing.assert_allclose(rotvecs_from_matrices(np.swapaxes(frame, 1, 2) @ at_half), 0.5 * whole, atol=1e-12)
    assert (weight, priority) == (1.0, 2) and staged_goals((positions, None, 0.5, 0), tip, frame, rows, 0.5)[1] is None


def test_frames_whose_goals_the_first_way_meets_are_not_solved_again():
    body = humanoid_body()
    chains = humanoid_chains(random_goal_sets(body, 8, 40).goals)
    once = solve_body(body, chains, body_root="hips", retry_stages=1)
    staged = solve_body(body, chains, body_root="hips")
    assert np.array_equal(once.q, staged.q) and np.array_equal(once.trunk_steps, staged.trunk_steps)


def test_frames_solved_again_in_stages_are_the_same_bits_in_any_batch():
    body = humanoid_body()
    n = 24
    goals = dict(random_goal_sets(body, 6, n).goals)
    head, turns = goals["spine"]
    head = head.copy()
    head[::2] += np.random.default_rng(2).normal(size=(n // 2, 3)) * 0.8  # the head (above the hands) thrown off
    goals["spine"] = (head, turns)
    whole = solve_body(body, humanoid_chains(goals), body_root="hips")
    once = solve_body(body, humanoid_chains(goals), body_root="hips", retry_stages=1)
    assert np.any(whole.trunk_steps > once.trunk_steps)  # some frames took the staged way
    for rows in [np.arange(n)[::-1]] + [np.arange(i, min(i + 5, n)) for i in range(0, n, 5)]:
        part = solve_body(body, humanoid_chains({k: (p[rows], None if r is None else r[rows])
                                                 for k, (p, r) in goals.items()}), body_root="hips")
        assert np.array_equal(part.q, whole.q[rows]) and np.array_equal(part.root_location, whole.root_location[rows])

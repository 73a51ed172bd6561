"""Closed-form two-bone IK: hand-computed branches, the reachability annulus, origin cases."""

import numpy as np
import pytest

from ik_solvers.core import (
    Chain,
    IKInputError,
    JointKind,
    Method,
    Status,
    forward_kinematics,
    solve,
    two_bone_planar,
    two_link_step_bound,
)


def planar_tip(l1, l2, theta1, theta2):
    return np.array(
        [l1 * np.cos(theta1) + l2 * np.cos(theta1 + theta2), l1 * np.sin(theta1) + l2 * np.sin(theta1 + theta2)]
    )


def test_unit_bones_to_1_1_give_the_two_hand_computed_branches():
    result = two_bone_planar(1.0, 1.0, [[1.0, 1.0]])
    np.testing.assert_allclose(result.branches[0, 0], [0.0, np.pi / 2], atol=1e-12)
    np.testing.assert_allclose(result.branches[0, 1], [np.pi / 2, -np.pi / 2], atol=1e-12)
    assert result.reachable[0] and result.branch_count[0] == 2
    assert result.residual[0] == 0.0


@pytest.mark.parametrize(
    "target, reachable, residual",
    [
        ((0.1, 0.0), False, 0.4),  # inner miss: |l1 − l2| = 0.5
        ((0.5, 0.0), True, 0.0),  # on the inner boundary
        ((1.5, 0.0), True, 0.0),  # on the outer boundary
        ((1.6, 0.0), False, 0.1),  # outer miss
        ((0.0, 2.0), False, 0.5),
        ((1.0, 0.0), True, 0.0),
    ],
)
def test_unequal_bones_reachability_and_residual_is_distance_to_annulus(target, reachable, residual):
    result = two_bone_planar(1.0, 0.5, [target])
    assert bool(result.reachable[0]) is reachable
    assert result.residual[0] == pytest.approx(residual, abs=1e-12)
    for theta1, theta2 in result.branches[0]:
        tip = planar_tip(1.0, 0.5, theta1, theta2)
        # The pose given is the nearest one: its error equals the residual.
        assert np.linalg.norm(tip - target) == pytest.approx(residual, abs=1e-12)


def test_the_first_branch_alone_has_the_same_bits():
    targets = np.random.default_rng(4).uniform(-2.0, 2.0, (200, 2))
    both = two_bone_planar(1.0, 0.7, targets)
    first = two_bone_planar(1.0, 0.7, targets, first_branch_only=True)
    assert first.branches.shape == (200, 1, 2)
    assert first.branches[:, 0].tobytes() == both.branches[:, 0].tobytes()
    assert first.residual.tobytes() == both.residual.tobytes()


def test_branches_merge_on_the_annulus_boundary():
    result = two_bone_planar(1.0, 0.5, [[1.5, 0.0], [0.5, 0.0]])
    assert list(result.branch_count) == [1, 1]
    np.testing.assert_allclose(result.branches[:, 0], result.branches[:, 1], atol=1e-12)


def test_origin_with_equal_bones_folds_exactly_but_direction_is_not_unique():
    result = two_bone_planar(1.0, 1.0, [[0.0, 0.0]])
    assert result.reachable[0] and not result.direction_unique[0]
    assert abs(result.branches[0, 0, 1]) == pytest.approx(np.pi)
    assert np.linalg.norm(planar_tip(1.0, 1.0, *result.branches[0, 0])) < 1e-12


def test_origin_with_unequal_bones_cannot_fold_residual_is_length_difference():
    result = two_bone_planar(0.5, 1.0, [[0.0, 0.0]])
    assert not result.reachable[0] and not result.direction_unique[0]
    assert result.residual[0] == pytest.approx(0.5)


def test_branches_reproduce_random_reachable_targets():
    rng = np.random.default_rng(0)
    angles = rng.uniform(-np.pi, np.pi, (200, 2))
    targets = np.array([planar_tip(0.8, 0.6, *a) for a in angles])
    result = two_bone_planar(0.8, 0.6, targets)
    for k in range(2):
        tips = np.array([planar_tip(0.8, 0.6, *b) for b in result.branches[:, k]])
        np.testing.assert_allclose(tips, targets, atol=1e-12)


@pytest.mark.parametrize("l1, l2", [(0.0, 1.0), (-1.0, 1.0), (np.nan, 1.0), (1.0, 1e-12)])
def test_bad_lengths_are_refused_naming_the_field(l1, l2):
    with pytest.raises(IKInputError, match="l1|l2"):
        two_bone_planar(l1, l2, [[1.0, 0.0]])


def test_step_bound_matches_the_formula():
    # L = l1 l2 + l1 r + 2 l2 r with r = |t| = sqrt(2).
    assert two_link_step_bound(1.0, 1.0, [1.0, 1.0]) == pytest.approx(2.0 / (1.0 + 3.0 * np.sqrt(2.0)))


def test_3d_arm_reaches_and_bends_toward_the_requested_direction():
    chain = Chain.straight([0.30, 0.28], [JointKind.BALL, JointKind.HINGE])
    start = np.array([[0.0, 0.0, 0.0, 0.3]])  # slightly bent so the bend plane is defined
    targets = np.array([[0.2, 0.3, 0.1], [0.0, -0.25, 0.3], [0.5, 0.0, 0.0]])
    bend = np.array([[0.0, 0.0, 1.0]] * 3)
    result = solve(chain, targets, Method.ANALYTIC, initial=start, bend_directions=bend)
    assert list(result.status) == [Status.CONVERGED] * 3
    np.testing.assert_allclose(result.tips, targets, atol=1e-9)
    elbows = result.positions[:, 1]
    heading = targets / np.linalg.norm(targets, axis=1, keepdims=True)
    sideways = elbows - np.sum(elbows * heading, axis=1, keepdims=True) * heading
    assert np.all(np.sum(sideways * (bend - np.sum(bend * heading, 1, keepdims=True) * heading), axis=1) > 0)


def test_3d_arm_out_of_reach_returns_nearest_pose_at_the_bound():
    chain = Chain.straight([0.30, 0.28], [JointKind.BALL, JointKind.HINGE])
    result = solve(chain, [[1.0, 0.5, 0.2], [0.01, 0.0, 0.0]], Method.ANALYTIC, initial=[0, 0, 0, 0.3])
    assert list(result.status) == [Status.UNREACHABLE] * 2
    np.testing.assert_allclose(result.error, result.lower_bound, atol=1e-12)
    assert result.lower_bound[1] == pytest.approx(0.02 - 0.01)


def test_analytic_refuses_chains_of_other_lengths():
    with pytest.raises(IKInputError, match="chain"):
        solve(Chain.straight([1.0, 1.0, 1.0]), [[1.0, 1.0, 0.0]], Method.ANALYTIC)


def test_planar_analytic_solve_matches_the_table():
    chain = Chain.planar([1.0, 1.0])
    result = solve(chain, [[1.0, 1.0, 0.0]], Method.ANALYTIC)
    pose = forward_kinematics(chain, result.q)
    np.testing.assert_allclose(pose.tips[0], [1.0, 1.0, 0.0], atol=1e-12)
    table = two_bone_planar(1.0, 1.0, [[1.0, 1.0]]).branches[0]
    assert any(np.allclose(result.q[0], branch, atol=1e-9) for branch in table)

"""Orientation goals in the core (SPEC §5): HI's leg-and-foot split, the Jacobian methods' angular
rows, ``orientation_error`` in the result, and the refusals (IKInputError naming the field)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ik_solvers.core import Chain, IKInputError, JointKind, SolveOptions, Status, forward_kinematics, solve


def _leg():
    """Thigh, shin, foot along +x, ball joints, knee bent −0.6 rad and ankle +0.9 rad about z."""
    chain = Chain.straight([0.45, 0.42, 0.15], JointKind.BALL)
    preferred = np.zeros(chain.n_dof)
    preferred[2], preferred[5], preferred[8] = 0.3, -0.6, 0.9
    return chain, preferred


def _goals(chain: Chain, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pose = forward_kinematics(chain, q)
    return pose.tips, pose.frames[:, -1]


@pytest.mark.parametrize("method", ["CCD", "FABRIK", "ANALYTIC"])
def test_position_only_methods_refuse_target_rotations_naming_the_field(method):
    chain = Chain.straight([1.0, 0.8], JointKind.BALL)
    with pytest.raises(IKInputError) as caught:
        solve(chain, [1.0, 0.5, 0.0], method, target_rotations=np.eye(3))
    assert caught.value.field == "target_rotations"


def test_hi_refuses_one_bone_and_an_orientation_goal_on_two_bones_naming_the_field():
    one = Chain.straight([1.0], JointKind.BALL)
    with pytest.raises(IKInputError) as caught:
        solve(one, [0.5, 0.5, 0.0], "HI", initial=np.zeros(3))
    assert caught.value.field == "chain"
    two = Chain.straight([1.0, 0.8], JointKind.BALL)
    bent = np.array([0.0, 0.0, 0.4, 0.0, 0.0, -0.5])
    with pytest.raises(IKInputError) as caught:
        solve(two, [1.0, 0.5, 0.0], "HI", initial=bent, target_rotations=np.eye(3))
    assert caught.value.field == "target_rotations"


def test_unknown_keywords_and_non_rotations_are_refused_naming_the_field():
    chain, preferred = _leg()
    with pytest.raises(IKInputError) as caught:
        solve(chain, [0.5, 0.5, 0.0], "HI", initial=preferred, bend_directions=np.ones(3))
    assert caught.value.field == "bend_directions"
    with pytest.raises(IKInputError) as caught:
        solve(chain, [0.5, 0.5, 0.0], "DLS", target_rotations=2.0 * np.eye(3))
    assert caught.value.field == "target_rotations"
    with pytest.raises(IKInputError) as caught:
        solve(chain, [0.5, 0.5, 0.0], "HI", initial=preferred, target_rotations=np.diag([1.0, 1.0, -1.0]))
    assert caught.value.field == "target_rotations"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-0.25, 0.25), min_size=9, max_size=9))
def test_hi_split_reaches_a_pose_near_the_preferred_one_in_position_and_orientation(noise):
    chain, preferred = _leg()
    q = preferred + np.array(noise)
    tips, frames = _goals(chain, q[None])
    result = solve(chain, tips, "HI", initial=preferred, target_rotations=frames)
    assert result.error[0] <= 1e-9
    assert result.orientation_error is not None and result.orientation_error[0] <= 1e-9
    assert result.status[0] is Status.CONVERGED
    solved_frames = forward_kinematics(chain, result.q).frames[:, -1]
    assert np.abs(solved_frames - frames).max() <= 1e-9
    assert result.length_error[0] <= 1e-12


def test_hi_split_is_history_independent_bit_identical_in_any_order():
    chain, preferred = _leg()
    rng = np.random.default_rng(3)
    q = preferred + rng.uniform(-0.3, 0.3, (40, chain.n_dof))
    tips, frames = _goals(chain, q)
    whole = solve(chain, tips, "HI", initial=preferred, target_rotations=frames)
    order = rng.permutation(40)
    shuffled = solve(chain, tips[order], "HI", initial=preferred, target_rotations=frames[order])
    assert np.array_equal(shuffled.q, whole.q[order])
    one = solve(chain, tips[7], "HI", initial=preferred, target_rotations=frames[7])
    assert np.array_equal(one.q[0], whole.q[7])


def test_hi_split_out_of_reach_keeps_the_orientation_and_stops_at_the_heads_bound():
    chain, preferred = _leg()
    flat = np.eye(3)
    result = solve(chain, [3.0, 0.0, 0.0], "HI", initial=preferred, target_rotations=flat)
    assert result.orientation_error[0] <= 1e-9
    # The head's goal is (2.85, 0, 0): thigh and shin reach 0.87 of it, straight.
    assert result.lower_bound[0] == pytest.approx(2.85 - 0.87, abs=1e-9)
    assert result.error[0] == pytest.approx(result.lower_bound[0], abs=1e-9)
    assert result.status[0] is Status.UNREACHABLE


def test_jacobian_methods_report_and_reduce_the_orientation_error():
    chain, preferred = _leg()
    q = preferred + 0.2
    tips, frames = _goals(chain, q[None])
    options = SolveOptions(orientation_weight=1.0, max_iterations=300, tolerance=1e-9)
    weighted = solve(chain, tips, "SDLS", options, initial=preferred, target_rotations=frames)
    unweighted = solve(chain, tips, "SDLS", SolveOptions(max_iterations=300, tolerance=1e-9), initial=preferred,
                       target_rotations=frames)
    assert weighted.orientation_error[0] <= 1e-4
    assert unweighted.orientation_error[0] > 10 * weighted.orientation_error[0]
    assert solve(chain, tips, "SDLS", initial=preferred).orientation_error is None

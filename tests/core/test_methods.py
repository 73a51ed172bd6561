"""Every iterative method through the shared loop: reach, statuses, invariants, validation (SPEC §3.2–§3.3)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ik_solvers.core import (
    METHOD_FACTS,
    Chain,
    IKInputError,
    JointKind,
    Method,
    SolveOptions,
    Status,
    bone_length_errors,
    forward_kinematics,
    solve,
)

# The methods that run the shared iteration loop (HI iterates, if at all, inside its own in-plane solve).
ITERATIVE = [method for method, facts in METHOD_FACTS.items() if facts.iterative and not facts.needs_preferred_pose]
JACOBIAN = [method for method in ITERATIVE if METHOD_FACTS[method].jacobian]

# The budget each method is documented to need for 1e-4 on a 4-bone ball chain
# from the straight pose (see docs/solver-race.md for the full race).
BUDGET = {
    Method.CCD: 200,
    Method.FABRIK: 100,
    Method.JACOBIAN_TRANSPOSE: 500,
    Method.PSEUDO_INVERSE: 50,
    Method.DLS: 50,
    Method.SDLS: 50,
}


def race_targets(chain, n, low, high, seed=0):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return d * rng.uniform(low, high, n)[:, None] * chain.reach


@pytest.fixture(scope="module")
def ball_chain():
    return Chain.straight([1.0, 0.9, 0.75, 0.55], JointKind.BALL)


@pytest.mark.parametrize("method", ITERATIVE, ids=lambda m: m.name)
def test_reaches_reachable_targets_within_its_budget(method, ball_chain):
    targets = race_targets(ball_chain, 60, 0.15, 0.95)
    result = solve(ball_chain, targets, method, SolveOptions(max_iterations=BUDGET[method], tolerance=1e-4))
    assert result.count(Status.CONVERGED) == 60
    assert np.all(result.error <= 1e-4)
    # The reported error is the real distance of the reported pose.
    tips = forward_kinematics(ball_chain, result.q).tips
    np.testing.assert_allclose(np.linalg.norm(tips - targets, axis=1), result.error, atol=1e-12)


@pytest.mark.parametrize("method", [Method.CCD, Method.FABRIK, Method.PSEUDO_INVERSE, Method.SDLS], ids=lambda m: m.name)
def test_unreachable_targets_end_at_the_lower_bound(method, ball_chain):
    targets = race_targets(ball_chain, 40, 1.05, 1.35, seed=1)
    result = solve(ball_chain, targets, method, SolveOptions(max_iterations=300, tolerance=1e-6))
    assert result.count(Status.UNREACHABLE) == 40
    assert np.all(result.error - result.lower_bound <= 1e-6)


@pytest.mark.parametrize("method", ITERATIVE, ids=lambda m: m.name)
def test_error_never_below_lower_bound_and_lengths_kept_over_the_trajectory(method, ball_chain):
    targets = np.concatenate([race_targets(ball_chain, 15, 0.1, 0.9), race_targets(ball_chain, 15, 1.0, 1.5, seed=2)])
    options = SolveOptions(max_iterations=30, tolerance=1e-6, record_trajectory=True)
    result = solve(ball_chain, targets, method, options)
    assert np.all(result.error >= result.lower_bound - 1e-12)
    for q in result.trajectory:
        pose = forward_kinematics(ball_chain, q)
        assert bone_length_errors(ball_chain, pose).max() < 1e-13
        errors = np.linalg.norm(pose.tips - targets, axis=1)
        assert np.all(errors >= result.lower_bound - 1e-12)
    assert result.length_error.max() < 1e-13


@pytest.mark.parametrize("method", ITERATIVE, ids=lambda m: m.name)
def test_straight_chain_pointing_past_a_target_in_front_is_stalled(method):
    chain = Chain.planar([1.0, 1.0])
    result = solve(chain, [[1.0, 0.0, 0.0]], method, SolveOptions(max_iterations=50, step=0.2 if method is Method.JACOBIAN_TRANSPOSE else None))
    assert result.status[0] is Status.STALLED
    assert result.error[0] == pytest.approx(1.0)


@pytest.mark.parametrize("method", ITERATIVE, ids=lambda m: m.name)
def test_limits_hold_after_every_step(method):
    lower = np.array([-0.3, -0.2, 0.0, -1.0, -0.5, -0.5])
    upper = np.array([0.3, 0.4, 0.1, 0.0, 0.5, 0.5])
    chain = Chain.straight([0.5, 0.4, 0.3], JointKind.UNIVERSAL, lower=lower, upper=upper)
    targets = race_targets(chain, 20, 0.2, 1.2, seed=3)
    result = solve(chain, targets, method, SolveOptions(max_iterations=40, record_trajectory=True))
    for q in result.trajectory:
        assert np.all(q >= lower - 1e-15) and np.all(q <= upper + 1e-15)


@pytest.mark.parametrize("method", [Method.DLS, Method.SDLS, Method.PSEUDO_INVERSE], ids=lambda m: m.name)
def test_max_step_angle_bounds_every_joint_turn(method):
    chain = Chain.straight([0.5, 0.4, 0.3], JointKind.HINGE)
    result = solve(chain, [[-0.5, 0.4, 0.0]], method, SolveOptions(max_iterations=10, max_step_angle=0.1, record_trajectory=True))
    steps = np.abs(np.diff(result.trajectory, axis=0))
    assert steps.max() <= 0.1 + 1e-12


def test_ball_joints_solve_through_euler_gimbal_lock_poses():
    chain = Chain.straight([1.0, 0.8], [JointKind.BALL, JointKind.BALL])
    # Targets straight up/down the y axis ask the root for a 90° turn about z,
    # which in XYZ Euler would be the gimbal-locked middle angle.
    targets = np.array([[0.0, 1.5, 0.0], [0.0, -1.5, 0.0], [0.0, 0.0, 1.7], [0.3, 1.2, 0.9]])
    for method in (Method.DLS, Method.SDLS, Method.PSEUDO_INVERSE):
        result = solve(chain, targets, method, SolveOptions(max_iterations=100, tolerance=1e-8))
        assert result.count(Status.CONVERGED) == 4, method


def test_fixed_step_too_large_is_reported_as_diverged():
    chain = Chain.planar([1.0, 1.0])
    result = solve(
        chain, [[1.0, 1.0, 0.0]], Method.JACOBIAN_TRANSPOSE,
        SolveOptions(step=5.0, max_step_angle=None, max_iterations=3), initial=[0.2, 0.4],
    )
    assert result.objective_increases[0] > 0
    assert result.status[0] in (Status.DIVERGED, Status.BUDGET_EXHAUSTED)
    start = np.linalg.norm(forward_kinematics(chain, [[0.2, 0.4]]).tips[0] - [1.0, 1.0, 0.0])
    assert (result.status[0] is Status.DIVERGED) == (result.error[0] > start)


def test_budget_exhausted_when_still_progressing():
    chain = Chain.straight([1.0, 0.9, 0.75, 0.55], JointKind.BALL)
    result = solve(chain, [[0.5, 1.5, 0.3]], Method.JACOBIAN_TRANSPOSE, SolveOptions(max_iterations=2, tolerance=1e-9))
    assert result.status[0] is Status.BUDGET_EXHAUSTED
    assert result.iterations[0] == 2


def test_stiff_joint_moves_less():
    free = Chain.straight([1.0, 1.0], JointKind.HINGE)
    stiff = Chain.straight([1.0, 1.0], JointKind.HINGE, weights=[0.05, 1.0])
    target = [[1.2, 1.2, 0.0]]
    a = solve(free, target, Method.DLS, SolveOptions(max_iterations=1, max_step_angle=None))
    b = solve(stiff, target, Method.DLS, SolveOptions(max_iterations=1, max_step_angle=None))
    assert abs(b.q[0, 0]) < abs(a.q[0, 0])


def test_line_search_transpose_never_raises_the_objective():
    chain = Chain.straight([1.0, 0.9, 0.75, 0.55], JointKind.BALL)
    targets = race_targets(chain, 50, 0.1, 1.3)
    result = solve(chain, targets, Method.JACOBIAN_TRANSPOSE, SolveOptions(step=None, max_iterations=60))
    assert result.objective_increases.max() == 0


def test_sigma_min_reported_for_jacobian_methods_only():
    chain = Chain.planar([1.0, 1.0])
    straight = solve(chain, [[1.0, 0.0, 0.0]], Method.DLS)
    assert straight.sigma_min[0] == pytest.approx(0.0, abs=1e-12)  # a straight planar 2-link is singular
    assert np.isnan(solve(chain, [[1.0, 1.0, 0.0]], Method.CCD).sigma_min[0])


@pytest.mark.parametrize("method", [Method.DLS, Method.SDLS], ids=lambda m: m.name)
def test_fabrik_warm_start_reaches_the_same_targets_with_fewer_iterations(method):
    chain = Chain.straight([0.3] * 10, JointKind.UNIVERSAL)
    targets = race_targets(chain, 200, 0.15, 0.95)
    plain = solve(chain, targets, method, SolveOptions(max_iterations=100, max_step_angle=0.8))
    warm = solve(chain, targets, method, SolveOptions(max_iterations=100, max_step_angle=0.8, warm_start_passes=1))
    assert warm.count(Status.CONVERGED) == plain.count(Status.CONVERGED) == 200
    assert warm.iterations.mean() < plain.iterations.mean()
    assert warm.iterations.min() >= 1  # the pass is counted


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(targets=[[np.nan, 0, 0]]), "targets"),
        (dict(targets=[[np.inf, 0, 0]]), "targets"),
        (dict(targets=[[1.0, 1.0]]), "targets"),
        (dict(initial=[np.nan, 0.0]), "initial"),
        (dict(method="NOPE"), "method"),
    ],
)
def test_solve_validates_before_computing(kwargs, field):
    args = dict(targets=[[1.0, 1.0, 0.0]], method=Method.DLS)
    args.update(kwargs)
    with pytest.raises(IKInputError, match=field):
        solve(Chain.planar([1.0, 1.0]), args.pop("targets"), args.pop("method"), **args)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(max_iterations=0), "max_iterations"),
        (dict(tolerance=0.0), "tolerance"),
        (dict(tolerance=-1.0), "tolerance"),
        (dict(damping=0.0), "damping"),
        (dict(step=0.0), "step"),
        (dict(step=np.nan), "step"),
        (dict(max_step_angle=0.0), "max_step_angle"),
        (dict(warm_start_passes=-1), "warm_start_passes"),
    ],
)
def test_options_validate(kwargs, field):
    with pytest.raises(IKInputError, match=field):
        SolveOptions(**kwargs)


@st.composite
def chains_and_targets(draw):
    n = draw(st.integers(1, 5))
    kinds = draw(st.lists(st.sampled_from(list(JointKind)), min_size=n, max_size=n))
    lengths = draw(st.lists(st.floats(1e-3, 10.0), min_size=n, max_size=n))
    scale = sum(lengths)
    targets = draw(
        st.lists(st.lists(st.floats(-2 * scale, 2 * scale), min_size=3, max_size=3), min_size=1, max_size=5)
    )
    return Chain.straight(lengths, kinds), np.array(targets)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains_and_targets(), st.sampled_from(ITERATIVE))
def test_random_chains_and_targets_never_give_nan(chain_and_targets, method):
    chain, targets = chain_and_targets
    try:
        result = solve(chain, targets, method, SolveOptions(max_iterations=15))
    except IKInputError as error:  # nothing here is invalid input: a planar chain reaches off-plane targets as near as it can
        raise AssertionError(f"refused valid input: {error}") from error
    for array in (result.q, result.positions, result.error, result.rotations):
        assert np.all(np.isfinite(array))
    assert np.all(result.error >= result.lower_bound - 1e-9 * chain.reach)
    assert result.length_error.max() <= 1e-12 * chain.reach


@pytest.mark.parametrize("method", [Method.DLS, Method.SDLS, Method.PSEUDO_INVERSE], ids=lambda m: m.name)
def test_orientation_rows_turn_the_tip_frame_to_the_target_rotation(method):
    from ik_solvers.core.rotations import rotvecs_from_matrices

    chain = Chain.straight([0.5, 0.4, 0.3, 0.2], JointKind.BALL)
    wanted_q = np.random.default_rng(7).normal(size=(5, chain.n_dof)) * 0.4
    wanted = forward_kinematics(chain, wanted_q)
    options = SolveOptions(max_iterations=200, tolerance=1e-9, orientation_weight=0.5)
    result = solve(chain, wanted.tips, method, options, target_rotations=wanted.frames[:, -1])
    assert np.all(result.error < 1e-6)
    reached = forward_kinematics(chain, result.q).frames[:, -1]
    angle = np.linalg.norm(rotvecs_from_matrices(reached @ np.swapaxes(wanted.frames[:, -1], 1, 2)), axis=1)
    assert angle.max() < 1e-5
    # Without the orientation rows the tip frame ends wherever the position solve leaves it.
    loose = solve(chain, wanted.tips, method, SolveOptions(max_iterations=200, tolerance=1e-9))
    loose_frames = forward_kinematics(chain, loose.q).frames[:, -1]
    assert np.linalg.norm(rotvecs_from_matrices(loose_frames @ np.swapaxes(wanted.frames[:, -1], 1, 2)), axis=1).max() > 0.05


def test_orientation_targets_are_refused_by_position_only_methods():
    chain = Chain.straight([0.5, 0.4], JointKind.BALL)
    with pytest.raises(IKInputError, match="target_rotations"):
        solve(chain, [[0.5, 0.2, 0.0]], Method.CCD, target_rotations=np.eye(3))


def crooked_chain(kinds, seed=5):
    """Oblique axes, random rest rotations and offsets, a tilted and shifted root: a Blender-like rig."""
    from ik_solvers.core.rotations import matrices_from_rotvecs

    rng = np.random.default_rng(seed)
    n, n_dof = len(kinds), sum(k.value for k in kinds)
    axes = rng.normal(size=(n_dof, 3))
    return Chain(
        kinds=kinds, offsets=rng.normal(size=(n, 3)) * 0.3, rest_rotations=matrices_from_rotvecs(rng.normal(size=(n, 3))),
        axes=axes / np.linalg.norm(axes, axis=1, keepdims=True), lower=np.full(n_dof, -np.inf),
        upper=np.full(n_dof, np.inf), weights=np.ones(n_dof), tip_offset=rng.normal(size=3) * 0.3,
        root_position=rng.normal(size=3), root_rotation=matrices_from_rotvecs(rng.normal(size=3)),
    )


@pytest.mark.parametrize(
    "chain",
    [Chain.straight([0.5, 0.4, 0.3, 0.2], kind) for kind in JointKind]
    + [crooked_chain((JointKind.BALL, JointKind.HINGE, JointKind.UNIVERSAL, JointKind.BALL))],
    ids=["HINGE", "UNIVERSAL", "BALL", "crooked"],
)
@pytest.mark.parametrize("method", ITERATIVE, ids=lambda m: m.name)
def test_a_target_gets_the_same_bits_alone_in_chunks_and_shuffled(chain, method):
    # ik_batch --jobs and the history-independent bake rely on this: no
    # reduction or product may round differently with the batch's size or layout.
    rng = np.random.default_rng(11)
    targets = chain.root_position + rng.normal(size=(24, 3)) * 0.6
    if all(kind is JointKind.HINGE for kind in chain.kinds):
        targets[:, 2] = 0.0
    start = rng.normal(size=(24, chain.n_dof)) * 0.3
    options = SolveOptions(max_iterations=25, warm_start_passes=1)
    whole = solve(chain, targets, method, options, initial=start).q
    order = rng.permutation(24)
    shuffled = np.empty_like(whole)
    shuffled[order] = solve(chain, targets[order], method, options, initial=start[order]).q
    np.testing.assert_array_equal(shuffled, whole)
    for size in (1, 5):
        parts = [solve(chain, targets[k : k + size], method, options, initial=start[k : k + size]).q for k in range(0, 24, size)]
        np.testing.assert_array_equal(np.concatenate(parts), whole)


@pytest.mark.parametrize(
    "method", [Method.ANALYTIC, Method.CCD, Method.FABRIK, Method.PSEUDO_INVERSE, Method.SDLS], ids=lambda m: m.name
)  # the methods that reach the bound out of reach (test_unreachable_targets_end_at_the_lower_bound)
def test_planar_chain_reaches_the_nearest_in_plane_point_of_an_off_plane_target(method):
    # Issue 11: no refusal; the error and the lower bound count the height off the plane.
    chain = Chain.planar([1.0, 1.0])
    targets = np.array([[1.0, 0.8, 0.5], [3.0, 0.0, -0.4], [1.2, 0.3, 1e-3]])
    result = solve(chain, targets, method, SolveOptions(max_iterations=300, tolerance=1e-6), initial=[0.3, 0.6])
    feet = targets * [1.0, 1.0, 0.0]
    np.testing.assert_allclose(result.lower_bound, np.hypot(np.maximum(np.linalg.norm(feet, axis=1) - 2.0, 0.0), targets[:, 2]))
    assert set(result.status) == {Status.UNREACHABLE}
    np.testing.assert_allclose(result.error, result.lower_bound, atol=1e-6)
    assert np.abs(result.positions[..., 2]).max() == 0.0  # the chain stays in its plane
    np.testing.assert_allclose(result.error, np.linalg.norm(result.tips - targets, axis=1), atol=1e-15)


LEVELS = [1e-12, 1e-9, 1e-6, 1e-3, 0.5, 1.0, 1e3, 1e6, 1e9, 1e12]


@st.composite
def chains_methods_and_extreme_targets(draw):
    n = draw(st.integers(1, 5))
    kinds = draw(st.lists(st.sampled_from(list(JointKind)), min_size=n, max_size=n))
    if draw(st.booleans()):
        kinds = [JointKind.HINGE] * n  # planar
    lengths = draw(st.lists(st.floats(1e-3, 10.0), min_size=n, max_size=n))
    chain = Chain.straight(lengths, kinds)
    methods = [m for m, f in METHOD_FACTS.items() if f.bones[0] <= n <= (f.bones[1] or n) and not f.needs_preferred_pose]
    method = draw(st.sampled_from(methods))
    count = draw(st.integers(1, 4))
    directions = np.array(draw(st.lists(st.lists(st.floats(-1, 1), min_size=3, max_size=3), min_size=count, max_size=count)))
    directions[np.linalg.norm(directions, axis=1) < 1e-6] = [1.0, 0.0, 0.0]
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    scale = np.array(draw(st.lists(st.sampled_from(LEVELS), min_size=count, max_size=count)))
    initial = np.array(draw(st.lists(st.floats(-3, 3), min_size=chain.n_dof, max_size=chain.n_dof)))
    return chain, method, directions * (scale * chain.reach)[:, None], initial


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chains_methods_and_extreme_targets())
def test_any_finite_target_from_1e_12_to_1e12_of_the_reach_gives_no_exception_and_no_nan(case):
    # Issue 11: SDLS raised LinAlgError (singular system) and returned NaN (0/0) for far targets.
    chain, method, targets, initial = case
    with np.errstate(divide="raise", invalid="raise"):  # 0/0 and x/0 are where NaN and inf come from
        result = solve(chain, targets, method, SolveOptions(max_iterations=20), initial=initial)
    for array in (result.q, result.positions, result.error, result.rotations, result.lower_bound):
        assert np.all(np.isfinite(array))
    # Out to 1e12 of the reach the error and the bound share their rounding (~1e-16 of the distance).
    slack = 1e-9 * chain.reach + 1e-14 * np.linalg.norm(targets, axis=1)
    assert np.all(result.error >= result.lower_bound - slack)
    assert result.length_error.max() <= 1e-12 * chain.reach


@pytest.mark.parametrize("method", JACOBIAN, ids=lambda m: m.name)
def test_reference_weight_keeps_a_redundant_arm_near_its_reference_and_the_elbow_bent_its_way(method):
    # Issue 11: a ball-jointed arm (6 variables for 3 coordinates) reaching across the body,
    # started from its reference pose (elbow bent about its local +z, as the Blender layer starts).
    from ik_solvers.core.kinematics import increments_toward, local_rotations

    chain = Chain.straight([0.30, 0.28], JointKind.BALL)
    reference = np.array([0.0, 0.0, -0.5, 0.0, 0.0, 1.2])
    angle, radius = np.linspace(0.2, 2.9, 40), np.linspace(0.3, 0.5, 40)
    targets = np.concatenate([
        np.stack([radius * np.cos(angle), radius * np.sin(angle), np.full(40, height)], -1) for height in (-0.15, 0.15)
    ])
    deviation, backward = {}, {}
    for weight in (0.0, 0.3):
        options = SolveOptions(max_iterations=200, tolerance=1e-6, reference_weight=weight)
        result = solve(chain, targets, method, options, initial=reference)
        assert result.count(Status.CONVERGED) == len(targets), weight
        deviation[weight] = np.linalg.norm(increments_toward(chain, result.q, np.broadcast_to(reference, result.q.shape)), axis=1)
        forearm = local_rotations(chain, result.q)[:, 1] @ [1.0, 0.0, 0.0]  # in the upper arm's frame
        backward[weight] = int(np.sum(forearm[:, 1] < 0.0))
    assert deviation[0.3].mean() < deviation[0.0].mean()
    assert backward[0.3] == 0


def test_reference_pose_defaults_to_the_initial_pose_and_is_validated():
    chain = Chain.straight([0.30, 0.28], JointKind.BALL)
    start = np.array([0.0, 0.0, -0.5, 0.0, 0.0, 1.2])
    options = SolveOptions(reference_weight=0.3)
    target = [[0.1, 0.3, 0.2]]
    implicit = solve(chain, target, Method.SDLS, options, initial=start)
    explicit = solve(chain, target, Method.SDLS, options, initial=start, reference=start)
    np.testing.assert_array_equal(implicit.q, explicit.q)
    other = solve(chain, target, Method.SDLS, options, initial=start, reference=np.zeros(6))
    assert not np.array_equal(other.q, implicit.q)
    with pytest.raises(IKInputError, match="reference"):
        solve(chain, target, Method.SDLS, options, reference=np.zeros(5))
    with pytest.raises(IKInputError, match="reference"):
        solve(chain, target, Method.SDLS, options, reference=[np.nan] * 6)
    # Weight 0 (the default) leaves every method as it was: the reference is not read.
    plain = solve(chain, target, Method.SDLS, SolveOptions(), initial=start)
    np.testing.assert_array_equal(plain.q, solve(chain, target, Method.SDLS, SolveOptions(), initial=start, reference=np.ones(6)).q)


@pytest.mark.parametrize("method", JACOBIAN, ids=lambda m: m.name)
def test_the_reference_pull_keeps_a_targets_bits_alone_and_in_a_batch(method):
    chain = crooked_chain((JointKind.BALL, JointKind.HINGE, JointKind.UNIVERSAL, JointKind.BALL))
    rng = np.random.default_rng(12)
    targets = chain.root_position + rng.normal(size=(12, 3)) * 0.6
    start = rng.normal(size=(12, chain.n_dof)) * 0.3
    reference = rng.normal(size=(12, chain.n_dof)) * 0.3
    options = SolveOptions(max_iterations=25, reference_weight=0.2)
    whole = solve(chain, targets, method, options, initial=start, reference=reference).q
    alone = [solve(chain, targets[k], method, options, initial=start[k], reference=reference[k]).q for k in range(12)]
    np.testing.assert_array_equal(np.concatenate(alone), whole)

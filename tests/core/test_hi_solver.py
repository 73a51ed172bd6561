"""The HI solver (SPEC §5): preferred-pose sphere, swivel, in-plane solve, parent space, flips, history independence."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import load_script
from hypothesis import given, settings
from hypothesis import strategies as st

from ik_solvers.core import (
    Chain,
    IKInputError,
    JointKind,
    Method,
    ParentSpace,
    Status,
    find_flips,
    forward_kinematics,
    pose_plane_normals,
    preferred_pose,
    solve,
    solve_hi,
    sphere_rotations_for_parent_space,
    swivel_for_plane,
)


def _rodrigues(axis, angle: float) -> np.ndarray:
    """Rotation matrix about an axis, written out independently of the core."""
    x, y, z = np.asarray(axis, float) / np.linalg.norm(axis)
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


def _unit_rows(vectors: np.ndarray) -> np.ndarray:
    return vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)


def _random_directions(rng: np.random.Generator, n: int) -> np.ndarray:
    return _unit_rows(rng.normal(size=(n, 3)))


def _arm(lengths=(1.0, 0.8), root_rotation=None):
    """Ball-jointed chain along +x, bent in its xy plane: each later joint −0.5 rad about z, the first +0.4."""
    chain = Chain.straight(lengths, JointKind.BALL, root_rotation=root_rotation)
    preferred = np.zeros(chain.n_dof)
    preferred[2] = 0.4
    preferred[5::3] = -0.5
    return chain, preferred


def _crooked_arm(seed: int = 11):
    """A 4-bone chain in a random root frame with random 3D preferred rotations: not planar."""
    rng = np.random.default_rng(seed)
    root, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    root *= np.sign(np.linalg.det(root))
    chain = Chain.straight([1.0, 0.9, 0.75, 0.55], JointKind.BALL, root_rotation=root, root_position=[0.3, -0.2, 0.5])
    preferred = rng.uniform(-0.5, 0.5, chain.n_dof)
    return chain, preferred


def _positions(chain: Chain, q: np.ndarray) -> np.ndarray:
    return forward_kinematics(chain, q).positions


def _heights(positions: np.ndarray, normals: np.ndarray) -> np.ndarray:
    return np.einsum("nki,ni->nk", positions - positions[:, :1], normals)


# ------------------------------------------------------------ preferred pose
def test_a_chain_read_again_reuses_the_derived_preferred_pose_and_solves_alike():
    """Each bake reads the rig again (an equal, new Chain): the preferred pose is derived once,
    handed back holding the new chain, and every solve's bits are unchanged."""
    chain, preferred = _crooked_arm(5)
    again, _ = _crooked_arm(5)
    first = preferred_pose(chain, preferred)
    reused = preferred_pose(again, preferred)
    assert reused.chain is again and reused.curled_turns is first.curled_turns  # not derived again
    assert preferred_pose(again, preferred) is reused
    targets = np.random.default_rng(3).normal(size=(20, 3))
    fresh = solve_hi(chain, targets, first).result
    cached = solve_hi(again, targets, reused).result
    assert fresh.q.tobytes() == cached.q.tobytes() and fresh.error.tobytes() == cached.error.tobytes()
    other = Chain(**{**{f: getattr(chain, f) for f in ("kinds", "offsets", "rest_rotations", "axes", "lower",
                                                         "upper", "weights", "root_position", "root_rotation")},
                     "tip_offset": chain.tip_offset * 1.01})
    assert preferred_pose(other, preferred).curled_turns is not first.curled_turns  # another chain: derived


def test_straight_preferred_pose_is_refused_with_a_request_to_bend_it():
    chain = Chain.straight([1.0, 0.8], JointKind.BALL)
    with pytest.raises(IKInputError, match="preferred pose is straight.*bend the chain") as info:
        solve_hi(chain, [[1.0, 0.5, 0.0]], np.zeros(chain.n_dof))
    assert info.value.field == "preferred"
    with pytest.raises(IKInputError, match="straight"):
        solve(chain, [[1.0, 0.5, 0.0]], Method.HI)  # the core entry: rest pose as preferred


def test_chains_the_swivel_cannot_turn_are_refused():
    hinge_start = Chain.planar([1.0, 0.8])
    with pytest.raises(IKInputError, match="ball start joint"):
        preferred_pose(hinge_start, np.array([0.3, 0.5]))
    # A hinge about y cannot bend in a preferred plane bent about z (by the ball elbow).
    chain = Chain(
        kinds=(JointKind.BALL, JointKind.BALL, JointKind.HINGE),
        offsets=[[0, 0, 0], [1.0, 0, 0], [1.0, 0, 0]],
        rest_rotations=np.broadcast_to(np.eye(3), (3, 3, 3)),
        axes=[[1, 0, 0], [0, 1, 0], [0, 0, 1]] * 2 + [[0, 1, 0]],
        lower=[-np.inf] * 7,
        upper=[np.inf] * 7,
        weights=[1.0] * 7,
        tip_offset=[0.8, 0, 0],
    )
    with pytest.raises(IKInputError, match="joint 2 cannot bend in the solver plane"):
        preferred_pose(chain, np.array([0.0, 0.0, 0.0, 0.0, 0.0, -0.5, 0.0]))
    with pytest.raises(IKInputError, match="expected a finite pose of shape"):
        preferred_pose(chain, np.zeros(3))


def test_hinge_elbow_about_the_plane_normal_is_solved_through_its_angle():
    chain = Chain(
        kinds=(JointKind.BALL, JointKind.HINGE),
        offsets=[[0, 0, 0], [1.0, 0, 0]],
        rest_rotations=np.broadcast_to(np.eye(3), (2, 3, 3)),
        axes=[[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]],
        lower=[-np.inf] * 4,
        upper=[np.inf] * 4,
        weights=[1.0] * 4,
        tip_offset=[0.8, 0, 0],
    )
    preferred = np.array([0.0, 0.0, 0.4, -0.9])
    targets = np.array([[0.5, 0.5, 0.7], [1.2, -0.3, 0.2], [-0.4, 0.9, -0.1]])
    result = solve_hi(chain, targets, preferred).result
    np.testing.assert_allclose(_positions(chain, result.q)[:, -1], targets, atol=1e-12)
    # Law of cosines for the elbow, bending the preferred (negative) way about the hinge.
    r = np.linalg.norm(targets, axis=1)
    elbow = np.pi - np.arccos((1.0 + 0.64 - r**2) / (2 * 0.8))
    np.testing.assert_allclose(result.q[:, 3], -elbow, atol=1e-12)


def test_universal_elbow_bends_through_its_second_axis():
    chain = Chain.straight([1.0, 0.8], [JointKind.BALL, JointKind.UNIVERSAL])  # elbow: about z, then y
    preferred = np.array([0.0, 0.0, 0.3, 0.0, 0.7])  # bent about y by the second elbow axis
    targets = np.array([[0.5, 0.5, 0.7], [1.2, -0.3, 0.2], [-0.4, 0.9, -0.1], [0.1, 0.2, 1.5]])
    result = solve_hi(chain, targets, preferred).result
    positions = _positions(chain, result.q)
    np.testing.assert_allclose(positions[:, -1], targets, atol=1e-12)
    np.testing.assert_array_equal(result.q[:, 3], 0.0)  # the first elbow axis never moves
    r = np.linalg.norm(targets, axis=1)
    elbow = np.pi - np.arccos((1.0 + 0.64 - r**2) / (2 * 0.8))  # law of cosines, preferred sense
    np.testing.assert_allclose(result.q[:, 4], elbow, atol=1e-12)


@pytest.mark.parametrize("lengths", [(1.0, 0.8), (1.0, 0.9, 0.75, 0.55)])
def test_target_at_the_preferred_tip_gives_the_preferred_pose(lengths):
    chain, preferred = _arm(lengths)
    tip = _positions(chain, preferred[None])[0, -1]
    solved = solve_hi(chain, tip, preferred)
    np.testing.assert_allclose(solved.result.positions[0], _positions(chain, preferred[None])[0], atol=1e-14)
    # n0 follows the two-bone convention n ∝ (p1 − p0) × (p2 − p1): here the chain bends clockwise, n0 = −z.
    np.testing.assert_allclose(solved.sphere.n0, [0.0, 0.0, -1.0], atol=1e-15)
    np.testing.assert_allclose(solved.sphere.a0, tip / np.linalg.norm(tip), atol=1e-15)


# ----------------------------------------------------------------- rule A
@pytest.mark.parametrize("lengths", [(1.0, 0.8), (1.0, 0.9, 0.75, 0.55)])
def test_rule_a_targets_in_the_preferred_plane_keep_every_joint_in_it(lengths):
    chain, preferred = _arm(lengths)
    rng = np.random.default_rng(1)
    angle = rng.uniform(-np.pi, np.pi, 300)
    radius = rng.uniform(0.05, 1.3, 300) * chain.reach  # inside, at and beyond the reach
    targets = np.stack([radius * np.cos(angle), radius * np.sin(angle), np.zeros(300)], -1)
    solved = solve_hi(chain, targets, preferred)
    positions = _positions(chain, solved.result.q)  # the core's FK of the returned angles
    assert np.abs(positions[..., 2]).max() < 1e-12
    np.testing.assert_allclose(solved.solver_normals, [[0.0, 0.0, -1.0]] * 300, atol=1e-15)
    # ... and bending the preferred way: clockwise seen from +z at every later joint.
    bones = np.diff(positions, axis=1)
    turns = np.cross(bones[:, :-1], bones[:, 1:])[..., 2]
    assert np.all(turns <= 1e-12)


# ------------------------------------------------------------------ reach
def test_two_bones_reach_reachable_targets_to_1e9_and_unreachable_ones_to_the_bound():
    chain, preferred = _arm((1.0, 0.6))
    rng = np.random.default_rng(2)
    radius = np.concatenate([rng.uniform(0.0, 0.4, 200), rng.uniform(0.4, 1.6, 600), rng.uniform(1.6, 3.0, 200)])
    targets = _random_directions(rng, radius.size) * radius[:, None]
    result = solve_hi(chain, targets, preferred, swivel=rng.uniform(-np.pi, np.pi, radius.size)).result
    positions = _positions(chain, result.q)
    error = np.linalg.norm(positions[:, -1] - targets, axis=1)
    bound = np.maximum(0.0, np.maximum(radius - 1.6, 0.4 - radius))  # hand annulus |l1 − l2| ≤ r ≤ l1 + l2
    reachable = bound == 0.0
    assert np.all(error[reachable] <= 1e-9)
    assert np.all(np.abs(error[~reachable] - bound[~reachable]) <= 1e-9)
    assert set(result.status[reachable]) == {Status.CONVERGED}
    assert set(result.status[~reachable]) == {Status.UNREACHABLE}
    lengths = np.linalg.norm(np.diff(positions, axis=1), axis=-1)
    np.testing.assert_allclose(lengths, np.broadcast_to([1.0, 0.6], lengths.shape), atol=1e-12)
    np.testing.assert_allclose(result.positions, positions, atol=1e-12)
    assert result.method is Method.HI


@pytest.mark.parametrize("make", [lambda: _arm((1.0, 0.9, 0.75, 0.55)), _crooked_arm])
def test_longer_chains_reach_to_1e6_and_keep_their_bone_lengths(make):
    chain, preferred = make()
    rng = np.random.default_rng(3)
    start = _positions(chain, preferred[None])[0, 0]
    radius = rng.uniform(0.1, 1.05, 500) * chain.reach
    targets = start + _random_directions(rng, 500) * radius[:, None]
    solved = solve_hi(chain, targets, preferred, swivel=rng.uniform(-3, 3, 500))
    result = solved.result
    positions = _positions(chain, result.q)
    error = np.linalg.norm(positions[:, -1] - targets, axis=1)
    # In-plane reach: the bones' parts across the preferred normal, measured by hand.
    bones = np.diff(_positions(chain, preferred[None])[0], axis=0)
    n0 = chain.root_rotation @ solved.sphere.n0
    in_plane_reach = np.linalg.norm(bones - np.outer(bones @ n0, n0), axis=1).sum()
    # Issue 20: past the in-plane reach the bones' heights give way, so every target up to the
    # chain's reach ΣB is reached and beyond it the error is the geometric bound r − ΣB.
    inside = radius < chain.reach
    assert np.all(error[inside] <= 1e-6)
    assert set(result.status[inside]) == {Status.CONVERGED}
    np.testing.assert_allclose(error[~inside], radius[~inside] - chain.reach, atol=1e-12)
    np.testing.assert_allclose(result.lower_bound[~inside], radius[~inside] - chain.reach, atol=1e-12)
    assert set(result.status[~inside]) <= {Status.UNREACHABLE}
    assert (in_plane_reach < chain.reach - 1e-3) == (make is _crooked_arm)  # a bent-out-of-plane chain
    assert np.count_nonzero((radius > in_plane_reach) & inside) > 0 or make is not _crooked_arm  # lifted, reached
    lengths = np.linalg.norm(np.diff(positions, axis=1), axis=-1)
    np.testing.assert_allclose(lengths, np.broadcast_to(chain.segment_lengths, lengths.shape), atol=1e-12)
    np.testing.assert_allclose(result.positions, positions, atol=1e-12)


def test_planar_chain_beyond_reach_is_straight_along_the_ee_axis_at_the_bound():
    chain, preferred = _arm((1.0, 0.9, 0.75, 0.55))
    rng = np.random.default_rng(4)
    radius = rng.uniform(1.0, 2.0, 100) * chain.reach
    targets = _random_directions(rng, 100) * radius[:, None]
    result = solve_hi(chain, targets, preferred).result
    positions = _positions(chain, result.q)
    np.testing.assert_allclose(np.linalg.norm(positions[:, -1] - targets, axis=1), radius - chain.reach, atol=1e-12)
    assert set(result.status) == {Status.UNREACHABLE}
    np.testing.assert_allclose(result.error - result.lower_bound, 0.0, atol=1e-12)


def test_longer_chains_bend_the_preferred_way_even_near_full_reach():
    chain, preferred = _arm((1.0, 0.9, 0.75, 0.55))
    rng = np.random.default_rng(5)
    angle = rng.uniform(-np.pi, np.pi, 400)
    radius = rng.uniform(0.9, 0.999, 400) * chain.reach
    targets = np.stack([radius * np.cos(angle), radius * np.sin(angle), np.zeros(400)], -1)
    result = solve_hi(chain, targets, preferred).result
    bones = np.diff(_positions(chain, result.q), axis=1)
    assert np.all(np.cross(bones[:, :-1], bones[:, 1:])[..., 2] <= 1e-12)
    assert set(result.status) == {Status.CONVERGED}


# ----------------------------------------------------------------- swivel
def test_swivel_turns_the_solver_plane_about_the_ee_axis():
    chain, preferred = _arm()
    rng = np.random.default_rng(6)
    targets = _random_directions(rng, 200) * rng.uniform(0.5, 1.7, (200, 1))
    swivel = rng.uniform(-np.pi, np.pi, 200)
    solved = solve_hi(chain, targets, preferred, swivel=swivel)
    still = solve_hi(chain, targets, preferred)
    axes = _unit_rows(targets)
    expected = np.array([_rodrigues(a, psi) @ n for a, psi, n in zip(axes, swivel, still.solver_normals)])
    np.testing.assert_allclose(solved.solver_normals, expected, atol=1e-12)
    positions = _positions(chain, solved.result.q)
    bend_normals = _unit_rows(np.cross(positions[:, 1] - positions[:, 0], positions[:, 2] - positions[:, 1]))
    np.testing.assert_allclose(bend_normals, expected, atol=1e-12)
    # The elbow swings on a circle about the EE axis: the turned pose is the still pose rotated by ψ.
    turned = np.einsum("nij,nkj->nki", [_rodrigues(a, psi) for a, psi in zip(axes, swivel)], still.result.positions)
    np.testing.assert_allclose(solved.result.positions, turned, atol=1e-12)
    full_turn = solve_hi(chain, targets, preferred, swivel=swivel + 2 * np.pi)
    np.testing.assert_allclose(full_turn.result.positions, solved.result.positions, atol=1e-12)


def test_pole_object_map_bends_the_elbow_toward_the_pole():
    chain, preferred = _arm()
    rng = np.random.default_rng(7)
    targets = _random_directions(rng, 300) * rng.uniform(0.5, 1.7, (300, 1))
    poles = rng.normal(size=(300, 3)) * 2.0
    solved = solve_hi(chain, targets, preferred, zero_plane_map="POLE_OBJECT", poles=poles)
    positions = solved.result.positions
    normals = pose_plane_normals(positions)
    assert np.abs(np.sum(normals * poles, axis=1)).max() < 1e-12  # the pole lies in the solver plane
    axes = _unit_rows(targets)
    elbow_out = positions[:, 1] - np.sum(positions[:, 1] * axes, axis=1, keepdims=True) * axes
    pole_out = poles - np.sum(poles * axes, axis=1, keepdims=True) * axes
    assert np.all(np.sum(elbow_out * pole_out, axis=1) > 0.0)
    with pytest.raises(IKInputError, match="needs pole positions"):
        solve_hi(chain, targets, preferred, zero_plane_map="POLE_OBJECT")


def test_custom_registered_map_is_used_by_the_solve():
    from ik_solvers.core import ZERO_PLANE_MAPS, register_zero_plane_map
    from ik_solvers.core.zero_plane import DefaultZeroPlaneMap, swivel_normals

    def tilted(a0, n0):
        default = DefaultZeroPlaneMap(a0, n0)
        return lambda axes, **data: swivel_normals(axes, default(axes), 0.5)

    def non_unit(a0, n0):
        default = DefaultZeroPlaneMap(a0, n0)
        return lambda axes, **data: 2.0 * default(axes)

    register_zero_plane_map("TEST_TILTED_HALF", tilted)
    register_zero_plane_map("TEST_NON_UNIT", non_unit)
    try:
        chain, preferred = _arm()
        targets = np.array([[0.5, 1.0, 0.3], [-1.0, 0.2, 0.9]])
        custom = solve_hi(chain, targets, preferred, zero_plane_map="TEST_TILTED_HALF")
        swivelled = solve_hi(chain, targets, preferred, swivel=0.5)
        np.testing.assert_allclose(custom.result.positions, swivelled.result.positions, atol=1e-14)
        with pytest.raises(IKInputError, match="non-unit normal at frame 0"):
            solve_hi(chain, targets, preferred, zero_plane_map="TEST_NON_UNIT")
    finally:
        ZERO_PLANE_MAPS.pop("TEST_TILTED_HALF")
        ZERO_PLANE_MAPS.pop("TEST_NON_UNIT")


# ---------------------------------------------------- history independence
@pytest.mark.parametrize("make", [lambda: _arm(), lambda: _arm((1.0, 0.9, 0.75, 0.55)), _crooked_arm])
def test_frames_in_any_order_or_chunks_give_bit_identical_poses(make):
    chain, preferred = make()
    rng = np.random.default_rng(8)
    n = 240
    start = _positions(chain, preferred[None])[0, 0]
    targets = start + _random_directions(rng, n) * rng.uniform(0.0, 1.3, (n, 1)) * chain.reach
    swivel = rng.uniform(-np.pi, np.pi, n)
    poles = rng.normal(size=(n, 3))
    sphere = np.array([_rodrigues(rng.normal(size=3), rng.uniform(0, np.pi)) for _ in range(n)])
    args = dict(zero_plane_map="POLE_OBJECT")

    def run(rows):
        return solve_hi(chain, targets[rows], preferred, swivel=swivel[rows], poles=poles[rows],
                        sphere_rotations=sphere[rows], **args)

    whole = run(np.arange(n))
    orders = {
        "reversed": np.arange(n)[::-1],
        "shuffled": rng.permutation(n),
    }
    for name, order in orders.items():
        part = run(order)
        back = np.argsort(order)
        assert np.array_equal(part.result.q[back], whole.result.q), name
        assert np.array_equal(part.result.positions[back], whole.result.positions), name
        assert np.array_equal(part.solver_normals[back], whole.solver_normals), name
    for size in (1, 7, 100):
        chunks = [run(np.arange(k, min(k + size, n))) for k in range(0, n, size)]
        assert np.array_equal(np.concatenate([c.result.q for c in chunks]), whole.result.q), size
        assert np.array_equal(np.concatenate([c.result.rotations for c in chunks]), whole.result.rotations), size


@given(st.integers(0, 2**31 - 1))
@settings(max_examples=25, deadline=None)
def test_a_frame_alone_equals_the_same_frame_in_any_batch(seed):
    chain, preferred = _arm((1.0, 0.9, 0.75, 0.55))
    rng = np.random.default_rng(seed)
    targets = _random_directions(rng, 20) * rng.uniform(0.0, 1.2, (20, 1)) * chain.reach
    swivel = rng.uniform(-np.pi, np.pi, 20)
    batch = solve_hi(chain, targets, preferred, swivel=swivel).result.q
    k = int(rng.integers(20))
    alone = solve_hi(chain, targets[k], preferred, swivel=swivel[k]).result.q
    assert np.array_equal(alone[0], batch[k])


def test_strided_one_frame_inputs_give_the_batch_bits():
    """Regression: a one-row view keeps its parent's stride, and numpy's sin/arctan2 round
    differently on strided input; a lone frame given such views must still match the batch."""
    chain, preferred = _arm((1.0, 0.9, 0.75, 0.55))
    rng = np.random.default_rng(12)
    table = rng.uniform(-1.0, 1.0, (64, 7))  # columns: target xyz, swivel, pole xyz
    table[:, :3] *= chain.reach
    swivel, poles = table[:, 3].copy(), table[:, 4:].copy()  # the batch gets unit-stride arrays
    batch = solve_hi(chain, table[:, :3], preferred, swivel=swivel, poles=poles, zero_plane_map="POLE_OBJECT")
    for k in range(64):
        row = table[k : k + 1]
        alone = solve_hi(chain, row[:, :3], preferred, swivel=row[:, 3], poles=row[:, 4:], zero_plane_map="POLE_OBJECT")
        assert np.array_equal(alone.result.q[0], batch.result.q[k]), k
        assert np.array_equal(alone.solver_normals[0], batch.solver_normals[k]), k


def test_core_solve_entry_runs_the_hi_solver():
    chain, preferred = _arm()
    targets = np.array([[0.5, 1.0, 0.3], [-1.0, 0.2, 0.9]])
    via_core = solve(chain, targets, "HI", initial=preferred, swivel=0.3)
    direct = solve_hi(chain, targets, preferred, swivel=0.3).result
    assert np.array_equal(via_core.q, direct.q)
    assert via_core.method is Method.HI
    with pytest.raises(IKInputError, match="one preferred pose for the whole batch"):
        solve(chain, targets, "HI", initial=np.stack([preferred, preferred + 0.1]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(swivel=[0.1, 0.2, 0.3]), "swivel: expected a number or shape"),
        (dict(swivel=np.nan), "swivel: must be finite"),
        (dict(sphere_rotations=2.0 * np.eye(3)), "sphere_rotations: must be proper rotation"),
        (dict(sphere_rotations=np.diag([1.0, 1.0, -1.0])), "sphere_rotations: must be proper rotation"),
        (dict(sphere_rotations=np.zeros((3, 3, 3))), "sphere_rotations: expected shape"),
        (dict(poles=np.zeros((5, 3)), zero_plane_map="POLE_OBJECT"), "poles: expected finite pole positions"),
        (dict(warning_angle=-1.0), "warning_angle"),
    ],
)
def test_bad_hi_parameters_are_refused(kwargs, message):
    chain, preferred = _arm()
    with pytest.raises(IKInputError, match=message):
        solve_hi(chain, [[0.5, 1.0, 0.3], [-1.0, 0.2, 0.9]], preferred, **kwargs)


# ------------------------------------------------------- the seed's examples
def test_seed_example_1_rotating_the_start_parent_turns_the_chain_only_with_start_joint_space():
    """Start joint parented to A (at A's origin), target in world, preferred pose captured with A unrotated."""
    chain, preferred = _arm()  # the chain's root is A; we solve in A's space
    preferred_positions = _positions(chain, preferred[None])[0]
    tip = preferred_positions[-1]
    a0 = tip / np.linalg.norm(tip)
    beta = np.linspace(0.0, 2 * np.pi, 25)
    spins = np.array([_rodrigues(a0, b) for b in beta])  # A turns about the drawn EE axis
    rng = np.random.default_rng(9)
    tumbles = np.array([_rodrigues(rng.normal(size=3), rng.uniform(0, np.pi)) for _ in range(25)])
    for rotations_a in (spins, tumbles):
        local_targets = np.einsum("nji,j->ni", rotations_a, tip)  # the world target seen from A
        world = {}
        for space in ParentSpace:
            sphere = sphere_rotations_for_parent_space(space, rotations_a, np.eye(3), solving_rotations=rotations_a)
            local = solve_hi(chain, local_targets, preferred, sphere_rotations=sphere).result.positions
            world[space] = np.einsum("nij,nkj->nki", rotations_a, local)
        np.testing.assert_allclose(world[ParentSpace.IK_TARGET], np.broadcast_to(preferred_positions, (25, 3, 3)),
                                   atol=1e-12)  # B: the chain holds still in world
        if rotations_a is spins:  # A: the whole chain turns with A about the EE axis
            np.testing.assert_allclose(world[ParentSpace.START_JOINT],
                                       np.einsum("nij,kj->nki", spins, preferred_positions), atol=1e-12)
    assert np.allclose(sphere_rotations_for_parent_space("START_JOINT", spins, np.eye(3), spins), np.eye(3))


def _circle_in_the_chain_plane(n_frames: int, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Targets going once round the start joint in the world xz plane, never exactly at ±z."""
    angle = (np.arange(n_frames) + 0.5) * 2 * np.pi / n_frames
    return angle, np.stack([radius * np.cos(angle), np.zeros(n_frames), radius * np.sin(angle)], -1)


@pytest.mark.parametrize("lengths", [(1.0, 0.8), (1.0, 0.9, 0.75, 0.55)])
def test_seed_example_2_parent_rotated_at_assignment(lengths):
    """A holds a 90° turn about x, so the chain (bent in A's xy plane) shows in the world xz plane."""
    chain, preferred = _arm(lengths)
    rotation_a = _rodrigues([1.0, 0.0, 0.0], np.pi / 2)
    angle, world_targets = _circle_in_the_chain_plane(144, 0.8 * chain.reach)
    local_targets = world_targets @ rotation_a  # rows: Aᵀ t
    solved = {}
    for space in ParentSpace:
        sphere = sphere_rotations_for_parent_space(space, rotation_a, np.eye(3), solving_rotations=rotation_a)
        solved[space] = solve_hi(chain, local_targets, preferred, sphere_rotations=sphere)
    # START_JOINT: the sphere's equator is the chain's viewport plane — the target never nears a pole.
    start = solved[ParentSpace.START_JOINT]
    world_positions = start.result.positions @ rotation_a.T
    assert np.abs(world_positions[..., 1]).max() < 1e-12
    assert len(find_flips(start).frames) == 0
    assert not start.pole_warnings.any()
    np.testing.assert_allclose(start.pole_angles, np.pi / 2, atol=1e-12)
    # IK_TARGET: the sphere sits level in world, its poles ±z lie in the viewport plane: two flips,
    # in exactly the steps where the target passes over the poles.
    target = solved[ParentSpace.IK_TARGET]
    flips = find_flips(target)
    over_a_pole = [k for k in range(1, 144) if np.floor((angle[k - 1] - np.pi / 2) / np.pi) != np.floor((angle[k] - np.pi / 2) / np.pi)]
    assert list(flips.frames) == over_a_pole and len(over_a_pole) == 2
    assert flips.pole_crossing.all()
    np.testing.assert_allclose(flips.turns, np.pi, atol=0.05)
    near_pole = np.degrees(np.arccos(np.abs(np.sin(angle)))) < 10.0  # hand: angle to ±z
    assert np.array_equal(target.pole_warnings, near_pole) and near_pole.sum() == 16
    assert np.all(target.result.error <= 1e-6)


def test_seed_example_3_reassigning_the_start_joint_keeps_the_swivel():
    """Bone01..Bone04 with Bone01 turned; re-assign the start joint to Bone02, or make a new chain from it."""
    full = Chain.straight([1.0, 1.0, 1.0, 1.0], JointKind.BALL)
    preferred = np.concatenate([[0.3, -0.5, 0.7], [0, 0, 0.5], [0, 0, 0.4], [0, 0, 0.3]])
    pose = forward_kinematics(full, preferred[None])
    viewport = pose.positions[0]
    target = viewport[-1]
    before = solve_hi(full, target, preferred)
    np.testing.assert_allclose(before.result.positions[0], viewport, atol=1e-13)
    # Bone02..Bone04 hang from Bone01's frame (its world frame in the pose shown).
    tail = Chain(
        kinds=full.kinds[1:],
        offsets=full.offsets[1:],
        rest_rotations=full.rest_rotations[1:],
        axes=full.axes[3:],
        lower=full.lower[3:],
        upper=full.upper[3:],
        weights=full.weights[3:],
        tip_offset=full.tip_offset,
        root_position=viewport[0],
        root_rotation=pose.frames[0, 1],
    )
    tail_preferred = preferred[3:]
    bone01 = pose.frames[0, 1]
    world = np.eye(3)  # the target's parent, and the solving frame
    in_start_space = sphere_rotations_for_parent_space("START_JOINT", bone01, world)
    in_target_space = sphere_rotations_for_parent_space("IK_TARGET", bone01, world)
    # START_JOINT: the sphere rides with Bone01 — same normal, the chain does not move.
    kept = solve_hi(tail, target, tail_preferred, sphere_rotations=in_start_space, swivel=before.swivel)
    np.testing.assert_allclose(kept.result.positions[0], viewport[1:], atol=1e-12)
    # IK_TARGET: the sphere stays in world while Bone01's turn moved the chain: one flip to another plane.
    flipped = solve_hi(tail, target, tail_preferred, sphere_rotations=in_target_space, swivel=before.swivel)
    assert flipped.result.error[0] <= 1e-6
    plane_before = pose_plane_normals(viewport[None, 1:])[0]
    assert np.degrees(np.arccos(flipped.solver_normals[0] @ plane_before)) > 20.0
    # A new chain instead picks ψ so that the solver plane stays where the viewport shows it.
    psi = swivel_for_plane(tail, target, tail_preferred, plane_before, sphere_rotations=in_target_space)
    new_chain = solve_hi(tail, target, tail_preferred, sphere_rotations=in_target_space, swivel=psi)
    np.testing.assert_allclose(new_chain.result.positions[0], viewport[1:], atol=1e-12)
    assert abs(psi[0]) > np.radians(20.0)  # the compensation is real, not ψ = 0


# ---------------------------------------------------------------- flips
def test_flip_report_separates_pole_crossings_from_swivel_jumps():
    chain, preferred = _arm()
    n0 = np.array([0.0, 0.0, -1.0])
    a0 = _positions(chain, preferred[None])[0, -1]
    a0 /= np.linalg.norm(a0)
    # Up the zero meridian from 60.5° latitude, over the pole (between frames 29 and 30), down the far side.
    latitude = np.radians(np.arange(60) + 60.5)
    axes = np.cos(latitude)[:, None] * a0 + np.sin(latitude)[:, None] * n0
    swivel = np.where(np.arange(60) >= 10, np.radians(60.0), 0.0)  # a swivel key jumps at frame 10
    solved = solve_hi(chain, 1.2 * axes, preferred, swivel=swivel)
    np.testing.assert_allclose(np.degrees(solved.pole_angles), np.abs(90.0 - np.degrees(latitude)), atol=1e-9)
    assert list(np.flatnonzero(solved.pole_warnings)) == list(range(20, 40))  # within 10° of the pole
    flips = find_flips(solved)
    assert list(flips.frames) == [10, 30]
    assert list(flips.pole_crossing) == [False, True]
    # Hand normals: cos φ n0 − sin φ e, e the meridian (a0 before the pole, −a0 after it) and φ the
    # latitude measured on that side, then turned by ψ about the axis.
    before_pole = (latitude <= np.pi / 2)[:, None]
    meridian = np.where(before_pole, a0, -a0)
    phi = np.where(before_pole, latitude[:, None], np.pi - latitude[:, None])
    hand = np.cos(phi) * n0 - np.sin(phi) * meridian
    hand = np.array([_rodrigues(a, psi) @ h for a, psi, h in zip(axes, swivel, hand)])
    np.testing.assert_allclose(solved.solver_normals, hand, atol=1e-12)
    expected = [np.degrees(np.arccos(np.clip(hand[k - 1] @ hand[k], -1, 1))) for k in (10, 30)]
    np.testing.assert_allclose(np.degrees(flips.turns), expected, atol=1e-6)
    assert 59.0 < expected[0] < 61.0 and expected[1] > 179.0
    # The arc from frame 29 to 30 runs over the pole itself: a crossing however tight the threshold.
    assert list(find_flips(solved, warning_angle=1e-9).pole_crossing) == [False, True]
    assert len(find_flips(solved, turn_threshold=np.radians(179.9)).frames) == 0
    # The same path tilted 5° about a0 misses the pole by 5°: a fast turn there, not a crossing at 3°.
    tilted = solve_hi(chain, 1.2 * axes @ _rodrigues(a0, np.radians(5.0)).T, preferred)
    near = find_flips(tilted, turn_threshold=np.radians(5.0))
    assert len(near.frames) > 0 and near.pole_crossing.all()
    assert not find_flips(tilted, turn_threshold=np.radians(5.0), warning_angle=np.radians(3.0)).pole_crossing.any()
    assert not find_flips(tilted, warning_angle=np.radians(10.0)).frames.size  # under the default 30° turn
    with pytest.raises(IKInputError, match="turn_threshold"):
        find_flips(solved, turn_threshold=np.nan)


def test_parent_space_rotations_follow_the_chosen_parent():
    rng = np.random.default_rng(10)
    start_parent = np.array([_rodrigues(rng.normal(size=3), rng.uniform(0, 3)) for _ in range(5)])
    target_parent = np.array([_rodrigues(rng.normal(size=3), rng.uniform(0, 3)) for _ in range(5)])
    np.testing.assert_allclose(sphere_rotations_for_parent_space("START_JOINT", start_parent, target_parent), start_parent)
    in_start_space = sphere_rotations_for_parent_space(ParentSpace.IK_TARGET, start_parent, target_parent, start_parent)
    np.testing.assert_allclose(in_start_space, np.transpose(start_parent, (0, 2, 1)) @ target_parent, atol=1e-15)
    with pytest.raises(IKInputError, match="parent_space"):
        sphere_rotations_for_parent_space("WORLD", start_parent, target_parent)


# ---------------------------------------------------------------- scripts
def test_hi_benchmark_solves_both_chains_and_reports_frames_per_second(capsys):
    figures = load_script("bench_hi").benchmark_hi(n_frames=400, repeats=1)
    assert set(figures) == {"two_bone", "four_bone"}
    for entry in figures.values():
        assert entry["frames"] == 400
        assert entry["converged"] + entry["unreachable"] == 400  # 0.1–1.1 of the reach: all solved
        assert 0 < entry["unreachable"] < 400
        assert entry["frames_per_second"] == pytest.approx(400 / entry["seconds"])
    assert "frames/s" in capsys.readouterr().out


def test_zero_plane_figure_script_writes_the_png(tmp_path):
    plot = load_script("plot_zero_plane_map")
    assert plot.main(["--out", str(tmp_path)]) == 0
    png = tmp_path / "hi-default-map.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert plot.main(["--help"]) == 0


def test_flips_from_bare_arrays_match_the_report_of_a_solve():
    chain, preferred = _arm()
    angle, targets = _circle_in_the_chain_plane(72, 1.2)
    targets = targets @ _rodrigues([0.0, 0.0, 1.0], 0.3).T  # a circle over the poles ±z
    solved = solve_hi(chain, targets, preferred)
    from ik_solvers.core import flips_from_normals

    report = find_flips(solved)
    bare = flips_from_normals(solved.solver_normals, solved.ee_axes_sphere, solved.sphere.n0)
    assert len(report.frames) == 2 and report.pole_crossing.all()
    assert np.array_equal(bare.frames, report.frames) and np.array_equal(bare.turns, report.turns)
    with pytest.raises(IKInputError, match="one shape"):
        flips_from_normals(solved.solver_normals, solved.ee_axes_sphere[:-1], solved.sphere.n0)


def test_pole_object_map_warns_and_flips_where_the_ee_axis_lines_up_with_the_pole():
    """The pole-object map's singular points are the pole target's line, not the sphere's poles."""
    chain, preferred = _arm()
    angle = (np.arange(72) + 0.5) * np.radians(5.0)
    targets = 1.2 * np.stack([np.cos(angle), np.sin(angle), np.zeros(72)], -1)  # the equator of ±z
    pole = np.array([0.0, 2.0, 0.0])  # on the circle's path at 90°
    solved = solve_hi(chain, targets, preferred, zero_plane_map="POLE_OBJECT", poles=pole)
    toward_pole = np.degrees(np.arccos(np.abs(np.sin(angle))))  # hand: angle between the axis and the ±y line
    np.testing.assert_allclose(np.degrees(solved.pole_angles), toward_pole, atol=1e-9)
    assert np.array_equal(solved.pole_warnings, toward_pole < 10.0) and solved.pole_warnings.sum() == 8
    flips = find_flips(solved)
    assert list(flips.frames) == [18, 54]  # between 87.5° and 92.5°, and 267.5° and 272.5°
    assert flips.pole_crossing.all()
    default = solve_hi(chain, targets, preferred)  # the default map never flips on its equator
    assert not default.pole_warnings.any() and len(find_flips(default).frames) == 0

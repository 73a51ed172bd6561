"""Chain model, batched FK and geometric Jacobians (SPEC §3.1)."""

import subprocess
import sys

import numpy as np
import pytest

from ik_solvers.core import (
    Chain,
    IKInputError,
    JointKind,
    bone_length_errors,
    error_lower_bounds,
    forward_kinematics,
    jacobian,
    position_jacobian,
)
from ik_solvers.core.kinematics import apply_increments, clamp_step
from ik_solvers.core.rotations import (
    matrices_from_quaternions,
    matrices_from_rotvecs,
    quaternions_from_matrices,
    rotvecs_from_matrices,
)

KINDS = [JointKind.HINGE, JointKind.UNIVERSAL, JointKind.BALL]


def mixed_chain():
    """A chain with every joint kind, non-trivial rest rotations and offsets."""
    rng = np.random.default_rng(3)
    kinds = (JointKind.BALL, JointKind.UNIVERSAL, JointKind.HINGE, JointKind.BALL)
    axes = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.6, 0.8, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    rest = matrices_from_rotvecs(rng.normal(size=(4, 3)) * 0.5)
    offsets = [[0.1, 0.0, 0.2], [0.0, 0.7, 0.0], [0.05, 0.5, 0.0], [0.0, 0.4, 0.1]]
    return Chain(
        kinds=kinds,
        offsets=offsets,
        rest_rotations=rest,
        axes=axes,
        lower=np.full(9, -np.inf),
        upper=np.full(9, np.inf),
        weights=np.ones(9),
        tip_offset=[0.0, 0.3, 0.0],
        root_position=[1.0, -2.0, 0.5],
        root_rotation=matrices_from_rotvecs(np.array([0.3, -0.2, 1.1])),
    )


def test_core_imports_without_blender():
    code = "import sys; sys.modules['bpy'] = None; sys.modules['mathutils'] = None; import ik_solvers.core; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_planar_fk_matches_hand_computation():
    chain = Chain.planar([1.0, 0.5])
    pose = forward_kinematics(chain, [[np.pi / 2, -np.pi / 2]])
    np.testing.assert_allclose(pose.positions[0], [[0, 0, 0], [0, 1, 0], [0.5, 1, 0]], atol=1e-15)


def test_fk_is_batched_identically_to_single_solves():
    chain = mixed_chain()
    q = np.random.default_rng(0).normal(size=(7, chain.n_dof))
    batch = forward_kinematics(chain, q).positions
    singles = np.concatenate([forward_kinematics(chain, row[None]).positions for row in q])
    np.testing.assert_array_equal(batch, singles)


def test_fk_keeps_segment_lengths_at_machine_precision():
    chain = mixed_chain()
    q = np.random.default_rng(1).normal(size=(500, chain.n_dof)) * 3
    assert bone_length_errors(chain, forward_kinematics(chain, q)).max() < 1e-14


def numeric_position_jacobian(chain, q, h=1e-6):
    """Central differences; ball variables are perturbed as increments in the joint frame."""
    cols = []
    for k in range(chain.n_dof):
        dq = np.zeros_like(q)
        dq[:, k] = h
        plus = forward_kinematics(chain, apply_increments(chain, q, dq)).tips
        minus = forward_kinematics(chain, apply_increments(chain, q, -dq)).tips
        cols.append((plus - minus) / (2 * h))
    return np.stack(cols, -1)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_jacobian_matches_central_differences_for_each_joint_kind(kind):
    chain = Chain.straight([0.7, 0.5, 0.4], kind)
    q = np.random.default_rng(2).normal(size=(5, chain.n_dof))
    analytic = position_jacobian(chain, forward_kinematics(chain, q))
    np.testing.assert_allclose(analytic, numeric_position_jacobian(chain, q), atol=1e-8)


def test_jacobian_matches_central_differences_on_a_mixed_chain_with_rest_rotations():
    chain = mixed_chain()
    q = np.random.default_rng(4).normal(size=(5, chain.n_dof))
    analytic = position_jacobian(chain, forward_kinematics(chain, q))
    np.testing.assert_allclose(analytic, numeric_position_jacobian(chain, q), atol=1e-8)


def test_ball_joint_jacobian_has_full_rank_at_euler_gimbal_lock():
    # XYZ Euler (0, π/2, 0) locks X and Z together; the rotation-increment
    # parametrisation must still move the tip in every direction a ball allows.
    chain = Chain.straight([1.0], JointKind.BALL)
    q = rotvecs_from_matrices(matrices_from_rotvecs(np.array([[0.0, np.pi / 2, 0.0]])))
    j = position_jacobian(chain, forward_kinematics(chain, q))[0]
    assert np.linalg.matrix_rank(j, tol=1e-9) == 2  # a point on a sphere: two directions
    np.testing.assert_allclose(j, numeric_position_jacobian(chain, q)[0], atol=1e-8)


def test_multi_effector_and_orientation_rows():
    chain = mixed_chain()
    q = np.random.default_rng(5).normal(size=(3, chain.n_dof))
    pose = forward_kinematics(chain, q)
    offset = np.array([0.0, 0.2, 0.0])
    j = jacobian(chain, pose, effectors=[(1, offset), (3, chain.tip_offset)], orientation=True)
    assert j.shape == (3, 9, chain.n_dof)
    np.testing.assert_allclose(j[:, 3:6], position_jacobian(chain, pose), atol=1e-15)
    # Effector on joint 1: numeric derivative of that point.
    h = 1e-6
    for k in range(chain.n_dof):
        dq = np.zeros_like(q)
        dq[:, k] = h
        points = []
        for sign in (1, -1):
            p = forward_kinematics(chain, apply_increments(chain, q, sign * dq))
            points.append(p.positions[:, 1] + p.frames[:, 2] @ offset)
        np.testing.assert_allclose(j[:, :3, k], (points[0] - points[1]) / (2 * h), atol=1e-8)
    # Angular rows: the tip frame's angular velocity per unit variable.
    k = 7
    dq = np.zeros_like(q)
    dq[:, k] = h
    r_plus = forward_kinematics(chain, apply_increments(chain, q, dq)).frames[:, -1]
    r_minus = forward_kinematics(chain, apply_increments(chain, q, -dq)).frames[:, -1]
    omega = rotvecs_from_matrices(r_plus @ np.swapaxes(r_minus, 1, 2)) / (2 * h)
    np.testing.assert_allclose(j[:, 6:, k], omega, atol=1e-7)


def test_step_clamp_keeps_direction_and_limits_the_largest_joint_turn():
    chain = Chain.straight([1.0, 1.0], [JointKind.BALL, JointKind.HINGE])
    dq = np.array([[0.3, 0.4, 0.0, 2.0]])
    clamped = clamp_step(chain, dq, 0.5)
    np.testing.assert_allclose(clamped, dq * 0.25)


def test_limits_clip_after_an_increment():
    chain = Chain.planar([1.0, 1.0], lower=[-0.1, -1.0], upper=[0.1, 1.0])
    out = apply_increments(chain, np.zeros((1, 2)), np.array([[0.5, -3.0]]))
    np.testing.assert_allclose(out, [[0.1, -1.0]])


def test_lower_bound_formula():
    chain = Chain.straight([1.0, 0.3, 0.2])  # d_min = 2·1.0 − 1.5 = 0.5
    targets = np.array([[2.0, 0, 0], [1.0, 0, 0], [0.2, 0, 0], [0.0, 0, 0]])
    np.testing.assert_allclose(error_lower_bounds(chain, targets), [0.5, 0.0, 0.3, 0.5])


def test_rotation_conversions_round_trip():
    rng = np.random.default_rng(6)
    vectors = rng.normal(size=(1000, 3))
    vectors *= (rng.uniform(0, np.pi - 1e-6, 1000) / np.linalg.norm(vectors, axis=1))[:, None]
    vectors[:5] *= 1e-9  # the small-angle branch
    matrices = matrices_from_rotvecs(vectors)
    np.testing.assert_allclose(rotvecs_from_matrices(matrices), vectors, atol=1e-9)
    np.testing.assert_allclose(matrices_from_quaternions(quaternions_from_matrices(matrices)), matrices, atol=1e-12)


@pytest.mark.parametrize(
    "change, field",
    [
        (dict(kinds=()), "kinds"),
        (dict(lower=[0.2, 0.0], upper=[0.1, 1.0]), "lower"),
        (dict(weights=[0.0, 1.0]), "weights"),
        (dict(tip_offset=[0.0, 0.0, 0.0]), "tip_offset"),
        (dict(offsets=[[0, 0, 0], [1e-12, 0, 0]]), "offsets"),
        (dict(root_position=[np.nan, 0, 0]), "root_position"),
        (dict(axes=[[0, 0, 2.0], [0, 0, 1.0]]), "axes"),
    ],
)
def test_invalid_chains_raise_naming_the_field(change, field):
    base = dict(
        kinds=(JointKind.HINGE, JointKind.HINGE),
        offsets=[[0, 0, 0], [1.0, 0, 0]],
        rest_rotations=np.broadcast_to(np.eye(3), (2, 3, 3)),
        axes=[[0, 0, 1.0], [0, 0, 1.0]],
        lower=[-np.inf, -np.inf],
        upper=[np.inf, np.inf],
        weights=[1.0, 1.0],
        tip_offset=[1.0, 0, 0],
    )
    base.update(change)
    with pytest.raises(IKInputError, match=field) as info:
        Chain(**base)
    assert info.value.field == field


@pytest.mark.parametrize("lengths", [[1.0, 0.0], [1.0, -1.0], [np.inf, 1.0], []])
def test_straight_chain_refuses_bad_lengths(lengths):
    with pytest.raises(IKInputError, match="lengths"):
        Chain.straight(lengths)


def test_cross_gives_the_same_bits_for_small_and_large_batches():
    from ik_solvers.core.vectors import cross

    rng = np.random.default_rng(8)
    a, b = rng.normal(size=(400, 30, 3)), rng.normal(size=(400, 30, 3))
    whole = cross(a, b)  # above the size where it switches to component products
    alone = np.concatenate([cross(a[k : k + 1], b[k : k + 1]) for k in range(400)])
    np.testing.assert_array_equal(whole, alone)
    np.testing.assert_allclose(whole, np.cross(a, b), atol=1e-15)

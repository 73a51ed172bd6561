"""HI on a straight preferred pose (SPEC §5, issue 20): ``bend_direction`` (or a pole map's poles) gives
the plane, every middle joint bends toward it, the straight pose comes back for a target on its tip,
the pose is continuous and one target is the batch's bits; without either, a clear refusal."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ik_solvers.core import Chain, IKInputError, JointKind, forward_kinematics, preferred_pose, solve_hi
from ik_solvers.core.hi.one_target import solve_hi_one
from ik_solvers.core.rotations import matrices_from_rotvecs

STEP = 0.0005  # target step (m), as tests/core/test_hi_continuity.py
MAX_JOINT_STEP = 0.005  # largest joint move per target step (m)


def _rotation(rotvec) -> np.ndarray:
    return matrices_from_rotvecs(np.asarray(rotvec, dtype=float)[None])[0]


@st.composite
def straight_chains(draw):
    """A straight chain of 2–5 ball joints (metre-scale bones), turned by a random root rotation and a
    random start-joint rotation (still straight), and a bend direction across it (start joint's rest frame)."""
    n = draw(st.integers(2, 5))
    lengths = draw(st.lists(st.floats(0.1, 0.6), min_size=n, max_size=n))
    unit_floats = st.floats(-1.0, 1.0)
    root = _rotation(draw(st.tuples(unit_floats, unit_floats, unit_floats)))
    chain = Chain.straight(lengths, JointKind.BALL, root_position=draw(st.tuples(unit_floats, unit_floats, unit_floats)),
                           root_rotation=root)
    preferred = np.zeros(chain.n_dof)
    preferred[:3] = draw(st.tuples(unit_floats, unit_floats, unit_floats))
    direction = np.array(draw(st.tuples(unit_floats, unit_floats, unit_floats)))
    # Across the chain (+x in the start joint's rest frame) by a clear margin.
    assume(np.linalg.norm(direction[1:]) > 0.2)
    return chain, preferred, direction


def _bend_side(chain: Chain, preferred: np.ndarray, direction: np.ndarray) -> np.ndarray:
    """The bend direction's part across the preferred EE axis, unit, in the solving frame."""
    positions = forward_kinematics(chain, preferred[None]).positions[0]
    axis = (positions[-1] - positions[0]) / np.linalg.norm(positions[-1] - positions[0])
    # The start joint's rest frame (root · rest₀) in the solving frame.
    d = chain.root_rotation @ chain.rest_rotations[0] @ direction
    across = d - (d @ axis) * axis
    return across / np.linalg.norm(across)


def _plane_turns(positions: np.ndarray, normal: np.ndarray) -> np.ndarray:
    """Each middle joint's turn about ``normal`` (radians), of poses ``(N, n + 1, 3)``."""
    bones = np.diff(positions, axis=1)
    first, second = bones[:, :-1], bones[:, 1:]
    return np.arctan2(np.cross(first, second) @ normal, np.sum(first * second, axis=-1))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(straight_chains())
def test_a_straight_chain_bends_toward_its_bend_direction_and_keeps_its_tip_pose(case):
    chain, preferred, direction = case
    pref = preferred_pose(chain, preferred, direction)
    positions = forward_kinematics(chain, preferred[None]).positions[0]
    side = _bend_side(chain, preferred, direction)
    # The plane holds the EE axis and d; the chain bulges toward a0 × n0 = d⊥.
    assert np.allclose(np.cross(pref.a0_world, pref.n0_world), side, atol=1e-12)
    # A target on the tip: the straight preferred pose itself, to the square root of rounding (at full
    # stretch the distance's last bit, ~1e-16, bends a joint by ~1e-8: the straight pose is where the
    # distance stops growing).
    at_tip = solve_hi(chain, positions[-1][None], pref).result
    np.testing.assert_allclose(at_tip.positions[0], positions, rtol=0.0, atol=1e-7)
    np.testing.assert_allclose(at_tip.q[0], preferred, rtol=0.0, atol=1e-6)
    # A reach sweep along the preferred axis: reached, every middle joint turned toward d, the knee on d's side.
    axis = (positions[-1] - positions[0]) / np.linalg.norm(positions[-1] - positions[0])
    r = np.linspace(max(0.3 * pref.in_plane_reach, pref.curled_distance + 0.01), 0.999 * pref.in_plane_reach, 60)
    targets = positions[0] + r[:, None] * axis
    solved = solve_hi(chain, targets, pref).result
    assert solved.error.max() <= 1e-9
    assert _plane_turns(solved.positions, pref.n0_world).min() >= -1e-12
    knee = solved.positions[:, 1] - solved.positions[:, 0]
    # The first joint lies on d's side wherever the chain is bent as a limb bends; curled deeper than
    # half its reach, a short first bone of a chain whose every joint turns toward d can tilt back
    # across the axis (seen: a 0.125 bone before three of 0.5, 0.004 across).
    assert (knee[r >= 0.5 * pref.in_plane_reach] @ side).min() > 0.0
    assert np.abs(knee @ pref.n0_world).max() <= 1e-9  # in the plane of the EE axis and d
    for k in (0, 30, 59):  # live mode's one-target solve: the batch's bits
        assert np.array_equal(np.array(solve_hi_one(pref, targets[k]).q), solved.q[k])


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(straight_chains(), st.integers(0, 2**31 - 1))
def test_anywhere_the_chain_bends_the_way_of_its_solver_plane(case, seed):
    """Targets all around (and a swivel): every middle joint turns positively about the frame's
    solver-plane normal — the sense the bend direction set, carried by the zero-plane map."""
    chain, preferred, direction = case
    pref = preferred_pose(chain, preferred, direction)
    rng = np.random.default_rng(seed)
    ways = rng.normal(size=(40, 3))
    ways /= np.linalg.norm(ways, axis=1)[:, None]
    reach = pref.in_plane_reach
    targets = pref.start + rng.uniform(max(0.3 * reach, pref.curled_distance + 0.01), 0.99 * reach, (40, 1)) * ways
    hi = solve_hi(chain, targets, pref, swivel=rng.uniform(-np.pi, np.pi, 40))
    assert hi.result.error.max() <= 1e-9
    turns = np.array([_plane_turns(hi.result.positions[k:k + 1], hi.solver_normals[k])[0] for k in range(40)])
    assert turns.min() >= -1e-12


def test_a_reach_sweep_is_continuous():
    """A 3-bone straight leg (metres): 0.5 mm target steps move no joint more than 5 mm from 5 % to 98 %
    of the reach (near full stretch a straight start moves the knee as √ of the target's move, as any
    solver must)."""
    chain = Chain.straight([0.45, 0.42, 0.12], JointKind.BALL)
    pref = preferred_pose(chain, np.zeros(9), [0.0, 0.0, -1.0])
    r = np.arange(0.05 * pref.in_plane_reach, 0.98 * pref.in_plane_reach, STEP)
    solved = solve_hi(chain, r[:, None] * np.array([1.0, 0.0, 0.0]), pref).result
    assert solved.error.max() <= 1e-9
    assert np.linalg.norm(np.diff(solved.positions, axis=0), axis=-1).max() <= MAX_JOINT_STEP
    assert (solved.positions[:, 1, 2] < 0.0).all()  # the knee toward d = −z


def test_a_straight_pose_without_bend_direction_or_pole_is_refused_naming_it():
    chain = Chain.straight([1.0, 0.8, 0.5], JointKind.BALL)
    with pytest.raises(IKInputError, match="bend_direction") as info:
        solve_hi(chain, [[1.0, 0.5, 0.0]], np.zeros(chain.n_dof))
    assert info.value.field == "preferred"
    for along in ([2.0, 0.0, 0.0], [0.0, 0.0, 0.0]):  # along the chain, or zero: no plane either
        with pytest.raises(IKInputError, match="along the chain") as info:
            solve_hi(chain, [[1.0, 0.5, 0.0]], np.zeros(chain.n_dof), bend_direction=along)
        assert info.value.field == "bend_direction"
    with pytest.raises(IKInputError):
        solve_hi(chain, [[1.0, 0.5, 0.0]], np.zeros(chain.n_dof), bend_direction=[0.0, np.nan, 1.0])


def test_a_bent_preferred_pose_ignores_bend_direction():
    chain = Chain.straight([1.0, 0.8, 0.5], JointKind.BALL)
    preferred = np.zeros(chain.n_dof)
    preferred[5] = 0.4  # the second joint bent about +z
    targets = np.random.default_rng(1).normal(size=(10, 3))
    plain = solve_hi(chain, targets, preferred).result
    directed = solve_hi(chain, targets, preferred, bend_direction=[0.0, 0.0, 1.0]).result
    assert plain.q.tobytes() == directed.q.tobytes()


def test_a_pole_target_gives_a_straight_chain_its_plane():
    """With the Pole Object map the pole gives every frame's plane: the knee bends toward the pole."""
    chain = Chain.straight([0.5, 0.45], JointKind.BALL)
    targets = np.array([[0.7, 0.1, 0.0], [0.6, -0.2, 0.3], [0.2, 0.5, -0.4]])
    poles = np.array([[0.3, 0.0, 1.0], [0.3, 1.0, 0.0], [-1.0, 0.0, 0.0]])
    solved = solve_hi(chain, targets, np.zeros(6), zero_plane_map="POLE_OBJECT", poles=poles).result
    assert solved.error.max() <= 1e-9
    for target, pole, knee in zip(targets, poles, solved.positions[:, 1]):
        axis = target / np.linalg.norm(target)
        assert (knee - (knee @ axis) * axis) @ (pole - (pole @ axis) * axis) > 0.0
    with pytest.raises(IKInputError, match="bend_direction"):  # the default map takes no plane from poles
        solve_hi(chain, targets, np.zeros(6), poles=poles)


def test_hinge_middle_joints_bend_about_their_axis_toward_the_bend_direction():
    """Hinges about +z: a bend direction −y makes the plane's normal their axis; the elbow goes to −y."""
    chain = Chain.straight([0.3, 0.28, 0.1], (JointKind.BALL, JointKind.HINGE, JointKind.HINGE))
    r = np.linspace(0.2, 0.67, 30)
    solved = solve_hi(chain, r[:, None] * np.array([1.0, 0.0, 0.0]), np.zeros(chain.n_dof),
                      bend_direction=[0.0, -1.0, 0.0]).result
    assert solved.error.max() <= 1e-9
    assert (solved.positions[:, 1, 1] < 0.0).all()
    assert np.abs(solved.positions[..., 2]).max() <= 1e-12
    with pytest.raises(IKInputError, match="cannot bend in the solver plane"):  # d across the hinges' axis
        solve_hi(chain, [[0.5, 0.0, 0.0]], np.zeros(chain.n_dof), bend_direction=[0.0, 0.0, 1.0])

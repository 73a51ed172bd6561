"""The HI solver's in-plane solve on chains of any length (issue 11): every target the plane chain
reaches with each joint bent its preferred way converges, and every joint keeps its bend sense."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ik_solvers.core import Chain, JointKind, SolveOptions, Status, forward_kinematics, preferred_pose, solve_hi


def _planar_tips(lengths: np.ndarray, heading: float, turns: np.ndarray) -> np.ndarray:
    """Tip of a plane chain (in xy) from its first bone's heading and the relative turns, by hand."""
    headings = heading + np.concatenate([[0.0], np.cumsum(turns)])
    return np.array([np.sum(lengths * np.cos(headings)), np.sum(lengths * np.sin(headings)), 0.0])


def _ball_chain_bent(lengths, heading, turns):
    """Ball-jointed chain along +x whose preferred pose turns about z: first by ``heading``, then by ``turns``."""
    chain = Chain.straight(lengths, JointKind.BALL)
    preferred = np.zeros(chain.n_dof)
    preferred[2] = heading
    preferred[5::3] = turns
    return chain, preferred


def _turns_about(positions: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Signed sine of each joint's turn ``(N, n − 1)`` about the given plane normals."""
    bones = np.diff(positions, axis=1)
    bones = bones / np.linalg.norm(bones, axis=-1, keepdims=True)
    return np.einsum("nki,ni->nk", np.cross(bones[:, :-1], bones[:, 1:]), normals)


def _preferred_senses(chain, preferred, n0):
    """Sign of each joint's preferred turn about the sphere's normal n0 (identity root: world = root frame)."""
    return np.sign(_turns_about(forward_kinematics(chain, preferred[None]).positions, n0[None])[0])


@st.composite
def plane_chains_and_reachable_targets(draw):
    n = draw(st.integers(3, 6))
    lengths = np.array(draw(st.lists(st.floats(0.1, 1.0), min_size=n, max_size=n)))
    signs = np.array(draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n - 1, max_size=n - 1)))
    preferred_turns = signs * np.array(draw(st.lists(st.floats(0.1, 2.5), min_size=n - 1, max_size=n - 1)))
    target_turns = signs * np.array(draw(st.lists(st.floats(0.0, np.pi), min_size=n - 1, max_size=n - 1)))
    heading = draw(st.floats(-np.pi, np.pi))
    direction = np.array(draw(st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3)))
    seed = draw(st.integers(0, 2**16))
    return lengths, heading, preferred_turns, target_turns, direction, seed


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plane_chains_and_reachable_targets())
def test_targets_reached_with_preferred_bend_senses_converge_and_keep_them(case):
    lengths, heading, preferred_turns, target_turns, direction, seed = case
    chain, preferred = _ball_chain_bent(lengths, heading, preferred_turns)
    r = np.linalg.norm(_planar_tips(lengths, 0.0, target_turns))
    if np.linalg.norm(direction) < 1e-3:
        direction = np.array([1.0, 0.0, 0.0])
    target = direction / np.linalg.norm(direction) * r
    swivel = np.random.default_rng(seed).uniform(-np.pi, np.pi)
    solved = solve_hi(chain, target, preferred, swivel=swivel, options=SolveOptions(tolerance=1e-9))
    result = solved.result
    assert result.status[0] is Status.CONVERGED, (result.error, result.lower_bound)
    positions = forward_kinematics(chain, result.q).positions
    assert np.linalg.norm(positions[0, -1] - target) <= 1e-9
    # Every joint keeps (or at most straightens) its preferred bend, measured about the solver normal.
    senses = _preferred_senses(chain, preferred, solved.sphere.n0)
    turns = _turns_about(positions, solved.solver_normals)[0]
    assert np.all(turns * senses >= -1e-9), (turns, senses)
    np.testing.assert_allclose(np.linalg.norm(np.diff(positions[0], axis=0), axis=1), lengths, atol=1e-12)


def _leg():
    """Thigh 0.45, shin 0.45, foot 0.15 in the xy plane (x forward, y up): standing, knee and ankle bent."""
    return _ball_chain_bent(np.array([0.45, 0.45, 0.15]), -np.pi / 2, np.radians([-10.0, 100.0]))


def test_leg_with_foot_follows_a_deep_squat_with_knee_and_ankle_bent_their_way():
    chain, preferred = _leg()
    # Thigh from hanging to near horizontal, knee to 140°, the foot kept flat (heading 0).
    depth = np.linspace(0.0, 1.0, 200)
    hip = np.radians(-90.0 + 70.0 * depth)
    knee = np.radians(-10.0 - 130.0 * depth)
    ankle = -hip - knee
    targets = np.array([_planar_tips(chain.segment_lengths, h, np.array([k, a])) for h, k, a in zip(hip, knee, ankle)])
    solved = solve_hi(chain, targets, preferred, options=SolveOptions(tolerance=1e-6))
    result = solved.result
    assert set(result.status) == {Status.CONVERGED}
    assert result.error.max() <= 1e-9  # where the old local solve stopped up to 0.3 off
    senses = _preferred_senses(chain, preferred, solved.sphere.n0)
    assert senses[0] == -senses[1]  # the knee and the ankle bend opposite ways
    turns = _turns_about(forward_kinematics(chain, result.q).positions, solved.solver_normals)
    assert np.all(turns * senses > 0.0)  # knee and ankle bent their own ways in every frame
    # Nearer than the preferred pose the path runs toward the curled pose, which folds the knee
    # and, the foot's angle not mattering once the ankle sits at the hip, keeps the ankle's bend.
    pref = preferred_pose(chain, preferred)
    np.testing.assert_allclose(np.abs(pref.curled_turns[0]), np.pi)
    np.testing.assert_allclose(pref.curled_turns[1], pref.relative_turns[1])
    # The same frames alone give the same bits (history independence).
    alone = solve_hi(chain, targets[57], preferred).result.q[0]
    np.testing.assert_array_equal(alone, result.q[57])


def test_targets_nearer_than_any_preferred_bend_allows_are_reached_with_the_joint_flagged():
    # Issue 20 (reach honesty): this target was UNREACHABLE at the curled pose's bound, while the
    # geometric bound is 0; now it is reached, the joints bent against their sense flagged.
    chain, preferred = _leg()
    solved = solve_hi(chain, [[0.0, -0.01, 0.0]], preferred)
    result = solved.result
    assert result.status[0] is Status.CONVERGED
    assert result.lower_bound[0] == 0.0
    assert result.error[0] <= 1e-9
    turns = _turns_about(forward_kinematics(chain, result.q).positions, solved.solver_normals)[0]
    reversed_sense = turns * _preferred_senses(chain, preferred, solved.sphere.n0) < 0.0
    assert reversed_sense.any()
    np.testing.assert_array_equal(solved.against_bend[0, 1:], reversed_sense)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plane_chains_and_reachable_targets(), st.sampled_from([1e-12, 1e-9, 1e-3, 1.0, 1e3, 1e9, 1e12]))
def test_far_and_near_targets_give_finite_poses_at_or_above_the_bound(case, level):
    # Issue 11: any finite target from 1e-12 to 1e12 of the reach, no exception and no NaN.
    lengths, heading, preferred_turns, _, direction, _ = case
    chain, preferred = _ball_chain_bent(lengths, heading, preferred_turns)
    if np.linalg.norm(direction) < 1e-3:
        direction = np.array([0.0, 0.0, 1.0])
    target = direction / np.linalg.norm(direction) * level * chain.reach
    with np.errstate(divide="raise", invalid="raise"):
        result = solve_hi(chain, target, preferred).result
    assert np.all(np.isfinite(result.q)) and np.all(np.isfinite(result.positions))
    assert result.error[0] >= result.lower_bound[0] - 1e-12 * chain.reach - 1e-14 * np.linalg.norm(target)
    assert result.status[0] in (Status.CONVERGED, Status.UNREACHABLE)
    assert result.length_error[0] <= 1e-12 * chain.reach


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([3, 5, 10, 30]), st.booleans())
def test_where_several_turns_meet_the_distance_the_one_nearest_the_preferred_end_is_taken(seed, n_bones, from_end):
    """The in-plane root finder brackets the root with the path samples nearest the preferred turns:
    no sample between that end and the chosen ``t`` lies across ``r`` (a curling chain's distance is
    not monotonic along its path, so later crossings exist), and the distance is met."""
    from ik_solvers.core.hi import plane_chain

    rng = np.random.default_rng(seed)
    lengths = rng.uniform(0.2, 1.5, n_bones)
    m = 50
    # Curling paths: turns of one sense summing past a full turn meet small distances several times.
    bases = rng.uniform(-0.3, 0.3, (m, n_bones - 1))
    directions = rng.choice([-1.0, 1.0], (m, 1)) * rng.uniform(0.2, 12.0 / n_bones, (m, n_bones - 1))
    samples = plane_chain.path_distances(lengths, bases, directions)
    lo, hi = samples[:, -1], samples[:, 0]
    r = lo + rng.uniform(0.0, 1.0, m) * (hi - lo)
    ordered = hi >= r  # the bracket the solver needs: distance(bases) ≥ r ≥ distance(bases + directions)
    t, _ = plane_chain.solve_path_parameters(lengths, bases, directions, r, samples, np.full(m, from_end))
    reached = plane_chain.plane_distances(lengths, bases + t[:, None] * directions)
    scale = lengths.sum()
    for row in np.flatnonzero(ordered & (lo <= r)):
        k = t[row] * plane_chain.PATH_SAMPLES
        f = samples[row] - r[row]
        if from_end:  # every sample after t's is at or below r
            assert np.all(f[int(np.ceil(k)) + 1 :] <= 0.0), row
        else:  # every sample before t's is at or above r
            assert np.all(f[: int(np.floor(k))] >= 0.0), row
        assert abs(reached[row] - r[row]) <= 1e-12 * scale, row

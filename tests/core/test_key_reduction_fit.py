"""Key reduction with a world-space bound (SPEC §9): the bound holds at every frame, checked with an
independent Bézier evaluation (de Casteljau) and the core's own forward kinematics."""

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ik_solvers.core import Chain, JointKind, forward_kinematics
from ik_solvers.core.key_points import KeyedPoints, chain_points, default_key_error
from ik_solvers.core.key_reduction import FLOAT32_MARGIN, reduce_keys
from ik_solvers.core.key_rotations import axis_angle_rotations, quaternion_rotations
from ik_solvers.core.key_search import hold_runs
from ik_solvers.core.rotations import (
    matrices_from_rotvecs,
    quaternions_from_rotvecs,
    rotvecs_from_matrices,
)


def leg_chain(root_rotation=(0.3, -0.2, 1.1)):
    """Three ball joints (thigh, shin, foot) with rest rotations: 0.45, 0.42 and a 0.15 tip."""
    rng = np.random.default_rng(5)
    return Chain(
        kinds=(JointKind.BALL,) * 3,
        offsets=[[0.02, 0.1, 0.0], [0.0, 0.45, 0.0], [0.0, 0.42, 0.0]],
        rest_rotations=matrices_from_rotvecs(rng.normal(size=(3, 3)) * 0.4),
        axes=np.tile(np.eye(3), (3, 1)),
        lower=np.full(9, -np.inf),
        upper=np.full(9, np.inf),
        weights=np.ones(9),
        tip_offset=[0.0, 0.15, 0.0],
        root_position=[0.3, 0.1, 1.0],
        root_rotation=matrices_from_rotvecs(np.array(root_rotation)),
    )


def catmull_rom(points: np.ndarray, every: int) -> np.ndarray:
    """A Catmull-Rom spline through ``points (P, d)``, ``every`` samples per span: ``((P-1)·every + 1, d)``."""
    padded = np.concatenate([2 * points[:1] - points[1:2], points, 2 * points[-1:] - points[-2:-1]])
    out = []
    for span in range(len(points) - 1):
        p0, p1, p2, p3 = padded[span:span + 4]
        for t in np.arange(every) / every:
            out.append(0.5 * (2 * p1 + (p2 - p0) * t + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t * t
                              + (3 * p1 - p0 - 3 * p2 + p3) * t ** 3))
    out.append(points[-1])
    return np.array(out)


def quaternion_path(rotvecs: np.ndarray) -> list[np.ndarray]:
    """Per joint, continuous quaternion channels ``(N, 4)`` of rotation vectors ``(N, 3·joints)``."""
    channels = []
    for joint in range(rotvecs.shape[1] // 3):
        q = quaternions_from_rotvecs(rotvecs[:, 3 * joint:3 * joint + 3])
        flips = np.cumsum(np.concatenate([[0], np.sum(q[1:] * q[:-1], axis=1) < 0])) % 2
        channels.append(np.where(flips[:, None] == 1, -q, q).astype(np.float32).astype(float))
    return channels


def smooth_path(seed: int, frames: int = 121, every: int = 12, amplitude: float = 0.8) -> np.ndarray:
    rng = np.random.default_rng(seed)
    spans = -(-(frames - 1) // every)
    return catmull_rom(rng.normal(scale=amplitude, size=(spans + 1, 9)), every)[:frames]


def de_casteljau(controls: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Bézier values ``(M, C)`` of control values ``(4, C)`` at parameters ``s (M,)``."""
    points = np.broadcast_to(controls, (len(s), *controls.shape)).copy()
    for level in range(3, 0, -1):
        points = points[:, :level] * (1 - s)[:, None, None] + points[:, 1:level + 1] * s[:, None, None]
    return points[:, 0]


def bisected_parameters(times: np.ndarray, frames: np.ndarray) -> np.ndarray:
    """Bézier parameters ``(M, C)`` where the time curves of control times ``times (4, C)`` (key,
    right handle, next left handle, next key) reach ``frames (M,)``: bisection on de Casteljau's
    time, independent of the core's Newton solve (the time curve increases: handles inside the segment)."""
    low, high = np.zeros((len(frames), times.shape[1])), np.ones((len(frames), times.shape[1]))
    for _ in range(60):
        middle = 0.5 * (low + high)
        at = np.stack([de_casteljau(times[:, c:c + 1], middle[:, c])[:, 0] for c in range(times.shape[1])], axis=1)
        beyond = at > frames[:, None]
        low, high = np.where(beyond, low, middle), np.where(beyond, middle, high)
    return np.where(frames[:, None] == times[0], 0.0, 0.5 * (low + high))  # on a key: its value (as Blender)


def evaluated_curves(reduced, frames: np.ndarray) -> list[np.ndarray]:
    """Every joint's channels at every frame as the reduced keys give them: per segment and channel
    the time parameter solved from the handles' times (bisection), then de Casteljau on the values."""
    keys = reduced.frames
    segment = np.clip(np.searchsorted(keys, frames, side="right") - 1, 0, len(keys) - 2)
    out = []
    for controls, handle_frames in zip(reduced.controls, reduced.handle_frames):
        values = np.empty((len(frames), controls.shape[-1]))
        for index in np.unique(segment):
            rows = segment == index
            times = np.stack([np.full(controls.shape[-1], keys[index]), *handle_frames[index],
                              np.full(controls.shape[-1], keys[index + 1])])
            s = bisected_parameters(times, frames[rows])
            values[rows] = np.stack([de_casteljau(controls[index][:, c:c + 1], s[:, c])[:, 0]
                                     for c in range(controls.shape[-1])], axis=1)
        out.append(values)
    return out


def world_errors(chain, reference: list[np.ndarray], curves: list[np.ndarray]) -> np.ndarray:
    """Farthest joint / tip distance per frame, by the core's forward kinematics (ball joints: q = rotvec)."""
    def points(channels):
        q = np.concatenate([rotvecs_from_matrices(quaternion_rotations(c)) for c in channels], axis=1)
        return forward_kinematics(chain, q).positions
    return np.linalg.norm(points(curves) - points(reference), axis=-1).max(axis=1)


def check_bound(chain, frames, channels, key_error, **kwargs):
    reduced = reduce_keys(frames, channels, [quaternion_rotations] * 3, chain, key_error, **kwargs)
    errors = world_errors(chain, channels, evaluated_curves(reduced, frames))
    assert reduced.frames[0] == frames[0] and reduced.frames[-1] == frames[-1]
    assert errors.max() <= key_error, (errors.max(), key_error)
    # The core evaluates a fixed-time segment with its handles at exact thirds; stored as float32
    # frames (as Blender stores them, and as evaluated here) they move by up to 4e-6 frames at frame
    # 120: on these fast paths (a radian in 12 frames) up to 2.7 % of a 0.01 mm bound (seed 57, 142
    # frames), more than FLOAT32_MARGIN (2 %), which the allowance covers. Merged segments are
    # evaluated on their float32 handle frames by the core too.
    assert reduced.allowance >= FLOAT32_MARGIN * key_error
    np.testing.assert_allclose(reduced.errors, errors, atol=1e-9 + reduced.allowance)
    return reduced


def test_chain_points_match_forward_kinematics():
    chain = leg_chain()
    rotvecs = smooth_path(1, 30)
    fk = forward_kinematics(chain, rotvecs).positions
    ours = chain_points(chain, [matrices_from_rotvecs(rotvecs[:, 3 * j:3 * j + 3]) for j in range(3)])
    np.testing.assert_allclose(ours, fk, atol=1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), key_error=st.sampled_from([1e-5, 1e-4, 1e-3, 5e-3]),
       noise=st.sampled_from([0.0, 1e-4, 3e-3]), frames=st.integers(2, 150))
@example(seed=57, key_error=1e-5, noise=1e-4, frames=142)  # float32 handle frames: 2.7 % of the bound
def test_the_world_bound_holds_at_every_frame_of_smooth_and_noisy_paths(seed, key_error, noise, frames):
    chain = leg_chain()
    rotvecs = smooth_path(seed, frames) + np.random.default_rng(seed + 1).normal(scale=noise, size=(frames, 9))
    check_bound(chain, np.arange(frames, dtype=float) + 1.0, quaternion_path(rotvecs), key_error)


def test_a_parents_error_counts_at_the_tip_and_scale_multiplies_the_error():
    chain = leg_chain()
    frames = np.arange(1.0, 97.0)
    channels = quaternion_path(smooth_path(7, 96))
    plain = check_bound(chain, frames, channels, 1e-4)
    scaled = reduce_keys(frames, channels, [quaternion_rotations] * 3, chain, 1e-4, scale=10.0)
    assert scaled.keys_after > plain.keys_after  # ten times larger in the world: ten times tighter in the rig
    assert scaled.max_error <= 1e-4


def cubic_channels(frames: np.ndarray) -> list[np.ndarray]:
    """Per joint, quaternion channels ``(N, 4)`` that are each one cubic over ``frames`` (10 to 70)."""
    s = (frames - 10.0) / 60.0
    rng = np.random.default_rng(2)
    channels = []
    for _joint in range(3):
        coefficients = rng.normal(scale=0.3, size=(4, 4))
        coefficients[0] = [1.0, 0.1, -0.2, 0.1]
        channels.append(np.polynomial.polynomial.polyval(s, coefficients).T)
    return channels


def test_a_cubic_path_needs_two_keys():
    chain = leg_chain()
    frames = np.arange(10.0, 71.0)
    channels = cubic_channels(frames)
    reduced = reduce_keys(frames, channels, [quaternion_rotations] * 3, chain, 1e-5)
    assert reduced.keys_after == 2
    assert reduced.max_error <= 1e-5


def test_a_bound_near_zero_keeps_every_frame():
    chain = leg_chain()
    frames = np.arange(1.0, 61.0)
    rotvecs = smooth_path(3, 60) + np.random.default_rng(4).normal(scale=1e-3, size=(60, 9))
    reduced = reduce_keys(frames, quaternion_path(rotvecs), [quaternion_rotations] * 3, chain, 1e-12)
    np.testing.assert_array_equal(reduced.indices, np.arange(60))
    assert reduced.max_error == 0.0


def test_frames_asked_to_stay_keys_stay_keys_and_are_exact():
    chain = leg_chain()
    frames = np.arange(1.0, 121.0)
    channels = quaternion_path(smooth_path(9, 120))
    reduced = check_bound(chain, frames, channels, 1e-3, keep=np.array([37, 80]))
    assert {37, 80} <= set(reduced.indices.tolist())
    exact = np.isin(reduced.indices, [0, 37, 80, 119])
    for joint in range(3):
        np.testing.assert_array_equal(reduced.key_values(joint)[exact], channels[joint][reduced.indices[exact]])


def test_a_hold_keeps_its_ends_as_keys_and_is_exact_on_every_frame_between():
    """Frames 40–70 hold one pose (a planted foot) and 90–91 two frames only: the hold's first and
    last frame are keys with no key between (no merge passes them), and the curves there give the
    held values (bit for bit in Blender's cubic; to de Casteljau's rounding here)."""
    chain = leg_chain()
    frames = np.arange(1.0, 121.0)
    rotvecs = smooth_path(11, 120)
    rotvecs[40:71] = rotvecs[40]
    rotvecs[90:92] = rotvecs[90]
    channels = quaternion_path(rotvecs)
    reduced = check_bound(chain, frames, channels, 1e-3)
    kept = reduced.indices.tolist()
    assert {40, 70} <= set(kept) and not any(40 < k < 70 for k in kept)
    assert not {90, 91} <= set(kept)  # shorter than HOLD_FRAMES: no keys forced
    segment = kept.index(40)
    curves = evaluated_curves(reduced, frames)
    for joint in range(3):  # all four controls the held value: Blender's cubic there is that value exactly
        np.testing.assert_array_equal(reduced.controls[joint][segment], np.broadcast_to(channels[joint][40], (4, 4)))
        np.testing.assert_allclose(curves[joint][40:71], np.broadcast_to(channels[joint][40], (31, 4)), rtol=0, atol=1e-15)
    assert np.all(reduced.errors[40:71] == 0.0) and reduced.errors[71:90].max() > 0.0
    np.testing.assert_array_equal(hold_runs(np.array([1, 1, 0, 1, 0, 0, 1, 1, 1], dtype=bool)), [[0, 6], [2, 9]])


def test_handles_sit_on_the_segments_and_mirror_at_the_ends():
    chain = leg_chain()
    frames = np.arange(1.0, 121.0)
    reduced = check_bound(chain, frames, quaternion_path(smooth_path(11, 120)), 1e-4)
    left, right = reduced.handles(0)
    np.testing.assert_array_equal(right[:-1], reduced.controls[0][:, 1].astype(np.float32))
    np.testing.assert_array_equal(left[1:], reduced.controls[0][:, 2].astype(np.float32))
    values = reduced.key_values(0)
    np.testing.assert_allclose(values[0] - left[0], right[0] - values[0], atol=1e-6)


@pytest.mark.parametrize("noise, key_error, at_most", [(0.0, 1e-4, 0.19), (0.0, 1e-3, 0.11), (2e-4, 1e-3, 0.3)])
def test_joint_paths_keyed_every_12_frames_keep_few_keys(noise, key_error, at_most):
    """Joint rotations (not IK) on a Catmull-Rom through random poses 12 frames apart (8.3 % of the frames)."""
    chain = leg_chain()
    kept = []
    for seed in range(4):
        jitter = np.random.default_rng(seed).normal(scale=noise, size=(121, 9))
        channels = quaternion_path(smooth_path(seed, 121, 12, amplitude=0.25) + jitter)
        kept.append(check_bound(chain, np.arange(1.0, 122.0), channels, key_error).kept_fraction)
    print(f"joint paths, noise {noise} rad: kept {np.round(kept, 3)} of the keys at E = {key_error}")
    assert max(kept) <= at_most


def test_axis_angle_channels_reduce_within_the_bound():
    chain = leg_chain()
    rotvecs = smooth_path(13, 90, amplitude=0.5)
    channels = []
    for joint in range(3):
        v = rotvecs[:, 3 * joint:3 * joint + 3]
        angle = np.linalg.norm(v, axis=1)
        channels.append(np.column_stack([angle, v / angle[:, None]]))
    frames = np.arange(1.0, 91.0)
    reduced = reduce_keys(frames, channels, [axis_angle_rotations] * 3, chain, 1e-4)
    assert reduced.max_error <= 1e-4 and reduced.keys_after < 45


def test_default_bound_is_a_tenth_of_a_millimetre_per_metre_of_reach():
    chain = leg_chain()
    assert default_key_error(chain) == pytest.approx(1e-4 * (0.45 + 0.42 + 0.15))
    assert default_key_error(chain, scale=2.0) == pytest.approx(2e-4 * (0.45 + 0.42 + 0.15))


def test_the_minimax_fit_keeps_fewer_keys_than_least_squares_alone(monkeypatch):
    """Lawson's reweighting aims each segment's handles at its largest world error: on smooth joint
    paths at 0.1 mm it keeps fewer keys than the plain least-squares fit (one round), never more
    (the search's keys: no merge)."""
    from ik_solvers.core import key_reduction

    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    paths = [quaternion_path(smooth_path(seed, 121, 12, amplitude=0.25)) for seed in range(2)]
    minimax = [check_bound(chain, frames, channels, 1e-4, merge=False).keys_after for channels in paths]
    monkeypatch.setattr(key_reduction, "MINIMAX_ROUNDS", 1)
    least_squares = [check_bound(chain, frames, channels, 1e-4, merge=False).keys_after for channels in paths]
    assert all(m <= s for m, s in zip(minimax, least_squares)) and sum(minimax) < sum(least_squares)


def test_the_world_metric_fit_keeps_fewer_keys_than_fitting_each_channel_alone(monkeypatch):
    """The handles of all channels fitted together in the chain's world metric (a channel error
    counts as far as it moves the joints and the tip) keep fewer keys than a fit of every channel
    on its own (the metric replaced by the identity), never more (the search's keys: no merge)."""
    from ik_solvers.core import key_reduction

    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    paths = [quaternion_path(smooth_path(seed, 121, 12, amplitude=0.25)) for seed in range(2)]
    world = [check_bound(chain, frames, channels, 1e-4, merge=False).keys_after for channels in paths]
    monkeypatch.setattr(key_reduction._Problem, "_metric", lambda self: np.broadcast_to(np.eye(12), (121, 12, 12)))
    alone = [check_bound(chain, frames, channels, 1e-4, merge=False).keys_after for channels in paths]
    assert all(w <= a for w, a in zip(world, alone)) and sum(world) < sum(alone)


def test_quaternions_of_any_length_keep_the_bound():
    """Blender normalises a quaternion before use, and so does the fit's world metric (a change of
    length moves nothing): quaternions keyed at a varying length keep the bound at every frame."""
    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    lengths = 1.0 + 0.3 * np.sin(frames / 5.0)[:, None]
    channels = [q * lengths for q in quaternion_path(smooth_path(4, 121, 12, amplitude=0.25))]
    assert check_bound(chain, frames, channels, 1e-4).kept_fraction < 0.4


def test_the_fit_solves_its_systems_as_lapack_does():
    from ik_solvers.core.bezier_segments import solve_positive_definite

    rng = np.random.default_rng(8)
    factors = rng.normal(size=(5, 16, 16))
    matrices = factors @ factors.transpose(0, 2, 1) + 1e-3 * np.eye(16)
    rhs = rng.normal(size=(5, 16))
    np.testing.assert_allclose(solve_positive_definite(matrices, rhs),
                               np.linalg.solve(matrices, rhs[..., None])[..., 0], rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("key_error", [1e-4, 3e-3])
def test_every_segment_is_as_long_as_it_can_be(key_error):
    """The search around the last segment's length takes the longest length that holds, forward
    from the first frame and backward from the last: one frame longer, every kept segment breaks
    the bound — those before where the two searches joined ending a frame later, those after it
    starting a frame earlier (the joining segment is the one that leaves the fewest keys)."""
    from ik_solvers.core import key_reduction

    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    channels = quaternion_path(smooth_path(6, 121, 12, amplitude=0.25))
    reduced = check_bound(chain, frames, channels, key_error)
    problem = key_reduction._Problem(frames, channels, [quaternion_rotations] * 3, KeyedPoints(chain), 1.0)
    budget = key_error * (1.0 - key_reduction.FLOAT32_MARGIN)

    def breaks(a, b):
        return problem.segments(int(a), np.array([b]), budget)[1][0] > budget

    segments = list(zip(reduced.indices[:-1].tolist(), reduced.indices[1:].tolist()))
    later = [b == 120 or breaks(a, b + 1) for a, b in segments]
    earlier = [a == 0 or breaks(a - 1, b) for a, b in segments]
    assert any(all(later[:join]) and all(earlier[join + 1:]) for join in range(len(segments))), (later, earlier)
    assert sum(later) >= 2 and sum(earlier) >= 2  # both searches kept keys


def test_a_candidates_fit_and_check_do_not_depend_on_the_rest_of_its_batch():
    """The search runs many windows in one batch (both chains, speculation): a candidate segment's
    controls, largest error and per-frame errors are the same bit for bit alone or among others."""
    from ik_solvers.core import key_reduction

    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    channels = quaternion_path(smooth_path(6, 121, 12, amplitude=0.25))
    problem = key_reduction._Problem(frames, channels, [quaternion_rotations] * 3, KeyedPoints(chain), 1.0)
    alone = problem.segments(40, np.array([44, 45, 46, 47, 48]), 1e-4)
    starts = np.array([3, 3, 3, 40, 40, 40, 40, 40, 100, 100])
    ends = np.array([6, 9, 12, 44, 45, 46, 47, 48, 110, 120])
    among = problem.segments(starts, ends, 1e-4, np.array([0, 0, 0, 1, 1, 1, 1, 1, 2, 2]))
    np.testing.assert_array_equal(among[0][3:8], alone[0])
    np.testing.assert_array_equal(among[1][3:8], alone[1])
    rows = (ends - starts - 1)
    first = int(rows[:3].sum())
    np.testing.assert_array_equal(among[2][first:first + int(rows[3:8].sum())], alone[2])


@pytest.mark.parametrize("noise", [0.0, 3e-4])
def test_speculation_changes_no_key(monkeypatch, noise):
    """The windows run speculatively beside the next keys' are a matter of speed only: without them
    the same keys and handles, bit for bit."""
    from ik_solvers.core import key_search

    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    rotvecs = smooth_path(8, 121, 12, amplitude=0.25) + np.random.default_rng(3).normal(scale=noise, size=(121, 9))
    channels = quaternion_path(rotvecs)
    for key_error in (1e-4, 1e-3):
        fast = reduce_keys(frames, channels, [quaternion_rotations] * 3, chain, key_error)
        with monkeypatch.context() as patch:
            patch.setattr(key_search, "SPECULATIVE_ROWS", 0)
            plain = reduce_keys(frames, channels, [quaternion_rotations] * 3, chain, key_error)
        np.testing.assert_array_equal(fast.indices, plain.indices)
        for ours, theirs in zip(fast.controls, plain.controls):
            np.testing.assert_array_equal(ours, theirs)


def test_chains_that_no_segment_joins_go_on_forward_within_the_bound(monkeypatch):
    """Where no segment between a key of each chain holds (a segment's length that holds need not
    make a shorter one hold), the forward chain goes on to the last frame: the bound still holds
    at every frame, and each of its segments is as long as it can be."""
    from ik_solvers.core import key_reduction, key_search

    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    channels = quaternion_path(smooth_path(6, 121, 12, amplitude=0.25))
    monkeypatch.setattr(key_search, "_holding", lambda problem, segments, budget: {})
    reduced = check_bound(chain, frames, channels, 1e-4)
    problem = key_reduction._Problem(frames, channels, [quaternion_rotations] * 3, KeyedPoints(chain), 1.0)
    budget = 1e-4 * (1.0 - key_reduction.FLOAT32_MARGIN)
    for a, b in zip(reduced.indices[:-2].tolist(), reduced.indices[1:-1].tolist()):
        assert problem.segments(a, np.array([b + 1]), budget)[1][0] > budget, (a, b)


def test_a_key_forced_near_the_last_one_takes_no_extra_key():
    """A forced key (a contact) nearer than half the last segment's length: the segment up to it
    is still as long as it can be (no straight one-frame segment and a key more before it)."""
    chain = leg_chain()
    frames = np.arange(10.0, 71.0)
    channels = cubic_channels(frames)
    keep = np.array([3, 30, 57])  # near the first and the last key, and where the two searches meet
    reduced = reduce_keys(frames, channels, [quaternion_rotations] * 3, chain, 1e-5, keep=keep)
    assert reduced.indices.tolist() == [0, 3, 30, 57, 60]
    assert reduced.max_error <= 1e-5


def test_merged_segments_with_free_handle_times_hold_the_bound_and_keep_fewer_keys():
    """After the search, kept keys are merged where one segment with free handle times per channel
    holds the bound: checked at every frame with the time cubic solved by bisection (not the core's
    Newton solve), the handles strictly inside their segments without overlap (so Blender corrects
    nothing), and fewer keys than the search's."""
    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    merged_any = False
    for seed in range(3):
        channels = quaternion_path(smooth_path(seed, 121, 12, amplitude=0.25))
        searched = check_bound(chain, frames, channels, 1e-4, merge=False)
        merged = check_bound(chain, frames, channels, 1e-4)
        assert merged.keys_after < searched.keys_after
        assert set(merged.indices.tolist()) <= set(searched.indices.tolist())  # only removes keys
        for times, controls in zip(merged.handle_frames, merged.controls):
            starts, ends = merged.frames[:-1, None], merged.frames[1:, None]
            right, left = times[:, 0], times[:, 1]
            assert np.all(right > starts) and np.all(left < ends) and np.all(right < left)
            thirds = np.isclose(right - starts, (ends - starts) / 3.0, atol=1e-4).all(axis=1)
            merged_any |= not thirds.all()
            np.testing.assert_array_equal(times, times.astype(np.float32))
            np.testing.assert_array_equal(controls, controls.astype(np.float32))
    assert merged_any


def test_a_free_time_candidates_fit_does_not_depend_on_the_rest_of_its_batch():
    """The merge fits every candidate of a round in one batch: a candidate's parameters and errors
    are the same bit for bit alone or among others."""
    from ik_solvers.core import key_merge, key_reduction

    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    channels = quaternion_path(smooth_path(6, 121, 12, amplitude=0.25))
    problem = key_reduction._Problem(frames, channels, [quaternion_rotations] * 3, KeyedPoints(chain), 1.0)
    alone = key_merge.fit_free_times(problem, np.array([40]), np.array([52]), 1e-4)
    among = key_merge.fit_free_times(problem, np.array([3, 40, 90]), np.array([20, 52, 99]), 1e-4)
    for ours, theirs in zip(alone[:3], among[:3]):
        np.testing.assert_array_equal(ours[0], theirs[1])
    np.testing.assert_array_equal(alone[3], among[3][16:16 + 11])


def test_the_time_cubic_is_solved_as_blender_solves_it():
    """The core's time parameters against Cardano's formula (Blender's ``solve_cubic``) on random
    handle times inside the segment: the same root, and the value cubic at it."""
    from ik_solvers.core.free_segments import time_parameters

    rng = np.random.default_rng(3)
    a, b = rng.uniform(0.02, 0.6, size=(2, 200, 1))
    b = np.minimum(b, 0.98 - a)
    s = rng.uniform(0.0, 1.0, size=(200, 1))
    u = time_parameters(s, a, b)
    # x(u) = c3 u³ + c2 u² + c1 u + c0 (fcurve.cc's findzero), the root in [0, 1] by numpy's companion matrix
    for row in range(200):
        c0, c1, c2, c3 = -s[row, 0], 3 * a[row, 0], 3 * (1 - b[row, 0] - 2 * a[row, 0]), 1 + 3 * (a[row, 0] - (1 - b[row, 0]))
        roots = np.roots([c3, c2, c1, c0]) if abs(c3) > 1e-12 else np.roots([c2, c1, c0])
        real = roots[np.abs(roots.imag) < 1e-9].real
        inside = real[(real >= -1e-9) & (real <= 1 + 1e-9)]
        assert len(inside) == 1 and abs(inside[0] - u[row, 0]) < 1e-9


def test_last_axis_sums_are_numpys_sums_bit_for_bit():
    """The fit sums its short last axes in a few long numpy calls: the same bits as ``sum(axis=-1)``
    (numpy's pairwise summation), for every length and magnitudes far apart."""
    from ik_solvers.core.bezier_segments import last_axis_sums

    rng = np.random.default_rng(11)
    for count in range(1, 140):
        for shape in ((37, count), (5, 6, count)):
            terms = rng.normal(size=shape) * np.exp(rng.normal(scale=6.0, size=shape))
            np.testing.assert_array_equal(last_axis_sums(terms), terms.sum(axis=-1))


@pytest.mark.parametrize(("seed", "amplitude", "key_error"), [(0, 0.8, 1e-3), (3, 0.8, 1e-4)])
def test_a_search_tries_each_length_once(monkeypatch, seed, amplitude, key_error):
    """A search whose doubled window holds nothing is done (every length still untried is shorter
    than the longest that held): no search fits a segment length twice, and some searches did
    double their window."""
    from ik_solvers.core import key_search

    chain = leg_chain()
    frames = np.arange(1.0, 122.0)
    channels = quaternion_path(smooth_path(seed, 121, 12, amplitude=amplitude))  # (paths where it happens)
    tried: dict[int, list[int]] = {}
    searches = []  # kept alive, so that no id is reused
    update = key_search._Search.update

    def recording(self, controls, largest, errors, budget):
        searches.append(self)
        tried.setdefault(id(self), []).extend(self.lengths().tolist())
        return update(self, controls, largest, errors, budget)

    monkeypatch.setattr(key_search._Search, "update", recording)
    check_bound(chain, frames, channels, key_error)
    assert all(len(lengths) == len(set(lengths)) for lengths in tried.values())
    assert any(max(lengths) > 2 * min(lengths) + 2 for lengths in tried.values())  # a doubled window

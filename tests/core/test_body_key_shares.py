"""Key reduction of a body bake (SPEC §8, §9; core.body.keys): units reduced top down, each against the bake as
reduced above it, and the bound held at every joint and tip of every chain when every unit's reduced curves are
evaluated together."""

import numpy as np
import pytest
from test_key_reduction_fit import evaluated_curves

from ik_solvers.core import Chain, JointKind
from ik_solvers.core.body.forward import body_pose
from ik_solvers.core.body.humanoid import CHAIN_BONES, humanoid_body, random_poses
from ik_solvers.core.body.keys import (
    KeyUnit,
    body_reduction_steps,
    compensated,
    local_rotations,
    pose_from_local,
    quaternion_channels,
    top_down,
    unit_depths,
    unit_parents,
    unit_points,
    unit_weights,
)
from ik_solvers.core.key_points import Attachments
from ik_solvers.core.free_segments import curve_values
from ik_solvers.core.key_rotations import quaternion_rotations
from ik_solvers.core.key_search import finished
from ik_solvers.core.kinematics import joint_local_matrices
from ik_solvers.core.rotations import quaternions_from_matrices


def test_depths_count_the_units_down_the_longest_path_and_parents_come_first():
    # root → spine → (arm, neck); root → leg; a lone chain
    parents = [-1, 0, 1, 1, 0, -1]
    assert unit_depths(parents) == [3, 2, 1, 1, 1, 1]
    assert top_down(parents) == list(range(6))
    assert top_down([2, -1, 1, 0]) == [1, 2, 0, 3]


def test_weights_keep_a_units_points_within_what_it_carries_leaves_and_its_first_joints_below_within_a_share():
    body = humanoid_body()
    q, location = smooth_poses(body, 3)
    units, _ = body_units(body, q, location)
    spine = units[3]  # its joints and the head's tip, two arms below (at its last joint)
    points = spine.chain.n_joints + 1
    attachments = Attachments(np.array([2, 2]), np.zeros((3, 2, 3)))
    carried = np.array([0.0, 0.25, 0.5]) * 1e-4
    share, weights = unit_weights(spine, attachments, carried, 2, 1e-4)
    assert share == 1e-4
    own = np.array([1.0, 4.0 / 3.0, 2.0])  # 1e-4 over each: 1e-4 less what it carries at that frame
    np.testing.assert_allclose(weights[:, :points], np.repeat(own[:, None], points, 1))
    np.testing.assert_allclose(weights[:, points:], np.repeat(2.0 * own[:, None], 2, 1))  # over the depth, 2
    assert unit_weights(units[1], None, np.zeros(3), 1, 1e-4) == (1e-4, None)  # a leg below nothing: none


def smooth_poses(body, frames: int, seed: int = 3, poses: int = 8):
    """Joint variables and hips location ``(N, …)`` passing smoothly through random poses."""
    q, location = random_poses(body, np.random.default_rng(seed), poses)
    t = np.linspace(0.0, poses - 1.0, frames)
    weights = np.stack([np.clip(1.0 - np.abs(t - k), 0.0, 1.0) for k in range(poses)], axis=1)
    weights = weights * weights * (3.0 - 2.0 * weights)  # smoothstep blends: no corner at the poses
    weights /= weights.sum(axis=1, keepdims=True)
    return weights @ q, weights @ location


def unit_chain(body, bones) -> Chain:
    n = len(bones)
    return Chain(kinds=(JointKind.BALL,) * n, offsets=body.offsets[list(bones)],
                 rest_rotations=body.rest_rotations[list(bones)], axes=np.tile(np.eye(3), (n, 1)),
                 lower=np.full(3 * n, -np.inf), upper=np.full(3 * n, np.inf), weights=np.ones(3 * n),
                 tip_offset=body.tails[bones[-1]],
                 root_position=body.root_position if body.parents[bones[0]] < 0 else np.zeros(3),
                 root_rotation=body.root_rotation if body.parents[bones[0]] < 0 else np.eye(3))


def body_units(body, q, location):
    """The hips (location and rotation) and the five chains as units, each bone's rotation as quaternion keys."""
    local = joint_local_matrices(body.variables, q)
    basis = np.swapaxes(body.rest_rotations, 1, 2)[None] @ local  # R_i(q): rest⁻¹ @ local
    quaternions = quaternions_from_matrices(basis.reshape(-1, 3, 3)).reshape(len(q), -1, 4)
    quaternions *= np.where(quaternions[..., :1] < 0.0, -1.0, 1.0)  # one hemisphere (these turns stay below π)
    stored = quaternions.astype(np.float32).astype(float)
    hips = body.names.index("hips")
    units = [KeyUnit("hips", (hips,), unit_chain(body, (hips,)), [location.astype(np.float32).astype(float),
                                                                   stored[:, hips]],
                     [None, quaternion_rotations], quaternion_channels, translation=True)]
    for name, (start, tip) in CHAIN_BONES.items():
        bones = [body.names.index(tip)]
        while body.names[bones[0]] != start:
            bones.insert(0, int(body.parents[bones[0]]))
        units.append(KeyUnit(name, tuple(bones), unit_chain(body, bones), [stored[:, b] for b in bones],
                             [quaternion_rotations] * len(bones), quaternion_channels))
    return units, stored


def reduced_body_errors(body, frames, units, stored, q, location, key_error):
    """The body's keys reduced, and the world distance ``(N, P)`` of every chain joint and tip from the
    unreduced bake when every unit's reduced curves are evaluated together."""
    hips = body.names.index("hips")
    reduced = finished(body_reduction_steps(frames, body, body_pose(body, body.variables, q, hips, location), units,
                                            key_error))
    quaternions, hips_location = stored.copy(), units[0].values[0].copy()
    for unit, keys in zip(units, reduced.reduced):
        curves = evaluated_curves(keys, frames)
        if unit.translation:
            hips_location, curves = curves[0], curves[1:]
        for bone, values in zip(unit.bones, curves):
            quaternions[:, bone] = values

    def points(quaternions, hips_location):
        pose = pose_of(body, quaternions, hips, hips_location)
        return np.concatenate([unit_points(body, pose, unit) for unit in units[1:]], axis=1)

    return reduced, np.linalg.norm(points(quaternions, hips_location) - points(stored, units[0].values[0]), axis=-1)


def smooth_body(frames: int = 121):
    body = humanoid_body()
    q, location = smooth_poses(body, frames)
    units, stored = body_units(body, q, location)
    return body, np.arange(1.0, frames + 1.0), q, location, units, stored


def test_every_joint_and_tip_of_every_chain_stays_within_the_bound():
    body, frames, q, location, units, stored = smooth_body()
    key_error = 1e-4
    reduced, errors = reduced_body_errors(body, frames, units, stored, q, location, key_error)
    assert reduced.parents == (-1, 0, 0, 0, 3, 3)  # the arms hang below the spine chain (from its chest)
    assert errors.max() <= key_error, errors.max()
    first = 0
    for k in range(1, len(units)):
        bound = reduced.path_errors(k)
        assert bound.max() <= key_error
        assert reduced.as_chain(k).key_error == key_error
        count = len(units[k].bones) + 1
        # each chain's own error plus what the units above carry to it bounds its points at every frame, to
        # the keys' float32 rounding (the allowance kept free for it)
        assert np.all(errors[:, first:first + count].max(axis=1) <= bound + reduced.as_chain(k).allowance)
        first += count
    assert reduced.carried[0].max() == 0.0 and min(c.max() for c in reduced.carried[1:]) > 0.0
    for k in range(len(units)):  # a unit's weighted bound: what the least it carries leaves of the bound
        assert reduced.shares[k] == key_error - reduced.carried[k].min()
    kept = [keys.keys_after for keys in reduced.reduced]
    assert max(kept) < len(frames) / 6, kept  # smooth paths through eight poses: few keys


def test_a_unit_measured_only_at_its_own_points_breaks_the_bound_below_it(monkeypatch):
    # What the attachments are for: unmeasured, the first joints of the chains below move with the hips' and
    # the spine's reduced curves by far more than the bound (measured: 17 mm against 0.1 mm on these paths).
    from ik_solvers.core.body import keys

    body, frames, q, location, units, stored = smooth_body()
    monkeypatch.setattr(keys, "unit_attachments", lambda *args: None)
    _, errors = reduced_body_errors(body, frames, units, stored, q, location, 1e-4)
    assert errors.max() > 10 * 1e-4


def test_a_unit_not_turned_back_for_the_units_above_it_breaks_the_bound(monkeypatch):
    # What the compensation is for: the units above are measured at the first joints below them only, so their
    # turns, 0.5-1 m from the hands and feet, are the chains' to take back (measured without: 0.2 mm against 0.1).
    from ik_solvers.core.body import keys

    body, frames, q, location, units, stored = smooth_body()
    turned = keys.compensated
    monkeypatch.setattr(keys, "compensated",
                        lambda body, pose, reduced, unit: (list(unit.values), turned(body, pose, reduced, unit)[1]))
    _, errors = reduced_body_errors(body, frames, units, stored, q, location, 1e-4)
    assert errors.max() > 1.5 * 1e-4


def test_compensated_values_give_a_unit_its_unreduced_frames_below_a_changed_parent():
    body, frames, q, location, units, stored = smooth_body(30)
    hips = body.names.index("hips")
    pose = body_pose(body, body.variables, q, hips, location)
    local = local_rotations(body, pose)
    np.testing.assert_allclose(pose_from_local(body, local, hips, location).frames, pose.frames, atol=1e-14)
    spine = units[3]
    parent = int(body.parents[spine.bones[0]])
    turn = quaternion_rotations(np.array([[1.0, 0.002, -0.003, 0.001]]))
    local[:, parent] = local[:, parent] @ turn  # the bone the spine hangs from turned a little at every frame
    changed = pose_from_local(body, local, hips, location + np.array([0.001, 0.0, 0.0]))
    values, moved = compensated(body, pose, changed, spine)
    for bone, channels in zip(spine.bones, values):
        local[:, bone] = body.rest_rotations[bone] @ quaternion_rotations(channels)
    after = pose_from_local(body, local, hips, location + np.array([0.001, 0.0, 0.0]))
    np.testing.assert_allclose(after.frames[:, list(spine.bones)], pose.frames[:, list(spine.bones)], atol=1e-6)
    shift = after.heads[:, list(spine.bones)] - pose.heads[:, list(spine.bones)]  # one shift for every joint
    np.testing.assert_allclose(shift, np.broadcast_to(shift[:, :1], shift.shape), atol=1e-6)
    np.testing.assert_allclose(moved, np.linalg.norm(shift[:, 0], axis=1), atol=1e-12)
    assert moved.min() > 5e-4
    assert np.all((values[0] * spine.values[0]).sum(axis=1) > 0.99)  # the hemisphere of the values given


def test_curve_values_are_the_reduced_keys_as_blender_evaluates_them():
    body, frames, q, location, units, stored = smooth_body()
    hips = body.names.index("hips")
    reduced = finished(body_reduction_steps(frames, body, body_pose(body, body.variables, q, hips, location), units,
                                            1e-4))
    for keys in reduced.reduced:
        for controls, handles, expected in zip(keys.controls, keys.handle_frames, evaluated_curves(keys, frames)):
            values = curve_values(keys.frames, controls, handles, frames)
            np.testing.assert_allclose(values, expected, atol=1e-12)
            np.testing.assert_array_equal(values[keys.indices[:-1]], controls[:, 0])  # the keys' own values
            np.testing.assert_array_equal(values[keys.indices[-1]], controls[-1, 3])


def pose_of(body, quaternions, root_bone, root_location):
    """The body's pose from every bone's quaternion channels ``(N, B, 4)`` and the root's location ``(N, 3)``."""
    n = quaternions.shape[0]
    local = body.rest_rotations[None] @ quaternion_rotations(quaternions.reshape(-1, 4)).reshape(n, -1, 3, 3)
    return pose_from_local(body, local, root_bone, root_location)


def test_units_hang_below_the_unit_of_their_nearest_keyed_ancestor():
    body = humanoid_body()
    q, location = smooth_poses(body, 3)
    units, _ = body_units(body, q, location)
    assert unit_parents(body, units) == [-1, 0, 0, 0, 3, 3]
    assert unit_parents(body, units[1:]) == [-1, -1, -1, 2, 2]  # without the hips: the legs and spine on top


def test_the_pose_from_local_rotations_is_the_body_pose_of_its_variables():
    body = humanoid_body()
    q, location = smooth_poses(body, 5)
    hips = body.names.index("hips")
    expected = body_pose(body, body.variables, q, hips, location)
    pose = pose_from_local(body, joint_local_matrices(body.variables, q), hips, location)
    np.testing.assert_allclose(pose.frames, expected.frames, atol=1e-14)
    np.testing.assert_allclose(pose.heads, expected.heads, atol=1e-14)


def test_a_body_held_still_keeps_every_units_hold_below_the_reduced_hips():
    # Frames 40-70 hold one pose: the hips' hold is flat, so the units below are turned back by the same (to the
    # last bits of the hips' flat segment), their compensated values, rounded as keys are, keep the hold bit for
    # bit, and every unit keeps the hold's ends as keys with nothing between.
    body = humanoid_body()
    q, location = smooth_poses(body, 121)
    q[40:71], location[40:71] = q[40], location[40]
    units, stored = body_units(body, q, location)
    frames = np.arange(1.0, 122.0)
    reduced, errors = reduced_body_errors(body, frames, units, stored, q, location, 1e-4)
    assert errors.max() <= 1e-4
    for keys in reduced.reduced:
        kept = keys.indices.tolist()
        assert {40, 70} <= set(kept) and not any(40 < k < 70 for k in kept), kept
        assert np.all(keys.errors[40:71] == 0.0)


def test_a_bound_below_the_float32_rounding_carried_keeps_finite_weights_and_no_bound_is_refused():
    # The keys are float32: the units above carry a few nanometres at least, so E = 3 nm cannot hold below them.
    # The reduction still ends with finite weights (every unit at most its keys per frame); E = 0 is refused.
    from ik_solvers.core.errors import IKInputError

    body, frames, q, location, units, stored = smooth_body(25)
    hips = body.names.index("hips")
    pose = body_pose(body, body.variables, q, hips, location)
    reduced = finished(body_reduction_steps(frames, body, pose, units, 3e-9))
    assert max(float(c.max()) for c in reduced.carried) > 3e-9  # the rounding carried is beyond the bound
    for k, keys in enumerate(reduced.reduced):
        assert np.all(np.isfinite(reduced.path_errors(k))) and keys.keys_after <= len(frames)
    with pytest.raises(IKInputError, match="bound above 0"):
        finished(body_reduction_steps(frames, body, pose, units, 0.0))

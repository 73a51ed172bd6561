"""Key reduction of a body bake (SPEC §8, §9; core.body.keys): shares of the bound along the tree, and the
bound held at every joint and tip of every chain when every unit's reduced curves are evaluated together."""

import numpy as np
import pytest
from test_key_reduction_fit import evaluated_curves

from ik_solvers.core import Chain, JointKind
from ik_solvers.core.body.forward import body_pose
from ik_solvers.core.body.humanoid import CHAIN_BONES, humanoid_body, random_poses
from ik_solvers.core.body.keys import (
    KeyUnit,
    body_reduction_steps,
    pose_from_local,
    unit_parents,
    unit_points,
    unit_shares,
)
from ik_solvers.core.key_reduction import quaternion_rotations
from ik_solvers.core.key_search import finished
from ik_solvers.core.kinematics import joint_local_matrices
from ik_solvers.core.rotations import quaternions_from_matrices


def test_shares_add_up_to_the_bound_along_every_path():
    # root → spine → (arm, neck); root → leg; a lone chain
    parents = [-1, 0, 1, 1, 0, -1]
    shares = unit_shares(parents, 0.9)
    assert shares == pytest.approx([0.3, 0.3, 0.3, 0.3, 0.6, 0.9])
    for leaf in (2, 3, 4, 5):
        total, k = 0.0, leaf
        while k >= 0:
            total, k = total + shares[k], parents[k]
        assert total == pytest.approx(0.9)


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
                     [None, quaternion_rotations], translation=True)]
    for name, (start, tip) in CHAIN_BONES.items():
        bones = [body.names.index(tip)]
        while body.names[bones[0]] != start:
            bones.insert(0, int(body.parents[bones[0]]))
        units.append(KeyUnit(name, tuple(bones), unit_chain(body, bones), [stored[:, b] for b in bones],
                             [quaternion_rotations] * len(bones)))
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


def test_every_joint_and_tip_of_every_chain_stays_within_the_bound():
    body = humanoid_body()
    frames = np.arange(1.0, 122.0)
    q, location = smooth_poses(body, len(frames))
    units, stored = body_units(body, q, location)
    key_error = 1e-4
    reduced, errors = reduced_body_errors(body, frames, units, stored, q, location, key_error)
    assert reduced.parents == (-1, 0, 0, 0, 3, 3)  # the arms hang below the spine chain (from its chest)
    assert errors.max() <= key_error, errors.max()
    for k in range(1, len(units)):
        assert reduced.path_errors(k).max() <= key_error
        assert reduced.as_chain(k).key_error == key_error
    kept = [keys.keys_after for keys in reduced.reduced]
    assert max(kept) < len(frames) / 6, kept  # smooth paths through eight poses: few keys


def test_a_unit_measured_only_at_its_own_points_breaks_the_bound_below_it(monkeypatch):
    # What the attachments are for: the hips' and the spine's small turns, seen 0.5-1 m away at the hands
    # and feet, are far more than their share (measured: 16 mm against 0.1 mm on these paths).
    from ik_solvers.core.body import keys

    body = humanoid_body()
    frames = np.arange(1.0, 122.0)
    q, location = smooth_poses(body, len(frames))
    units, stored = body_units(body, q, location)
    monkeypatch.setattr(keys, "unit_attachments", lambda *args: None)
    _, errors = reduced_body_errors(body, frames, units, stored, q, location, 1e-4)
    assert errors.max() > 10 * 1e-4


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

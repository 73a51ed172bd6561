"""``rig.write_pose`` writes every joint bone's channel in bulk (``foreach_set``): what it stores is
bit for bit what setting each bone's channel property stored, in every rotation mode, and the bones
outside the chain keep their channels exactly."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import RIG_BUILDERS, build_arm
from test_rig import _randomise_pose, _stored_channels

from ik_solvers.blender import rig
from ik_solvers.core.kinematics import local_quaternions


def _write_bone_by_bone(obj, chain: rig.RigChain, q: np.ndarray) -> None:
    """The per-bone property writes ``write_pose`` made before it wrote in bulk (the reference)."""
    rotations = local_quaternions(chain.chain, q[None])
    for joint, name in enumerate(chain.joint_bones):
        pose_bone = obj.pose.bones[name]
        value = rig._values_in_mode(pose_bone.rotation_mode, rig._current_channels(pose_bone), rotations[:, joint],
                                    keep_norm=True)[0]
        channel = rig.CHANNELS.get(pose_bone.rotation_mode, ("rotation_euler", 3))[0]
        setattr(pose_bone, channel, value)


@pytest.mark.parametrize("modes", [rig.ROTATION_MODES, ("QUATERNION",)], ids=["every mode", "quaternions"])
@pytest.mark.parametrize("rig_name", sorted(RIG_BUILDERS))
def test_bulk_write_stores_what_bone_by_bone_writes_stored(scene, rig_name, modes):
    builder, tip, length = RIG_BUILDERS[rig_name]
    obj = builder()
    rng = np.random.default_rng(3)
    for trial in range(12):
        _randomise_pose(obj, rng, modes)
        first = obj.pose.bones[0]
        if trial % 2:  # an unnormalised quaternion keeps its length
            first.rotation_mode = "QUATERNION"
            first.rotation_quaternion = (0.5, -1.2, 0.3, 0.9)
        chain = rig.read_chain(obj, tip, length)
        q = chain.q + rng.normal(size=chain.chain.n_dof)
        before = _stored_channels(obj)
        _write_bone_by_bone(obj, chain, q)
        expected = _stored_channels(obj)
        for name, pose_bone in zip(before, obj.pose.bones):  # back to the pose read
            pose_bone.rotation_quaternion, pose_bone.rotation_euler, pose_bone.rotation_axis_angle = before[name]
        assert _stored_channels(obj) == before
        rig.write_pose(obj, chain, q)
        assert _stored_channels(obj) == expected, trial


def test_mode_names_are_blenders_rotation_mode_values(scene):
    obj = build_arm()
    values = np.empty(len(obj.pose.bones), dtype=np.int32)
    for mode in rig.ROTATION_MODES:
        obj.pose.bones[0].rotation_mode = mode
        obj.pose.bones.foreach_get("rotation_mode", values)
        assert rig.MODE_NAMES[int(values[0])] == mode



def test_quaternion_values_are_the_per_bone_values_in_float64():
    rng = np.random.default_rng(9)
    references = rng.normal(size=(500, 4)) * rng.uniform(1e-3, 1e3, (500, 1))
    references[::50] = 0.0  # zero quaternions read as identity
    quaternions = rng.normal(size=(500, 4))
    quaternions /= np.linalg.norm(quaternions, axis=1, keepdims=True)
    bulk = np.array(rig._quaternion_values(references.tolist(), quaternions))
    for row in range(500):
        one = rig._values_in_mode("QUATERNION", references[row], quaternions[row:row + 1], keep_norm=True)[0]
        assert one.tobytes() == bulk[row].tobytes(), row

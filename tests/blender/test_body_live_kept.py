"""Live mode keeps a body between goal moves (issue 22, ``body_live``): a goal move re-solves the
body without reading it again, the live pose stays the operator's solve bit for bit, and anything a
body read depends on (a bone's IK setting, a chain's weight, a goal parented to a solved bone) is
still seen at the next update.
"""

from __future__ import annotations

import bpy
import pytest
from conftest import pose_snapshot
from test_body_metarig import CHAINS, REACHED, _solve, _target, _tip_error, body  # noqa: F401  # the fixture

try:  # Rigify off after this module (the fixture lives in test_body_metarig or, later, in conftest)
    from test_body_metarig import rigify_enabled  # noqa: F401  # the fixture
except ImportError:
    pass

from ik_solvers.blender import body_live, live
from ik_solvers.blender.snapshots import PoseSnapshot

pytestmark = pytest.mark.usefixtures("rigify_enabled")


@pytest.fixture
def live_body(body, monkeypatch):  # noqa: F811  # the fixture imported above
    """``body`` live, with the number of body reads and solves live mode makes."""
    counts = {"reads": 0, "solves": 0}
    read, solve = body_live.read_body, body_live.solve_body_inputs

    def counted(name, function):
        def call(*args):
            counts[name] += 1
            return function(*args)
        return call

    monkeypatch.setattr(body_live, "read_body", counted("reads", read))
    monkeypatch.setattr(body_live, "solve_body_inputs", counted("solves", solve))
    body.ik_solvers.active_chain_index = list(CHAINS).index("arm.L")
    before = PoseSnapshot(body)
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    return body, counts, before


def _matches_the_operator(obj, before: PoseSnapshot) -> None:
    """The live pose is the operator's solve of the same goals and settings from the pose ``before`` the
    last live solve (``rig.write_pose`` keeps a quaternion's stored length: the same start, the same bits)."""
    live_pose = pose_snapshot(obj)
    obj.ik_solvers.chains["arm.L"].use_live = False
    before.restore()
    _solve(obj)
    assert pose_snapshot(obj) == live_pose


def test_goal_moves_reuse_the_body_and_match_the_operator(live_body):
    obj, counts, before = live_body
    reads = counts["reads"]
    for step in range(4):
        solves = counts["solves"]
        before = PoseSnapshot(obj)
        _target(obj, "arm.L").location.z -= 0.05
        _target(obj, "chest").location.y -= 0.02
        bpy.context.view_layer.update()
        assert counts["solves"] == solves + 1, step  # one solve per move, none for our own write
        bpy.context.view_layer.update()
        assert counts["solves"] == solves + 1, step
    assert counts["reads"] == reads  # the body read at live mode's start served every move
    assert body_live.bodies[obj.session_uid].quaternion_bones is not None  # written in one bulk write
    for name in ("leg.L", "leg.R"):  # the feet outrank the rest: planted throughout
        assert _tip_error(obj, name) <= REACHED, name
    _matches_the_operator(obj, before)


@pytest.mark.parametrize("change", ["stiffness", "weight", "fixed_link_pose", "euler_elbow"])
def test_what_a_body_read_depends_on_is_read_again(live_body, change):
    obj, counts, _ = live_body
    _target(obj, "arm.L").location.x += 0.3  # out of reach: weights and stiffness matter
    bpy.context.view_layer.update()
    reads, solves = counts["reads"], counts["solves"]
    before = PoseSnapshot(obj)
    if change == "stiffness":
        obj.pose.bones["spine.002"].ik_stiffness_x = 0.6
    elif change == "weight":
        obj.ik_solvers.chains["arm.L"].weight = 0.3
    elif change == "euler_elbow":  # a chain bone out of quaternion mode: written bone by bone
        obj.pose.bones["forearm.L"].rotation_mode = "XYZ"
        before = PoseSnapshot(obj)
    else:  # the animator turns a fixed link: the arm's start moves
        obj.pose.bones["shoulder.L"].rotation_quaternion = (0.99, 0.1, 0.0, 0.0)
        before = PoseSnapshot(obj)  # the operator solves with that pose of the fixed link too
    bpy.context.view_layer.update()
    assert counts["reads"] == reads + 1 and counts["solves"] == solves + 1
    assert (body_live.bodies[obj.session_uid].quaternion_bones is None) == (change == "euler_elbow")
    _matches_the_operator(obj, before)


def test_a_goal_parented_to_a_solved_bone_turns_a_kept_body_off(live_body):
    obj, counts, _ = live_body
    reads = counts["reads"]
    target = _target(obj, "arm.L")
    target.parent, target.parent_type, target.parent_bone = obj, "BONE", "spine.003"  # an object change only
    bpy.context.view_layer.update()
    chain = obj.ik_solvers.chains["arm.L"]
    assert counts["reads"] == reads  # the kept body's checks found it
    assert not chain.use_live
    assert "depends on the chain" in chain.last_message


def test_a_kept_body_whose_chains_are_all_disabled_turns_off_in_words(live_body):
    obj, _, _ = live_body
    for chain in obj.ik_solvers.chains:
        chain.enabled = False
    live.update_live_chains(bpy.context.scene, bpy.context.evaluated_depsgraph_get(), force=True)
    chain = obj.ik_solvers.chains["arm.L"]
    assert not chain.use_live
    assert "no enabled chain" in chain.last_message

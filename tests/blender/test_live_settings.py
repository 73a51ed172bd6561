"""Every setting a solve reads (``properties.SOLVE_SETTINGS``), changed while the chain is live, in real
Blender: live mode solves again at once, Blender's evaluated pose is the one a fresh solve with the new
setting gives (the solve operator, from the chain's reference pose), and live mode keeps no stale record
(issue 19: only 3 of the 15 settings were tested)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import bpy
import numpy as np
import pytest
from conftest import add_empty, build_leg

from ik_solvers.blender import live, live_quick, properties
from ik_solvers.blender.spec import settings_key

TARGET = (0.25, -0.2, 0.3)


@dataclass(frozen=True)
class Change:
    """How one setting is changed, on which chain, and whether the pose must move with it."""

    change: Callable[[object], None]
    method: str = "HI"
    settings: dict = field(default_factory=dict)
    """Set after the preferred pose is captured, before live mode is turned on."""
    moves: bool = True
    fresh: bool = True
    """Whether the solve operator's fresh solve gives live mode's pose: not below influence 1, where
    live mode blends with the FK pose before its writes and the operator with the pose it finds
    (``test_influence.py`` tests live mode's blend)."""


def _set(name: str, value) -> Callable[[object], None]:
    return lambda chain: setattr(chain, name, value)


def _new_target(chain) -> None:
    chain.target = add_empty("Other Target", location=(0.05, 0.15, 0.35))


def _new_pole(chain) -> None:
    chain.pole_target = add_empty("Other Pole", location=(0.6, 0.3, 0.6))


def _turn_preferred_shin(chain) -> None:
    item = next(item for item in chain.preferred_pose if item.bone_name == "shin")
    item.rotation = (0.92, 0.39, 0.0, 0.0)


BUDGET = {"max_iterations": 3}
"""A budget the iterative methods run out of here: then every step setting shapes the pose."""

CHANGES = {
    "name": Change(_set("name", "Renamed"), moves=False),
    "tip_bone": Change(_set("tip_bone", "shin"), settings={"chain_length": 2}),
    # Set up again (issue 20): the preferred pose captured now and the swivel kept, so nothing moves.
    "chain_length": Change(_set("chain_length", 2), moves=False),
    "target": Change(_new_target),
    # An Empty target has no bones: the goal stays (bone targets: test_bone_targets.py).
    "target_bone": Change(_set("target_bone", "foot"), moves=False),
    "pole_target": Change(_new_pole, settings={"zero_plane_map": "POLE_OBJECT"}),
    "method": Change(_set("method", "SDLS")),
    "max_iterations": Change(_set("max_iterations", 1), "SDLS", BUDGET),
    "tolerance": Change(_set("tolerance", 0.2), "SDLS", BUDGET),
    "max_step_angle": Change(_set("max_step_angle", 0.02), "SDLS", BUDGET),
    "step": Change(_set("step", 0.3), "JACOBIAN_TRANSPOSE", BUDGET),
    "damping": Change(_set("damping", 0.5), "DLS", BUDGET),
    "reference_weight": Change(_set("reference_weight", 0.5), "SDLS", BUDGET),
    "swivel_angle": Change(_set("swivel_angle", 0.7)),
    "influence": Change(_set("influence", 0.6), fresh=False),
    # The target Empty's axes are the world's: the foot turns to them (HI aligns the last bone).
    "use_rotation": Change(_set("use_rotation", True)),
    "rotation_weight": Change(_set("rotation_weight", 0.2), "SDLS", {**BUDGET, "use_rotation": True}),
    "zero_plane_map": Change(_set("zero_plane_map", "POLE_OBJECT")),
    "parent_space": Change(_set("parent_space", "IK_TARGET")),
    "flip_threshold": Change(_set("flip_threshold", 1.2), moves=False),  # the warning's angle, not the pose
    # The leg's preferred pose is bent, which gives the plane: the bend direction is for straight
    # ones (test_straight_rest.py flips it on a live straight arm).
    "bend_direction": Change(_set("bend_direction", (0.0, 0.0, 1.0)), moves=False),
    "has_preferred_pose": Change(_set("has_preferred_pose", False), "SDLS", BUDGET),
    "preferred_pose": Change(_turn_preferred_shin),
}


def test_every_setting_a_solve_reads_is_tested():
    assert list(CHANGES) == [setting.name for setting in properties.SOLVE_SETTINGS]


def evaluated_pose(obj) -> np.ndarray:
    """Blender's evaluated pose: every pose bone's matrix (armature space), after an update."""
    bpy.context.view_layer.update()
    return np.array([np.array(pose_bone.matrix) for pose_bone in obj.pose.bones])


def live_leg(method: str, settings: dict):
    """A live 3-bone leg whose hip is turned (the start joint's parent is not the world), its preferred
    pose a bent knee, a pole target beside it."""
    obj = build_leg()
    obj.pose.bones["hip"].rotation_quaternion = (0.96, 0.1, -0.2, 0.15)
    obj.pose.bones["shin"].rotation_quaternion = (0.98, 0.2, 0.0, 0.0)
    bpy.context.view_layer.update()
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.method = "Leg", "foot", 3, method
    chain.target, chain.pole_target = add_empty("Target", TARGET), add_empty("Pole", (0.1, -0.6, 0.5))
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}
    for name, value in settings.items():
        setattr(chain, name, value)
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    return obj, chain


def fresh_solve_pose(obj, chain) -> np.ndarray:
    """Blender's evaluated pose after the solve operator (from the chain's reference pose: history
    independent) with live mode off; live mode is turned on again after."""
    chain.use_live = False
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    pose = evaluated_pose(obj)
    chain.use_live = True
    evaluated_pose(obj)
    assert chain.use_live, chain.last_message
    return pose


@pytest.mark.parametrize("name", list(CHANGES))
def test_a_setting_changed_while_live_re_solves_as_a_fresh_solve(addon, monkeypatch, name):
    change = CHANGES[name]
    obj, chain = live_leg(change.method, change.settings)
    solves = []
    run_solve = live.run_solve
    monkeypatch.setattr(live, "run_solve", lambda prepared: solves.append(1) or run_solve(prepared))
    quick_solves = []
    quick_solve = live_quick.quick_solve
    monkeypatch.setattr(live_quick, "quick_solve", lambda *args: quick_solves.append(1) or quick_solve(*args))
    before = evaluated_pose(obj)
    assert live.state.quick  # a target move would take the quick path ...
    change.change(chain)
    assert not live.state.quick  # ... which the setting's update hook forgot at once
    after = evaluated_pose(obj)  # the update the change makes is handled by live mode
    assert chain.use_live and chain.last_status != "ERROR", chain.last_message
    assert solves, f"changing {name} did not re-solve"
    assert (not np.allclose(after, before, rtol=0.0, atol=1e-5)) == change.moves
    (key, record), = live.state.chains.items()  # one record, of the chain as it is now
    assert key == (obj.session_uid, chain.name) and record.spec.source[2] == settings_key(chain)
    if change.fresh:
        np.testing.assert_allclose(fresh_solve_pose(obj, chain), after, rtol=0.0, atol=1e-6)
    # The next target move (the quick path again) solves with the new setting too.
    chain.target.location = (0.2, -0.05, 0.4)
    moved = evaluated_pose(obj)
    assert quick_solves
    assert not np.allclose(moved, after, rtol=0.0, atol=1e-5)
    if change.fresh:
        np.testing.assert_allclose(fresh_solve_pose(obj, chain), moved, rtol=0.0, atol=1e-6)

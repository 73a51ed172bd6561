"""Live mode reuses the chain it read while the rig key (every armature value the rig reader
depends on) is unchanged: a change the reader refuses must reach the key, or live mode would keep
solving a rig ``read_chain`` no longer accepts."""

from __future__ import annotations

import bpy
from conftest import add_empty, build_leg


def test_a_start_bone_that_stops_inheriting_its_scaled_parents_scale_turns_live_off(addon):
    # Regression: inherit_scale was not in the rig key, so the cached chain hid read_chain's refusal.
    obj = build_leg()
    obj.pose.bones["hip"].scale = (2.0, 2.0, 2.0)
    bpy.context.view_layer.update()
    target = add_empty(location=(0.2, -0.1, 0.3))
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Leg", "shin", 2, target, "DLS"
    bpy.context.view_layer.objects.active = obj
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    assert chain.use_live and chain.last_status == "CONVERGED"
    obj.data.bones["thigh"].inherit_scale = "NONE"
    target.location = (0.25, -0.1, 0.3)
    bpy.context.view_layer.update()
    assert not chain.use_live
    assert "does not fully inherit the scale" in chain.last_message

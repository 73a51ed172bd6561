"""Issue 21, "reported as success while Blender shows otherwise": a target that depends on the chain
through a driver of any variable type, a vertex parent or a constraint on a mesh the chain deforms,
or shape-key drivers is a dependency cycle, refused by solve, bake and live mode naming target and bone."""

from __future__ import annotations

import bpy
import pytest
from conftest import add_empty, build_arm, build_armature

CALLS = {
    "solve": lambda: bpy.ops.ik_solvers.solve(),
    "bake": lambda: bpy.ops.ik_solvers.bake(frame_start=1, frame_end=3),
    "live": lambda: bpy.ops.ik_solvers.live_toggle(),
}


def arm_chain(obj, target):
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target, chain.method = "Arm", "forearm", 2, target, "SDLS"
    bpy.context.view_layer.objects.active = obj
    return chain


def assert_refused(match: str):
    for call in CALLS.values():
        with pytest.raises(RuntimeError, match=match):
            call()


def drive_target(target, variable_type, configure):
    driver = target.driver_add("location", 0).driver
    variable = driver.variables.new()
    variable.type = variable_type
    configure(variable)
    driver.expression = f"0.4 + 0.1 * {variable.name}"
    return driver


VARIABLES = {
    "SINGLE_PROP": lambda v, rig: (setattr(v.targets[0], "id", rig),
                                   setattr(v.targets[0], "data_path", 'pose.bones["forearm"].rotation_quaternion[1]')),
    "SINGLE_PROP from the scene": lambda v, rig: (
        setattr(v.targets[0], "id_type", "SCENE"), setattr(v.targets[0], "id", bpy.context.scene),
        setattr(v.targets[0], "data_path", 'objects["Rig"].pose.bones["upper_arm"].matrix[0][3]')),
    "CONTEXT_PROP": lambda v, rig: (setattr(v.targets[0], "context_property", "ACTIVE_SCENE"),
                                    setattr(v.targets[0], "data_path", 'objects["Rig"].pose.bones["forearm"].tail[0]')),
    "TRANSFORMS": lambda v, rig: (setattr(v.targets[0], "id", rig), setattr(v.targets[0], "bone_target", "forearm")),
    "ROTATION_DIFF": lambda v, rig: [(setattr(t, "id", rig), setattr(t, "bone_target", b))
                                     for t, b in zip(v.targets, ("upper_arm", "forearm"))],
    "LOC_DIFF": lambda v, rig: [(setattr(t, "id", rig), setattr(t, "bone_target", b))
                                for t, b in zip(v.targets, ("upper_arm", "forearm"))],
}


@pytest.mark.parametrize("kind", list(VARIABLES))
def test_a_target_driven_through_any_variable_type_by_a_chain_bone_is_refused(addon, kind):
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    variable_type = kind.split()[0]
    drive_target(target, variable_type, lambda v: VARIABLES[kind](v, obj))
    arm_chain(obj, target)
    assert_refused(r"Chain 'Arm': the target 'Target' depends on the chain: the driver of 'Target' location reads "
                   r"bone '(forearm|upper_arm)', which the chain moves \(a dependency cycle\)")


def test_a_driver_reading_a_chain_bones_custom_property_is_fine(addon):
    """A custom property of a pose bone does not move with the pose: no cycle."""
    obj = build_arm()
    obj.pose.bones["forearm"]["reach"] = 0.1
    target = add_empty(location=(0.4, 0.1, 1.3))
    drive_target(target, "SINGLE_PROP", lambda v: (setattr(v.targets[0], "id", obj),
                                                   setattr(v.targets[0], "data_path", 'pose.bones["forearm"]["reach"]')))
    arm_chain(obj, target)
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}


def deformed_mesh(obj, group_of_vertex):
    """A mesh of three vertices, each weighted fully to the bone ``group_of_vertex[i]``, deformed by ``obj``."""
    mesh = bpy.data.meshes.new("Body")
    mesh.from_pydata([(0.45, 0.05, 1.4), (0.5, 0.0, 1.4), (0.1, 0.0, 1.45)], [], [(0, 1, 2)])
    body = bpy.data.objects.new("Body", mesh)
    bpy.context.scene.collection.objects.link(body)
    for index, bone in enumerate(group_of_vertex):
        group = body.vertex_groups.get(bone) or body.vertex_groups.new(name=bone)
        group.add([index], 1.0, "REPLACE")
    modifier = body.modifiers.new("Armature", "ARMATURE")
    modifier.object = obj
    return body


@pytest.mark.parametrize("parent_type", ["VERTEX", "VERTEX_3"])
def test_a_target_parented_to_vertices_the_chain_deforms_is_refused(addon, parent_type):
    obj = build_arm()
    body = deformed_mesh(obj, ("forearm", "forearm", "spine"))
    target = add_empty(location=(0.4, 0.1, 1.3))
    target.parent, target.parent_type = body, parent_type
    target.parent_vertices = (0, 1, 2)
    bpy.context.view_layer.update()
    arm_chain(obj, target)
    assert_refused(r"the target 'Target' depends on the chain: 'Target' is parented to vertices of 'Body', which "
                   r"modifier 'Armature' deforms with bone 'forearm', which the chain moves")


def test_a_target_parented_to_a_vertex_of_bones_outside_the_chain_is_fine(addon):
    obj = build_arm()
    body = deformed_mesh(obj, ("spine", "forearm", "forearm"))
    target = add_empty(location=(0.4, 0.1, 1.3))
    target.parent, target.parent_type, target.parent_vertices = body, "VERTEX", (0, 0, 0)
    arm_chain(obj, target)
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}


def test_a_target_constrained_to_a_vertex_group_of_a_deformed_mesh_is_refused(addon):
    obj = build_arm()
    body = deformed_mesh(obj, ("forearm", "forearm", "forearm"))
    target = add_empty(location=(0.4, 0.1, 1.3))
    follow = target.constraints.new("COPY_LOCATION")
    follow.target, follow.subtarget = body, "forearm"
    arm_chain(obj, target)
    assert_refused(r"constraint 'Copy Location' of 'Target' follows the geometry of 'Body', which modifier 'Armature' "
                   r"deforms with bone 'forearm'")


def test_a_target_on_vertices_moved_by_a_shape_key_driven_by_a_chain_bone_is_refused(addon):
    obj = build_arm()
    body = deformed_mesh(obj, ("spine", "spine", "spine"))
    body.modifiers.clear()
    body.shape_key_add(name="Basis")
    key = body.shape_key_add(name="Bend")
    driver = key.driver_add("value").driver
    variable = driver.variables.new()
    variable.type, variable.targets[0].id, variable.targets[0].bone_target = "TRANSFORMS", obj, "forearm"
    driver.expression = variable.name
    target = add_empty(location=(0.4, 0.1, 1.3))
    target.parent, target.parent_type, target.parent_vertices = body, "VERTEX", (0, 0, 0)
    arm_chain(obj, target)
    assert_refused(r"'Target' is parented to vertices of 'Body', and the driver of 'Body' "
                   r"key_blocks\[\"Bend\"\].value reads bone 'forearm'")


def test_a_live_chain_whose_target_gets_a_cycle_turns_live_off_naming_it(addon):
    """Live mode (the quick path for moved objects included) says why, never CONVERGED."""
    obj = build_arm()
    target = add_empty(location=(0.4, 0.1, 1.3))
    chain = arm_chain(obj, target)
    assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"} and chain.use_live
    target.location.x = 0.45
    bpy.context.view_layer.update()
    drive_target(target, "SINGLE_PROP", lambda v: (setattr(v.targets[0], "id", obj), setattr(
        v.targets[0], "data_path", 'pose.bones["forearm"].rotation_quaternion[1]')))
    bpy.context.view_layer.update()
    bpy.context.scene.frame_set(2)
    assert not chain.use_live
    assert "depends on the chain" in chain.last_message and "bone 'forearm'" in chain.last_message


def test_a_target_driven_by_another_armatures_bone_that_follows_the_chain_is_refused(addon):
    obj = build_arm()
    other = build_armature([{"name": "follower", "head": (0.0, 0.0, 0.0), "tail": (0.0, 0.0, 0.2)}], name="Other")
    copy = other.pose.bones["follower"].constraints.new("COPY_ROTATION")
    copy.target, copy.subtarget = obj, "forearm"
    target = add_empty(location=(0.4, 0.1, 1.3))
    drive_target(target, "TRANSFORMS", lambda v: (setattr(v.targets[0], "id", other),
                                                  setattr(v.targets[0], "bone_target", "follower")))
    arm_chain(obj, target)
    assert_refused(r"the target 'Target' depends on the chain: constraint 'Copy Rotation' of bone 'follower' of "
                   r"'Other' follows bone 'forearm', which the chain moves")

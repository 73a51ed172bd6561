"""Shared fixtures for the Blender tests: a fresh empty scene per test, the add-on registered,
and rig builders (arm, leg, long disconnected chain, transformed / parented armature, Empty target).

``bpy`` is imported here, after ``tests/conftest.py`` pointed Blender's user folders at a
temporary directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import bpy
import numpy as np
import pytest

import ik_solvers


@pytest.fixture
def scene():
    """An empty scene (``read_homefile(use_empty=True)``) without the add-on registered."""
    bpy.ops.wm.read_homefile(use_empty=True)
    return bpy.context.scene


@pytest.fixture
def addon(scene):
    """The add-on registered on a fresh empty scene; unregistered afterwards."""
    ik_solvers.register()
    try:
        yield scene
    finally:
        ik_solvers.unregister()


def build_armature(
    bones: Sequence[dict],
    name: str = "Rig",
    location=(0.0, 0.0, 0.0),
    rotation_euler=(0.0, 0.0, 0.0),
    scale: float = 1.0,
    parent=None,
):
    """An armature object with ``bones``: dicts of ``name, head, tail`` and optional
    ``parent`` (name), ``connect`` (bool), ``roll`` (radians); left in object mode, active."""
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.objects.active = obj
    obj.select_set(True)
    bpy.ops.object.mode_set(mode="EDIT")
    for spec in bones:
        edit_bone = data.edit_bones.new(spec["name"])
        edit_bone.head = spec["head"]
        edit_bone.tail = spec["tail"]
        edit_bone.roll = spec.get("roll", 0.0)
    for spec in bones:
        if spec.get("parent"):
            edit_bone = data.edit_bones[spec["name"]]
            edit_bone.parent = data.edit_bones[spec["parent"]]
            edit_bone.use_connect = spec.get("connect", True)
    bpy.ops.object.mode_set(mode="OBJECT")
    obj.location = location
    obj.rotation_euler = rotation_euler
    obj.scale = (scale, scale, scale)
    if parent is not None:
        obj.parent = parent
    bpy.context.view_layer.update()
    return obj


def build_arm(**kwargs):
    """A two-bone arm: upper 0.30 and forearm 0.28 (Blender units), bent, with bone roll."""
    return build_armature(
        [
            {"name": "upper_arm", "head": (0.0, 0.0, 1.4), "tail": (0.3, 0.0, 1.4), "roll": 0.4},
            {"name": "forearm", "head": (0.3, 0.0, 1.4), "tail": (0.57, 0.08, 1.39), "roll": -0.7,
             "parent": "upper_arm"},
        ],
        **kwargs,
    )


def build_leg(**kwargs):
    """A 3-bone leg below a hip bone: thigh 0.45, shin 0.42, foot 0.15, knee slightly forward."""
    return build_armature(
        [
            {"name": "hip", "head": (0.0, 0.0, 1.0), "tail": (0.1, 0.0, 1.0)},
            {"name": "thigh", "head": (0.1, 0.0, 0.95), "tail": (0.1, -0.02, 0.5), "parent": "hip",
             "connect": False},
            {"name": "shin", "head": (0.1, -0.02, 0.5), "tail": (0.1, 0.0, 0.08), "parent": "thigh",
             "roll": 0.2},
            {"name": "foot", "head": (0.1, 0.0, 0.08), "tail": (0.1, -0.15, 0.02), "parent": "shin"},
        ],
        **kwargs,
    )


def build_long_chain(count: int = 10, **kwargs):
    """``count`` bones, each disconnected from its parent by a small gap, with varying roll."""
    rng = np.random.default_rng(0)
    specs, head = [], np.zeros(3)
    for index in range(count):
        direction = np.array([1.0, 0.0, 0.0]) + 0.3 * rng.normal(size=3)
        tail = head + 0.12 * direction / np.linalg.norm(direction)
        spec = {"name": f"b{index}", "head": tuple(head), "tail": tuple(tail), "roll": float(rng.uniform(-1, 1))}
        if index:
            spec.update(parent=f"b{index - 1}", connect=False)
        specs.append(spec)
        head = tail + 0.02 * rng.normal(size=3)  # the gap: a disconnected child
    return build_armature(specs, **kwargs)


def build_two_arms():
    """Two independent two-bone arms on one armature: ``l_upper → l_fore`` at +y, ``r_upper → r_fore`` at -y."""
    return build_armature([
        {"name": "l_upper", "head": (0.0, 0.2, 1.4), "tail": (0.3, 0.2, 1.4)},
        {"name": "l_fore", "head": (0.3, 0.2, 1.4), "tail": (0.58, 0.25, 1.4), "parent": "l_upper"},
        {"name": "r_upper", "head": (0.0, -0.2, 1.4), "tail": (0.3, -0.2, 1.4)},
        {"name": "r_fore", "head": (0.3, -0.2, 1.4), "tail": (0.58, -0.25, 1.4), "parent": "r_upper"},
    ])


def build_zero_length_segment():
    """Bones ``a`` → ``b``, ``b`` disconnected but starting at ``a``'s head: ``a``'s segment has no length."""
    return build_armature([
        {"name": "a", "head": (0, 0, 0), "tail": (0, 0.3, 0)},
        {"name": "b", "head": (0, 0, 0), "tail": (0.3, 0, 0), "parent": "a", "connect": False},
    ])


def build_transformed_arm():
    """The arm on an armature rotated, translated, uniformly scaled and parented to a rotated Empty."""
    holder = add_empty("Holder", location=(0.5, -0.3, 0.2))
    holder.rotation_euler = (0.2, -0.4, 0.9)
    holder.scale = (1.3, 1.3, 1.3)
    return build_arm(location=(0.2, 0.7, -0.1), rotation_euler=(0.3, 0.5, -0.2), scale=1.7, parent=holder)


def add_empty(name: str = "Target", location=(0.0, 0.0, 0.0)):
    """An Empty (plain axes) linked to the scene."""
    obj = bpy.data.objects.new(name, None)
    obj.empty_display_type = "PLAIN_AXES"
    obj.location = location
    bpy.context.scene.collection.objects.link(obj)
    bpy.context.view_layer.update()
    return obj


def evaluated_tip(obj, bone_name: str) -> np.ndarray:
    """Blender's own evaluated world position of a bone's tail (after a view-layer update)."""
    bpy.context.view_layer.update()
    return np.array(obj.matrix_world @ obj.pose.bones[bone_name].tail)


def evaluated_head(obj, bone_name: str) -> np.ndarray:
    bpy.context.view_layer.update()
    return np.array(obj.matrix_world @ obj.pose.bones[bone_name].head)


def pose_snapshot(obj) -> dict[str, tuple]:
    """Every pose bone's stored channels, exactly (to compare 'unchanged')."""
    return {
        pose_bone.name: (
            tuple(pose_bone.rotation_quaternion),
            tuple(pose_bone.rotation_euler),
            tuple(pose_bone.rotation_axis_angle),
            tuple(pose_bone.location),
            tuple(pose_bone.scale),
            pose_bone.rotation_mode,
        )
        for pose_bone in obj.pose.bones
    }


RIG_BUILDERS = {
    "arm": (build_arm, "forearm", 2),
    "leg": (build_leg, "foot", 3),
    "chain10": (build_long_chain, "b9", 10),
    "transformed_arm": (build_transformed_arm, "forearm", 2),
}
"""name → (builder, tip bone, chain length): the rigs every method is tested on."""


FLOAT32_EPS = 2.0**-24
"""Unit roundoff of Blender's float32 storage (rest matrices, channels, object matrices)."""


def float32_slack(obj, bone_names: Sequence[str]) -> float:
    """How far Blender's evaluated tip may sit from the exact (float64) pose of its own values.

    Every stored number (rest matrix, rotation channel, world matrix) carries a relative rounding
    error of up to ``FLOAT32_EPS``, and each of the ``n`` bones' matrix products adds one more,
    acting on lever arms no longer than the tip's distance from the world origin plus the chain's
    world reach. The bound ``2 · eps · (n + 2) · (|tip| + reach)`` is 3-4× the largest deviation
    measured over 200 random poses per test rig (arm 2.6e-7 → bound 1.0e-6, 10-bone chain
    6.8e-7 → 2.2e-6, transformed arm 5.6e-7 → 2.3e-6).
    """
    scale = float(np.cbrt(abs(np.linalg.det(np.array(obj.matrix_world)[:3, :3]))))
    heads = [np.array(obj.data.bones[name].head_local) for name in bone_names]
    segments = [np.linalg.norm(b - a) for a, b in zip(heads, heads[1:])]
    reach = (sum(segments) + obj.data.bones[bone_names[-1]].length) * scale
    tip = float(np.linalg.norm(evaluated_tip(obj, bone_names[-1])))
    return 2.0 * FLOAT32_EPS * (len(bone_names) + 2) * (tip + reach)


@pytest.fixture(scope="module")
def rigify_enabled():
    """Rigify on for a module's tests (``pytestmark = pytest.mark.usefixtures("rigify_enabled")``), off
    afterwards so other modules see the usual add-ons."""
    import addon_utils
    import bpy

    was_loaded = addon_utils.check("rigify")[1]
    handlers = list(bpy.app.handlers.load_post)
    yield
    if not was_loaded and addon_utils.check("rigify")[1]:
        addon_utils.disable("rigify", default_set=True)
        # Rigify's unregister leaves its load_post versioning handler (bpy 5.0.1), which then fails on
        # every later file load ("no attribute 'rigify_action_slots'"): take off what it added.
        for handler in [h for h in bpy.app.handlers.load_post if h not in handlers]:
            if getattr(handler, "__module__", "").startswith("rigify"):
                bpy.app.handlers.load_post.remove(handler)


@pytest.fixture
def live_solves(monkeypatch):
    """Counts the chain solves live mode runs through the batch solve (``run_solve`` wrapped in the
    full update and in the quick path): read ``.count``."""
    from types import SimpleNamespace

    from ik_solvers.blender import live, live_quick

    counter = SimpleNamespace(count=0)
    solve = live.run_solve

    def counting(prepared):
        counter.count += 1
        return solve(prepared)

    for module in (live, live_quick):
        monkeypatch.setattr(module, "run_solve", counting)
    return counter


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Let go of ``bpy`` when pytest is done, so bpy 4.5 does not hang at exit.

    Once ``tests/core/conftest.py`` is imported under the same name, this module is no longer in
    ``sys.modules``, so Python's shutdown does not clear its globals, and Blender runs its own
    shutdown only when the ``bpy`` module object is freed: 4.5 then hangs in a static destructor
    (gdb: ``GlobalState::~GlobalState`` in ``pthread_cond_destroy``). Other references from the whole
    Blender suite still keep it alive on 4.x (each test file alone exits; the suite did not), so on
    Blender 4.x the process ends here, after pytest's summary, with pytest's exit status and without
    the C++ static destructors. Blender 5.0 shuts down normally and keeps the ordinary exit.
    """
    bpy_module = globals().pop("bpy", None)
    if bpy_module is not None and bpy_module.app.version < (5, 0, 0) and _EXIT_STATUS:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[-1])

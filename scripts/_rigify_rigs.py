"""Rigify's own rigs as IK test beds: chains on the metarigs shipped in the bpy wheel, each with an
Empty target keyed along paths generated from the chain's rest joints (``_rigify_paths.py``).

Rigs (``BUILDERS``; chain bones root → tip):

- ``human_arm``: ``upper_arm.L → forearm.L`` of the human metarig;
- ``human_leg``: ``thigh.L → shin.L``; ``human_leg_foot``: ``thigh.L → shin.L → foot.L``;
- ``human_spine``: ``spine → spine.001 → spine.002 → spine.003``;
- ``horse_hind_leg``: ``thigh.L → lower_leg.L → hind_foot.L`` (horse metarig);
- ``wolf_hind_leg``: ``thigh.L → shin.L → foot.L`` (wolf metarig);
- ``horse_hind_leg_toe``, ``wolf_hind_leg_toe``: the same with the toe bone (4 bones);
- ``generated_fk_arm``: ``upper_arm_fk.L → forearm_fk.L`` of the rig ``pose.rigify_generate`` builds
  from the human metarig (face removed first: it is 95 % of the generation time and no chain uses it).

Each builder returns a :class:`RigifySetup`: the armature, an Empty target keyed along named paths
(one after another on one timeline, ``frames`` frames each) and a pole Empty on the side of the rest
bend. Solving and measuring a setup: ``_rigify_runs.py``; the comparison table: ``compare_rigify.py``.

Import ``bpy`` the way the caller needs (``BLENDER_USER_RESOURCES`` set first, ``_cli.import_bpy``)
before using the functions here.
"""

from __future__ import annotations

import atexit
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from _rigify_paths import arm_paths, leg_paths, min_preferred_ratio, reference_joint, spine_paths, with_fold
from _rigs import key_path

if TYPE_CHECKING:
    import bpy

STRAIGHT_REST_DEGREES = 2.0
"""A joint bent less than this at rest has no preferred side (the human spine's top joint: 0.19°):
it is never counted backward. The other joints here are bent 7° (spine) to 64° (ankle) at rest."""


# --------------------------------------------------------------------------- setup
@dataclass
class RigifySetup:
    """One chain on a Rigify rig with its animated target.

    Attributes
    ----------
    name : str
        Key in ``BUILDERS``.
    rig : bpy.types.Object
        The armature object.
    bones : tuple of str
        Chain bones, root → tip.
    target : bpy.types.Object
        Empty keyed (linear) at every frame of ``paths``.
    pole : bpy.types.Object
        Empty on the rest bend side of the reference joint, 0.6 reach away (not used unless asked).
    paths : dict of str → ndarray, shape (F, 3)
        World target positions per path, in timeline order; path ``k`` covers frames
        ``1 + k·F … (k+1)·F``.
    reachable : dict of str → bool
        Whether each path is designed reachable (every frame) or out of reach (every frame).
    rest_joints : ndarray, shape (n + 1, 3)
        World rest positions of the bones' heads and the tip bone's tail.
    rest_bend_axes : ndarray, shape (n - 1, 3)
        Unit rest bend axis of each inner joint, in its parent bone's rest frame (NaN if bent less
        than ``STRAIGHT_REST_DEGREES`` at rest: no preferred side).
    reference_joint : int
        Inner joint (1 … n-1) farthest from the root → tip axis at rest: it spans the bend plane.
    min_preferred_ratio : float
        Smallest root-to-tip distance, as a ratio of the reach, of the planar chain with every joint
        bent its rest way (0 … 180°): reachable targets with every joint on its preferred side lie
        between this and 1.
    """

    name: str
    rig: bpy.types.Object
    bones: tuple[str, ...]
    target: bpy.types.Object
    pole: bpy.types.Object
    paths: dict[str, np.ndarray]
    reachable: dict[str, bool]
    rest_joints: np.ndarray
    rest_bend_axes: np.ndarray
    reference_joint: int
    min_preferred_ratio: float
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def frames_per_path(self) -> int:
        return len(next(iter(self.paths.values())))

    @property
    def frame_end(self) -> int:
        return self.frames_per_path * len(self.paths)

    @property
    def reach(self) -> float:
        return float(np.linalg.norm(np.diff(self.rest_joints, axis=0), axis=1).sum())

    @property
    def targets(self) -> np.ndarray:
        """All target positions ``(frame_end, 3)``, frame 1 first."""
        return np.concatenate(list(self.paths.values()))

    def path_frames(self, path: str) -> np.ndarray:
        """Frames (1-based, inclusive) of ``path``."""
        index = list(self.paths).index(path)
        f = self.frames_per_path
        return np.arange(1 + index * f, 1 + (index + 1) * f)

    def reachable_mask(self) -> np.ndarray:
        """``(frame_end,)`` bool: frames of designed-reachable paths."""
        return np.concatenate([np.full(len(p), self.reachable[k]) for k, p in self.paths.items()])


def enable_rigify() -> None:
    """Enable the Rigify add-on bundled with bpy.

    ``default_set=True`` is needed: Rigify's ``register()`` reads its own entry in
    ``preferences.addons``, which only ``default_set`` creates (with False it raises KeyError half-way
    through registering). The preferences are not saved.
    """
    import addon_utils

    if not addon_utils.check("rigify")[1]:
        addon_utils.enable("rigify", default_set=True)


def unregister_generated_rig_ui() -> None:
    """Unregister the classes that the ``rig_ui.py`` script of a generated rig registered.

    Rigify runs that script as it generates, with ``__module__`` ``'builtins'``; its panels and
    operators stay registered after the rig is gone, and a registered class keeps ``bpy`` alive past
    Python's shutdown, where bpy 4.5 hangs (see ``ik_solvers.blender.compat.unregister_at_exit``).
    """
    import bpy

    for base in (bpy.types.Panel, bpy.types.Operator, bpy.types.Menu, bpy.types.UIList, bpy.types.PropertyGroup):
        for cls in base.__subclasses__():
            if cls.__module__ == "builtins" and getattr(cls, "is_registered", False):
                bpy.utils.unregister_class(cls)


def fresh_scene() -> None:
    """An empty scene with Rigify enabled."""
    import bpy

    bpy.ops.wm.read_homefile(use_empty=True)
    enable_rigify()


def metarig(operator: str):
    """Add the metarig of ``operator`` (e.g. ``armature_human_metarig_add``) with Rigify enabled; returns it."""
    import bpy

    enable_rigify()
    result = getattr(bpy.ops.object, operator)()
    assert result == {"FINISHED"}, (operator, result)
    obj = bpy.context.object
    bpy.context.view_layer.update()
    return obj


def chain_bones(obj, tip: str, count: int) -> tuple[str, ...]:
    names: list[str]
    bone, names = obj.data.bones[tip], []
    while bone is not None and len(names) < count:
        names.append(bone.name)
        bone = bone.parent
    assert len(names) == count, f"{tip} has only {len(names)} bones above it"
    return tuple(reversed(names))


def rest_geometry(obj, bones) -> tuple[np.ndarray, np.ndarray]:
    """World rest joints ``(n+1, 3)`` and the unit rest bend axes ``(n-1, 3)`` in parent bone frames
    (NaN rows for joints straighter than ``STRAIGHT_REST_DEGREES``)."""
    world = np.array(obj.matrix_world)
    data = [obj.data.bones[b] for b in bones]
    local = np.array([b.head_local for b in data] + [data[-1].tail_local])
    joints = local @ world[:3, :3].T + world[:3, 3]
    rotations = np.array([np.array(b.matrix_local)[:3, :3] for b in data])
    axes = np.full((len(bones) - 1, 3), np.nan)
    for k in range(1, len(bones)):
        u = rotations[k - 1].T @ (local[k] - local[k - 1])
        w = rotations[k - 1].T @ (local[k + 1] - local[k])
        c = np.cross(u, w)
        if math.degrees(math.atan2(np.linalg.norm(c), u @ w)) >= STRAIGHT_REST_DEGREES:
            axes[k - 1] = c / np.linalg.norm(c)
    return joints, axes



def add_empty(name: str, location):
    import bpy

    obj = bpy.data.objects.new(name, None)
    obj.empty_display_type = "PLAIN_AXES"
    obj.location = tuple(location)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def make_setup(name: str, rig, bones, paths: dict[str, np.ndarray], reachable: dict[str, bool] | None = None,
               notes: dict[str, str] | None = None) -> RigifySetup:
    """Key a target Empty along ``paths``, add the pole Empty, set the scene's frame range."""
    import bpy

    joints, axes = rest_geometry(rig, bones)
    reference = reference_joint(joints)
    axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
    off = joints[reference] - joints[0]
    side = off - (off @ axis) * axis
    reach = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    target = add_empty(f"{name}_target", joints[-1])
    pole = add_empty(f"{name}_pole", joints[reference] + 0.6 * reach * side / np.linalg.norm(side))
    key_path(target, np.concatenate(list(paths.values())))
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, sum(len(p) for p in paths.values())
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = rig
    reachable = reachable or {k: k != "out_of_reach" for k in paths}
    return RigifySetup(name, rig, tuple(bones), target, pole, paths, reachable, joints, axes, reference,
                       min_preferred_ratio(joints), notes or {})



def _limb(name: str, operator: str, tip: str, count: int, frames: int, kind: str) -> RigifySetup:
    rig = metarig(operator)
    bones = chain_bones(rig, tip, count)
    joints, _ = rest_geometry(rig, bones)
    reach = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    if kind == "arm":
        paths = arm_paths(joints[0], reach, frames)
    elif kind == "spine":
        paths = spine_paths(joints[0], reach, frames)
    else:
        low = max(0.35, 1.25 * min_preferred_ratio(joints))
        paths = leg_paths(joints[0], reach, frames, low, quadruped=(kind == "quadruped"))
    return make_setup(name, rig, bones, with_fold(paths, joints, frames))



def human_arm(frames: int = 30) -> RigifySetup:
    """``upper_arm.L → forearm.L`` of the human metarig, arm paths."""
    return _limb("human_arm", "armature_human_metarig_add", "forearm.L", 2, frames, "arm")


def human_leg(frames: int = 30) -> RigifySetup:
    """``thigh.L → shin.L`` of the human metarig (tip: the ankle), leg paths."""
    return _limb("human_leg", "armature_human_metarig_add", "shin.L", 2, frames, "leg")


def human_leg_foot(frames: int = 30) -> RigifySetup:
    """``thigh.L → shin.L → foot.L`` of the human metarig (tip: the ball of the foot), leg paths."""
    return _limb("human_leg_foot", "armature_human_metarig_add", "foot.L", 3, frames, "leg")


def human_spine(frames: int = 30) -> RigifySetup:
    """``spine → … → spine.003`` of the human metarig (tip: the top of the chest), spine paths."""
    return _limb("human_spine", "armature_human_metarig_add", "spine.003", 4, frames, "spine")


def horse_hind_leg(frames: int = 30) -> RigifySetup:
    """``thigh.L → lower_leg.L → hind_foot.L`` of the horse metarig (tip: the fetlock), leg paths."""
    return _limb("horse_hind_leg", "armature_horse_metarig_add", "hind_foot.L", 3, frames, "quadruped")


def wolf_hind_leg(frames: int = 30) -> RigifySetup:
    """``thigh.L → shin.L → foot.L`` of the wolf metarig (tip: the paw's heel), leg paths."""
    return _limb("wolf_hind_leg", "armature_wolf_metarig_add", "foot.L", 3, frames, "quadruped")


def horse_hind_leg_toe(frames: int = 30) -> RigifySetup:
    """``thigh.L → lower_leg.L → hind_foot.L → r_toe.L`` of the horse metarig (tip: the hoof), leg paths."""
    return _limb("horse_hind_leg_toe", "armature_horse_metarig_add", "r_toe.L", 4, frames, "quadruped")


def wolf_hind_leg_toe(frames: int = 30) -> RigifySetup:
    """``thigh.L → shin.L → foot.L → toe.L`` of the wolf metarig (tip: the toes), leg paths."""
    return _limb("wolf_hind_leg_toe", "armature_wolf_metarig_add", "toe.L", 4, frames, "quadruped")


def generate_human_rig():
    """The rig Rigify generates from the human metarig, face removed; returns (metarig, rig).

    Headless, ``pose.rigify_generate`` needs the metarig active and selected in the view layer, and
    no ``temp_override`` of the active object (see below). It returns FINISHED even when generation
    fails (it reports an error instead), so the generated rig's presence is checked. The limbs'
    IK/FK switch is set to FK. The rig UI classes generation registers are unregistered at exit at
    the latest (:func:`unregister_generated_rig_ui`).
    """
    import bpy

    atexit.unregister(unregister_generated_rig_ui)  # registered once, however many rigs are generated
    atexit.register(unregister_generated_rig_ui)
    meta = metarig("armature_human_metarig_add")
    bpy.ops.object.mode_set(mode="EDIT")
    edit_bones = meta.data.edit_bones
    face = edit_bones["face"]
    for bone in [face, *face.children_recursive]:
        edit_bones.remove(bone)
    bpy.ops.object.mode_set(mode="OBJECT")
    # No temp_override: Rigify makes the new rig the view layer's active object half-way through and
    # asserts that context.active_object followed; an overridden active_object stays the metarig.
    bpy.context.view_layer.objects.active = meta
    meta.select_set(True)
    result = bpy.ops.pose.rigify_generate()  # type: ignore[attr-defined]  # Rigify's operator: an add-on's, not in fake-bpy-module
    rig = meta.data.rigify_target_rig
    assert result == {"FINISHED"} and rig is not None, "Rigify generation failed"
    for side in ("L", "R"):
        for parent in (f"upper_arm_parent.{side}", f"thigh_parent.{side}"):
            rig.pose.bones[parent]["IK_FK"] = 1.0  # the ORG/DEF bones follow the FK controls
    meta.hide_set(True)
    bpy.context.view_layer.objects.active = rig
    bpy.context.view_layer.update()
    return meta, rig


def generated_fk_arm(frames: int = 30) -> RigifySetup:
    """``upper_arm_fk.L → forearm_fk.L`` of the generated human rig, arm paths."""
    _, rig = generate_human_rig()
    bones = ("upper_arm_fk.L", "forearm_fk.L")
    joints, _ = rest_geometry(rig, bones)
    reach = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    return make_setup("generated_fk_arm", rig, bones, with_fold(arm_paths(joints[0], reach, frames), joints, frames))


BUILDERS: dict[str, Callable[..., RigifySetup]] = {
    "human_arm": human_arm,
    "human_leg": human_leg,
    "human_leg_foot": human_leg_foot,
    "human_spine": human_spine,
    "horse_hind_leg": horse_hind_leg,
    "wolf_hind_leg": wolf_hind_leg,
    "horse_hind_leg_toe": horse_hind_leg_toe,
    "wolf_hind_leg_toe": wolf_hind_leg_toe,
    "generated_fk_arm": generated_fk_arm,
}
"""name → builder(frames=…) → RigifySetup. Each adds its rig to the current scene (Rigify enabled)."""



"""Rigify's own rigs as IK test beds: chains on the metarigs shipped in the bpy wheel, target paths,
Blender-evaluated measurements, and the comparison table of issue 11.

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
(one after another on one timeline, ``frames`` frames each; every rig also gets ``fold``, see
:func:`fold_path`) and a pole Empty on the side of the rest bend. Paths are generated from the
rig's own rest joints and lengths, in the character's axes
(up +Z, forward −Y, outward +X for the ``.L`` side), with the distance from the chain's root stated
as a ratio of the reach (sum of the segment lengths): every path is reachable except
``out_of_reach`` (1.05–1.3 of the reach).

Measurements read Blender's evaluated pose only (``scene.frame_set``, ``matrix_world @ pose_bone.head``
/ ``.tail`` / ``.matrix``), never the add-on's FK:

- tip error per frame (mm in the tables; a reachable frame off by more than ``MISSED_MM`` is a miss);
- backward joints: a joint bent to the opposite side of its rest bend by more than
  ``BACKWARD_DEGREES``, measured in the parent bone's frame (so a limb that turns as a whole is
  not miscounted);
- flips: the bend normal of some inner joint (``u × w`` of the segments at it) turning by more than
  ``FLIP_TURN_DEGREES`` between consecutive frames of one path (see :func:`flip_frames`).

``measure_all(out_dir)`` runs our methods and Blender's IK constraint (with and without pole) on
every rig and returns the rows of the Rigify table in ``docs/comparison.md`` (``scripts/compare_native.py``
runs it for the Rigify rigs); on its own:

    python scripts/_rigify_rigs.py --out /tmp/rigify [--frames 40] [--rigs NAME …] [--repeats 3]
                                  [--doc FILE]

Import ``bpy`` the way the caller needs (``BLENDER_USER_RESOURCES`` set first) before using the
Blender functions here; ``main`` does it itself.
"""

from __future__ import annotations

import argparse
import atexit
import csv
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from _rigs import key_path

if TYPE_CHECKING:
    import bpy

UP = np.array([0.0, 0.0, 1.0])
FORWARD = np.array([0.0, -1.0, 0.0])
OUTWARD = np.array([1.0, 0.0, 0.0])
"""The metarigs' character axes: up, facing direction, and outward for the left (``.L``) side."""

BACKWARD_DEGREES = 1.0
"""A joint bent this far (or more) to the opposite side of its rest bend counts as backward: well
above float32 noise of Blender's evaluation (~1e-4°), well below any bend an animator would see."""
STRAIGHT_REST_DEGREES = 2.0
"""A joint bent less than this at rest has no preferred side (the human spine's top joint: 0.19°):
it is never counted backward. The other joints here are bent 7° (spine) to 64° (ankle) at rest."""
FLIP_TURN_DEGREES = 30.0
"""A bend-plane turn above this between consecutive frames is a flip (compare_native's threshold)."""
MISSED_MM = 1.0
"""A reachable frame whose tip ends farther than this from the target is a miss (compare_native)."""
PLANELESS = 1e-3
"""A pose whose reference joint lies within this fraction of the reach from the root → tip axis (or
whose tip is that close to the root) has no bend plane: its normal is NaN and no flip is counted."""
TOLERANCE = 1e-5
"""Tolerance given to our chains (scene units: 0.01 mm): what an animator needs, and Blender's
constraint reaches about that on these rigs."""


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


def _add_metarig(operator: str):
    import bpy

    enable_rigify()
    result = getattr(bpy.ops.object, operator)()
    assert result == {"FINISHED"}, (operator, result)
    obj = bpy.context.object
    bpy.context.view_layer.update()
    return obj


def _chain_bones(obj, tip: str, count: int) -> tuple[str, ...]:
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


def _reference_joint(joints: np.ndarray) -> int:
    axis = joints[-1] - joints[0]
    axis = axis / np.linalg.norm(axis)
    off = joints[1:-1] - joints[0]
    dist = np.linalg.norm(off - np.outer(off @ axis, axis), axis=1)
    return 1 + int(np.argmax(dist))


def min_preferred_ratio(joints: np.ndarray, steps: int = 73) -> float:
    """Least root-to-tip distance / reach of the planar chain with each joint bent its rest way.

    Joint ``k`` bends by β ∈ [0, π] with the sign of its rest bend relative to the first joint's
    (from the world rest bend vectors); evaluated on a grid of ``steps`` per joint.
    """
    seg = np.diff(joints, axis=0)
    lengths = np.linalg.norm(seg, axis=1)
    bends = np.cross(seg[:-1], seg[1:])
    signs = np.sign(bends @ bends[0])
    signs[signs == 0] = 1.0
    betas = np.meshgrid(*[np.linspace(0.0, math.pi, steps)] * (len(lengths) - 1), indexing="ij")
    betas = np.stack([b.ravel() for b in betas], axis=1) * signs
    phi = np.concatenate([np.zeros((len(betas), 1)), np.cumsum(betas, axis=1)], axis=1)
    tip = np.stack([(lengths * np.cos(phi)).sum(1), (lengths * np.sin(phi)).sum(1)], axis=1)
    return float(np.linalg.norm(tip, axis=1).min() / lengths.sum())


def _directions(alpha, beta, a, b, c) -> np.ndarray:
    """Unit directions ``cos β (cos α a + sin α b) + sin β c`` for arrays of angles (radians)."""
    alpha, beta = np.broadcast_arrays(np.atleast_1d(np.asarray(alpha, float)), np.atleast_1d(np.asarray(beta, float)))
    d = np.cos(alpha)[:, None] * a + np.sin(alpha)[:, None] * b
    return np.cos(beta)[:, None] * d + np.sin(beta)[:, None] * c


def leg_paths(root, reach, frames: int, low_ratio: float, quadruped: bool = False) -> dict[str, np.ndarray]:
    """Foot-target paths of a leg hanging from ``root`` (hip): ratio of the reach in brackets.

    ``crouch`` (0.95 → ``low_ratio`` → 0.95): the foot rises toward the hip and moves forward of it
    (5° → 50° from straight down), as in a deep squat; ``kick`` (0.9): from 20° behind to 95° in front
    (a quadruped bucks: 10° in front to 70° behind); ``stride`` (0.85–0.96): ±25° fore and aft, the
    knee bending in the swing; ``cross`` (0.85): the foot crosses in front of the other leg (25°
    inward, 20° forward); ``out_of_reach`` (1.05–1.3): straight down to 60° forward.
    """
    t = np.linspace(0.0, 1.0, frames)
    rise = np.sin(math.pi * t)
    down = -UP
    deg = math.radians
    if quadruped:
        kick_alpha = deg(10.0) - deg(80.0) * rise
    else:
        kick_alpha = deg(-20.0) + deg(115.0) * rise
    swing = np.sin(2 * math.pi * t)
    paths = {
        "crouch": (0.95 - (0.95 - low_ratio) * rise,
                   _directions(deg(5.0) + deg(45.0) * rise, 0.0, down, FORWARD, OUTWARD)),
        "kick": (np.full(frames, 0.9), _directions(kick_alpha, deg(3.0), down, FORWARD, OUTWARD)),
        "stride": (0.96 - 0.11 * np.clip(swing, 0.0, None),
                   _directions(deg(25.0) * np.cos(2 * math.pi * t), deg(2.0), down, FORWARD, OUTWARD)),
        "cross": (np.full(frames, 0.85), _directions(deg(20.0), deg(5.0) - deg(30.0) * rise, down, FORWARD, OUTWARD)),
        "out_of_reach": (1.05 + 0.25 * rise, _directions(deg(60.0) * t, 0.0, down, FORWARD, OUTWARD)),
    }
    return {k: root + (reach * r)[:, None] * d for k, (r, d) in paths.items()}


def arm_paths(root, reach, frames: int) -> dict[str, np.ndarray]:
    """Hand-target paths of an arm from ``root`` (shoulder); ratio of the reach in brackets.

    ``reach_across`` (0.8): from out to the side, through in front, across the chest past the other
    shoulder (azimuth 0° → 150° from outward toward forward, 20° below the shoulder); ``reach_behind``
    (0.75): from the side to behind the back (azimuth 0° → −150°, 40° below); ``curl`` (0.95 → 0.3 →
    0.95): the hand comes up to the shoulder as the elbow folds; ``overhead`` (0.9): from forward and
    level to 80° up; ``out_of_reach`` (1.05–1.3): sweeping from the side to the front.
    """
    t = np.linspace(0.0, 1.0, frames)
    rise = np.sin(math.pi * t)
    deg = math.radians
    paths = {
        "reach_across": (np.full(frames, 0.8), _directions(deg(150.0) * t, deg(-20.0), OUTWARD, FORWARD, UP)),
        "reach_behind": (np.full(frames, 0.75), _directions(deg(-150.0) * t, deg(-40.0), OUTWARD, FORWARD, UP)),
        "curl": (0.95 - 0.65 * rise, _directions(deg(60.0), deg(-70.0) + deg(110.0) * rise, OUTWARD, FORWARD, UP)),
        "overhead": (np.full(frames, 0.9), _directions(deg(70.0), deg(80.0) * t, OUTWARD, FORWARD, UP)),
        "out_of_reach": (1.05 + 0.25 * rise, _directions(deg(90.0) * t, deg(-10.0), OUTWARD, FORWARD, UP)),
    }
    return {k: root + (reach * r)[:, None] * d for k, (r, d) in paths.items()}


def spine_paths(root, reach, frames: int) -> dict[str, np.ndarray]:
    """Chest-target paths of a spine from ``root`` (pelvis); ratio of the reach in brackets.

    ``bend_forward`` (0.97 → 0.9): 0° → 60° from up toward forward; ``side_bend`` (0.95): 30° to one
    side and to the other; ``lean_back`` (0.96): 0° → 20° backward; ``out_of_reach`` (1.05–1.2).
    """
    t = np.linspace(0.0, 1.0, frames)
    rise = np.sin(math.pi * t)
    deg = math.radians
    paths = {
        "bend_forward": (0.97 - 0.07 * t, _directions(deg(60.0) * t, 0.0, UP, FORWARD, OUTWARD)),
        "side_bend": (np.full(frames, 0.95),
                      _directions(deg(5.0), deg(30.0) * np.sin(2 * math.pi * t), UP, FORWARD, OUTWARD)),
        "lean_back": (np.full(frames, 0.96), _directions(deg(-20.0) * rise, 0.0, UP, FORWARD, OUTWARD)),
        "out_of_reach": (1.05 + 0.15 * rise, _directions(deg(40.0) * t, 0.0, UP, FORWARD, OUTWARD)),
    }
    return {k: root + (reach * r)[:, None] * d for k, (r, d) in paths.items()}


def _empty(name: str, location):
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
    reference = _reference_joint(joints)
    axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
    off = joints[reference] - joints[0]
    side = off - (off @ axis) * axis
    reach = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    target = _empty(f"{name}_target", joints[-1])
    pole = _empty(f"{name}_pole", joints[reference] + 0.6 * reach * side / np.linalg.norm(side))
    key_path(target, np.concatenate(list(paths.values())))
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, sum(len(p) for p in paths.values())
    scene.frame_set(1)
    bpy.context.view_layer.objects.active = rig
    reachable = reachable or {k: k != "out_of_reach" for k in paths}
    return RigifySetup(name, rig, tuple(bones), target, pole, paths, reachable, joints, axes, reference,
                       min_preferred_ratio(joints), notes or {})


FOLD_MARGIN = 1.05
"""The ``fold`` path goes down to this multiple of the preferred-bend minimum distance."""


def fold_path(joints: np.ndarray, frames: int) -> np.ndarray:
    """The ``fold`` path: the target drawn in along the rest root → tip axis from 0.97 of the reach to
    ``FOLD_MARGIN`` × the preferred-bend minimum (:func:`min_preferred_ratio`) and back out.

    Not a motion anyone makes (near the minimum every joint is folded almost flat): it covers the
    whole depth of the set a chain reaches with each joint bent its own way, which is what issue 11
    asks HI to reach at any chain length.
    """
    seg = np.diff(joints, axis=0)
    reach = float(np.linalg.norm(seg, axis=1).sum())
    axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
    low = FOLD_MARGIN * min_preferred_ratio(joints)
    ratio = 0.97 - (0.97 - low) * np.sin(math.pi * np.linspace(0.0, 1.0, frames))
    return joints[0] + (reach * ratio)[:, None] * axis


def _limb(name: str, operator: str, tip: str, count: int, frames: int, kind: str) -> RigifySetup:
    rig = _add_metarig(operator)
    bones = _chain_bones(rig, tip, count)
    joints, _ = rest_geometry(rig, bones)
    reach = float(np.linalg.norm(np.diff(joints, axis=0), axis=1).sum())
    if kind == "arm":
        paths = arm_paths(joints[0], reach, frames)
    elif kind == "spine":
        paths = spine_paths(joints[0], reach, frames)
    else:
        low = max(0.35, 1.25 * min_preferred_ratio(joints))
        paths = leg_paths(joints[0], reach, frames, low, quadruped=(kind == "quadruped"))
    return make_setup(name, rig, bones, _with_fold(paths, joints, frames))


def _with_fold(paths: dict[str, np.ndarray], joints: np.ndarray, frames: int) -> dict[str, np.ndarray]:
    """``paths`` with ``fold`` inserted before ``out_of_reach`` (which stays last)."""
    out = {k: v for k, v in paths.items() if k != "out_of_reach"}
    out["fold"] = fold_path(joints, frames)
    out["out_of_reach"] = paths["out_of_reach"]
    return out


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
    meta = _add_metarig("armature_human_metarig_add")
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
    return make_setup("generated_fk_arm", rig, bones, _with_fold(arm_paths(joints[0], reach, frames), joints, frames))


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


# --------------------------------------------------------------------------- solving
def add_chain(setup: RigifySetup, method: str | None = None, *, pole: bool = False, name: str = "Chain",
              tolerance: float = TOLERANCE, max_iterations: int | None = None,
              reference_weight: float | None = None):
    """Add our chain through the operators (``chain_add`` with the tip bone active and the target
    selected), set its length and options, capture the preferred pose at the rest pose.

    ``method`` None gives the chain what ``chain_add`` gives a new chain of its length
    (``chains.default_method``: HI for two bones; SDLS with ``DEFAULT_REFERENCE_WEIGHT`` for longer
    ones — ``chain_add`` itself makes a two-bone chain, whose default we must not keep once the length
    is set). ``reference_weight`` overrides the chain's pull toward its reference pose. With ``pole``
    the chain gets the pole Empty (HI: the Pole Object zero-plane map). Returns the chain's settings.
    """
    import bpy

    from ik_solvers.blender.chains import DEFAULT_REFERENCE_WEIGHT, default_method
    from ik_solvers.core import Method

    rig = setup.rig
    bpy.context.view_layer.objects.active = rig
    rig.data.bones.active = rig.data.bones[setup.bones[-1]]
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig, setup.target]):
        assert bpy.ops.ik_solvers.chain_add() == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime (fake-bpy-module lists only built-in ones)
        chain = rig.ik_solvers.active_chain  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime
        chain.name = name
        chain.tip_bone = setup.bones[-1]
        chain.chain_length = len(setup.bones)
        chain.target = setup.target
        if method is None:
            chosen = default_method(len(setup.bones))
            chain.method = chosen.value
            chain.reference_weight = DEFAULT_REFERENCE_WEIGHT if chosen is Method.SDLS else 0.0
        else:
            chain.method = method
        if reference_weight is not None:
            chain.reference_weight = reference_weight
        chain.tolerance = tolerance
        if max_iterations is not None:
            chain.max_iterations = max_iterations
        if pole:
            chain.pole_target = setup.pole
            if chain.method == "HI":
                chain.zero_plane_map = "POLE_OBJECT"
        assert bpy.ops.ik_solvers.capture_preferred_pose() == {"FINISHED"}  # type: ignore[attr-defined]  # an operator registered at runtime (fake-bpy-module lists only built-in ones)
    return chain


def bake_ours(setup: RigifySetup, chain_name: str = "Chain", frame_start: int = 1,
              frame_end: int | None = None) -> float:
    """``ik_solvers.bake`` of one chain over the range (default: all paths); returns seconds."""
    import bpy

    rig = setup.rig
    frame_end = setup.frame_end if frame_end is None else frame_end
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        started = time.perf_counter()
        result = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=frame_start, frame_end=frame_end, chain=chain_name)  # type: ignore[attr-defined]  # an operator registered at runtime (fake-bpy-module lists only built-in ones)
        seconds = time.perf_counter() - started
    assert result == {"FINISHED"}, result
    return seconds


def add_blender_ik(setup: RigifySetup, pole: bool) -> object:
    """Blender's IK constraint (Standard solver) on the tip bone over the chain; with ``pole`` the pole
    Empty and, of 0°, ±90°, 180°, the pole angle that moves the rest pose least (Blender leaves it to
    the user)."""
    import bpy

    rig = setup.rig
    constraint = rig.pose.bones[setup.bones[-1]].constraints.new("IK")
    constraint.name = "IKCompare"
    constraint.chain_count = len(setup.bones)
    if pole:
        probe = _empty("PoleProbe", setup.rest_joints[-1])
        constraint.target = probe
        constraint.pole_target = setup.pole
        best, best_angle = np.inf, 0.0
        for angle in (0.0, math.pi / 2, -math.pi / 2, math.pi):
            constraint.pole_angle = angle
            bpy.context.view_layer.update()
            moved = np.abs(evaluated_joints(setup) - setup.rest_joints).max()
            if moved < best:
                best, best_angle = moved, angle
        constraint.pole_angle = best_angle
        bpy.data.objects.remove(probe)
    constraint.target = setup.target
    bpy.context.scene.frame_set(1)
    return constraint


def bake_blender(setup: RigifySetup) -> float:
    """``nla.bake`` (visual keying, constraints kept) of the chain bones over all frames; seconds."""
    import bpy

    from ik_solvers.blender import compat

    rig = setup.rig
    bpy.context.view_layer.objects.active = rig
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        bpy.ops.object.mode_set(mode="POSE")
        for pose_bone in rig.pose.bones:
            compat.select_pose_bone(pose_bone, pose_bone.name in setup.bones)
        started = time.perf_counter()
        result = bpy.ops.nla.bake(frame_start=1, frame_end=setup.frame_end, only_selected=True, visual_keying=True,
                                  clear_constraints=False, bake_types={"POSE"})
        seconds = time.perf_counter() - started
        bpy.ops.object.mode_set(mode="OBJECT")
    assert result == {"FINISHED"}, result
    return seconds


# --------------------------------------------------------------------------- measuring (Blender's evaluation)
def evaluated_joints(setup: RigifySetup) -> np.ndarray:
    """World joints ``(n+1, 3)`` of the pose as Blender evaluates it now (update the view layer first)."""
    world = np.array(setup.rig.matrix_world)
    pose = [setup.rig.pose.bones[b] for b in setup.bones]
    local = np.array([b.head[:] for b in pose] + [pose[-1].tail[:]])
    return local @ world[:3, :3].T + world[:3, 3]


def evaluate(setup: RigifySetup, frames=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Blender's evaluation at ``frames`` (default all): joints ``(F, n+1, 3)``, pose bone world
    rotations ``(F, n, 3, 3)`` (orthonormalised) and targets ``(F, 3)``."""
    import bpy

    frames = np.arange(1, setup.frame_end + 1) if frames is None else np.asarray(frames)
    scene = bpy.context.scene
    n = len(setup.bones)
    joints = np.empty((len(frames), n + 1, 3))
    rotations = np.empty((len(frames), n, 3, 3))
    targets = np.empty((len(frames), 3))
    for i, frame in enumerate(frames):
        scene.frame_set(int(frame))
        world = np.array(setup.rig.matrix_world)
        joints[i] = evaluated_joints(setup)
        for k, name in enumerate(setup.bones):
            m = world[:3, :3] @ np.array(setup.rig.pose.bones[name].matrix)[:3, :3]
            rotations[i, k] = m / np.linalg.norm(m, axis=0)
        targets[i] = setup.target.matrix_world.translation[:]
    return joints, rotations, targets


def tip_errors(joints: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Tip-to-target distances ``(F,)`` (scene units)."""
    return np.linalg.norm(joints[:, -1] - targets, axis=1)


def lower_bounds(setup: RigifySetup, targets: np.ndarray) -> np.ndarray:
    """Geometric lower bound of the tip error ``(F,)``: ``max(0, r − Σl, d_min − r)`` (SPEC §3.3)."""
    lengths = np.linalg.norm(np.diff(setup.rest_joints, axis=0), axis=1)
    d_min = max(0.0, 2.0 * lengths.max() - lengths.sum())
    r = np.linalg.norm(targets - setup.rest_joints[0], axis=1)
    return np.maximum(0.0, np.maximum(r - lengths.sum(), d_min - r))


def bend_angles(setup: RigifySetup, joints: np.ndarray, rotations: np.ndarray) -> np.ndarray:
    """Signed bend ``(F, n-1)`` of each inner joint about its rest bend axis, degrees.

    Joint ``k`` bends from ``u = p_k − p_{k−1}`` to ``w = p_{k+1} − p_k``; both are taken into the
    parent bone's (bone ``k−1``) evaluated frame, and the angle is ``atan2((u × w)·h, u·w)`` with ``h``
    the rest bend axis in that bone's rest frame. Positive: the rest side; the rest pose gives its own
    rest bend angles. NaN for a joint without a preferred side (straighter than
    ``STRAIGHT_REST_DEGREES`` at rest).
    """
    u = joints[:, 1:-1] - joints[:, :-2]
    w = joints[:, 2:] - joints[:, 1:-1]
    parent = rotations[:, :-1]
    u_local = np.einsum("fkji,fkj->fki", parent, u)
    w_local = np.einsum("fkji,fkj->fki", parent, w)
    sine = np.einsum("fki,ki->fk", np.cross(u_local, w_local), setup.rest_bend_axes)
    cosine = np.einsum("fki,fki->fk", u_local, w_local)
    return np.degrees(np.arctan2(sine, cosine))


def backward_joints(angles: np.ndarray, threshold: float = BACKWARD_DEGREES) -> np.ndarray:
    """``(F, n-1)`` bool: joints bent to the opposite side of their rest bend by more than ``threshold``°."""
    return np.nan_to_num(angles, nan=0.0) < -threshold


def plane_normals(setup: RigifySetup, joints: np.ndarray) -> np.ndarray:
    """Bend-plane normals ``(F, 3)``: unit ``(p_j − p_0) × (p_tip − p_0)`` with ``j`` the reference
    joint; NaN where that joint is within ``PLANELESS`` · reach of the root → tip axis."""
    reach = setup.reach
    axis = joints[:, -1] - joints[:, 0]
    off = joints[:, setup.reference_joint] - joints[:, 0]
    normal = np.cross(off, axis)
    length = np.linalg.norm(axis, axis=1)
    distance = np.linalg.norm(normal, axis=1) / np.maximum(length, 1e-300)
    planeless = (distance < PLANELESS * reach) | (length < PLANELESS * reach)
    unit = normal / np.maximum(np.linalg.norm(normal, axis=1), 1e-300)[:, None]
    return np.where(planeless[:, None], np.nan, unit)


JOINT_PLANELESS_DEGREES = 1.0
"""A joint bent less than this has no bend plane of its own: its normal is NaN (no flip counted)."""


def joint_normals(joints: np.ndarray) -> np.ndarray:
    """World bend normals ``(F, n-1, 3)`` of each inner joint: unit ``u × w`` of the two segments at it;
    NaN for a joint bent less than ``JOINT_PLANELESS_DEGREES``."""
    seg = np.diff(joints, axis=1)
    u, w = seg[:, :-1], seg[:, 1:]
    c = np.cross(u, w)
    norm = np.linalg.norm(c, axis=-1)
    sine = norm / np.maximum(np.linalg.norm(u, axis=-1) * np.linalg.norm(w, axis=-1), 1e-300)
    unit = c / np.maximum(norm, 1e-300)[..., None]
    return np.where((sine < math.sin(math.radians(JOINT_PLANELESS_DEGREES)))[..., None], np.nan, unit)


def flip_frames(setup: RigifySetup, joints: np.ndarray, threshold: float = FLIP_TURN_DEGREES) -> list[int]:
    """Frames (1-based, evaluated joints of every frame given) where the bend normal of some inner joint
    turned by more than ``threshold``° since the last frame of the same path where that joint was bent.

    Per joint rather than one plane through the root, a reference joint and the tip: on two bones the
    same thing; on a zigzag chain (the human leg with foot: knee and ankle bent opposite ways) that
    plane's normal reverses whenever the reference joint crosses the root → tip line, although the
    chain stays in one plane with every joint bent its own way (it counted 2 such "flips" in HI's crouch).
    """
    normals = joint_normals(joints)
    flips = []
    for path in setup.paths:
        previous = np.full(normals.shape[1:], np.nan)
        for frame in setup.path_frames(path):
            normal = normals[frame - 1]
            defined = np.all(np.isfinite(normal), axis=1)
            both = defined & np.all(np.isfinite(previous), axis=1)
            cosines = np.einsum("ki,ki->k", previous[both], normal[both])
            if both.any() and np.degrees(np.arccos(np.clip(cosines, -1.0, 1.0))).max() > threshold:
                flips.append(int(frame))
            previous = np.where(defined[:, None], normal, previous)
    return flips


@dataclass(frozen=True)
class Measurement:
    """Per-frame measurements of one solve over all frames (from Blender's evaluation)."""

    errors: np.ndarray  # (F,) scene units
    bounds: np.ndarray  # (F,) geometric lower bound
    bends: np.ndarray  # (F, n-1) degrees, positive on the rest side
    backward: np.ndarray  # (F, n-1) bool
    flips: list[int]  # 1-based frames


def measure(setup: RigifySetup, frames=None) -> Measurement:
    """Evaluate every frame (or ``frames``) and measure it."""
    joints, rotations, targets = evaluate(setup, frames)
    bends = bend_angles(setup, joints, rotations)
    return Measurement(tip_errors(joints, targets), lower_bounds(setup, targets), bends, backward_joints(bends),
                       flip_frames(setup, joints) if frames is None else [])


def bake_report(chain) -> dict | None:
    """The add-on's report of the chain's last bake (``not_reached_frames``, ``flip_frames`` with
    ``warned``, status counts), or None if it has none or it cannot be read."""
    try:
        return json.loads(chain.last_bake_report)
    except (AttributeError, TypeError, ValueError):
        return None


def action_keys(rig, bones) -> dict[tuple[str, int], np.ndarray]:
    """Every key (``co``, float32 pairs) of the bones' rotation F-curves in the rig's action."""
    from ik_solvers.blender import compat

    channelbag = compat.channelbag_for_assigned_slot(rig.animation_data)
    keys = {}
    for fcurve in channelbag.fcurves:
        if any(fcurve.data_path == f'pose.bones["{b}"].rotation_{mode}'
               for b in bones for mode in ("quaternion", "euler", "axis_angle")):
            co = np.empty(2 * len(fcurve.keyframe_points), np.float32)
            fcurve.keyframe_points.foreach_get("co", co)
            keys[(fcurve.data_path, fcurve.array_index)] = co
    return keys


# --------------------------------------------------------------------------- the table
SOLVERS = (
    ("HI", {"method": "HI"}),
    ("default", {"method": None}),
    ("SDLS, no pull", {"method": "SDLS", "reference_weight": 0.0, "bones_min": 3}),
    ("ANALYTIC+pole", {"method": "ANALYTIC", "pole": True}),
    ("CCD", {"method": "CCD"}),
    ("FABRIK", {"method": "FABRIK"}),
    ("Blender IK", {"blender": True, "pole": False}),
    ("Blender IK+pole", {"blender": True, "pole": True}),
)
"""Table rows per rig: label → how to run it (ours: ``add_chain`` options; Blender's IK constraint).
``bones_min``: only on chains of at least that many bones ("SDLS, no pull" is the default of longer
chains without its reference-pose pull, for comparison)."""


def pole_warning_frames(setup: RigifySetup, chain) -> set[int]:
    """Frames at which an HI chain's pole warning is on (empty for other methods): the solve the bake
    ran, repeated through the Blender layer's own sampling and solving."""
    import bpy

    if chain.method != "HI":
        return set()
    from ik_solvers.blender.sampling import sample_fcurves
    from ik_solvers.blender.solving import prepare_solve, run_solve
    from ik_solvers.blender.spec import chain_spec

    rig = setup.rig
    rig.animation_data.action = None  # the reference pose the bake solved from (the keys would move it)
    for pose_bone in rig.pose.bones:
        pose_bone.matrix_basis.identity()
    bpy.context.scene.frame_set(1)
    spec = chain_spec(rig, chain)
    frames = np.arange(1, setup.frame_end + 1)
    result = run_solve(prepare_solve(spec, sample_fcurves(rig, spec, spec.rig, frames)))
    if result.hi is None:
        return set()
    return {int(f) for f, on in zip(frames, np.asarray(result.hi.pole_warnings, bool)) if on}


def warned_flips(setup: RigifySetup, flips: list[int], report: dict | None, warnings: set[int]) -> int:
    """How many of the measured ``flips`` our bake warned of: the frame (or the one before) is listed
    in the bake report's flip frames or has the pole warning on."""
    listed = {int(f["frame"]) for f in (report or {}).get("flip_frames", ())} | warnings
    return sum(int(f in listed or f - 1 in listed) for f in flips)


def run(name: str, label: str, spec: dict, frames: int, repeats: int = 3) -> dict:
    """One row: build ``name`` in a fresh scene, solve with ``spec``, measure from Blender's evaluation.

    The measures are of the first bake (ours: from the rest pose); the bake time is the least of
    ``repeats`` bakes of the same range (the machine is shared: the minimum is the stable number)."""
    fresh_scene()
    setup = BUILDERS[name](frames=frames)
    row = {"rig": name, "solver": label, "bones": len(setup.bones), "reach_m": setup.reach}
    if spec.get("blender"):
        add_blender_ik(setup, spec["pole"])
        result = measure(setup)
        seconds = min(bake_blender(setup) for _ in range(repeats))
        report = None
    else:
        if spec["method"] == "ANALYTIC" and len(setup.bones) != 2:
            return {**row, "skipped": "two-bone only"}
        if len(setup.bones) < spec.get("bones_min", 0):
            return {**row, "skipped": f"chains of {spec['bones_min']}+ bones only"}
        import ik_solvers

        ik_solvers.register()
        try:
            chain = add_chain(setup, spec["method"], pole=spec.get("pole", False),
                              reference_weight=spec.get("reference_weight"))
            pull = f", pull {chain.reference_weight:.2g}" if chain.reference_weight else ""
            row["solver"] = label if spec["method"] else f"default ({chain.method}{pull})"
            try:
                seconds = bake_ours(setup)
            except RuntimeError as error:
                return {**row, "skipped": f"bake failed: {error}"}
            result = measure(setup)  # the first bake's keys, from the rest pose
            report = bake_report(chain)
            seconds = min([seconds] + [bake_ours(setup) for _ in range(repeats - 1)])
            warnings = pole_warning_frames(setup, chain)
        finally:
            ik_solvers.unregister()
    reachable = setup.reachable_mask()
    errors_mm = result.errors * 1000.0
    missed = np.flatnonzero(reachable & (errors_mm > MISSED_MM)) + 1
    if report is not None:
        not_reached = set(report.get("not_reached_frames", ()))
        starts = {int(setup.path_frames(p)[0]) for p in setup.paths}  # the target jumps between paths there
        flips = [f for f in report.get("flip_frames", ()) if int(f["frame"]) not in starts]
        row.update(misses_unreported=int(sum(int(f) not in not_reached for f in missed)),
                   flips_warned=warned_flips(setup, result.flips, report, warnings),
                   flips_reported=len(flips), flips_reported_warned=int(sum(bool(f.get("warned")) for f in flips)))
    row.update(
        frames=setup.frame_end,
        reachable_frames=int(reachable.sum()),
        max_reachable_mm=float(errors_mm[reachable].max()),
        misses=int((errors_mm[reachable] > MISSED_MM).sum()),
        max_excess_mm=float(((result.errors - result.bounds) * 1000.0)[~reachable].max()),
        flips=len(result.flips),
        flips_unwarned=len(result.flips) - (warned_flips(setup, result.flips, report, warnings) if report else 0),
        backward_frames=int(result.backward[reachable].any(axis=1).sum()),
        bake_seconds=seconds,
        bake_repeats=repeats,
        flips_by_path={p: sum(int(f in setup.path_frames(p)) for f in result.flips) for p in setup.paths},
        backward_by_path={p: int(result.backward[setup.path_frames(p) - 1].any(axis=1).sum()) for p in setup.paths},
        max_error_mm_by_path={p: float(errors_mm[setup.path_frames(p) - 1].max()) for p in setup.paths},
    )
    return row


def measure_all(out_dir: Path | None = None, frames: int = 40, rigs=None, log=print, repeats: int = 3) -> list[dict]:
    """Every rig × solver of ``SOLVERS``; bake ratio = Blender's ``nla.bake`` time (without pole) /
    ours. Writes ``rows.json``, ``rows.csv`` and ``table.md`` into ``out_dir`` if given."""
    rows = []
    started = time.perf_counter()
    for name in rigs or BUILDERS:
        block = []
        for label, spec in SOLVERS:
            block.append(run(name, label, spec, frames, repeats))
            log(f"{name:18s} {block[-1]['solver']:22s} {time.perf_counter() - started:6.0f} s")
        blender = next(r for r in block if r["solver"] == "Blender IK")
        for row in block:
            if "bake_seconds" in row:
                row["bake_ratio"] = blender["bake_seconds"] / row["bake_seconds"]
        rows += block
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "rows.json").write_text(json.dumps(rows, indent=2))
        columns = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
        with open(out_dir / "rows.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, columns)
            writer.writeheader()
            writer.writerows(rows)
        (out_dir / "table.md").write_text(table_markdown(rows, frames) + "\n" + per_path_markdown(rows))
    return rows


def _fmt(value, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"


def table_markdown(rows: list[dict], frames: int) -> str:
    """The summary table: one row per rig × solver, with a caption saying how each column is measured."""
    repeats = max((row.get("bake_repeats", 1) for row in rows), default=1)
    caption = (
        f"{frames} frames per path; errors from Blender's evaluation of the baked keys (ours) or the live "
        f"constraint (Blender). Miss: reachable frame off by > {MISSED_MM:g} mm; unreported: a miss the bake's "
        f"report does not list as not reached. Backward: reachable frames with a joint bent > "
        f"{BACKWARD_DEGREES:g}° to the wrong side of its rest bend. Flips: a joint's bend normal turning > "
        f"{FLIP_TURN_DEGREES:g}° between frames of a path, split into unwarned / warned (warned: the frame or "
        "the one before is in our bake report's flip frames or has HI's pole warning on; Blender warns of "
        "nothing). Excess below 0 (float32 noise, under 1e-4 mm) shows as 0. Bake "
        f"ratio: Blender's `nla.bake` time (no pole) / this solver's bake time, least of {repeats} bakes each."
    )
    header = ("| rig | solver | max reachable error mm | misses | max excess (out of reach) mm "
              "| flips unwarned / warned | backward frames | bake µs / frame | bake ratio |")
    lines = [caption, "", header, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if "skipped" in row:
            continue
        misses = f"{row['misses']} of {row['reachable_frames']}"
        if row.get("misses_unreported"):
            misses += f" ({row['misses_unreported']} unreported)"
        flips = f"{row['flips_unwarned']} / {row['flips'] - row['flips_unwarned']}"
        lines.append(
            f"| {row['rig']} | {row['solver']} | {_fmt(row['max_reachable_mm'])} "
            f"| {misses} | {_fmt(max(row['max_excess_mm'], 0.0))} | {flips} "
            f"| {row['backward_frames']} | {_fmt(row['bake_seconds'] / row['frames'] * 1e6)} "
            f"| {_fmt(row['bake_ratio'], 2)} |")
    return "\n".join(lines) + "\n"


def per_path_markdown(rows: list[dict]) -> str:
    """Per rig, one table solver × path: ``max error mm / backward frames / flips``."""
    lines = []
    for rig in dict.fromkeys(r["rig"] for r in rows):
        block = [r for r in rows if r["rig"] == rig and "skipped" not in r]
        paths = list(block[0]["flips_by_path"])
        lines += [f"#### {rig} ({block[0]['bones']} bones, reach {block[0]['reach_m']:.3f} m)", "",
                  "Cells: max error mm / backward frames / flips.", "",
                  "| solver | " + " | ".join(paths) + " |", "|---|" + "---:|" * len(paths)]
        for row in block:
            cells = [f"{_fmt(row['max_error_mm_by_path'][p])} / {row['backward_by_path'][p]} "
                     f"/ {row['flips_by_path'][p]}" for p in paths]
            lines.append(f"| {row['solver']} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


SWEEP_RIGS = ("human_leg_foot", "human_spine", "horse_hind_leg", "wolf_hind_leg", "horse_hind_leg_toe",
              "wolf_hind_leg_toe")
"""The rigs of three or more bones, where the reference-pose pull of SDLS was measured."""


def reference_weight_sweep(weights, frames: int = 40, rigs=SWEEP_RIGS, log=print) -> str:
    """The default method of longer chains (SDLS) at each ``reference_weight``: a markdown table of
    backward frames (reachable, by path), flips, max reachable error, not-reached frames and the
    excess over the bound out of reach, per rig and weight."""
    import ik_solvers

    lines = [f"{frames} frames per path; measures as in the Rigify table.", "",
             "| rig | reference_weight | backward frames | backward by path | flips | max reachable error mm "
             "| not reached (of which out of reach) | max excess out of reach mm |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    for name in rigs:
        for weight in weights:
            fresh_scene()
            ik_solvers.register()
            try:
                setup = BUILDERS[name](frames=frames)
                chain = add_chain(setup, "SDLS", reference_weight=weight)
                bake_ours(setup, chain.name)
                result = measure(setup)
                report = bake_report(chain) or {}
            finally:
                ik_solvers.unregister()
            reachable = setup.reachable_mask()
            by_path = {p: int(result.backward[setup.path_frames(p) - 1].any(axis=1).sum())
                       for p in setup.paths if setup.reachable[p]}
            not_reached = report.get("not_reached_frames", [])
            outside = sum(int(not reachable[f - 1]) for f in not_reached)
            lines.append(
                f"| {name} | {weight:g} | {int(result.backward[reachable].any(axis=1).sum())} "
                f"| {', '.join(f'{p} {v}' for p, v in by_path.items() if v) or '–'} | {len(result.flips)} "
                f"| {_fmt(result.errors[reachable].max() * 1000)} | {len(not_reached)} ({outside}) "
                f"| {_fmt(((result.errors - result.bounds)[~reachable]).max() * 1000)} |")
            log(lines[-1])
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Issue 11's table on Rigify's rigs: ours against Blender's IK.")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--frames", type=int, default=40, help="frames per target path (default 40)")
    parser.add_argument("--rigs", nargs="+", choices=tuple(BUILDERS), help="rigs (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="bakes timed per row, the least counts (default 3)")
    parser.add_argument("--doc", type=Path, help="markdown file to paste the table into (between markers)")
    parser.add_argument("--sweep", type=lambda text: [float(w) for w in text.split(",")],
                        help="instead: the default of longer chains at these reference weights (e.g. 0,0.1,1), "
                             "written to OUT/sweep.md")
    args = parser.parse_args(argv)
    if args.frames < 2 or args.repeats < 1:
        print("_rigify_rigs: --frames must be at least 2 and --repeats at least 1", file=sys.stderr)
        return 1
    if "bpy" not in sys.modules:
        os.environ.setdefault("BLENDER_USER_RESOURCES", tempfile.mkdtemp(prefix="ik_rigify_blender_user_"))
    repo = Path(__file__).resolve().parents[1]
    if str(repo) not in sys.path:
        sys.path.insert(0, str(repo))
    import bpy  # noqa: F401  (after BLENDER_USER_RESOURCES)

    if args.sweep is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sweep.md").write_text(reference_weight_sweep(args.sweep, args.frames, args.rigs or SWEEP_RIGS))
        return 0
    rows = measure_all(args.out, args.frames, args.rigs, repeats=args.repeats)
    table = table_markdown(rows, args.frames) + "\n" + per_path_markdown(rows)
    if args.doc is not None:
        start, end = "<!-- table:start -->", "<!-- table:end -->"
        text = args.doc.read_text()
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        args.doc.write_text(f"{head}{start}\n{table}{end}{tail}")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The history-independent (HI) solver package: swivel angle, zero-plane map, parent space, flips (SPEC §5).

Entry point for callers (the Blender layer, the batch baker)
------------------------------------------------------------
``solve_hi(chain, targets, preferred, swivel=..., zero_plane_map=..., poles=...,
sphere_rotations=..., options=...) -> HISolveResult``: one batch of frames;
``HISolveResult.result`` is the core's ``SolveResult`` (method ``Method.HI``),
the other fields are the HI extras (EE axes, zero-plane and solver-plane
normals, pole angles and warnings, map singularities). ``find_flips(...)`` lists
the frames of a sequence where the solver plane jumps. The plain core entry
``solve(chain, targets, Method.HI, options, initial=preferred, swivel=...)``
runs the same solve and returns only the ``SolveResult``. ``solve_hi_one(pref, target, ...)
-> OneTargetHI | None``: one target on Python floats (live mode) through the same per-target
functions (``core/array_ops.py``; the batch's bits wherever ``math``'s cosine is numpy's), None
where only ``solve_hi`` will do (custom maps, inputs it must check).

Coordinates
-----------
The *solving frame* is the frame of ``chain.root_position`` / ``root_rotation``
and of ``targets`` (world for a live solve, or the start joint's parent space
when baking with an identity root). The chain's root frame is the start joint's
parent. The sphere's intrinsic frame (``SphereFrame``) is read off the preferred
pose in that root frame's own coordinates; ``sphere_rotations (N, 3, 3)`` place
it in the solving frame per frame — the parent space (SPEC §5). By default the
sphere rides with the root (``START_JOINT``); ``sphere_rotations_for_parent_space``
computes the rotations for either choice from the parents' world rotations.

History independence
--------------------
Every frame is computed from its own target, swivel, pole and sphere rotation
and the preferred pose alone: two bones in closed form, longer chains by an
in-plane solve that starts from the preferred angles every time. Solving the
frames in any order or in any chunks gives bit-identical poses.

Modules, one concern each: ``sphere`` (preferred pose → sphere frame; ``straight`` the plane of a straight one), ``parent_space``,
``planes`` (per-frame EE axis, zero plane, swivel), ``in_plane`` (the bends; ``plane_chain``
the longer chains' root finder, ``path`` their path through the preferred pose, ``in_plane_constants`` the pose's constants as floats),
``placement`` (pose on the solver plane, joint rotations), ``solve`` (the entry,
registered as ``Method.HI``), ``one_target`` (the one-target entry: inputs gathered, the same
functions called on Python floats) and ``flips``. Each piece of per-target math is written once,
against an array namespace (``array_ops``), and serves both entries.
"""

from .flips import DEFAULT_TURN_THRESHOLD, FlipReport, find_flips, flips_from_normals
from .one_target import OneTargetHI, solve_hi_one
from .orientation import solve_hi_oriented  # registers Method.HI (with the orientation split)
from .parent_space import ParentSpace, sphere_rotations_for_parent_space
from .planes import DEFAULT_WARNING_ANGLE, pole_angles
from .solve import HISolveResult, hi_preferred_pose, solve_hi, swivel_for_plane
from .sphere import PreferredPose, SphereFrame, pose_plane_normals, preferred_pose

__all__ = [
    "DEFAULT_TURN_THRESHOLD",
    "DEFAULT_WARNING_ANGLE",
    "FlipReport",
    "HISolveResult",
    "OneTargetHI",
    "ParentSpace",
    "PreferredPose",
    "SphereFrame",
    "find_flips",
    "hi_preferred_pose",
    "flips_from_normals",
    "pole_angles",
    "pose_plane_normals",
    "preferred_pose",
    "solve_hi",
    "solve_hi_one",
    "solve_hi_oriented",
    "sphere_rotations_for_parent_space",
    "swivel_for_plane",
]

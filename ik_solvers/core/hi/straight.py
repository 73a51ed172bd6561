"""The HI solver's plane for a straight preferred pose (SPEC §5 "A straight preferred pose", issue 20).

A straight pose (T-pose and BVH rigs) spans no plane; ``bend_direction`` ``d`` gives it — the direction
the middle joints (knee, elbow) move when the chain bends, in the start joint's rest frame (``root ·
rest₀``, the start bone's rest axes in Blender; any length). The plane holds the EE axis ``a0`` and
``d``; its normal ``n0 = unit(d⊥ × a0)`` (``d⊥`` the part of ``d`` ⟂ ``a0``) makes the chain bulge
toward ``a0 × n0 = d⊥`` (``pose_plane_normals``' sign), and every middle joint bends that way only
(``sphere``: the turn box ``[0, π]`` of a bent joint). With ``any_plane`` (a map that gives every
frame's plane: a pole target), a straight pose without ``d`` takes the plane of its first middle
hinge's axis, else one fixed plane through ``a0``. A bent preferred pose never comes here.
"""

from __future__ import annotations

import numpy as np

from ..chain import Chain, JointKind
from ..errors import IKInputError
from ..vectors import cross, dot, matvec, norm, tmatvec, unit

# How far from parallel (|cross| of unit vectors) a bend direction may be from the EE axis.
ALONG_TOLERANCE = 1e-9


def straight_pose_normal(chain: Chain, positions: np.ndarray, frames: np.ndarray, bend_direction: np.ndarray | None,
                          any_plane: bool) -> np.ndarray:
    """The solver-plane normal ``(3,)`` (solving frame) of a straight preferred pose at ``positions``
    ``(n + 1, 3)`` with joint ``frames`` ``(n + 1, 3, 3)`` (index 0 the root), as the module says.

    Raises IKInputError: no bend direction and not ``any_plane`` (field ``preferred``, naming
    ``bend_direction``); a bend direction zero or along the chain (field ``bend_direction``).
    """
    axis = unit(positions[-1] - positions[0])
    if bend_direction is not None:
        # The start joint's rest frame in the solving frame: root · rest₀.
        direction = matvec(chain.root_rotation @ chain.rest_rotations[0], bend_direction)
    elif any_plane:
        start_rest = chain.root_rotation @ chain.rest_rotations[0]
        hinges = [j for j, kind in enumerate(chain.kinds) if j and kind is JointKind.HINGE]
        if hinges:  # its axis is the plane's normal: d = axis × a0 gives n0 = unit(d⊥ × a0) = the axis
            j = hinges[0]
            direction = cross(matvec(frames[j + 1], chain.axes[chain.dof_start[j]]), axis)
        else:  # one fixed plane: the start joint's rest axis least along the chain
            local_axis = np.abs(tmatvec(start_rest, axis))
            direction = start_rest[:, int(np.argmin(local_axis))].copy()
    else:
        raise IKInputError(
            "preferred",
            "the preferred pose is straight, so it defines no solver plane: set the chain's bend_direction "
            "(the direction the knee or elbow moves when the chain bends, in the start bone's rest frame), "
            "give it a pole target, or bend the chain a little and capture the preferred pose again",
        )
    across = direction - dot(direction, axis) * axis
    if norm(across) <= ALONG_TOLERANCE * max(float(norm(direction)), 1e-300) or not norm(direction) > 0.0:
        raise IKInputError("bend_direction", "the bend direction is zero or along the chain: it must point "
                           "where the knee or elbow moves, across the straight chain")
    return unit(cross(across, axis))


def turn_box(relative: np.ndarray, in_plane: np.ndarray, straight: bool,
             tolerance: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The preferred relative turns and the box ``(lower, upper)`` the in-plane solve keeps them in, each
    ``(n − 1,)``, from the preferred turns and whether both bones at each joint lie in the plane (a
    turn within ``tolerance`` radians of 0 is no bend).

    Each bent joint keeps its sense (the seed: bend as the preferred pose does); a joint straight in
    the preferred pose, or with a bone out of the plane, may go either way. A straight preferred pose
    has exactly zero turns and every in-plane joint bends toward the bend direction (``[0, π]``).
    """
    if straight:
        return np.zeros_like(relative), np.where(in_plane, 0.0, -np.pi), np.full(relative.shape, np.pi)
    bent = (np.abs(relative) > tolerance) & in_plane
    return relative, np.where(bent & (relative > 0.0), 0.0, -np.pi), np.where(bent & (relative < 0.0), 0.0, np.pi)

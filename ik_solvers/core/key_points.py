"""What a key reduction measures (SPEC §9): the points of one keyed unit as forward kinematics of its
channel values — a chain's joints and tip, a body root's head moved by its location keys, and the first
joints of the units that hang below it (:mod:`.body.keys`).

A unit is a :class:`~.chain.Chain` in its root space (the frame it hangs from). Its points are, in
order: the joints' origins (the first one moves only with a location), the tip, then the attached
points, each riding on one joint's bone: ``p = p_j + Q_j @ local`` with its own ``local`` at every
frame (a child unit's first joint as the unreduced bake puts it in that bone's frame).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from .chain import Chain


@dataclass(frozen=True, eq=False)
class Attachments:
    """Points riding on a unit's joint bones.

    Attributes
    ----------
    joints : ndarray of int, shape (P,)
        The joint (index in the unit's chain) whose bone carries each point.
    local : ndarray, shape (N, P, 3)
        Each point at every baked frame, from its joint's origin in the joint bone's frame after its
        rotation (chain units).
    """

    joints: np.ndarray
    local: np.ndarray


@dataclass(frozen=True, eq=False)
class KeyedPoints:
    """A keyed unit's geometry: its ``chain``, whether its first joint also moves by a location
    (``translation``: a body root's ``location``, in its rest frame), the ``attachments`` below it, and how many
    times each point's distance from the unreduced bake counts against the bound at each baked frame,
    ``weights (N, n + 1 + P)`` (the points in :meth:`frames_and_points`' order; None: once)."""

    chain: Chain
    translation: bool = False
    attachments: Attachments | None = None
    weights: np.ndarray | None = None

    @property
    def first_moving(self) -> int:
        """The first point the channels move: the first joint with a location, else the second."""
        return 0 if self.translation else 1

    @cached_property
    def location_axes(self) -> np.ndarray:
        """``(3, 3)``: root-space motion of every point per unit of each location channel (columns)."""
        return self.chain.root_rotation @ self.chain.rest_rotations[0]

    @cached_property
    def moved_by(self) -> list[np.ndarray]:
        """Per joint, the points its rotation moves (indices into :meth:`frames_and_points`' points): the
        joints after it, the tip and the attached points on it or below it."""
        n = self.chain.n_joints
        attached = np.empty(0, dtype=int) if self.attachments is None else self.attachments.joints
        return [np.concatenate([np.arange(joint + 1, n + 1), n + 1 + np.flatnonzero(attached >= joint)])
                for joint in range(n)]

    def frames_and_points(self, rotations: Sequence[np.ndarray], location: np.ndarray | None = None,
                          rows: np.ndarray | None = None) -> tuple[list[np.ndarray], np.ndarray]:
        """Each joint bone's root-space frame ``(M, 3, 3)`` after its rotation and the points ``(M, n + 1 + P, 3)``
        of the joints' rotations (``rotations[i]`` ``(M, 3, 3)``, the rotation part of each joint bone's basis
        matrix), the first joint's ``location (M, 3)`` (with ``translation``) and the baked frames ``rows (M,)``
        they stand for (the attached points' own positions; with attachments, required)."""
        chain = self.chain
        count = rotations[0].shape[0]
        attached = 0 if self.attachments is None else self.attachments.joints.size
        points = np.empty((count, chain.n_joints + 1 + attached, 3))
        position = chain.root_position + chain.root_rotation @ chain.offsets[0]
        if self.translation:
            assert location is not None  # a unit with a location moves by it
            position = position + location @ self.location_axes.T
        points[:, 0] = position
        frames = [chain.root_rotation @ chain.rest_rotations[0] @ rotations[0]]
        for joint in range(1, chain.n_joints):
            position = position + frames[-1] @ chain.offsets[joint]
            points[:, joint] = position
            frames.append(frames[-1] @ chain.rest_rotations[joint] @ rotations[joint])
        points[:, chain.n_joints] = position + frames[-1] @ chain.tip_offset
        if self.attachments is not None:
            assert rows is not None  # attached points differ frame by frame
            joints, local = self.attachments.joints, self.attachments.local[rows]
            stacked = np.stack(frames, axis=1)[:, joints]  # (M, P, 3, 3)
            points[:, chain.n_joints + 1:] = points[:, joints] + (stacked * local[:, :, None, :]).sum(axis=-1)
        return frames, points


def chain_frames_and_points(chain: Chain, rotations: Sequence[np.ndarray]) -> tuple[list[np.ndarray], np.ndarray]:
    """:meth:`KeyedPoints.frames_and_points` of a chain alone: its joint frames and joints and tip ``(M, n + 1, 3)``."""
    return KeyedPoints(chain).frames_and_points(rotations)


def chain_points(chain: Chain, rotations: Sequence[np.ndarray]) -> np.ndarray:
    """Root-space joint origins and tip ``(M, n + 1, 3)`` for the joints' variable rotations,
    ``rotations[i]`` of shape ``(M, 3, 3)`` (the rotation part of each joint bone's basis matrix)."""
    return chain_frames_and_points(chain, rotations)[1]


DEFAULT_KEY_ERROR_PER_REACH = 1e-4
"""Default bound per unit of chain reach: 0.1 mm for a chain of 1 m (ACL's default 0.01 cm)."""


def chain_reach(chain: Chain) -> float:
    """Length of the chain from its first joint to the tip, in chain units."""
    return float(np.linalg.norm(chain.offsets[1:], axis=-1).sum() + np.linalg.norm(chain.tip_offset))


def default_key_error(chain: Chain, scale: float = 1.0) -> float:
    """The default bound in world units: :data:`DEFAULT_KEY_ERROR_PER_REACH` × the chain's reach × ``scale``."""
    return DEFAULT_KEY_ERROR_PER_REACH * chain_reach(chain) * scale

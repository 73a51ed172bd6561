"""Key reduction for a body bake (SPEC §8, §9): the fewest keys for every chain and the body root such that
every joint and tip of every chain stays within ``E`` (world space) of the unreduced bake at every frame.

A body is reduced unit by unit, top down — the body root (its location and rotation), then each chain (its
bones' rotations) once the units above it are reduced — every unit against the bake *as reduced above it*.
A unit's first bone is turned so that its world rotation is the unreduced bake's again (the unit's values
compensated: :attr:`KeyUnit.channels`), which leaves the units above it one error at the unit: how far they
move its first joint, ``g`` (:attr:`BodyKeys.carried`), a shift of every point of the unit alike. So a unit's
point sits at most its own error (against its compensated values, a rigid placement apart) plus ``g`` from
the unreduced bake. A unit is measured at its own points and at the first joints of the units directly
below it (:func:`unit_attachments`); their chains' turns are theirs to keep. The bound, frame by frame
(:func:`unit_weights`): a unit's own points within what ``g`` leaves of ``E`` there, the first joints below it
within that divided by the number of units on the longest path from it down to a chain nothing hangs from
(so the units below keep the rest).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..chain import Chain
from ..errors import IKInputError
from ..free_segments import curve_values
from ..key_points import Attachments
from ..key_reduction import FLOAT32_MARGIN, ReducedKeys, reduction_steps
from ..key_rotations import RotationsOf
from ..rotations import quaternions_from_matrices
from ..vectors import norm, tmatvec
from .forward import BodyPose
from .model import Body

ChannelsOf = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""A bone's rotation matrices ``(N, 3, 3)`` (its basis) and channel values near them ``(N, k)`` → channel values
``(N, k)`` of those rotations, as continuous as the values given (one hemisphere, no Euler jumps)."""


def quaternion_channels(basis: np.ndarray, near: np.ndarray) -> np.ndarray:
    """:data:`ChannelsOf` quaternion channels (w, x, y, z): unit quaternions in the hemisphere of ``near``."""
    quaternions = quaternions_from_matrices(basis)
    return quaternions * np.where((quaternions * near).sum(axis=1) < 0.0, -1.0, 1.0)[:, None]


@dataclass(frozen=True, eq=False)
class KeyUnit:
    """One keyed unit of a body bake.

    Attributes
    ----------
    name : str
        The chain's name, or the body root bone's.
    bones : tuple of int
        Its bones in the body (start → tip; the body root alone for the root).
    chain : Chain
        The bones as a chain in the frame they hang from (its root space; any rigid placement).
    values : list of ndarray, shape (N, k)
        Per channel group, the unreduced bake's keys as stored: with ``translation`` first the location
        ``(N, 3)``, then each bone's rotation channels.
    rotations : list
        Per channel group, its :data:`~..key_rotations.RotationsOf` (None for the location).
    channels : callable
        The first bone's :data:`ChannelsOf` (the inverse of its ``rotations``): its compensated values.
    translation : bool
        The first bone's location is keyed (the body root's).
    tip : int or None
        The bone whose tail is the unit's tip (a chain's last bone, which need not carry a joint);
        None: the last of ``bones``.
    """

    name: str
    bones: tuple[int, ...]
    chain: Chain
    values: list[np.ndarray]
    rotations: list[RotationsOf | None]
    channels: ChannelsOf
    translation: bool = False
    tip: int | None = None


@dataclass(frozen=True, eq=False)
class BodyKeys:
    """A body's reduced keys, per unit (in the order given).

    Attributes
    ----------
    reduced : tuple of ReducedKeys
        Each unit's keys; its ``errors`` the unit's own: the largest weighted distance (:func:`unit_weights`) its
        reduced keys put any of its points and the first joints of the units directly below it from its
        compensated values', per frame.
    carried : tuple of ndarray, shape (N,)
        Per unit, how far the reduced units above it move its first joint from the unreduced bake (zero
        for a unit on top), per frame (world units).
    parents : tuple of int
        The unit each hangs below (−1: none).
    shares : tuple of float
        Each unit's bound on its weighted error (world units): ``key_error`` less the least it carries.
    key_error : float
        The body's bound ``E``.
    """

    reduced: tuple[ReducedKeys, ...]
    carried: tuple[np.ndarray, ...]
    parents: tuple[int, ...]
    shares: tuple[float, ...]
    key_error: float

    def path(self, unit: int) -> list[int]:
        """``unit`` and every unit above it, nearest first."""
        out = [unit]
        while self.parents[out[-1]] >= 0:
            out.append(self.parents[out[-1]])
        return out

    def path_errors(self, unit: int) -> np.ndarray:
        """A bound ``(N,)`` on the world error of ``unit``'s points per frame: its own error (its points' weighted
        error over their weight, :func:`unit_weights`) and what it carries; at most ``key_error`` unless that is
        below the float32 rounding carried (:func:`unit_room`)."""
        carried = self.carried[unit]
        return self.reduced[unit].errors * unit_room(carried, self.key_error) / self.shares[unit] + carried

    def as_chain(self, unit: int) -> ReducedKeys:
        """``unit``'s keys with :meth:`path_errors` and the body's bound, as a chain's reduction would report them
        from the core alone (the bake reports the errors of Blender's evaluation instead; its float32 allowance
        the sum of the units' on the path, as each adds its own rounding)."""
        allowance = sum(self.reduced[k].allowance for k in self.path(unit))
        return replace(self.reduced[unit], errors=self.path_errors(unit), key_error=self.key_error,
                       allowance=allowance)


def unit_parents(body: Body, units: Sequence[KeyUnit]) -> list[int]:
    """The unit each unit hangs below (the one holding the nearest ancestor of its first bone; −1: none)."""
    owner = {bone: k for k, unit in enumerate(units) for bone in unit.bones}
    parents = []
    for unit in units:
        bone = int(body.parents[unit.bones[0]])
        while bone >= 0 and bone not in owner:
            bone = int(body.parents[bone])
        parents.append(owner[bone] if bone >= 0 else -1)
    return parents


def unit_depths(parents: Sequence[int]) -> list[int]:
    """Per unit, the number of units on the longest path from it down to a unit nothing hangs below."""
    depths = [1] * len(parents)
    for k in range(len(parents)):
        above, below = parents[k], 1
        while above >= 0:
            below += 1
            depths[above] = max(depths[above], below)
            above = parents[above]
    return depths


def top_down(parents: Sequence[int]) -> list[int]:
    """The units in the given order, each moved after the unit it hangs below where it came before it."""
    order: list[int] = []

    def place(k: int) -> None:
        if k not in order:
            if parents[k] >= 0:
                place(parents[k])
            order.append(k)

    for k in range(len(parents)):
        place(k)
    return order


def unit_points(body: Body, pose: BodyPose, unit: KeyUnit) -> np.ndarray:
    """A unit's joints and tip ``(N, n + 1, 3)`` in the body's frame (chain units)."""
    bones = list(unit.bones)
    return np.concatenate([pose.heads[:, bones], pose.tails(body, [bones[-1] if unit.tip is None else unit.tip])],
                          axis=1)


def pose_from_local(body: Body, local: np.ndarray, root_bone: int | None = None,
                    root_location: np.ndarray | None = None) -> BodyPose:
    """The body's pose from every bone's rotation relative to its parent ``local (N, B, 3, 3)`` (``rest @ basis``,
    as Blender forms it from the bone's channels: a hinge's reduced curves need not stay on its axis, so
    no joint variables in between) and the root bone's location ``(N, 3)`` in its rest frame."""
    n = local.shape[0]
    frames, heads = np.empty((n, body.n_bones, 3, 3)), np.empty((n, body.n_bones, 3))
    for i, parent in enumerate(body.parents):
        offset = np.broadcast_to(body.offsets[i], (n, 3))
        if i == root_bone and root_location is not None:
            offset = offset + root_location @ body.rest_rotations[i].T
        if parent < 0:
            frames[:, i] = body.root_rotation @ local[:, i]
            heads[:, i] = body.root_position + offset @ body.root_rotation.T
        else:
            frames[:, i] = frames[:, parent] @ local[:, i]
            heads[:, i] = heads[:, parent] + (frames[:, parent] @ offset[:, :, None])[:, :, 0]
    return BodyPose(frames, heads)


def local_rotations(body: Body, pose: BodyPose) -> np.ndarray:
    """Every bone's rotation relative to its parent ``(N, B, 3, 3)`` in ``pose`` (:func:`pose_from_local`'s input)."""
    above = np.empty_like(pose.frames)
    above[:] = body.root_rotation
    parents = np.asarray(body.parents)
    placed = parents >= 0
    above[:, placed] = pose.frames[:, parents[placed]]
    return np.swapaxes(above, -1, -2) @ pose.frames


def unit_errors(body: Body, pose: BodyPose, reference: BodyPose, units: Sequence[KeyUnit]) -> np.ndarray:
    """The distance ``(U, N)`` of each unit's farthest joint or tip in ``pose`` from ``reference`` (chain units)."""
    return np.stack([np.linalg.norm(unit_points(body, pose, unit) - unit_points(body, reference, unit),
                                    axis=-1).max(axis=1) for unit in units])


def unit_attachments(body: Body, pose: BodyPose, units: Sequence[KeyUnit], parents: Sequence[int],
                     k: int) -> Attachments | None:
    """The first joint of every unit directly below unit ``k`` on the bone of ``k`` it hangs from, as ``pose``
    (the unreduced bake, ``(N, …)``) puts it; None when nothing hangs below ``k``."""
    joints, local = [], []
    for below, parent in zip(units, parents):
        if parent != k:
            continue
        bone = int(body.parents[below.bones[0]])
        while bone not in units[k].bones:
            bone = int(body.parents[bone])
        joints.append(units[k].bones.index(bone))
        local.append(tmatvec(pose.frames[:, bone], pose.heads[:, below.bones[0]] - pose.heads[:, bone]))
    if not joints:
        return None
    return Attachments(np.array(joints, dtype=int), np.stack(local, axis=1))


def compensated(body: Body, pose: BodyPose, reduced: BodyPose, unit: KeyUnit) -> tuple[list[np.ndarray], np.ndarray]:
    """``unit``'s values with its first bone turned so that its frame in ``reduced`` (the units above it as
    reduced) is its frame in ``pose`` (the unreduced bake), and how far ``reduced`` moves its first joint
    ``(N,)`` (chain units)."""
    first = unit.bones[0]
    group = 1 if unit.translation else 0
    parent = int(body.parents[first])
    rest = body.rest_rotations[first]
    values = list(unit.values)
    if parent >= 0:
        # rest⁻¹ A'⁻¹ A rest: the parent's frame error, in the first bone's rest frame, before its basis
        error = rest.T @ np.swapaxes(reduced.frames[:, parent], -1, -2) @ pose.frames[:, parent] @ rest
        rotate = unit.rotations[group]
        assert rotate is not None  # a bone's rotation channels
        # rounded as keys are (float32): where the units above hold still, so do the values (a hold stays one)
        values[group] = unit.channels(error @ rotate(values[group]), values[group]).astype(np.float32).astype(float)
    return values, norm(reduced.heads[:, first] - pose.heads[:, first])


def unit_weights(unit: KeyUnit, attachments: Attachments | None, carried: np.ndarray, depth: int,
                 key_error: float) -> tuple[float, np.ndarray | None]:
    """A unit's bound and its points' weights ``(N, n + 1 + P)`` (:class:`~..key_points.KeyedPoints`): at each
    frame its own points within what its ``carried (N,)`` error leaves of ``key_error``, the first joints of
    the units below it (``attachments``) within that over its ``depth`` (the units below share the rest)."""
    room = unit_room(carried, key_error)
    points = unit.chain.n_joints + 1
    own = room.max() / room  # the bound over its weight: what is left of key_error at each frame
    weights = np.repeat(own[:, None], points + (0 if attachments is None else attachments.joints.size), axis=1)
    weights[:, points:] *= depth
    return float(room.max()), None if np.all(weights == 1.0) else weights


def unit_room(carried: np.ndarray, key_error: float) -> np.ndarray:
    """What ``carried (N,)`` leaves of ``key_error`` per frame, at least :data:`~..key_reduction.FLOAT32_MARGIN` of
    it: a bound below the float32 rounding the units above carry (a few nanometres) cannot hold there, and the
    check of Blender's evaluation says so, but the weights stay finite."""
    return np.maximum(key_error - carried, FLOAT32_MARGIN * key_error)


def body_reduction_steps(frames: np.ndarray, body: Body, pose: BodyPose, units: Sequence[KeyUnit], key_error: float,
                         scale: float = 1.0) -> Generator[None, None, BodyKeys]:
    """Every unit's keys reduced, top down, within its bound of :func:`unit_weights` (``key_error`` in world
    units; ``scale``: world units per chain unit) against the unreduced bake at ``frames (N,)``, whose pose
    ``pose`` is (``(N, …)``, the body's frame), as the units above it are reduced, in rounds
    (:func:`~..key_reduction.reduction_steps`, unit after unit)."""
    if not key_error > 0.0:
        raise IKInputError("key_error", "a body's key reduction needs a bound above 0")
    parents, count = unit_parents(body, units), len(units)
    depths = unit_depths(parents)
    local = local_rotations(body, pose)
    root = next((unit for unit in units if unit.translation), None)
    root_bone = None if root is None else root.bones[0]
    location = None if root is None else root.values[0]
    reduced: list[ReducedKeys | None] = [None] * count
    carried, shares = [np.zeros(len(frames))] * count, [0.0] * count
    for k in top_down(parents):
        unit = units[k]
        values = unit.values
        if parents[k] >= 0:
            values, moved = compensated(body, pose, pose_from_local(body, local, root_bone, location), unit)
            carried[k] = scale * moved
        attachments = unit_attachments(body, pose, units, parents, k)
        shares[k], weights = unit_weights(unit, attachments, carried[k], depths[k], key_error)
        keys = yield from reduction_steps(frames, values, unit.rotations, unit.chain, shares[k], scale,
                                          translation=unit.translation, attachments=attachments, weights=weights)
        reduced[k] = keys
        curves = [curve_values(keys.frames, controls, handles, frames)
                  for controls, handles in zip(keys.controls, keys.handle_frames)]
        if unit.translation:
            location, curves = curves[0], curves[1:]
        for bone, rotate, curve in zip(unit.bones, unit.rotations[1 if unit.translation else 0:], curves):
            assert rotate is not None  # a bone's rotation channels
            local[:, bone] = body.rest_rotations[bone] @ rotate(curve)
    done = tuple(keys for keys in reduced if keys is not None)
    return BodyKeys(done, tuple(carried), tuple(parents), tuple(shares), key_error)

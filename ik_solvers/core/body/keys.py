"""Key reduction for a body bake (SPEC §8, §9): the fewest keys for every chain and the body root such that
every joint and tip of every chain stays within ``E`` (world space) of the unreduced bake at every frame.

A body is reduced unit by unit — the body root (its location and rotation), then each chain (its bones'
rotations) — every unit against the unreduced bake, within its share of ``E``. A unit's error is
measured at its own points *and at every point of the chains below it* (:class:`~..key_points.Attachments`:
as the unreduced bake puts them on the unit's bones). That makes the shares add up: a point of a chain
``D`` below units ``U_1 … U_k`` (top first) sits in the reduced bake at ``T'_1 … T'_k T'_D p`` and in the
unreduced one at ``T_1 … T_k T_D p`` (rigid motions of each unit); replacing one ``T`` by its ``T'`` at a
time, the distance is at most the sum of each unit's error at the unreduced point (a rigid motion keeps
distances), each within that unit's share. The shares: a unit takes what is left of ``E`` above it,
divided by the number of units on the longest path from it down to a chain nothing hangs from.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..chain import Chain
from ..key_points import Attachments
from ..key_reduction import ReducedKeys, RotationsOf, reduction_steps
from ..vectors import tmatvec
from .forward import BodyPose
from .model import Body


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
        Per channel group, its :data:`~..key_reduction.RotationsOf` (None for the location).
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
    translation: bool = False
    tip: int | None = None


@dataclass(frozen=True, eq=False)
class BodyKeys:
    """A body's reduced keys, per unit (in the order given).

    Attributes
    ----------
    reduced : tuple of ReducedKeys
        Each unit's keys; its ``errors`` the unit's own share: the largest distance its reduced keys
        alone put any of its points and the points below it from the unreduced bake, per frame.
    parents : tuple of int
        The unit each hangs below (−1: none).
    shares : tuple of float
        Each unit's bound (world units).
    key_error : float
        The body's bound ``E``.
    """

    reduced: tuple[ReducedKeys, ...]
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
        """A bound ``(N,)`` on the world error of ``unit``'s points per frame: the sum of its own error and
        every unit's above it (each at most its share, so the sum at most ``key_error``)."""
        path = self.path(unit)
        total = self.reduced[path[0]].errors.copy()
        for above in path[1:]:
            total += self.reduced[above].errors
        return total

    def as_chain(self, unit: int) -> ReducedKeys:
        """``unit``'s keys with :meth:`path_errors` and the body's bound: what a chain's report shows (its
        float32 allowance the sum of the units' on the path, as the errors are)."""
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


def unit_shares(parents: Sequence[int], key_error: float) -> list[float]:
    """Each unit's share of ``key_error``: what is left above it over the units on its longest path down."""
    children: list[list[int]] = [[] for _ in parents]
    for k, parent in enumerate(parents):
        if parent >= 0:
            children[parent].append(k)

    def depth(k: int) -> int:
        return 1 + max((depth(c) for c in children[k]), default=0)

    shares = [0.0] * len(parents)

    def share(k: int, left: float) -> None:
        shares[k] = left / depth(k)
        for child in children[k]:
            share(child, left - shares[k])

    for k, parent in enumerate(parents):
        if parent < 0:
            share(k, key_error)
    return shares


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


def unit_errors(body: Body, pose: BodyPose, reference: BodyPose, units: Sequence[KeyUnit]) -> np.ndarray:
    """The distance ``(U, N)`` of each unit's farthest joint or tip in ``pose`` from ``reference`` (chain units)."""
    return np.stack([np.linalg.norm(unit_points(body, pose, unit) - unit_points(body, reference, unit),
                                    axis=-1).max(axis=1) for unit in units])


def unit_attachments(body: Body, pose: BodyPose, units: Sequence[KeyUnit], parents: Sequence[int],
                     k: int) -> Attachments | None:
    """Every point of the units below unit ``k`` on the bone of ``k`` it hangs from, as ``pose`` (the
    unreduced bake, ``(N, …)``) puts it; None when nothing hangs below ``k``."""
    joints, local = [], []
    for d in range(len(units)):
        above = parents[d]
        while above >= 0 and above != k:
            above = parents[above]
        if above != k:
            continue
        bone = int(body.parents[units[d].bones[0]])
        while bone not in units[k].bones:
            bone = int(body.parents[bone])
        joint = units[k].bones.index(bone)
        points = unit_points(body, pose, units[d])
        frame, head = pose.frames[:, bone], pose.heads[:, bone]
        local.append(tmatvec(frame[:, None], points - head[:, None]))
        joints.extend([joint] * points.shape[1])
    if not joints:
        return None
    return Attachments(np.array(joints, dtype=int), np.concatenate(local, axis=1))


def body_reduction_steps(frames: np.ndarray, body: Body, pose: BodyPose, units: Sequence[KeyUnit], key_error: float,
                         scale: float = 1.0) -> Generator[None, None, BodyKeys]:
    """Every unit's keys reduced within its share of ``key_error`` (world units; ``scale``: world units
    per chain unit) against the unreduced bake at ``frames (N,)``, whose pose ``pose`` is (``(N, …)``,
    the body's frame), in rounds (:func:`~..key_reduction.reduction_steps`, unit after unit)."""
    parents = unit_parents(body, units)
    shares = unit_shares(parents, key_error)
    reduced = []
    for k, unit in enumerate(units):
        attachments = unit_attachments(body, pose, units, parents, k)
        reduced.append((yield from reduction_steps(frames, unit.values, unit.rotations, unit.chain, shares[k], scale,
                                                   translation=unit.translation, attachments=attachments)))
    return BodyKeys(tuple(reduced), tuple(parents), tuple(shares), key_error)

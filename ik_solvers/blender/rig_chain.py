"""The bone chain read from an armature (:class:`RigChain`): what the rig reader gives and the
root-space mapping reads, in a module of its own so that neither imports the other
(``rig`` reads and writes chains, ``root_space`` places their root in the world)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import Chain


@dataclass(frozen=True)
class RigChain:
    """A bone chain read from an armature.

    Attributes
    ----------
    chain : Chain
        The core chain in the chain's root space (root frame identity, armature-space units).
    bone_names : tuple of str
        Every bone of the chain, start → tip.
    q : ndarray, shape (n_dof,)
        The pose at read time as joint variables (radians).
    joint_bones : tuple of str
        The bones that carry the chain's joints, start → tip: ``bone_names`` without the bones
        whose IK axes are all locked (those are held fixed). ``joint_bones[i]`` is joint ``i``.
    parent_bone : str or None
        The start bone's parent (the root space), None for armature space.
    """

    chain: Chain
    bone_names: tuple[str, ...]
    q: np.ndarray
    joint_bones: tuple[str, ...] = ()
    parent_bone: str | None = None

"""The body model: a tree of bones, its chains and their goals (SPEC §8), checked once and laid out for the solve."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TypeVar

import numpy as np

from ..chain import Chain, JointKind
from ..errors import IKInputError
from ..zero_plane import ZeroPlaneMapFactory

_Kept = TypeVar("_Kept")


def variable_chain(kinds: tuple[JointKind, ...], rest_rotations: np.ndarray, axes: np.ndarray, lower: np.ndarray,
                   upper: np.ndarray, weights: np.ndarray) -> Chain:
    """A core Chain holding bones' joint variables alone (unit segments stand in for the tree's offsets).

    The tree's bones are no serial chain, but their variables behave as a chain's: this one lends
    the kinematics module's local matrices, increments and limit clamps to the tree, unchanged.
    """
    n = len(kinds)
    offsets = np.zeros((n, 3))
    offsets[1:, 0] = 1.0
    return Chain(kinds=kinds, offsets=offsets, rest_rotations=rest_rotations, axes=axes, lower=lower, upper=upper,
                 weights=weights, tip_offset=np.array([1.0, 0.0, 0.0]))


@dataclass(frozen=True, eq=False)
class Body:
    """A tree of ``B`` bones, each a joint as a core :class:`~..chain.Chain` models it.

    Bone ``i``'s world frame is ``Q_i = Q_p @ rest_rotations[i] @ R_i(q)`` and its head
    ``p_i = p_p + Q_p @ offsets[i]``, with ``p`` its parent (``parents[i]``; for a tree root
    ``Q_p = root_rotation``, ``p_p = root_position``, the armature's frame). Its tail is
    ``p_i + Q_i @ tails[i]``. The joint variables of every bone are one vector ``(n_dof,)``,
    bone ``i``'s from ``dof_start[i]``, laid out as in a Chain (hinge / universal angles in
    radians, ball joints as rotation vectors in the rest frame).

    Attributes
    ----------
    names : tuple of str, length B
        Bone names (for messages and the Blender layer).
    parents : tuple of int, length B
        Parent of each bone, ``-1`` for a tree root; every parent comes before its children.
    kinds : tuple of JointKind, length B
    offsets : ndarray, shape (B, 3)
        Head of each bone in its parent's frame (chain units).
    rest_rotations : ndarray, shape (B, 3, 3)
        Rest orientation of each bone relative to its parent's frame.
    tails : ndarray, shape (B, 3)
        Tail of each bone in its own frame (Blender: ``(0, length, 0)``).
    axes, lower, upper, weights : ndarray, shapes (n_dof, 3), (n_dof,) ×3
        Joint axes, limits (radians) and weights ``1 − stiffness`` per variable, as in a Chain.
    root_position : ndarray, shape (3,)
    root_rotation : ndarray, shape (3, 3)
        The frame the tree roots hang from (the armature object's world matrix, unscaled).
    """

    names: tuple[str, ...]
    parents: tuple[int, ...]
    kinds: tuple[JointKind, ...]
    offsets: np.ndarray
    rest_rotations: np.ndarray
    tails: np.ndarray
    axes: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    weights: np.ndarray
    root_position: np.ndarray = field(default_factory=lambda: np.zeros(3))
    root_rotation: np.ndarray = field(default_factory=lambda: np.eye(3))

    def __post_init__(self) -> None:
        n = len(self.kinds)
        object.__setattr__(self, "names", tuple(self.names))
        object.__setattr__(self, "parents", tuple(int(p) for p in self.parents))
        object.__setattr__(self, "kinds", tuple(self.kinds))
        if n == 0 or len(self.names) != n or len(self.parents) != n:
            raise IKInputError("parents", "a body needs one name, parent and kind per bone")
        if len(set(self.names)) != n or not all(isinstance(k, JointKind) for k in self.kinds):
            raise IKInputError("names", "bone names must be unique and every joint kind a JointKind")
        if any(not -1 <= p < i for i, p in enumerate(self.parents)):
            raise IKInputError("parents", "every parent must come before its child (-1: a tree root)")
        n_dof = sum(k.value for k in self.kinds)
        for name, shape in (("offsets", (n, 3)), ("rest_rotations", (n, 3, 3)), ("tails", (n, 3)),
                            ("axes", (n_dof, 3)), ("lower", (n_dof,)), ("upper", (n_dof,)),
                            ("weights", (n_dof,)), ("root_position", (3,)), ("root_rotation", (3, 3))):
            value = np.array(getattr(self, name), dtype=float)
            if value.shape != shape:
                raise IKInputError(name, f"expected shape {shape}, got {value.shape}")
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        if np.any(self.lower > self.upper) or np.any(self.weights <= 0.0) or np.any(self.weights > 1.0):
            raise IKInputError("weights", "limits need min ≤ max and weights must lie in (0, 1]")

    @property
    def n_bones(self) -> int:
        return len(self.kinds)

    @cached_property
    def variables(self) -> Chain:
        """Every bone's joint variables as one :func:`variable_chain` (rest rotations included)."""
        return variable_chain(self.kinds, self.rest_rotations, self.axes, self.lower, self.upper, self.weights)

    @cached_property
    def hanging_bones(self) -> np.ndarray:
        """The bones with a parent, in order ``(H,)``."""
        return np.array([i for i, p in enumerate(self.parents) if p >= 0], dtype=int)

    @cached_property
    def hanging_parents(self) -> np.ndarray:
        """The parent of each of :attr:`hanging_bones` ``(H,)``."""
        return np.array([p for p in self.parents if p >= 0], dtype=int)

    @cached_property
    def hanging_slots(self) -> dict[int, int]:
        """Each of :attr:`hanging_bones`' position in it."""
        return {int(b): k for k, b in enumerate(self.hanging_bones)}

    @property
    def n_dof(self) -> int:
        return self.variables.n_dof

    @property
    def dof_start(self) -> np.ndarray:
        """Index ``(B,)`` of each bone's first variable."""
        return self.variables.dof_start

    def dofs(self, bones: list[int] | tuple[int, ...]) -> np.ndarray:
        """The variable indices of ``bones``, in order."""
        if not bones:
            return np.zeros(0, dtype=int)
        return np.concatenate([self.dof_start[b] + np.arange(self.kinds[b].value) for b in bones])

    def bone_index(self, name: str | int) -> int:
        """A bone's index from its name (or index)."""
        if isinstance(name, (int, np.integer)):
            if not 0 <= int(name) < self.n_bones:
                raise IKInputError("bone", f"no bone {name}")
            return int(name)
        if name not in self.names:
            raise IKInputError("bone", f"no bone named {name!r}")
        return self.names.index(name)

    def ancestors(self, bone: int) -> list[int]:
        """``bone`` and its ancestors, from it up to its tree root."""
        out = []
        while bone >= 0:
            out.append(bone)
            bone = self.parents[bone]
        return out

    @cached_property
    def memo(self) -> dict[tuple, object]:
        """What solves derive from the body alone (sub-bodies, chains), kept for the next solve of this
        body (live mode solves one body move after move): a body is immutable, and so are they."""
        return {}

    def kept(self, key: tuple, make: Callable[[], _Kept]) -> _Kept:
        """``make()``, made once for this body and kept in :attr:`memo` under ``key``."""
        value = self.memo.get(key)
        if value is None:
            value = self.memo[key] = make()
        return value  # type: ignore[return-value]  # what make() gave for this key

    def restricted(self, bones: list[int]) -> Body:
        """The body of ``bones`` alone (sorted, and holding each one's parent), renumbered in that order
        (kept in :attr:`memo`)."""
        return self.kept(("restricted", tuple(bones)), lambda: self._restricted(bones))

    def _restricted(self, bones: list[int]) -> Body:
        index = {b: i for i, b in enumerate(bones)}
        dofs = self.dofs(bones)
        return Body(names=tuple(self.names[b] for b in bones),
                    parents=tuple(-1 if self.parents[b] < 0 else index[self.parents[b]] for b in bones),
                    kinds=tuple(self.kinds[b] for b in bones), offsets=self.offsets[bones],
                    rest_rotations=self.rest_rotations[bones], tails=self.tails[bones], axes=self.axes[dofs],
                    lower=self.lower[dofs], upper=self.upper[dofs], weights=self.weights[dofs],
                    root_position=self.root_position, root_rotation=self.root_rotation)

    def chain_of(self, bones: list[int]) -> Chain:
        """The core Chain of a run of bones (each the previous one's child), hanging from an identity root:
        solved in the first bone's parent frame (kept in :attr:`memo`: the HI solver's derivations are
        kept per chain object)."""
        return self.kept(("chain", tuple(bones)), lambda: self._chain_of(bones))

    def _chain_of(self, bones: list[int]) -> Chain:
        dofs = self.dofs(bones)
        return Chain(kinds=tuple(self.kinds[b] for b in bones), offsets=self.offsets[bones],
                     rest_rotations=self.rest_rotations[bones], axes=self.axes[dofs], lower=self.lower[dofs],
                     upper=self.upper[dofs], weights=self.weights[dofs], tip_offset=self.tails[bones[-1]])


@dataclass(frozen=True, eq=False)
class BodyGoal:
    """One chain's goal per frame (world, i.e. the body's ``root_position`` / ``root_rotation`` frame's parent).

    Attributes
    ----------
    positions : ndarray, shape (N, 3)
        Where the chain's tip (its last bone's tail) should be (chain units).
    rotations : ndarray, shape (N, 3, 3), or None
        The last bone's wanted world frame (``use_rotation``); None: position only.
    weight : float
        In ``[0, 1]``: how hard the goal pulls among goals of its priority (0: ignored).
    priority : int
        Higher priorities are met first; a lower goal works in what they leave free.
    """

    positions: np.ndarray
    rotations: np.ndarray | None = None
    weight: float = 1.0
    priority: int = 0


@dataclass(frozen=True, eq=False)
class BodyChain:
    """A run of bones from ``start`` to ``tip`` (each bone the previous one's child) and its goal.

    The HI settings are read when the chain is a *limb* (nothing hangs below it: the HI solver
    poses it from its start bone's parent frame); see :func:`~..hi.solve.solve_hi` for each.

    Attributes
    ----------
    name : str
    start, tip : str or int
        First and last bone (names or indices).
    goal : BodyGoal
    preferred : ndarray, shape (chain n_dof,), or None
        HI preferred pose (joint variables); None: the reference pose's values.
    swivel : float or ndarray, shape (N,)
        HI swivel angle (radians).
    zero_plane_map : str or factory
    poles : ndarray, shape (N, 3) or (3,), or None
        Pole targets in world coordinates (turned into the chain's parent frame per frame).
    """

    name: str
    start: str | int
    tip: str | int
    goal: BodyGoal
    preferred: np.ndarray | None = None
    swivel: np.ndarray | float = 0.0
    zero_plane_map: str | ZeroPlaneMapFactory = "DEFAULT"
    poles: np.ndarray | None = None


class GoalStatus(enum.Enum):
    """How a body goal ended, per frame."""

    REACHED = "REACHED"
    """Position (and orientation, if asked) within tolerance."""
    LIMITED = "LIMITED"
    """Not reached, farther than the goal's bound: held back by a higher goal or a joint limit."""
    OUT_OF_REACH = "OUT_OF_REACH"
    """Not reached, and at its bound: no pose of the body could bring it nearer."""


@dataclass(frozen=True, eq=False)
class ChainLayout:
    """One chain checked against its body: its bones, variables and role in the solve."""

    index: int
    chain: BodyChain
    bones: tuple[int, ...]
    dofs: np.ndarray
    limb: bool
    """Nothing hangs below it and HI can pose it: solved by HI from its start's parent frame."""
    core: Chain | None
    """The limb's core Chain (identity root: its start bone's parent frame); None for a trunk chain."""


def chain_bones(body: Body, chain: BodyChain) -> tuple[int, ...]:
    """The bones of ``chain`` from start to tip; IKInputError unless the tip hangs below the start."""
    start, tip = body.bone_index(chain.start), body.bone_index(chain.tip)
    up = body.ancestors(tip)
    if start not in up:
        raise IKInputError("start", f"chain {chain.name!r}: bone {body.names[tip]!r} does not hang below "
                           f"{body.names[start]!r}")
    return tuple(reversed(up[: up.index(start) + 1]))


def lay_out(body: Body, chains: tuple[BodyChain, ...], body_root: int | None) -> tuple[ChainLayout, ...]:
    """Each chain's layout; IKInputError where two chains share a bone or a chain holds the body root."""
    runs = [chain_bones(body, c) for c in chains]
    owner: dict[int, int] = {}
    for i, run in enumerate(runs):
        for bone in run:
            if bone in owner:
                raise IKInputError("chains", f"chains {chains[owner[bone]].name!r} and {chains[i].name!r} share "
                                   f"bone {body.names[bone]!r}")
            owner[bone] = i
        if body_root is not None and body_root in run:
            raise IKInputError("body_root", f"the body root {body.names[body_root]!r} is in chain "
                               f"{chains[i].name!r}: it moves as the root, not as a joint")
    layouts = []
    for i, (c, run) in enumerate(zip(chains, runs)):
        below = any(set(run) & set(body.ancestors(other[0])) for j, other in enumerate(runs) if j != i)
        hi_capable = len(run) >= 2 and body.kinds[run[0]] is JointKind.BALL
        if c.goal.rotations is not None:
            hi_capable = hi_capable and len(run) >= 3 and body.kinds[run[-1]] is JointKind.BALL
        limb = hi_capable and not below
        layouts.append(ChainLayout(i, c, run, body.dofs(list(run)), limb, body.chain_of(list(run)) if limb else None))
    return tuple(layouts)

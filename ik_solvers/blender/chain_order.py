"""The order dependent chains are solved in: a chain after every chain that moves one of its ancestor bones.

A chain's root frame is its first bone's parent as Blender evaluates it. When that parent (or any
bone above it) belongs to another chain solved in the same run, the child must be solved after it:
before, it would read the parent chain's old pose — at a bake, keys left from an earlier bake, or
from the part of the range an earlier chunk already replaced — and its keys would depend on that
history (issue 22). After, it reads the pose the parent chain is solved to on that frame.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar, cast

if TYPE_CHECKING:
    import bpy

    from .properties import IK_SOLVERS_PG_chain

Item = TypeVar("Item")


def chain_bones(obj: bpy.types.Object, tip_bone: str, chain_length: int) -> list[str]:
    """The bones a chain's settings name now, start → tip: the tip bone and its parents, at most
    ``chain_length`` of them (none for a tip bone not found)."""
    bones = cast("bpy.types.Armature", obj.data).bones
    names: list[str] = []
    bone = bones.get(tip_bone)
    while bone is not None and len(names) < chain_length:
        names.append(bone.name)
        bone = bone.parent
    return names[::-1]


def _ancestors(obj: bpy.types.Object, bone_name: str) -> set[str]:
    bones = cast("bpy.types.Armature", obj.data).bones
    bone = bones.get(bone_name)
    parent = None if bone is None else bone.parent
    found: set[str] = set()
    while parent is not None:
        found.add(parent.name)
        parent = parent.parent
    return found


def parents_first(obj: bpy.types.Object, items: Sequence[Item], bones_of: Callable[[Item], Sequence[str]],
                  ) -> list[Item]:
    """``items`` (chains of ``obj``) reordered so that each comes after every item whose bones
    (``bones_of(item)``, start → tip) include an ancestor of its first bone; otherwise in the order
    given. Chains that share bones are refused elsewhere (``checks.check_chains_apart``); should some
    still form a cycle, the rest keep the order given."""
    bones = [set(bones_of(item)) for item in items]
    parents = []
    for index, item in enumerate(items):
        names = bones_of(item)
        above = _ancestors(obj, names[0]) if names else set()
        parents.append({other for other, other_bones in enumerate(bones) if other != index and above & other_bones})
    order: list[int] = []
    done: set[int] = set()
    while len(order) < len(items):
        waiting = [index for index in range(len(items)) if index not in done]
        ready = next((index for index in waiting if parents[index] <= done), waiting[0])
        order.append(ready)
        done.add(ready)
    return [items[index] for index in order]


def settings_parents_first(chains: Sequence[tuple[bpy.types.Object, IK_SOLVERS_PG_chain]],
                           ) -> list[tuple[bpy.types.Object, IK_SOLVERS_PG_chain]]:
    """(armature, chain settings) pairs with each armature's chains :func:`parents_first` (their bones as
    the settings name them now), the armatures in the order of their first pair."""
    ordered = []
    for obj in dict.fromkeys(obj for obj, _ in chains):
        ordered += parents_first(obj, [pair for pair in chains if pair[0] == obj],
                                 lambda pair: chain_bones(pair[0], pair[1].tip_bone, pair[1].chain_length))
    return ordered

"""Which armatures ik_batch bakes (linked and overridden rigs), and the check of what it saved (issue 10).

A linked armature (``obj.library`` set) cannot be edited: keys written to it are not saved. When a
library override of it is in the file, the override is what the user animates and the linked
original is hidden behind it: a default run bakes the override and skips the original. ``--chain``
names an armature by its name (a local armature or an override) or by Blender's full name
``NAME [LIBRARY]`` (``Rig [rig.blend]``, the name Blender's outliner shows for a linked ID); a
non-editable armature chosen either way is refused with how to make an override, and so is one that
plays a linked Action (the keys would be written into it and lost on saving), before any work; a
file whose library is missing is refused naming it (its linked rigs would be empty placeholders).

The functions take bpy objects; this module does not import bpy.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from _cli import UsageError

KEY_TIME_TOLERANCE = 1e-3
"""Frames: a key time read back from a file matches the frame it was written at to this (float32 time
at frames up to ~1e4 is exact to ~1e-3)."""
ROTATION_CHANNELS = {"QUATERNION": ("rotation_quaternion", 4), "AXIS_ANGLE": ("rotation_axis_angle", 4)}
"""A pose bone's rotation mode → its rotation F-curves' property and count (any other mode: Euler, 3)."""


class RigError(Exception):
    """An armature or chain that cannot be baked, or saved keys missing (one line, exit 2)."""


@dataclass(frozen=True)
class ChainSelector:
    """``--chain [ARMATURE:]NAME`` as given (``text``, ``given``). Which armature and chain it names is decided
    against the file's armatures (``select_chains``), since armature and chain names may contain
    ``:`` and brackets:

    - ``ARMATURE:NAME``, split at a ``:`` whose left part names an armature in the file that has a
      chain named by the right part (each ``:`` is tried, the last first). ARMATURE is a local armature
      or an override by its name (``Rig [v2]`` too), or a linked one by Blender's full name
      ``NAME [LIBRARY]``.
    - otherwise the whole text is a chain name, on whichever armature has it (``Left:Arm``);
    - ``:NAME`` (an empty armature part): NAME as it is, on any armature, never split.

    ``armature``, ``chain`` and ``library`` are the reading at the last ``:``, for display."""

    armature: str | None
    chain: str
    library: str | None = None
    text: str = ""

    @classmethod
    def parse(cls, text: str) -> ChainSelector:
        armature, sep, chain = ("", "", text[1:]) if text.startswith(":") else text.rpartition(":")
        if not chain:
            raise UsageError(f"--chain {text!r}: empty chain name")
        library = None
        if armature.endswith("]") and "[" in armature:
            name, _, inside = armature[:-1].rpartition("[")
            if name.strip() and inside.strip():
                armature, library = name.rstrip(), inside.strip()
        return cls(armature or None, chain, library, text)

    @property
    def given(self) -> str:
        """The text as given to ``--chain``."""
        return self.text or str(self)

    def qualified_readings(self) -> list[tuple[str, str]]:
        """(armature part, chain name) at every ``:`` of the text, the last first (none for ``:NAME``)."""
        text = self.given
        if text.startswith(":"):
            return []
        return [(text[:i], text[i + 1:]) for i in range(len(text) - 1, 0, -1) if text[i] == ":" and text[i + 1:]]

    def whole_chain_name(self) -> str:
        """The chain name when no armature part names an armature: the whole text (without a leading ``:``)."""
        return self.given[1:] if self.given.startswith(":") else self.given

    def __str__(self) -> str:
        armature = f"{self.armature} [{self.library}]" if self.library else self.armature
        return f"{armature}:{self.chain}" if armature else f":{self.chain}" if self.text.startswith(":") else self.chain


def names_armature(part: str, obj: Any) -> bool:
    """Whether ``part`` of a ``--chain`` names ``obj``: its name for a local armature or an override,
    Blender's full name ``NAME [LIBRARY]`` (spaces around the brackets optional) for a linked one."""
    if obj.library is None:
        return bool(obj.name == part)
    name, bracket, library = part[:-1].rpartition("[") if part.endswith("]") else ("", "", "")
    return bool(bracket) and obj.name == name.rstrip() and obj.library.name == library.strip()


def full_name(obj: Any) -> str:
    """``Rig``, or ``Rig [rig.blend]`` for a linked object (Blender's ``name_full``)."""
    return f"{obj.name} [{obj.library.name}]" if obj.library is not None else obj.name


def overridden_originals(objects: Iterable[Any]) -> set[int]:
    """``as_pointer()`` of the linked objects some library override in the file stands for."""
    hidden = set()
    for obj in objects:
        override = obj.override_library
        if override is not None and override.reference is not None:
            hidden.add(override.reference.as_pointer())
    return hidden


def refusal(obj: Any) -> str | None:
    """Why ``obj``'s keys cannot be baked (None: it can): a linked or non-editable armature, or one
    whose Action is linked (the bake would key that Action, and nothing of it is saved)."""
    if obj.library is not None and obj.override_library is None:
        return (f"armature '{full_name(obj)}' is linked from {obj.library.filepath} and cannot be keyed; "
                "make a library override (Object > Library Override > Make) and bake that")
    if not getattr(obj, "is_editable", True):
        return (f"armature '{full_name(obj)}' is a non-editable library override; make it editable "
                "(Object > Library Override > Make Editable) and bake that")
    action = obj.animation_data.action if obj.animation_data is not None else None
    if action is not None and (action.library is not None or not getattr(action, "is_editable", True)):
        where = f" linked from {action.library.filepath}" if action.library is not None else " not editable"
        return (f"armature '{full_name(obj)}' plays the Action '{action.name}'{where}, whose keys cannot be "
                "changed or saved; make the Action local (Outliner in Blender File view: right-click the Action > "
                "Make Local) or give the armature a local Action, and bake that")
    return None


def check_libraries(libraries: Iterable[Any], abspath: Callable[[Any], str]) -> None:
    """RigError naming the first library of the open file that Blender could not find (``is_missing``),
    whose linked data are then empty placeholders (an armature without bones, a chain without its
    target). ``abspath(library)``: the library's absolute path."""
    missing = [library for library in libraries if library.is_missing]
    if missing:
        more = f" (and {len(missing) - 1} more libraries)" if len(missing) > 1 else ""
        raise RigError(f"the library {missing[0].filepath} is missing ({abspath(missing[0])}){more}: what the file "
                       "links from it could not be loaded; put the file back or relocate the library (Outliner in "
                       "Blender File view: right-click it > Relocate)")


def select_chains(objects: Sequence[Any], selectors: Sequence[ChainSelector]) -> list[tuple[Any, Any]]:
    """(armature object, chain settings) pairs to bake, in file order; RigError for a missing or
    ambiguous chain, a refused armature or a chain without a target."""
    armatures = [obj for obj in objects if obj.type == "ARMATURE"]
    hidden = overridden_originals(armatures)
    if not selectors:
        found = [(obj, chain) for obj in armatures if obj.as_pointer() not in hidden
                 for chain in obj.ik_solvers.chains if chain.enabled]
        if not found:
            raise RigError("the file has no enabled IK chain")
        selected = found
    else:
        selected = [select_one(armatures, hidden, selector) for selector in selectors]
    for obj, chain in selected:
        reason = refusal(obj)
        if reason is not None:
            raise RigError(f"chain '{full_name(obj)}:{chain.name}': {reason}")
        if chain.target is None:
            raise RigError(f"chain '{full_name(obj)}:{chain.name}' has no target")
    return selected


def select_one(armatures: Sequence[Any], hidden: set[int], selector: ChainSelector) -> tuple[Any, Any]:
    """The (armature object, chain settings) ``selector`` names (``ChainSelector``); RigError if none
    or several. ``hidden``: the linked originals behind overrides, skipped when no armature is named."""
    matches, named = [], None
    for part, name in selector.qualified_readings():
        objs = [obj for obj in armatures if names_armature(part, obj)]
        named = named or (part if objs else None)
        matches += [(obj, chain) for obj in objs for chain in obj.ik_solvers.chains if chain.name == name]
    if not matches:
        whole = selector.whole_chain_name()
        matches = [(obj, chain) for obj in armatures for chain in obj.ik_solvers.chains if chain.name == whole]
        if len(matches) > 1:  # the override, not the original behind it
            matches = [(obj, chain) for obj, chain in matches if obj.as_pointer() not in hidden]
    if not matches:
        if named is not None:
            raise RigError(f"armature '{named}' has no IK chain '{selector.given[len(named) + 1:]}'")
        raise RigError(f"no IK chain '{selector}'")
    if len(matches) > 1:
        names = ", ".join(f"'{full_name(obj)}:{chain.name}'" for obj, chain in matches)
        raise RigError(f"chain '{selector}' is on several armatures ({names}); name one of them "
                       "(ARMATURE:NAME, or :NAME for a chain name with ':' on any armature)")
    return matches[0]


@dataclass(frozen=True)
class BakedChain:
    """What one chain's bake must have left in the saved file: a key at exactly ``frames`` in their range."""

    armature: str
    """The armature's full name (``Rig`` or ``Rig [rig.blend]``)."""
    chain: str
    bones: tuple[str, ...]
    frames: tuple[float, ...]
    """The frames the keys were written at: the action's own time (``BakeJob.key_frames``), which in NLA
    tweak mode is not the scene's and need not be whole; with reduced keys only the kept ones."""


def _keyed_at(keyed: list[float], frame: float) -> bool:
    """Whether the sorted key times ``keyed`` hold ``frame`` (to Blender's float32 storage of key times)."""
    index = bisect.bisect_left(keyed, frame - KEY_TIME_TOLERANCE)
    return index < len(keyed) and keyed[index] <= frame + KEY_TIME_TOLERANCE


def missing_keys(objects: Iterable[Any], baked: BakedChain, channelbag_of) -> str | None:
    """What is missing of ``baked``'s rotation keys among ``objects`` (a re-opened file); None: all there.

    ``channelbag_of(anim_data)`` is the add-on's ``compat.channelbag_for_assigned_slot``.
    """
    obj = next((o for o in objects if full_name(o) == baked.armature and o.type == "ARMATURE"), None)
    if obj is None:
        return f"armature '{baked.armature}' is not in the saved file"
    channelbag = channelbag_of(obj.animation_data)
    if channelbag is None:
        return f"'{baked.armature}:{baked.chain}' has no action in the saved file"
    curves = {(fcurve.data_path, fcurve.array_index): fcurve for fcurve in channelbag.fcurves}
    for bone in baked.bones:
        pose_bone = obj.pose.bones.get(bone)
        if pose_bone is None:
            return f"armature '{baked.armature}' has no bone '{bone}' in the saved file"
        path, count = ROTATION_CHANNELS.get(pose_bone.rotation_mode, ("rotation_euler", 3))
        for index in range(count):
            fcurve = curves.get((f'pose.bones["{bone}"].{path}', index))
            if fcurve is None:
                return (f"'{baked.armature}:{baked.chain}' has no rotation keys on bone '{bone}' "
                        f"({path}[{index}]) in the saved file")
            keyed = sorted(point.co[0] for point in fcurve.keyframe_points)
            absent = [frame for frame in baked.frames if not _keyed_at(keyed, frame)]
            if absent:
                return (f"'{baked.armature}:{baked.chain}' bone '{bone}' lacks keys on {len(absent)} baked frames "
                        f"(first {absent[0]:g}) in the saved file")
            first, last = baked.frames[0] - KEY_TIME_TOLERANCE, baked.frames[-1] + KEY_TIME_TOLERANCE
            inside = [t for t in keyed if first <= t <= last]
            if len(inside) > len(baked.frames):  # all found: the others are keys the bake did not write
                return (f"'{baked.armature}:{baked.chain}' bone '{bone}' has {len(inside) - len(baked.frames)} keys "
                        f"in the baked range that the bake did not write in the saved file")
    return None

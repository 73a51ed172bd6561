"""Chain identity (issue 10): a chain remembers its bones, so a renamed bone is followed and a
changed hierarchy (a bone deleted, one re-parented) is refused instead of silently re-targeted.

What is remembered: the bone names start → tip on the chain's settings (``chain_bones``, JSON) and,
where the armature data can be saved, a tag on each Bone: ``bone["ik_solvers_chains"][chain_id] =
index in the chain``. Names alone follow nothing but still tell a changed hierarchy; tags follow
renames. A chain whose tip bone or length the user has set since is a new chain: it is remembered
again the next time it is set up, captured, solved or baked.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

from .errors import IKSolversError

if TYPE_CHECKING:
    import bpy

    from .properties import IK_SOLVERS_PG_chain

TAG = "ik_solvers_chains"
"""Bone ID property: a group ``{chain_id: index in the chain (start = 0)}``."""


def remembered(chain_settings: IK_SOLVERS_PG_chain) -> list[str] | None:
    """The bones the chain remembers, start → tip, if they still describe its settings (else None)."""
    try:
        names = json.loads(chain_settings.chain_bones) if chain_settings.chain_bones else None
    except ValueError:
        return None
    if not names or not chain_settings.chain_id or len(names) != chain_settings.chain_length:
        return None
    return names


def _tag(bone: bpy.types.Bone, chain_id: str) -> int | None:
    tags = bone.get(TAG)
    if tags is None or chain_id not in tags:
        return None
    return int(tags[chain_id])


def _tagged(obj: bpy.types.Object, chain_id: str, index: int) -> bpy.types.Bone | None:
    found = [bone for bone in _armature(obj).bones if _tag(bone, chain_id) == index]
    return found[0] if len(found) == 1 else None


def _armature(obj: bpy.types.Object) -> bpy.types.Armature:
    return cast("bpy.types.Armature", obj.data)  # obj is the chain's armature


def _data_savable(obj: bpy.types.Object) -> bool:
    armature = _armature(obj)
    return armature.library is None and armature.is_editable


def remember(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, bone_names: Sequence[str]) -> None:
    """Remember ``bone_names`` (start → tip) as the chain's bones; writes only what changed."""
    if not chain_settings.chain_id:
        chain_settings.chain_id = uuid.uuid4().hex
    value = json.dumps(list(bone_names))
    if chain_settings.chain_bones != value:
        chain_settings.chain_bones = value
    if not _data_savable(obj):
        return  # a linked armature's bones keep no tags: names only
    chain_id = chain_settings.chain_id
    for bone in _armature(obj).bones:
        index = _tag(bone, chain_id)
        wanted = bone_names.index(bone.name) if bone.name in bone_names else None
        if index == wanted:
            continue
        if wanted is None:
            del bone[TAG][chain_id]
        else:
            if bone.get(TAG) is None:
                bone[TAG] = {}
            bone[TAG][chain_id] = wanted


def _rename(chain_settings: IK_SOLVERS_PG_chain, renamed: dict[str, str], names: list[str]) -> None:
    """Carry renamed bones into the settings: remembered names, preferred-pose items, tip bone (last:
    its update sets a chain whose bones changed up again, which a rename is not)."""
    chain_settings.chain_bones = json.dumps([renamed.get(name, name) for name in names])
    for item in chain_settings.preferred_pose:
        if item.bone_name in renamed:
            item.bone_name = renamed[item.bone_name]
    if chain_settings.tip_bone in renamed:
        chain_settings.tip_bone = renamed[chain_settings.tip_bone]


def follow_renamed_tip(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain) -> None:
    """A tip bone renamed since the chain remembered it: point the chain at its new name."""
    if _armature(obj).bones.get(chain_settings.tip_bone) is not None:
        return  # the usual case, and the cheapest test (live mode asks at every update)
    names = remembered(chain_settings)
    if names is None or names[-1] != chain_settings.tip_bone:
        return
    renamed = {}
    for index, old in enumerate(names):
        bone = _tagged(obj, chain_settings.chain_id, index)
        if bone is not None and bone.name != old:
            renamed[old] = bone.name
    if names[-1] in renamed:
        _rename(chain_settings, renamed, names)


def check_bones(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, bone_names: Sequence[str]) -> None:
    """IKSolversError naming what changed when the bones read from the tip bone up are not the ones
    the chain remembers; bones renamed since are carried into the settings."""
    names = remembered(chain_settings)
    if names is None or names[-1] != chain_settings.tip_bone:
        return  # not remembered, or the user picked another tip bone / length since
    chain_id = chain_settings.chain_id
    bones = _armature(obj).bones
    mismatch = None
    for index in range(len(bone_names) - 1, -1, -1):
        tag = _tag(bones[bone_names[index]], chain_id)
        if not (tag == index if tag is not None else bone_names[index] == names[index]):
            mismatch = index
            break
    if mismatch is None:
        if list(bone_names) != names:
            _rename(chain_settings, {old: new for old, new in zip(names, bone_names) if old != new}, names)
        return
    old = names[mismatch]
    still_there = bones.get(old) is not None or _tagged(obj, chain_id, mismatch) is not None
    if not still_there:
        what = f"bone '{old}' was deleted"
    elif mismatch + 1 < len(bone_names):
        what = f"bone '{bone_names[mismatch + 1]}' now has parent '{bone_names[mismatch]}' instead of '{old}'"
    else:
        what = f"bone '{bone_names[mismatch]}' is not the tip bone '{old}' it had"
    raise IKSolversError(
        f"the chain's bones changed ({what}): it would now run {' → '.join(bone_names)} instead of "
        f"{' → '.join(names)}; set its tip bone and length again.")

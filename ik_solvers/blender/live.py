"""Live mode: re-solve the chains marked Live whenever their inputs move or the frame changes.

Two handlers drive it: ``frame_change_post`` re-solves every live chain (the frame change may have
reset keyed bones), ``depsgraph_update_post`` re-solves a live chain only when what it reads changed
(target, pole, root frame, swivel, settings). Our own pose writes trigger depsgraph updates too;
they change none of those inputs, so they never cause another solve, and a busy flag keeps a
handler that fires while we are writing from re-entering. The handlers are persistent (they
outlive a file load) and hold no reference to scene data across a load: ``load_pre`` forgets
everything and pauses live mode until ``load_post``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import bpy
import numpy as np
from bpy.app.handlers import persistent

from . import solving
from .operators import ActiveChainPoll
from .rig import RigError, read_chain, write_pose

SOLVE_SETTINGS = (
    "tip_bone", "chain_length", "method", "max_iterations", "tolerance", "step", "damping", "max_step_angle",
    "swivel_angle", "zero_plane_map", "parent_space", "has_preferred_pose",
)
"""Chain settings whose change re-solves a live chain."""


@dataclass
class LiveState:
    """Live mode's memory between handler calls (no Blender data: it must survive a file load).

    Attributes
    ----------
    signatures : dict
        (armature ``session_uid``, chain name) → bytes of the inputs of its last live solve.
    rigs : dict
        Same keys → (bytes of everything the rig reader reads, the chain read then, posed as written).
    busy : bool
        Set while live mode itself writes, so handlers fired by those writes return at once.
    loading : bool
        Between ``load_pre`` and ``load_post``.
    paused : int
        Nesting depth of :func:`paused` (a bake stepping through frames).
    solves : int
        Chain solves run by live mode since registration (read by tests and the benchmark).
    """

    signatures: dict = field(default_factory=dict)
    rigs: dict = field(default_factory=dict)
    busy: bool = False
    loading: bool = False
    paused: int = 0
    solves: int = 0

    def reset(self) -> None:
        self.signatures.clear()
        self.rigs.clear()
        self.busy = False
        self.loading = False
        self.paused = 0


state = LiveState()


@contextmanager
def paused() -> Iterator[None]:
    """Live mode holds still inside this block: a bake stepping through frames must read the
    scene as its keys make it, not re-solve (and rewrite) live chains at every frame."""
    state.paused += 1
    try:
        yield
    finally:
        state.paused = max(state.paused - 1, 0)


def _inputs_signature(chain, inputs: solving.FrameInputs) -> bytes:
    arrays = (inputs.target_world, inputs.root_world, inputs.pole_world, inputs.target_parent_world)
    settings = repr(tuple(getattr(chain, name) for name in SOLVE_SETTINGS)).encode()
    return b"".join(np.ascontiguousarray(a, dtype=float).tobytes() for a in arrays if a is not None) + settings


POSE_BONE_PROPS = (
    ("location", 3), ("scale", 3), ("rotation_quaternion", 4), ("rotation_euler", 3), ("rotation_axis_angle", 4),
    ("rotation_mode", 1), ("lock_ik_x", 1), ("lock_ik_y", 1), ("lock_ik_z", 1), ("use_ik_limit_x", 1),
    ("use_ik_limit_y", 1), ("use_ik_limit_z", 1), ("ik_min_x", 1), ("ik_min_y", 1), ("ik_min_z", 1), ("ik_max_x", 1),
    ("ik_max_y", 1), ("ik_max_z", 1), ("ik_stiffness_x", 1), ("ik_stiffness_y", 1), ("ik_stiffness_z", 1),
)
BONE_PROPS = (("matrix_local", 16), ("length", 1), ("use_connect", 1), ("use_inherit_rotation", 1),
              ("use_local_location", 1))


def _rig_inputs(obj, chain) -> bytes:
    """Every armature value the rig reader can depend on, for all bones at once (bulk reads).

    Reading the chain costs several times more than this; a live chain whose bones, pose and IK
    settings are as we left them reuses the chain read before.
    """
    parts = [repr((chain.tip_bone, chain.chain_length)).encode()]
    for collection, props in ((obj.pose.bones, POSE_BONE_PROPS), (obj.data.bones, BONE_PROPS)):
        count = len(collection)
        for name, width in props:
            values = np.empty(count * width, dtype=np.float64)
            collection.foreach_get(name, values)
            parts.append(values.tobytes())
    bone = obj.data.bones.get(chain.tip_bone)
    while bone is not None:  # the hierarchy above the tip
        parts.append(bone.name.encode())
        bone = bone.parent
    return b"\0".join(parts)


def _read_rig(obj, chain, key):
    cached = state.rigs.get(key)
    shape = _rig_inputs(obj, chain)
    if cached is not None and cached[0] == shape:
        return cached[1]
    return read_chain(obj, chain.tip_bone, chain.chain_length)


def _set_outcome(chain, status: str, message: str, outcome=None, prepared=None) -> None:
    """Store a live solve's outcome on the chain, writing only what changed (each write is an update).

    HI chains also get the pole distance, so the panel's flip warning follows the live pose.
    """
    values = {"last_status": status, "last_message": message}
    if outcome is not None:
        result = outcome.result
        error, lower_bound = solving.world_errors(prepared, result)
        values.update(last_error=float(error[0]), last_lower_bound=float(lower_bound[0]),
                      last_iterations=int(result.iterations[0]))
        if outcome.hi is not None:
            values["last_pole_distance"] = float(outcome.hi.pole_angles[0])
    for name, value in values.items():
        if getattr(chain, name) != value:
            setattr(chain, name, value)


def live_chains(scene) -> list[tuple[bpy.types.Object, list]]:
    """Armatures of ``scene`` with their chains marked Live, in list order."""
    found = []
    for obj in scene.objects:
        if obj.type != "ARMATURE" or obj.mode == "EDIT":
            continue
        chains = [chain for chain in obj.ik_solvers.chains if chain.use_live]
        if chains:
            found.append((obj, chains))
    return found


def update_live_chains(scene, depsgraph, *, force: bool) -> int:
    """Re-solve the live chains whose inputs changed since their last live solve (all if ``force``).

    Returns how many chains were solved. A chain that cannot be solved (no target, a bone gone)
    keeps its pose and shows the reason in its status; nothing is raised into Blender's handler loop.
    """
    if state.busy or state.loading or state.paused:
        return 0
    state.busy = True
    solved = 0
    try:
        for obj, chains in live_chains(scene):
            for chain in chains:
                key = (obj.session_uid, chain.name)
                try:
                    rig = _read_rig(obj, chain, key)
                    inputs = solving.sample_inputs(obj, chain, rig, depsgraph)
                    signature = _inputs_signature(chain, inputs)
                    if not force and state.signatures.get(key) == signature:
                        continue
                    prepared = solving.prepare_solve(obj, chain, inputs, rig=rig)
                    outcome = solving.run_solve_full(prepared)
                    result = outcome.result
                    write_pose(obj, rig, result.q[0])
                except RigError as error:
                    state.signatures.pop(key, None)
                    state.rigs.pop(key, None)
                    _set_outcome(chain, "ERROR", str(error))
                    continue
                state.signatures[key] = signature
                state.rigs[key] = (_rig_inputs(obj, chain), replace(rig, q=result.q[0].copy()))
                state.solves += 1
                solved += 1
                _set_outcome(chain, result.status[0].value, "", outcome, prepared)
    finally:
        state.busy = False
    return solved


# --------------------------------------------------------------------------- handlers
@persistent
def on_frame_change(scene, depsgraph=None) -> None:
    update_live_chains(scene, depsgraph, force=True)


@persistent
def on_depsgraph_update(scene, depsgraph) -> None:
    if state.busy or state.loading or state.paused:
        return
    moved = any(update.is_updated_transform and isinstance(update.id, bpy.types.Object)
                for update in depsgraph.updates)
    settings_changed = any(isinstance(update.id, bpy.types.Object) and update.id.type == "ARMATURE"
                           for update in depsgraph.updates)
    if moved or settings_changed:
        update_live_chains(scene, depsgraph, force=False)


@persistent
def on_load_pre(*_args) -> None:
    state.reset()
    state.loading = True


@persistent
def on_load_post(*_args) -> None:
    state.loading = False


HANDLERS = (
    ("frame_change_post", on_frame_change),
    ("depsgraph_update_post", on_depsgraph_update),
    ("load_pre", on_load_pre),
    ("load_post", on_load_post),
    ("load_post_fail", on_load_post),
)


# --------------------------------------------------------------------------- operator
class IK_SOLVERS_OT_live_toggle(ActiveChainPoll, bpy.types.Operator):
    """Turn live mode on or off for the active chain: re-solve whenever its target moves or the frame changes"""

    bl_idname = "ik_solvers.live_toggle"
    bl_label = "Toggle Live IK"
    bl_options = {"REGISTER", "UNDO"}


    def execute(self, context):
        chain = context.object.ik_solvers.active_chain
        if chain.use_live:
            chain.use_live = False
            state.signatures.pop((context.object.session_uid, chain.name), None)
            self.report({"INFO"}, f"Live IK off for '{chain.name}'.")
            return {"FINISHED"}
        try:
            rig = read_chain(context.object, chain.tip_bone, chain.chain_length)
            solving.prepare_solve(context.object, chain, rig=rig)  # refuse a chain that cannot solve now
        except RigError as error:
            self.report({"ERROR"}, str(error))
            return {"CANCELLED"}
        chain.use_live = True
        update_live_chains(context.scene, context.evaluated_depsgraph_get(), force=True)
        self.report({"INFO"}, f"Live IK on for '{chain.name}'.")
        return {"FINISHED"}


classes = (IK_SOLVERS_OT_live_toggle,)


def register() -> None:
    for cls in classes:
        bpy.utils.register_class(cls)
    state.reset()
    for name, handler in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if handler not in handlers:
            handlers.append(handler)


def unregister() -> None:
    for name, handler in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while handler in handlers:
            handlers.remove(handler)
    state.reset()
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)

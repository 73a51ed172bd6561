"""Live mode: re-solve the chains marked Live whenever their inputs move or the frame changes.

Two handlers drive it: ``frame_change_post`` re-solves every live chain (the frame change may have
reset keyed bones), ``depsgraph_update_post`` re-solves a live chain only when what it reads changed
(target, pole, root frame, swivel, the chain's spec). Our own pose writes trigger depsgraph updates too;
they change none of those inputs, so they never cause another solve, and a busy flag keeps a
handler that fires while we are writing from re-entering.

An update that reads and checks the whole armature (:func:`update_live_chains`) runs at a frame
change, whenever an armature is among the updated data, and after anything that forgets the quick
path (a setting a solve reads, live mode toggled, an undo, a bake). When only other objects moved
(the animator dragging a target) the chains it checked are re-solved by the quick path
(``live_quick``): the same checks of the target, the same inputs, and the core's one-target HI
solve, which has the batch solve's bits (docs/performance.md has what it costs).

The handlers are persistent (they outlive a file load) and hold no reference to scene data across
a load: ``load_pre`` forgets everything and pauses live mode until ``load_post``. What live mode
keeps between calls is in ``live_state``.
"""

from __future__ import annotations

import operator
from dataclasses import replace

import bpy
import numpy as np
from bpy.app.handlers import persistent

from .chains import store_solve_outcome
from .checks import check_editable, check_target_independent, constraint_limits_hold
from .errors import IKSolversError, failure_sentence
from .identity import check_bones, follow_renamed_tip
from .live_quick import offer_quick, quick_update
from .live_state import after_write, forget_quick, inputs_signature, rig_values, state, turn_off
from .rig import read_chain, write_pose
from .sampling import sample_inputs
from .solving import prepare_solve, run_solve
from .spec import chain_spec


def _read_rig(obj, chain, key, rig_key: bytes):
    cached = state.rigs.get(key)
    if cached is not None and cached[0] == rig_key:
        return cached[1]
    try:
        return read_chain(obj, chain.tip_bone, chain.chain_length)
    except IKSolversError as error:
        raise error.about(chain.name) from None


SPEC_SETTINGS = ("name", "tip_bone", "chain_length", "method", "max_iterations", "tolerance", "max_step_angle",
                 "step", "damping", "reference_weight", "has_preferred_pose", "swivel_angle", "zero_plane_map",
                 "parent_space", "flip_threshold")
"""The chain settings ``spec.chain_spec`` reads (with the target, pole and preferred pose)."""
_spec_settings = operator.attrgetter(*SPEC_SETTINGS)


def _spec_key(obj, chain, rig) -> tuple:
    """Everything ``chain_spec`` builds the spec from besides what it re-checks on every update
    (:func:`_live_spec`): the chain read and the armature's scale, then the chain's settings
    (:func:`_settings_key`)."""
    return ((id(rig.chain), rig.joint_bones, rig.bone_names, rig.parent_bone,
             np.array(obj.matrix_world, dtype=float).tobytes()), _settings_key(chain))


def _settings_key(chain) -> tuple:
    """The chain's settings, target, pole and preferred pose as ``chain_spec`` reads them."""
    preferred = chain.preferred_pose
    rotations = np.empty(4 * len(preferred), dtype=np.float64)
    preferred.foreach_get("rotation", rotations)
    target, pole = chain.target, chain.pole_target
    return (chain.path_from_id(), *_spec_settings(chain),
            None if target is None else target.session_uid, None if pole is None else pole.session_uid,
            tuple(item.bone_name for item in preferred), rotations.tobytes())


def _live_spec(obj, chain, rig, key):
    """``chain_spec(obj, chain, rig)``, built again only when what it is built from changed.

    The checks of the scene around the chain (editable armature, the chain's bones, Limit Rotation
    limits, a target independent of the chain) run on every update as ``chain_spec`` runs them; the
    rest (method, options, the preferred pose's joint variables, the armature's scale) is a function
    of :func:`_spec_key`, so the spec kept is the one ``chain_spec`` would build, with this ``rig``.
    """
    cached = state.specs.get(key)
    if cached is None or chain.target is None or cached[0] != _spec_key(obj, chain, rig):
        spec = chain_spec(obj, chain, rig)
        state.specs[key] = (_spec_key(obj, chain, spec.rig), spec, spec.signature())
        return spec
    try:
        check_editable(obj)
        if not constraint_limits_hold(obj, rig):
            state.specs.pop(key, None)
            return _live_spec(obj, chain, rig, key)  # chain_spec reads the chain again
        check_bones(obj, chain, rig.bone_names)
        for what, point in (("the target", chain.target), ("the pole target", chain.pole_target)):
            check_target_independent(obj, rig.bone_names[0], point, what)
    except IKSolversError as error:
        raise error.about(chain.name) from None
    spec = cached[1]
    return spec if spec.rig is rig else replace(spec, rig=rig)



def live_chains(scene) -> list[tuple[bpy.types.Object, list]]:
    """Armatures of ``scene`` with their chains marked Live, in list order."""
    found = []
    for obj in scene.objects:
        if obj.type != "ARMATURE" or obj.mode == "EDIT":
            continue
        chains = [chain for chain in obj.ik_solvers.chains if chain.use_live]
        for chain in chains:
            follow_renamed_tip(obj, chain)  # before the rig is read by the (old) tip bone's name
        if chains:
            found.append((obj, chains))
    return found


def update_live_chains(scene, depsgraph, *, force: bool) -> int:
    """Re-solve the live chains whose inputs changed since their last live solve (all if ``force``).

    Returns how many chains were solved. A chain that cannot be solved (no target, a bone gone, a
    solver failure) keeps its pose, turns live mode off and shows the reason in its status
    (``live_state.turn_off``); nothing is raised into Blender's handler loop. Every chain is
    checked in full; what the checks found is offered to the next target moves
    (``live_quick.quick_update``).
    """
    if state.busy or state.loading or state.paused:
        return 0
    state.busy = True
    forget_quick()
    solved, every_chain_quick = 0, True
    try:
        for obj, chains in live_chains(scene):
            checked = []
            for chain in chains:
                key = (obj.session_uid, chain.name)
                try:
                    rig_read = rig_values(obj, chain, key)
                    spec = _live_spec(obj, chain, _read_rig(obj, chain, key, rig_read.key()), key)
                    inputs = sample_inputs(obj, spec, depsgraph=depsgraph)
                    signature = inputs_signature(state.specs[key][2], inputs)
                    if not force and state.signatures.get(key) == signature:
                        checked.append((key, spec, inputs))
                        continue
                    prepared = prepare_solve(spec, inputs)
                    result = run_solve(prepared)
                    written = write_pose(obj, spec.rig, result.q[0])
                except Exception as error:  # never into Blender's handler loop
                    turn_off(obj, chain, error)
                    continue
                state.signatures[key] = signature
                # The chain as read (its q the pose at read time; nothing in a live solve reads q): the
                # same object as the spec's, so the next update reuses the spec without a copy.
                state.rigs[key] = (after_write(obj, rig_read, written), spec.rig)
                solved += 1
                store_solve_outcome(chain, result.status[0].value, "", result, prepared)
                checked.append((key, spec, inputs))
            every_chain_quick &= offer_quick(obj, checked)
    finally:
        state.busy = False
    if every_chain_quick and state.quick and depsgraph is not None:
        state.quick_scene = scene.session_uid
    return solved



def _guarded(update) -> None:
    """Run a handler's work; anything escaping the per-chain guard turns every live chain off
    with the reason, printed once (never a traceback at every frame change)."""
    try:
        update()
    except Exception as error:  # never into Blender's handler loop
        state.busy = False
        print(f"IK Solvers: live mode turned off: {failure_sentence(error)}")
        for scene in bpy.data.scenes:
            try:
                for obj, chains in live_chains(scene):
                    for chain in chains:
                        turn_off(obj, chain, error)
            except Exception:  # a scene we cannot read has nothing live
                continue


# --------------------------------------------------------------------------- handlers
@persistent
def on_frame_change(scene, depsgraph=None) -> None:
    _guarded(lambda: update_live_chains(scene, depsgraph, force=True))


@persistent
def on_depsgraph_update(scene, depsgraph) -> None:
    _guarded(lambda: _on_depsgraph_update(scene, depsgraph))


def _on_depsgraph_update(scene, depsgraph) -> None:
    if state.busy or state.loading or state.paused:
        return
    # One pass over the updates: an object moved, or an armature changed (its settings or pose).
    moved, only_objects_moved = False, True
    for update in depsgraph.updates:
        data = update.id
        if not isinstance(data, bpy.types.Object):
            only_objects_moved = False
        elif data.type == "ARMATURE":
            moved, only_objects_moved = True, False
            break
        elif update.is_updated_transform:
            moved = True
    if not only_objects_moved:
        # The scene, a collection, an action … changed: what the last full update found (which
        # armatures are in the scene, what moves them) may not hold any more.
        forget_quick()
    if moved and not (only_objects_moved and quick_update(scene, depsgraph)):
        update_live_chains(scene, depsgraph, force=False)


@persistent
def on_load_pre(*_args) -> None:
    state.reset()
    state.loading = True


@persistent
def on_load_post(*_args) -> None:
    state.loading = False


@persistent
def on_undo_redo(*_args) -> None:
    forget_quick()


HANDLERS = (
    ("frame_change_post", on_frame_change),
    ("depsgraph_update_post", on_depsgraph_update),
    ("load_pre", on_load_pre),
    ("load_post", on_load_post),
    ("load_post_fail", on_load_post),
    ("undo_pre", on_undo_redo),
    ("redo_pre", on_undo_redo),
)


def register() -> None:
    """Add live mode's handlers (its operator registers with the other operators)."""
    state.reset()
    for name, handler in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if handler not in handlers:
            handlers.append(handler)


def unregister() -> None:
    """Remove live mode's handlers."""
    for name, handler in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while handler in handlers:
            handlers.remove(handler)
    state.reset()

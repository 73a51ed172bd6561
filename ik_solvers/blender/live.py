"""Live mode: re-solve the chains marked Live whenever their inputs move or the frame changes.

Two handlers drive it: ``frame_change_post`` re-solves every live chain (the frame change may have
reset keyed bones), ``depsgraph_update_post`` re-solves a live chain only when what it reads changed
(target, pole, root frame, swivel, the chain's spec: a setting of ``properties.SOLVE_SETTINGS`` changed
changes the spec's ``source``). Our own pose writes trigger depsgraph updates too;
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

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import bpy
from bpy.app.handlers import persistent

from . import interrupts, live_check, properties
from .body import solves_together
from .body_live import forget_bodies, update_live_body
from .chains import store_solve_outcome
from .checks import ChainBones, check_chains_apart
from .errors import chain_context, failure_sentence
from .identity import follow_renamed_tip
from .live_check import check_chain, note_chain_write
from .live_quick import offer_quick, quick_update
from .live_state import (
    ChainKey,
    LiveChain,
    after_write,
    forget_quick,
    inputs_key,
    kept_fk_pose,
    rig_values,
    state,
    turn_off,
)
from .rig import write_pose
from .sampling import FrameInputs, sample_inputs
from .solving import prepare_solve, run_solve
from .spec import ChainSpec, chain_spec

if TYPE_CHECKING:
    from .properties import IK_SOLVERS_PG_chain


def live_chains(scene: bpy.types.Scene) -> list[tuple[bpy.types.Object, list[Any]]]:
    """Armatures of ``scene`` with their chains marked Live, in list order."""
    found = []
    for obj in scene.objects:
        if obj.type != "ARMATURE" or obj.mode == "EDIT":
            continue
        chains = [chain for chain in obj.ik_solvers.chains if chain.use_live]  # type: ignore[attr-defined]  # registered at runtime (properties.register)
        for chain in chains:
            follow_renamed_tip(obj, chain)  # before the rig is read by the (old) tip bone's name
        if chains:
            found.append((obj, chains))
    return found


def update_live_chains(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph | None, *, force: bool) -> int:
    """Re-solve the live chains whose inputs changed since their last live solve (all if ``force``).

    Returns how many chains were solved. A chain that cannot be solved (no target, a bone gone, a
    solver failure) keeps its pose, turns live mode off and shows the reason in its status
    (``live_state.turn_off``); nothing is raised into Blender's handler loop. Every chain is
    checked in full (``spec.chain_spec``, which builds the spec again only when what it is built
    from changed); what the checks found is offered to the next target moves
    (``live_quick.quick_update``).
    """
    if state.busy or state.loading or state.paused:
        return 0
    state.busy = True
    forget_quick()
    solved, every_chain_quick = 0, True
    updated: set[ChainKey] = set()
    try:
        for obj, chains in live_chains(scene):
            if solves_together(obj):  # one body: re-solved in full at every move (no quick path)
                solved += update_live_body(obj, chains, depsgraph, force)
                every_chain_quick = False
                continue
            checked: list[tuple[ChainKey, ChainSpec, FrameInputs]] = []
            for chain in chains:
                key = (obj.session_uid, chain.name)
                updated.add(key)
                record = state.chains.setdefault(key, LiveChain())
                try:
                    with chain_context(chain.name):
                        result = _update_chain(obj, chain, record, depsgraph, force,
                                               [(key[1], spec.bone_names) for key, spec, _ in checked])
                except Exception as error:  # never into Blender's handler loop
                    turn_off(obj, chain, error)
                    continue
                solved += result
                assert record.spec is not None and record.inputs is not None  # set by _update_chain
                checked.append((key, record.spec, record.inputs))
            every_chain_quick &= offer_quick(obj, checked)
        # A record of these armatures not updated now is of a chain renamed or no longer live.
        armatures = {key[0] for key in updated}
        for key in [key for key in state.chains if key[0] in armatures and key not in updated]:
            del state.chains[key]
    finally:
        state.busy = False
    if every_chain_quick and state.quick and depsgraph is not None:
        state.quick_scene = scene.session_uid
    return solved


def _update_chain(obj: bpy.types.Object, chain: IK_SOLVERS_PG_chain, record: LiveChain, depsgraph: bpy.types.Depsgraph | None,
                  force: bool, earlier: list[ChainBones]) -> bool:
    """Check one live chain in full (also against the ``earlier`` live chains of its armature: no
    bone in common) and solve it if its inputs changed (or ``force``); True if solved."""
    values = rig_values(obj, chain, record)
    kept, rig_as_left = record.spec, record.rig_key == values.key()
    rig = kept.rig if kept is not None and rig_as_left else None
    spec = record.spec = chain_spec(obj, chain, rig, reuse=kept)
    check_chains_apart([(chain.name, spec.bone_names)], earlier)
    inputs = sample_inputs(obj, spec, depsgraph=depsgraph)
    inputs = record.inputs = kept_fk_pose(record, inputs, rig_as_left, obj, spec.rig)
    solved = (spec.source, inputs_key(inputs))
    if not force and record.solved == solved:
        check_chain(obj, chain, record, values)  # nothing to solve: Blender's evaluation of our last write, now
        return False
    prepared = prepare_solve(spec, inputs)
    result = run_solve(prepared)
    written = write_pose(obj, spec.rig, result.q[0])
    record.solved, record.rig_key = solved, after_write(obj, values, written)
    store_solve_outcome(chain, result.status[0].value, record.overridden, result, prepared)
    note_chain_write(obj, record, spec, result.q[0])
    return True


def _guarded(update: Callable[[], object]) -> None:
    """Run a handler's work; anything escaping the per-chain guard turns every live chain off
    with the reason, printed once (never a traceback at every frame change). A KeyboardInterrupt
    is noted for a bake at work (``interrupts``), else raised as before."""
    try:
        update()
    except KeyboardInterrupt:
        interrupts.note()  # Blender would swallow it: a bake at work raises it after the frame change
        if not interrupts.watching():
            raise
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
def on_frame_change(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph | None = None) -> None:
    _guarded(lambda: update_live_chains(scene, depsgraph, force=True))


@persistent
def on_depsgraph_update(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
    _guarded(lambda: _on_depsgraph_update(scene, depsgraph))


def _on_depsgraph_update(scene: bpy.types.Scene, depsgraph: bpy.types.Depsgraph) -> None:
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
def on_load_pre(*_args: object) -> None:
    state.reset()
    forget_bodies()
    state.loading = True


@persistent
def on_load_post(*_args: object) -> None:
    state.loading = False


@persistent
def on_undo_redo(*_args: object) -> None:
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
    """Add live mode's handlers (its operator registers with the other operators) and listen to the
    settings a solve reads (``properties.SOLVE_SETTINGS``: a change forgets the quick path)."""
    state.reset()
    if forget_quick not in properties.solve_setting_listeners:
        properties.solve_setting_listeners.append(forget_quick)
    for name, handler in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        if handler not in handlers:
            handlers.append(handler)


def unregister() -> None:
    """Remove live mode's handlers, its listener of the settings and its check's timer."""
    live_check.unregister()
    while forget_quick in properties.solve_setting_listeners:
        properties.solve_setting_listeners.remove(forget_quick)
    for name, handler in HANDLERS:
        handlers = getattr(bpy.app.handlers, name)
        while handler in handlers:
            handlers.remove(handler)
    state.reset()

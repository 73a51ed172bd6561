"""The bake operator (``ik_solvers.bake``): a modal bake of the active chain, every enabled chain or a body
over a frame range into rotation keys, with progress, Esc to cancel and the scene put back on error."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import bpy
from bpy.props import BoolProperty, FloatProperty, IntProperty, StringProperty

from .bake import BakeJob, BakeOptions
from .body import solves_together
from .body_bake import BodyBakeJob
from .errors import failure_sentence
from .key_reduction import reduction_sentence
from .operators import posable_armature, report_unhonoured

if TYPE_CHECKING:
    from bpy.stub_internal.rna_enums import OperatorReturnItems


class IK_SOLVERS_OT_bake(bpy.types.Operator):
    """Bake the IK chain over a frame range into rotation keys of its bones (Esc cancels)"""

    bl_idname = "ik_solvers.bake"
    bl_label = "Bake IK"
    bl_options = {"REGISTER", "UNDO"}

    frame_start: IntProperty(name="Start Frame", description="First frame to bake", min=0, max=1048574, default=1)
    frame_end: IntProperty(name="End Frame", description="Last frame to bake", min=0, max=1048574, default=250)
    step: IntProperty(
        name="Frame Step", description="Key every this many frames (the end frame is always keyed)",
        min=1, max=1000, default=1,
    )
    all_chains: BoolProperty(name="All Chains", default=False,
                             description="Bake every enabled chain, in list order but each after the chains "
                                         "that move its parent bones")
    chain: StringProperty(
        name="Chain", description="Name of the chain to bake; empty: the active chain (ignored with All Chains)",
        default="",
    )
    reduce_keys: BoolProperty(
        name="Reduce Keys", default=False,
        description="Keep the fewest Bézier keys that hold every joint and the tip within Key Error of the full bake",
    )
    key_error: FloatProperty(
        name="Key Error", subtype="DISTANCE", unit="LENGTH", min=0.0, soft_max=0.01, precision=5, default=0.0,
        description="World-space bound of the reduced keys; 0: 0.1 mm per metre of the chain's length",
    )

    INTERRUPTED = "Bake interrupted (Ctrl-C); the action is as it was."

    TIME_PER_TICK = 0.05
    """Seconds of work per modal timer tick: long enough to make progress, short enough for Esc."""

    @classmethod
    def poll(cls, context: bpy.types.Context) -> bool:
        obj = posable_armature(context)
        if obj is None:
            cls.poll_message_set("Select an armature (not in Edit Mode)")
            return False
        if not len(obj.ik_solvers.chains):  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
            cls.poll_message_set("The armature has no IK chain")
            return False
        return True

    def invoke(self, context: bpy.types.Context, _event: bpy.types.Event) -> set[OperatorReturnItems]:
        scene, wm = context.scene, context.window_manager
        assert scene is not None and wm is not None  # invoked from a window
        if scene.use_preview_range:
            self.frame_start, self.frame_end = scene.frame_preview_start, scene.frame_preview_end
        else:
            self.frame_start, self.frame_end = scene.frame_start, scene.frame_end
        return wm.invoke_props_dialog(self)

    def _bake_options(self, obj: bpy.types.Object) -> BakeOptions:
        settings = obj.ik_solvers  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        if self.all_chains:
            names = tuple(chain.name for chain in settings.chains if chain.enabled)
        elif self.chain:
            names = (self.chain,)
        else:
            active = settings.active_chain
            names = () if active is None else (active.name,)
        return BakeOptions(self.frame_start, self.frame_end, self.step, names, reduce_keys=self.reduce_keys,
                           key_error=self.key_error)

    def execute(self, context: bpy.types.Context) -> set[OperatorReturnItems]:
        obj, wm = posable_armature(context), context.window_manager
        assert obj is not None and wm is not None  # poll() found the armature; every context has the window manager
        try:
            job = BodyBakeJob if self.all_chains and solves_together(obj) else BakeJob
            self._job: BakeJob | BodyBakeJob = job(context, obj, self._bake_options(obj))
        except Exception as error:  # nothing written yet
            self.report({"ERROR"}, failure_sentence(error))
            return {"CANCELLED"}
        wm.progress_begin(0, self._job.total_steps)
        if self.options.is_invoke and context.window is not None and not bpy.app.background:
            self._timer: bpy.types.Timer | None = wm.event_timer_add(0.001, window=context.window)
            wm.modal_handler_add(self)
            return {"RUNNING_MODAL"}
        try:
            self._job.advance()
            return self._done(context)
        except KeyboardInterrupt:  # Ctrl-C: the job put everything back; bpy.ops cannot pass the interrupt on
            return self._fail(context, self.INTERRUPTED)
        except Exception as error:  # the action goes back, one sentence
            return self._fail(context, failure_sentence(error))

    def modal(self, context: bpy.types.Context, event: bpy.types.Event) -> set[OperatorReturnItems]:
        if event.type == "ESC":
            self._job.cancel()
            self._end(context)
            self.report({"WARNING"}, "Bake cancelled; the action is as it was.")
            return {"CANCELLED"}
        if event.type != "TIMER":
            return {"RUNNING_MODAL"}
        try:
            finished = self._job.advance(self.TIME_PER_TICK)
            assert context.window_manager is not None  # a modal operator runs in a window
            context.window_manager.progress_update(self._job.done_steps)
            return self._done(context) if finished else {"RUNNING_MODAL"}
        except KeyboardInterrupt:  # Ctrl-C in the terminal: the job put everything back
            return self._fail(context, self.INTERRUPTED)
        except Exception as error:  # the action goes back, one sentence
            return self._fail(context, failure_sentence(error))

    def cancel(self, context: bpy.types.Context) -> None:
        """Blender ends the modal bake (file load, window closed): leave the action as it was."""
        try:
            self._job.cancel()
        except Exception as error:  # the data may be gone with the file: one line, no traceback
            print(f"IK Solvers: the cancelled bake could not put the action back: {failure_sentence(error)}")
        self._end(context)

    def _end(self, context: bpy.types.Context) -> None:
        wm = context.window_manager
        assert wm is not None  # every context has the window manager
        timer = getattr(self, "_timer", None)
        if timer is not None:
            wm.event_timer_remove(timer)
            self._timer = None
        wm.progress_end()

    def _fail(self, context: bpy.types.Context, message: str) -> set[OperatorReturnItems]:
        try:
            self._job.cancel()
        except Exception as error:  # the restore failed too: say so, still one report, no traceback
            message += f" Putting the action back failed as well: {failure_sentence(error)}"
        self._end(context)
        self.report({"ERROR"}, message)
        return {"CANCELLED"}

    def _done(self, context: bpy.types.Context) -> set[OperatorReturnItems]:
        reports = self._job.finish()
        self._end(context)
        for chain in self._job.chains:
            if chain.reduced is not None:
                self.report({"INFO"}, reduction_sentence(chain.name, chain.reduced))
        job = self._job
        if isinstance(job, BodyBakeJob) and job.root_reduced is not None and job.spec.root is not None:
            self.report({"INFO"}, reduction_sentence(job.spec.root, job.root_reduced))  # its location and rotation
        for report in reports:
            self.report({"INFO"}, report.sentence())
            warning = report.warning()
            if warning is not None:
                self.report({"WARNING"}, warning)
        obj = self._job.obj
        report_unhonoured(self, obj, [chain for chain in obj.ik_solvers.chains  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
                                       if chain.name in {report.chain for report in reports}])
        return {"FINISHED"}


classes = (IK_SOLVERS_OT_bake,)

register: Callable[[], None]
unregister: Callable[[], None]
register, unregister = bpy.utils.register_classes_factory(classes)  # type: ignore[func-returns-value, misc]  # stub: returns None

"""The body bake (SPEC §8): every enabled chain of an armature solved as one body per frame batch,
rotation keys for every chain bone and location + rotation keys for the body root.

:class:`BodyBakeJob` drives the same steps as ``bake.BakeJob`` (sample every frame, solve them as
one batch from the body's reference, with Reduce Keys reduce them in rounds (:mod:`.body_keys`), key in
bulk, let Blender evaluate the keys) and answers the
bake operator the same way (``advance`` / ``finish`` / ``cancel``, progress, one ``BakeReport``
per chain with a ``goals`` section). The action is snapshotted before the first key, so a cancel or
an error leaves it exactly as it was.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..core import Status
from ..core.body import GoalStatus
from . import interrupts, live_state
from .bake_state import BakeState, steps_until
from .body import BodyInputs, BodySpec, read_body, sample_body, solve_body_inputs
from .body_keys import (
    body_curve_writers,
    body_reduction,
    body_units,
    default_body_key_error,
    evaluated_unit_errors,
    solved_tips,
)
from .body_sampling import body_sampling_blockers, keys_alone_move_the_body, sample_body_fcurves
from .checks import check_action_keyable
from .errors import IKSolversError
from .frames import HIFrames, SolvedFrames
from .keyframes import action_frames, bake_seeds, key_locations, key_rotations, stored_values
from .report import BakeReport, bake_report, goals_section
from .rig import rotation_channel_values
from .root_space import uniform_scale
from .sampling import geometry_key
from .verify import BakedCheck

if TYPE_CHECKING:
    from collections.abc import Generator

    import bpy

    from ..core.body.keys import BodyKeys, KeyUnit
    from ..core.key_reduction import ReducedKeys
    from .bake import BakeOptions
    from .spec import ChainSpec

STATUS_OF_GOAL = {GoalStatus.REACHED: Status.CONVERGED, GoalStatus.LIMITED: Status.STALLED,
                  GoalStatus.OUT_OF_REACH: Status.UNREACHABLE}
"""A goal's status as the chain report's ``status_counts`` count it (the ``goals`` section keeps the goal's own)."""


@dataclass(frozen=True, eq=False)
class BodySolved:
    """A body solve at some frames: every variable, the root's location and each goal's outcome.

    ``status`` ``(C, N)`` of GoalStatus, ``error`` / ``bound`` ``(C, N)`` in scene units,
    ``orientation_error`` per chain ``(N,)`` radians or None.
    """

    frames: np.ndarray
    q: np.ndarray
    root_location: np.ndarray
    status: np.ndarray
    error: np.ndarray
    bound: np.ndarray
    orientation_error: tuple[np.ndarray | None, ...]
    seconds: float
    hi: tuple[HIFrames | None, ...] = ()
    """Per chain, a limb's HI diagnostics (plane flips, pole warnings); None for a trunk chain."""

    def in_order(self) -> BodySolved:
        """The same frames sorted (a solve of frames in any order, keyed as one bake)."""
        rows = np.argsort(self.frames, kind="stable")
        return BodySolved(self.frames[rows], self.q[rows], self.root_location[rows], self.status[:, rows],
                          self.error[:, rows], self.bound[:, rows],
                          tuple(None if o is None else o[rows] for o in self.orientation_error), self.seconds,
                          tuple(None if h is None else h.select(rows) for h in self.hi))

    def chain_frames(self, index: int, dofs: np.ndarray) -> SolvedFrames:
        """Chain ``index``'s record as a single-chain bake keeps it (its variables ``dofs``)."""
        status = np.array([STATUS_OF_GOAL[s] for s in self.status[index]], dtype=object)
        return SolvedFrames(frames=self.frames, q=self.q[:, dofs], status=status, error=self.error[index],
                            bound=self.bound[index], hi=self.hi[index] if self.hi else None, seconds=self.seconds,
                            orientation_error=self.orientation_error[index])


@dataclass(eq=False)
class BodyChainBake:
    """One chain of a body bake, as the bake operator reads it (``name``, ``reduced``, ``report``)."""

    spec: ChainSpec
    dofs: np.ndarray
    report: BakeReport | None = None
    reduced: ReducedKeys | None = None
    check: BakedCheck | None = None

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(eq=False)
class _BodyWriting:
    """A body bake's keys between the solve and the write: the channel values and, when the bake reduces
    keys, the units and their reduction in rounds (:func:`.body_keys.body_reduction`)."""

    solved: BodySolved
    values: dict[str, np.ndarray]
    started: float
    units: list[KeyUnit] | None = None
    key_error: float = 0.0
    reduction: Generator[None, None, BodyKeys] | None = None
    keys: BodyKeys | None = None


class _FrameSetOnce:
    """The scene for the chains' checks: ``frame_set`` evaluates a frame once for all of them (the keys
    are written; nothing changes between one chain's check of a frame and the next one's)."""

    def __init__(self, scene: bpy.types.Scene) -> None:
        self._scene = scene
        self._frame: int | None = None

    def frame_set(self, frame: int) -> None:
        if frame != self._frame:
            self._scene.frame_set(frame)
            self._frame = frame

    def forget(self) -> None:
        """Evaluate the next frame asked, even the last one (the scene's frame may have moved since)."""
        self._frame = None


class BodyBakeJob(BakeState):
    """A body bake in progress: sample every frame → solve the batch → key → check, resumable."""

    def __init__(self, context: bpy.types.Context, obj: bpy.types.Object, options: BakeOptions) -> None:
        super().__init__(context, obj)
        self.options = options
        self.frames = options.frames
        self.spec: BodySpec = read_body(obj)
        self._chains = [BodyChainBake(spec, dofs) for spec, dofs in zip(self.spec.specs, self.spec.chain_dofs)]
        check_action_keyable(obj)
        self.key_frames = action_frames(obj, self.frames)
        self.scale = uniform_scale(np.array(obj.matrix_world, dtype=float))
        self.reports: list[BakeReport] = []
        self._depsgraph = context.evaluated_depsgraph_get()
        self._blockers = body_sampling_blockers(self.scene, obj, self.spec)  # before our keys: sampled elsewhere
        self._snapshot()
        self._inputs: list[BodyInputs] = []
        self._solved: BodySolved | None = None
        self._writing: _BodyWriting | None = None
        self.root_reduced: ReducedKeys | None = None
        """The body root's reduced keys (its location and rotation) when the bake reduces keys."""
        self._write_started = 0.0
        self._checking = 0
        self._check_scene = _FrameSetOnce(self.scene)

    @property
    def chains(self) -> tuple[BodyChainBake, ...]:
        return tuple(self._chains)

    @property
    def total_steps(self) -> int:
        """Frames to sample, one solve-and-write step, frames to check per chain."""
        return len(self.frames) * (1 + len(self._chains)) + 1

    @property
    def done_steps(self) -> int:
        if self._solved is None:
            return len(self._inputs)
        if self._checking == len(self._chains):
            return self.total_steps
        return len(self.frames) + 1 + sum(chain.check.done for chain in self._chains if chain.check is not None)

    # ------------------------------------------------------------------ work
    def advance(self, time_budget: float | None = None) -> bool:
        """Work for about ``time_budget`` seconds (None: to the end); True once baked and checked."""
        deadline = None if time_budget is None else time.perf_counter() + time_budget
        with self._interruptible():
            if self._solved is None:
                if self._writing is None:
                    with live_state.paused():
                        if not self._sample(self.frames, self._inputs, deadline):
                            return False
                        self._restore_frame()
                    self._start_writing(self.solve(self.frames, BodyInputs.stack(self._inputs)))
                if not self._continue_writing(deadline):
                    return False
            return self._continue_checks(deadline)

    def sample(self, frames: np.ndarray) -> BodyInputs:
        """What the body solve reads at ``frames (M,)`` (each frame evaluated; the frame put back)."""
        inputs: list[BodyInputs] = []
        with self._interruptible(), live_state.paused():
            self._sample(np.asarray(frames), inputs, None)
            self._restore_frame()
        return BodyInputs.stack(inputs)

    def _sample(self, frames: np.ndarray, inputs: list[BodyInputs], deadline: float | None) -> bool:
        if not self._blockers:  # exactly Blender's evaluation, without a frame change per frame
            try:
                inputs.extend(sample_body_fcurves(self.obj, self.spec, frames[len(inputs):], self._depsgraph))
            except IKSolversError as error:
                error.name_where(None, self.scene.frame_current)
                raise
            return True
        frame_list = frames.tolist()
        while len(inputs) < len(frame_list):
            frame = frame_list[len(inputs)]
            self.scene.frame_set(frame)
            interrupts.raise_pending()  # a Ctrl-C that landed in a frame-change handler
            try:
                inputs.append(sample_body(self.obj, self.spec, self._depsgraph))
            except IKSolversError as error:
                error.name_where(None, frame)
                raise
            if deadline is not None and time.perf_counter() > deadline and len(inputs) < len(frame_list):
                return False
        return True

    def solve(self, frames: np.ndarray, inputs: BodyInputs) -> BodySolved:
        """The body solve of ``inputs`` sampled at ``frames``, one batch, every frame from the reference."""
        started = time.perf_counter()
        result = solve_body_inputs(self.spec, inputs)
        orientation = tuple(None if g.orientation_error is None else g.orientation_error for g in result.goals)
        return BodySolved(frames=np.asarray(frames), q=result.q, root_location=result.root_location,
                          status=np.array([g.status for g in result.goals], dtype=object),
                          error=np.array([g.error for g in result.goals]) * self.scale,
                          bound=np.array([g.bound for g in result.goals]) * self.scale,
                          orientation_error=orientation, seconds=time.perf_counter() - started,
                          hi=tuple(None if g.hi is None else HIFrames.of(g.hi) for g in result.goals))

    def write_solved(self, solved: BodySolved) -> list[BakeReport]:
        """Key ``solved`` (the bake's frames, any order) and check the keys; the chains' reports."""
        with self._interruptible():
            self._start_writing(solved.in_order())
            self._continue_writing(None)
            self._continue_checks(None)
        return self.reports

    def _start_writing(self, solved: BodySolved) -> None:
        """Every chain bone's and the root's channel values from ``solved``, checked finite; their reduction
        started when the bake reduces keys (from the values as the keys store them)."""
        started = time.perf_counter()
        if not np.array_equal(solved.frames, self.frames):
            raise IKSolversError("the solved frames are not the bake's frames.")
        spec = self.spec
        values: dict[str, np.ndarray] = {}
        start = float(self.key_frames[0])
        keyed = [(chain.spec.rig, chain.dofs) for chain in self._chains]
        if spec.root is not None and spec.root_rig is not None:
            keyed.append((spec.root_rig, spec.root_dofs))
        for rig, dofs in keyed:  # each block continues the key kept before it, never the current pose
            seeds = bake_seeds(self.action, self.obj, rig.joint_bones, start)
            values.update(rotation_channel_values(self.obj, rig, solved.q[:, dofs], seeds))
        for bone, channel in [*values.items(), (spec.root, solved.root_location)]:
            bad = np.flatnonzero(~np.all(np.isfinite(channel), axis=1))
            if bad.size:
                raise IKSolversError(f"bone '{bone}' got a non-finite value.", frame=int(self.frames[bad[0]]))
        writing = self._writing = _BodyWriting(solved, values, started)
        if self.options.reduce_keys and len(self.frames) > 2:
            stored = {bone: stored_values(channel) for bone, channel in values.items()}
            writing.units = body_units(self.obj, spec, stored, stored_values(solved.root_location))
            writing.key_error = self.options.key_error or default_body_key_error(spec, self.scale)
            writing.reduction = body_reduction(spec, solved.q, solved.root_location, writing.units, self.key_frames,
                                               writing.key_error, self.scale)

    def _continue_writing(self, deadline: float | None) -> bool:
        """Reduce the keys until done or past ``deadline`` (False: call again to go on); then key every chain
        bone's rotation and the root's location and rotation (only the reduced keys, when reduced), measure
        the reduced keys' error as Blender evaluates them, and start the checks (True)."""
        writing, spec = self._writing, self.spec
        assert writing is not None  # started by _start_writing
        if writing.reduction is not None:
            done, writing.keys = steps_until(writing.reduction, deadline)
            if not done:
                return False
            writing.reduction = None
        solved, self._write_started = writing.solved, writing.started
        start, end = float(self.key_frames[0]), float(self.key_frames[-1])
        write_rotation, write_location = (None, None) if writing.keys is None or writing.units is None else \
            body_curve_writers(spec, writing.units, writing.keys, start, end)
        key_rotations(self.action, self.obj, writing.values, self.key_frames, start, end, write_rotation)
        if spec.root is not None:
            key_locations(self.action, self.obj, {spec.root: solved.root_location}, self.key_frames, start, end,
                          write_location)
        if writing.keys is not None and writing.units is not None:
            self._measure_reduced(writing.keys, writing.units, writing.key_error, solved)
        self._solved = solved
        keys_alone = keys_alone_move_the_body(self.obj, spec, self._blockers)
        tips = None if writing.keys is None else solved_tips(spec, solved.q, solved.root_location)
        for index, chain in enumerate(self._chains):
            chain_solved = solved.chain_frames(index, chain.dofs)
            rigs = {geometry_key(self.obj, chain.spec.rig): chain.spec.rig}
            # Sparse where the keys alone move the body (as a chain's check), else every frame.
            chain.check = BakedCheck(self._check_scene, self.obj, chain.spec, rigs, chain_solved,  # type: ignore[arg-type]  # a scene that sets each frame once
                                     solved.status[index] != GoalStatus.REACHED, keys_alone=keys_alone,
                                     reduced=chain.reduced, key_frames=self.key_frames, predict=False,
                                     solved_tips=None if tips is None else tips[:, index])
        return True

    def _measure_reduced(self, keys: BodyKeys, units: list[KeyUnit], key_error: float, solved: BodySolved) -> None:
        """Each chain's (and the root's) reduced keys with the world error of its joints and tip per frame as
        Blender evaluates every written curve (:func:`.body_keys.evaluated_unit_errors`)."""
        errors = self.scale * evaluated_unit_errors(self.obj, self.spec, units, solved.q, solved.root_location,
                                                    self.key_frames)
        measured = [replace(reduced, errors=error, key_error=key_error) for reduced, error in zip(keys.reduced, errors)]
        if units[0].translation:
            self.root_reduced, measured = measured[0], measured[1:]
        for chain, reduced in zip(self._chains, measured):
            chain.reduced = reduced

    def _continue_checks(self, deadline: float | None) -> bool:
        """Blender's evaluation of the keys, frame after frame for every chain at once (one frame change
        per frame, not one per chain); the reports once all are checked."""
        checks = [chain.check for chain in self._chains]
        assert all(check is not None for check in checks)  # started by _continue_writing
        self._check_scene.forget()  # the frame may have changed between calls
        with live_state.paused():
            try:
                while True:
                    due = [(int(check.solved.frames[check.rows[check.done]]), k) for k, check in enumerate(checks)
                           if check is not None and check.done < len(check.rows)]
                    if not due:
                        break
                    frame = min(due)[0]
                    for at, k in due:
                        if at == frame:
                            checks[k].advance(0.0)  # type: ignore[union-attr]  # a deadline already past: one frame
                    if deadline is not None and time.perf_counter() > deadline:
                        return False
                self._checking = len(self._chains)
            finally:
                self._restore_frame()
        solved = self._solved
        assert solved is not None  # set by _continue_writing
        seconds = solved.seconds + time.perf_counter() - self._write_started
        for index, chain in enumerate(self._chains):
            assert chain.check is not None
            report = bake_report(solved.chain_frames(index, chain.dofs), armature=self.obj.name, chain=chain.name,
                                 method="BODY", frame_step=self.options.frame_step,
                                 sampling_reasons=self._blockers, flip_threshold=chain.spec.flip_threshold,
                                 seconds=seconds, evaluation=chain.check.result(), reduced=chain.reduced)
            chain.report = replace(report, goals=goals_section(
                solved.frames, solved.status[index], solved.error[index], solved.bound[index],
                self.spec.weights[index], self.spec.priorities[index]))
            self.reports.append(chain.report)
        return True

    # ------------------------------------------------------------------ ending
    def finish(self) -> list[BakeReport]:
        """Store the reports on the chains, restore the frame and the unbaked pose (the keyed bones show
        their keys: the chains' rotations, the root's location too)."""
        root = {self.spec.root} if self.spec.root is not None else set()
        self._end([(chain.name, chain.report, chain.spec.bone_names) for chain in self._chains],
                  keep_rotation_of=self.spec.keyed_bones, keep_location_of=root)
        return self.reports

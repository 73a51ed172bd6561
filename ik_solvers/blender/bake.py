"""The bake job: solve chains over a frame range as one batch and key their bones' rotation channels.

Per chain: sample what the solve needs at every frame (:mod:`.sampling`), solve all frames at once
from the chain's reference pose (:mod:`.solving`), then key the joint bones' rotation channels in
bulk (:mod:`.keyframes`) and report (:mod:`.report`). Every F-curve a bake touches is snapshotted
first (:mod:`.snapshots`), so a cancel (Esc) or an error puts the action back exactly as it was.
The operator that drives a job lives in :mod:`.operators`.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from . import interrupts, live_state
from .bake_state import BakeState, steps_until
from .body import solves_together
from .chain_order import parents_first
from .checks import check_action_keyable, check_chains_apart, enabled_chain_bones
from .errors import IKSolversError, chain_context
from .frames import SampledFrames, SolvedFrames, stitch
from .key_reduction import joint_groups, reduced_curve_writer, reduced_rotation_keys
from .keyframes import action_frames, bake_seeds, key_rotations, stored_values
from .report import BakeReport, bake_report, reached
from .rig import rotation_channel_values
from .sampling import FrameInputs, fcurve_sampling_blockers, geometry_key, sample_fcurves, sample_inputs
from .solving import prepare_solve, run_solve, world_errors
from .spec import ChainSpec, chain_spec
from .verify import BakedCheck, keys_alone_move_the_chain

if TYPE_CHECKING:
    import bpy

    from ..core.key_reduction import ReducedKeys
    from .rig_chain import RigChain


# --------------------------------------------------------------------------- options
@dataclass(frozen=True)
class BakeOptions:
    """What to bake, as the operator's properties give it.

    Attributes
    ----------
    frame_start, frame_end : int
        Inclusive frame range; existing keys of the baked channels inside it are replaced.
    frame_step : int
        Key every ``frame_step``-th frame; the end frame is always keyed.
    chain_names : tuple of str
        Names of the chains of the object to bake, in order.
    reduce_keys : bool
        Replace the per-frame keys by the fewest Bézier keys within ``key_error`` (SPEC §9, :mod:`.key_reduction`).
    key_error : float
        The world-space bound of the reduced keys (scene units); 0: 0.1 mm per metre of each chain's reach. Kept
        as the operator's property holds it (float32), read back as the shortest decimal that rounds to it: the
        operator and ``ik_batch --reduce-keys`` reduce within the same bits, so they write the same keys.
    """

    frame_start: int
    frame_end: int
    frame_step: int
    chain_names: tuple[str, ...]
    reduce_keys: bool = False
    key_error: float = 0.0

    def __post_init__(self) -> None:
        if self.frame_end < self.frame_start:
            raise IKSolversError(f"The end frame {self.frame_end} is before the start frame {self.frame_start}.")
        if self.frame_step < 1:
            raise IKSolversError("The frame step must be at least 1.")
        if not self.chain_names:
            raise IKSolversError("There is no chain to bake.")
        with np.errstate(over="ignore"):  # a bound beyond float32 becomes inf: refused below
            held = float(np.format_float_scientific(np.float32(self.key_error), unique=True))
        if not held >= 0.0 or not np.isfinite(held):
            raise IKSolversError("The key error bound must be a distance of at least 0.")
        object.__setattr__(self, "key_error", held)

    @property
    def frames(self) -> np.ndarray:
        """The keyed frames ``(N,)``: start, start + step, …, and the end frame."""
        frames = np.arange(self.frame_start, self.frame_end + 1, self.frame_step)
        if frames[-1] != self.frame_end:
            frames = np.append(frames, self.frame_end)
        return frames


# --------------------------------------------------------------------------- the job
@dataclass(eq=False)
class ChainBake:
    """One chain of a bake.

    Attributes
    ----------
    spec : ChainSpec
        The chain's spec as built when the bake started (its rig: the bones, the first shape).
    report : BakeReport or None
        The chain's bake report once :meth:`BakeJob.write_solved` keyed it.
    """

    spec: ChainSpec
    report: BakeReport | None = None
    reduced: ReducedKeys | None = None
    """The key reduction of the chain's keys when the bake reduces keys."""
    _rigs: dict[bytes, RigChain] = field(default_factory=dict)
    """geometry key → RigChain read at a frame with that geometry (the first: the spec's rig)."""
    _blockers: list[str] | None = None
    """Why F-curve sampling is not exact, found just before sampling (an earlier chain of the
    same bake may have keyed this chain's ancestors); empty: sample F-curves."""
    _sampling: _Sampling | None = None
    """The operator's resumable sampling of every frame."""
    _writing: _Writing | None = None
    """The keys to write once solved (and reduced, resumable round by round)."""
    _check: BakedCheck | None = None
    """Blender's evaluation of the keys once written, resumable frame by frame."""
    _write_started: float = 0.0
    _solved: SolvedFrames | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def rig(self) -> RigChain:
        return self.spec.rig


@dataclass(eq=False)
class _Sampling:
    """A chain's sampling at some frames, resumable frame by frame."""

    frames: np.ndarray
    inputs: list[FrameInputs] = field(default_factory=list)
    geometry: list[bytes] = field(default_factory=list)
    sampled: SampledFrames | None = None


@dataclass(eq=False)
class _Writing:
    """A chain's keys to write: the solve, its rotation channels (bone → ``(N, k)``) and, when the
    bake reduces keys, the reduction in rounds (:func:`.key_reduction.reduced_rotation_keys`)."""

    solved: SolvedFrames
    values: dict[str, np.ndarray]
    started: float
    reduction: Generator[None, None, ReducedKeys] | None = None


class BakeJob(BakeState):
    """A bake in progress: sample → solve → write, chain after chain, resumable in chunks.

    ``advance()`` does a bounded amount of work (a modal operator calls it per timer tick, a
    headless run until it returns True); ``finish()`` or ``cancel()`` ends the job. Until
    ``finish()`` the action can be put back exactly with ``cancel()``.

    The steps are public for callers that split the frames themselves (``scripts/ik_batch.py``
    solves chunks of frames in other processes): :meth:`sample` the chain at some frames,
    :meth:`solve` them, gather the parts with :meth:`SolvedFrames.concatenate` and key them
    all with :meth:`write_solved`. Every frame starts from the chain's reference pose, so the
    split does not change the keys.
    """

    def __init__(self, context: bpy.types.Context, obj: bpy.types.Object, options: BakeOptions) -> None:
        super().__init__(context, obj)
        if solves_together(obj):  # its chains are one body: baked one by one, each would ignore the others
            raise IKSolversError(f"Armature '{obj.name}' solves its chains together: bake all of them at once "
                                 "(All Chains), or turn Solve Together off.", field="solve_together")
        self.options = options
        self.frames = options.frames
        self.reports: list[BakeReport] = []
        self._chains: list[ChainBake] = []
        by_name = {chain.name: chain for chain in obj.ik_solvers.chains}  # type: ignore[attr-defined]  # Object.ik_solvers is registered at runtime (properties.register)
        for name in options.chain_names:
            settings = by_name.get(name)
            if settings is None:
                raise IKSolversError(f"Armature '{obj.name}' has no IK chain named '{name}'.")
            spec = chain_spec(obj, settings)
            chain = ChainBake(spec)
            chain._rigs[geometry_key(obj, spec.rig)] = spec.rig
            self._chains.append(chain)
        check_action_keyable(obj)
        self.key_frames = action_frames(obj, self.frames)
        """The action's own times of the keyed frames ``(N,)`` (mapped in NLA tweak mode, else the frames)."""
        check_chains_apart([(chain.name, chain.rig.bone_names) for chain in self._chains],
                           enabled_chain_bones(obj, options.chain_names))
        # A chain below another chain of the bake samples that chain's keys of this bake, never older ones.
        self._chains = parents_first(obj, self._chains, lambda chain: chain.rig.bone_names)
        self._depsgraph = context.evaluated_depsgraph_get()
        self._snapshot()
        self._index = 0

    @property
    def chains(self) -> tuple[ChainBake, ...]:
        """The chains to bake: in the options' order, except that a chain comes after every chain moving
        one of its ancestor bones (``chain_order.parents_first``)."""
        return tuple(self._chains)

    # ------------------------------------------------------------------ progress
    @property
    def total_steps(self) -> int:
        """Frames to sample, one solve-and-write step and frames to check, per chain."""
        return len(self._chains) * (2 * len(self.frames) + 1)

    @property
    def done_steps(self) -> int:
        done = self._index * (2 * len(self.frames) + 1)
        if self._index < len(self._chains):
            chain = self._chains[self._index]
            sampling = chain._sampling
            if sampling is not None:
                done += len(self.frames) if sampling.sampled is not None else len(sampling.inputs)
            if chain._check is not None:
                done += 1 + len(self.frames) * chain._check.done // max(len(chain._check.rows), 1)
        return done

    # ------------------------------------------------------------------ work
    def advance(self, time_budget: float | None = None) -> bool:
        """Work for about ``time_budget`` seconds (None: to the end); True once every chain is baked.

        Raises IKSolversError (after which ``cancel()`` restores everything), or KeyboardInterrupt
        after restoring everything itself (:meth:`_interruptible`).
        """
        with self._interruptible():
            return self._advance(None if time_budget is None else time.perf_counter() + time_budget)

    def _advance(self, deadline: float | None) -> bool:
        while self._index < len(self._chains):
            chain = self._chains[self._index]
            with chain_context(chain.name):
                if chain._check is None:
                    if chain._writing is None:
                        if chain._sampling is None:
                            chain._sampling = _Sampling(self.frames)
                        if not self._continue_sampling(chain, chain._sampling, deadline):
                            return False
                        assert chain._sampling.sampled is not None  # set when sampling is done
                        chain._writing = self._start_writing(chain, self.solve(chain, chain._sampling.sampled))
                    if not self._continue_writing(chain, deadline):
                        return False
                if not self._continue_check(chain, deadline):
                    return False
            self._index += 1
            if deadline is not None and time.perf_counter() > deadline:
                return self._index == len(self._chains)
        return True

    def sample(self, chain: ChainBake, frames: np.ndarray | None = None) -> SampledFrames:
        """What ``chain``'s solve reads at ``frames (M,)`` (default: every frame of the bake).

        From the F-curves where that is exactly Blender's evaluation, else by evaluating each
        frame (the current frame is put back afterwards). Raises IKSolversError.
        """
        sampling = _Sampling(self.frames if frames is None else np.asarray(frames))
        with self._interruptible(), chain_context(chain.name):
            self._continue_sampling(chain, sampling, None)
        assert sampling.sampled is not None  # no deadline: sampling ran to the end
        return sampling.sampled

    def _continue_sampling(self, chain: ChainBake, sampling: _Sampling, deadline: float | None) -> bool:
        """Sample until done (True) or past ``deadline`` (False: call again to go on)."""
        if sampling.sampled is not None:
            return True
        if not self._sampling_blockers(chain):
            inputs = sample_fcurves(self.obj, chain.spec, chain.rig, sampling.frames)
            geometry = [next(iter(chain._rigs))] * len(sampling.frames)
        else:
            with live_state.paused():  # also while the frame goes back: live chains must not solve on it
                if not self._sample_evaluated(chain, sampling, deadline):
                    return False
                self._restore_frame()
            inputs = FrameInputs.stack(sampling.inputs)
            geometry = sampling.geometry
        sampling.sampled = SampledFrames(sampling.frames, inputs, np.array(geometry, dtype=object))
        sampling.inputs, sampling.geometry = [], []
        return True

    def _sampling_blockers(self, chain: ChainBake) -> list[str]:
        if chain._blockers is None:
            chain._blockers = fcurve_sampling_blockers(self.scene, self.obj, chain.rig, chain.spec)
        return chain._blockers

    def _sample_evaluated(self, chain: ChainBake, sampling: _Sampling, deadline: float | None) -> bool:
        frames = sampling.frames.tolist()
        while len(sampling.inputs) < len(frames):
            frame = frames[len(sampling.inputs)]
            self.scene.frame_set(frame)
            interrupts.raise_pending()  # a Ctrl-C that landed in a frame-change handler
            key = geometry_key(self.obj, chain.rig)
            if key not in chain._rigs:
                with chain_context(chain.name, frame):
                    chain._rigs[key] = chain.spec.read_rig(self.obj)
            sampling.geometry.append(key)
            sampling.inputs.append(sample_inputs(self.obj, chain.spec, chain.rig, self._depsgraph))
            if deadline is not None and time.perf_counter() > deadline and len(sampling.inputs) < len(frames):
                return False
        return True

    def solve(self, chain: ChainBake, sampled: SampledFrames) -> SolvedFrames:
        """Solve the sampled frames as one batch per chain shape, each from the chain's reference pose.

        Raises IKSolversError for a non-finite target or input the solver refuses.
        """
        started = time.perf_counter()
        frames, inputs = sampled.frames, sampled.inputs
        bad = np.flatnonzero(~np.all(np.isfinite(np.asarray(inputs.target_world)), axis=1))
        if bad.size:
            raise IKSolversError("the target location is not finite.", chain=chain.name, frame=int(frames[bad[0]]))
        n = len(frames)
        parts, rows_of = [], []
        for key, rig in chain._rigs.items():
            rows = np.flatnonzero(sampled.geometry == key)
            if rows.size == 0:
                continue
            subset = inputs if rows.size == n else inputs.select(rows)
            with chain_context(chain.name, int(frames[rows[0]])):
                prepared = prepare_solve(chain.spec, subset, rig)
                result = run_solve(prepared)
            error, bound = world_errors(prepared, result)
            parts.append(SolvedFrames.from_result(frames[rows], result, error, bound, 0.0))
            rows_of.append(rows)
        solved = stitch(parts, n, rows_of, frames)
        return replace(solved, seconds=time.perf_counter() - started)

    def write_solved(self, chain: ChainBake, solved: SolvedFrames) -> BakeReport:
        """Key ``chain``'s joint bones from ``solved`` (every frame of the bake, in order); its report.

        Raises IKSolversError (nothing of this chain keyed) for a solve of other frames or a
        rotation that is not finite. After keying, Blender evaluates the keys (:mod:`.verify`,
        the current frame put back) and the report says where that differs from the solve.
        """
        with self._interruptible(), chain_context(chain.name):
            chain._writing = self._start_writing(chain, solved)
            self._continue_writing(chain, None)
            self._continue_check(chain, None)
        assert chain.report is not None  # set when the check has run to the end
        return chain.report

    def _start_writing(self, chain: ChainBake, solved: SolvedFrames) -> _Writing:
        """The keys of ``chain``'s joint bones from ``solved``, checked finite; their reduction started."""
        started = time.perf_counter()
        if not np.array_equal(solved.frames, self.frames):
            raise IKSolversError("the solved frames are not the bake's frames.", chain=chain.name)
        self._sampling_blockers(chain)  # found (and kept for the report) before our keys: sampled elsewhere
        seeds = bake_seeds(self.action, self.obj, chain.rig.joint_bones, float(self.key_frames[0]))
        values = rotation_channel_values(self.obj, chain.rig, solved.q, seeds)  # inside the chain's chain_context
        for bone, channel in values.items():
            bad = np.flatnonzero(~np.all(np.isfinite(channel), axis=1))
            if bad.size:
                raise IKSolversError(f"bone '{bone}' got a non-finite rotation.", chain=chain.name,
                                     frame=int(self.frames[bad[0]]))
        writing = _Writing(solved, values, started)
        if self.options.reduce_keys and len(self.frames) > 2:  # reduced from the values as the keys store them
            stored = {bone: stored_values(channel) for bone, channel in values.items()}
            writing.reduction = reduced_rotation_keys(self.obj, chain.rig, self.key_frames, stored,
                                                      self.options.key_error or None)
        return writing

    def _continue_writing(self, chain: ChainBake, deadline: float | None) -> bool:
        """Reduce the keys until done or past ``deadline`` (False: call again to go on); then key the
        chain's joint bones (only the reduced keys, when reduced) and start checking them (True)."""
        writing = chain._writing
        assert writing is not None  # started by _start_writing
        if writing.reduction is not None:
            done, chain.reduced = steps_until(writing.reduction, deadline)
            if not done:
                return False
            writing.reduction = None
        start, end = float(self.key_frames[0]), float(self.key_frames[-1])
        write = (None if chain.reduced is None
                 else reduced_curve_writer(chain.reduced, joint_groups(chain.rig), start, end))
        key_rotations(self.action, self.obj, writing.values, self.key_frames, start, end, write)
        solved = writing.solved
        chain._solved, chain._write_started = solved, writing.started
        keys_alone = keys_alone_move_the_chain(self.obj, chain.rig, self._sampling_blockers(chain))
        chain._check = BakedCheck(self.scene, self.obj, chain.spec, chain._rigs, solved, ~reached(solved.status),
                                  keys_alone=keys_alone, reduced=chain.reduced, key_frames=self.key_frames)
        return True

    def _continue_check(self, chain: ChainBake, deadline: float | None) -> bool:
        """Evaluate the chain's keys until done (True: report made, frame put back) or past ``deadline``."""
        check = chain._check
        assert check is not None  # started by _continue_writing
        with live_state.paused():  # live chains hold still, also while the frame goes back
            try:
                if not check.advance(deadline):
                    return False
            except BaseException:
                self._restore_frame()
                raise
            self._restore_frame()
        solved = chain._solved
        assert solved is not None  # set by _continue_writing before the check starts
        chain.report = bake_report(
            solved, armature=self.obj.name, chain=chain.name, method=chain.spec.method.value,
            frame_step=self.options.frame_step, sampling_reasons=self._sampling_blockers(chain),
            flip_threshold=chain.spec.flip_threshold,
            seconds=solved.seconds + time.perf_counter() - chain._write_started,
            evaluation=check.result(), reduced=chain.reduced,
        )
        self.reports.append(chain.report)
        return True

    # ------------------------------------------------------------------ ending
    def finish(self) -> list[BakeReport]:
        """Store the reports on the chains, restore the current frame and the unbaked pose."""
        self._end([(chain.name, chain.report, chain.spec.bone_names) for chain in self._chains],
                  keep_rotation_of={bone for chain in self._chains for bone in chain.rig.joint_bones})
        return self.reports

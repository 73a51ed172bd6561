"""Headless batch bake of IK chains over .blend files (SPEC §7).

Two ways to run it::

    blender -b FILE.blend --python scripts/ik_batch.py -- [FILE.blend ...] [options]
    python scripts/ik_batch.py FILE.blend [FILE.blend ...] [options]      # with the bpy module

Per file: open it, pick the chains (default: every enabled chain on every armature), bake each
over the frame range through the add-on's bake machinery (``ik_solvers.blender.bake.BakeJob``), and
save the result as a new file (``--output``), or over the input only with ``--in-place``.

``--jobs N`` solves fixed chunks of ``--chunk-size`` frames in N worker processes, each loading a
snapshot of the file and sampling + solving its chunks, and the parent writes the keys once. The
chunk boundaries depend on the frame range and the chunk size alone, never on N, so every N gives
the same keys bit for bit as ``--jobs 1`` (which solves the same chunks in-process). Every frame
starts from the same pose (the chain's pose when the bake starts; the preferred pose for HI), so
the chunks do not depend on each other.

Exit status: 0 success; 1 usage error; 2 a bad / missing file, a missing chain or target, or a
failed bake (one line on stderr per problem; the other files are still processed and saved).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # `python scripts/ik_batch.py` and `blender --python` both start in scripts/

EXIT_OK, EXIT_USAGE, EXIT_FAILED = 0, 1, 2
DEFAULT_CHUNK_SIZE = 100
"""Frames per chunk: big enough for the core's batched solve to pay off, small enough that a long
range splits over a few processes."""

METHOD_NAMES = ("ANALYTIC", "CCD", "FABRIK", "JACOBIAN_TRANSPOSE", "PSEUDO_INVERSE", "DLS", "SDLS", "HI")
"""``ik_solvers.core.Method`` values (kept literal so ``--help`` works before bpy is imported)."""


class BatchError(Exception):
    """A problem with one file (exit 2); the message is one line."""


class UsageError(Exception):
    """Bad command line (exit 1)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse would exit 2, which here means "bad file"
        raise UsageError(message)


# --------------------------------------------------------------------------- command line
def script_args(argv: list[str]) -> list[str]:
    """The script's own arguments from a full ``sys.argv``.

    Under ``blender -b FILE --python ik_batch.py -- ARGS`` Blender leaves its own arguments in
    ``sys.argv``: the script's are those after the first ``--``. Run by a plain Python
    (``python ik_batch.py ARGS``) they are ``argv[1:]`` (a ``--`` there is skipped as well).
    """
    if "--" in argv:
        return list(argv[argv.index("--") + 1:])
    return list(argv[1:])


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ik_batch.py",
        description="Bake the IK chains of .blend files to rotation keys, headless (SPEC §7).",
        epilog="Exit status: 0 ok, 1 usage error, 2 bad file / missing chain / missing target / failed bake.",
    )
    parser.add_argument("files", nargs="*", type=Path,
                        help="input .blend files (under `blender -b FILE`, FILE comes first)")
    parser.add_argument("--chain", action="append", default=[], metavar="[ARMATURE:]NAME",
                        help="bake this chain (repeatable); default every enabled chain of every armature")
    parser.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"),
                        help="inclusive frame range (default the scene's)")
    parser.add_argument("--step", type=int, default=1, help="key every STEP frames; the end frame is always keyed")
    parser.add_argument("--method", type=str.upper, choices=METHOD_NAMES,
                        help="solve every chain with this method (the file's setting is kept in the output)")
    parser.add_argument("--jobs", type=int, default=1, help="worker processes for the frame chunks (default 1)")
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE,
                        help=f"frames per chunk (default {DEFAULT_CHUNK_SIZE}); the result does not depend on --jobs")
    save = parser.add_mutually_exclusive_group()
    save.add_argument("--output", type=Path,
                      help="save-as path: a .blend file for one input, else a directory (created if missing)")
    save.add_argument("--in-place", action="store_true", help="overwrite each input file with its baked version")
    save.add_argument("--dry-run", action="store_true", help="bake in memory and report, save nothing")
    parser.add_argument("--report", type=Path, metavar="FILE.json", help="write per-file, per-chain statistics")
    parser.add_argument("--quiet", action="store_true", help="no per-chain lines on stdout")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: a chunk task file
    return parser


@dataclass(frozen=True)
class ChainSelector:
    armature: str | None
    chain: str

    @classmethod
    def parse(cls, text: str) -> "ChainSelector":
        armature, sep, chain = text.rpartition(":")
        if not chain:
            raise UsageError(f"--chain {text!r}: empty chain name")
        return cls(armature if sep else None, chain)

    def __str__(self) -> str:
        return f"{self.armature}:{self.chain}" if self.armature else self.chain


@dataclass(frozen=True)
class BatchOptions:
    """What to do with every file, checked once before any file is opened."""

    files: tuple[Path, ...]
    chains: tuple[ChainSelector, ...]
    frames: tuple[int, int] | None
    step: int
    method: str | None
    jobs: int
    chunk_size: int
    output: Path | None
    in_place: bool
    dry_run: bool
    report: Path | None
    quiet: bool

    def output_path(self, source: Path) -> Path | None:
        """Where the baked version of ``source`` is saved (None: not saved)."""
        if self.dry_run:
            return None
        if self.in_place:
            return source
        if len(self.files) == 1 and self.output.suffix.lower() == ".blend" and not self.output.is_dir():
            return self.output
        return self.output / source.name


def parse_options(args: list[str], opened_file: Path | None = None) -> BatchOptions:
    """Check the script's arguments (``script_args``); ``opened_file`` is the file Blender opened.

    Raises UsageError for anything wrong with the command line itself.
    """
    ns = build_parser().parse_args(args)
    files = list(ns.files)
    if opened_file is not None and opened_file.resolve() not in {f.resolve() for f in files}:
        files.insert(0, opened_file)
    if not files:
        raise UsageError("no input file given")
    if ns.step < 1:
        raise UsageError("--step must be at least 1")
    if ns.jobs < 1:
        raise UsageError("--jobs must be at least 1")
    if ns.chunk_size < 1:
        raise UsageError("--chunk-size must be at least 1")
    if ns.frames is not None and ns.frames[1] < ns.frames[0]:
        raise UsageError(f"--frames: the end frame {ns.frames[1]} is before the start frame {ns.frames[0]}")
    if ns.output is None and not ns.in_place and not ns.dry_run:
        raise UsageError("say where to save: --output PATH, --in-place, or --dry-run")
    resolved = [f.resolve() for f in files]
    if len(set(resolved)) != len(resolved):
        raise UsageError("the same input file is given twice")
    if ns.output is not None:
        if len(files) > 1 and ns.output.suffix.lower() == ".blend":
            raise UsageError("--output must be a directory when baking several files")
        names = [f.name for f in files]
        if len(files) > 1 and len(set(names)) != len(names):
            raise UsageError("several inputs share a file name; they would overwrite each other in --output")
    options = BatchOptions(
        files=tuple(files),
        chains=tuple(ChainSelector.parse(text) for text in ns.chain),
        frames=tuple(ns.frames) if ns.frames is not None else None,
        step=ns.step,
        method=ns.method,
        jobs=ns.jobs,
        chunk_size=ns.chunk_size,
        output=ns.output,
        in_place=ns.in_place,
        dry_run=ns.dry_run,
        report=ns.report,
        quiet=ns.quiet,
    )
    if ns.output is not None:
        for source, target in zip(resolved, (options.output_path(f) for f in files)):
            if target.resolve() == source:
                raise UsageError(f"--output would overwrite the input {source}; use --in-place for that")
    return options


# --------------------------------------------------------------------------- chunks
def plan_chunks(frames: np.ndarray, chunk_size: int) -> list[np.ndarray]:
    """Consecutive runs of at most ``chunk_size`` of ``frames``: a function of the frames alone."""
    return [frames[i:i + chunk_size] for i in range(0, len(frames), chunk_size)]


def assign_chunks(count: int, jobs: int) -> list[list[int]]:
    """Chunk indices per worker, round robin (worker w gets w, w + jobs, ...); empty workers dropped."""
    return [list(range(w, count, jobs)) for w in range(min(jobs, count))]


# --------------------------------------------------------------------------- bpy side
def _bpy():
    """Import bpy (keeping Blender out of the user's config when run as a module) and the add-on."""
    if "bpy" not in sys.modules:
        home = os.environ.get("BLENDER_USER_RESOURCES")
        if not home:
            home = tempfile.mkdtemp(prefix="ik_batch_blender_user_")
            os.environ["BLENDER_USER_RESOURCES"] = home
    import bpy

    if not hasattr(bpy.types.Object, "ik_solvers"):
        import ik_solvers

        ik_solvers.register()
    return bpy


@dataclass
class ChunkResult:
    """One chunk's solve: per frame ``(M,)`` arrays, plus the HI extras when the method is HI.

    ``inputs`` holds the sampled :class:`FrameInputs` fields (None where absent).
    """

    frames: np.ndarray
    q: np.ndarray
    status: np.ndarray  # str values of core.Status
    error: np.ndarray
    bound: np.ndarray
    inputs: dict[str, np.ndarray | None]
    hi: dict[str, np.ndarray] | None = None

    def save(self, path: Path) -> None:
        arrays = {"frames": self.frames, "q": self.q, "status": self.status.astype("U32"), "error": self.error,
                  "bound": self.bound}
        arrays.update({f"in_{k}": v for k, v in self.inputs.items() if v is not None})
        if self.hi is not None:
            arrays.update({f"hi_{k}": v for k, v in self.hi.items()})
        np.savez(path, **arrays)

    @classmethod
    def load(cls, path: Path) -> "ChunkResult":
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        inputs = {k: arrays.get(f"in_{k}") for k in INPUT_FIELDS}
        hi = {k[3:]: v for k, v in arrays.items() if k.startswith("hi_")} or None
        return cls(arrays["frames"], arrays["q"], arrays["status"], arrays["error"], arrays["bound"], inputs, hi)


INPUT_FIELDS = ("target_world", "root_world", "pole_world", "target_parent_world", "swivel_angle")


def _bake_module():
    _bpy()
    from ik_solvers.blender import bake

    return bake


def make_job(obj, chain_name: str, frames: tuple[int, int], step: int):
    """A ``ChunkedBakeJob`` for one chain (BatchError when the chain cannot be baked)."""
    bpy = _bpy()
    bake = _bake_module()
    job_class = _chunked_job_class()
    try:
        return job_class(bpy.context, obj, bake.BakeOptions(frames[0], frames[1], step, (chain_name,)))
    except bake.BakeError as error:
        raise BatchError(str(error)) from None


_JOB_CLASS = None


def _chunked_job_class():
    """``BakeJob`` extended with chunk solves and a write of results solved elsewhere (built lazily:
    the base class needs bpy)."""
    global _JOB_CLASS
    if _JOB_CLASS is not None:
        return _JOB_CLASS
    bake = _bake_module()
    from ik_solvers.blender import solving
    from ik_solvers.blender.rig import RigError
    from ik_solvers.core import HISolveResult, Status, find_flips

    class ChunkedBakeJob(bake.BakeJob):
        """One chain's bake whose frames are sampled and solved in fixed chunks (maybe elsewhere)."""

        _gathered = None

        @property
        def chain(self):
            return self._chains[0]

        def solve_chunk(self, frames: np.ndarray) -> ChunkResult:
            """Sample and solve ``frames`` (a run of this job's frames) exactly as the bake would."""
            chain, full = self.chain, self.frames
            self.frames = np.asarray(frames)
            chain.inputs, chain.samples, chain.frame_keys = None, [], []
            try:
                self._sample(chain, None)
                return self._solve_sampled(chain)
            finally:
                self.frames = full
                chain.inputs, chain.samples, chain.frame_keys = None, [], []

        def _solve_sampled(self, chain) -> ChunkResult:
            inputs, n = chain.inputs, chain.inputs.frame_count
            keys = np.array(chain.frame_keys or [next(iter(chain.rigs))] * n, dtype=object)
            q = np.empty((n, chain.rig.chain.n_dof))
            status = np.empty(n, dtype="U32")
            error, bound = np.empty(n), np.empty(n)
            hi = None
            for key, rig in chain.rigs.items():
                rows = np.flatnonzero(keys == key)
                if rows.size == 0:
                    continue
                subset = inputs if rows.size == n else bake._select(inputs, rows)
                try:
                    prepared = solving.prepare_solve(self.obj, chain.settings, subset, rig=rig, initial=chain.rig.q)
                    outcome = solving.run_solve_full(prepared)
                except RigError as error_:
                    raise bake.BakeError(
                        f"Chain '{chain.settings.name}', frames from {int(self.frames[rows[0]])}: {error_}") from None
                result = outcome.result
                q[rows] = result.q
                status[rows] = [s.value for s in result.status]
                error[rows], bound[rows] = solving.world_errors(prepared, result)
                if outcome.hi is not None:
                    if hi is None:
                        hi = {"solver_normals": np.full((n, 3), np.nan), "ee_axes_sphere": np.full((n, 3), np.nan),
                              "pole_angles": np.full(n, np.nan), "pole_warnings": np.zeros(n, bool),
                              "n0": np.asarray(outcome.hi.sphere.n0, float)}
                    for name in ("solver_normals", "ee_axes_sphere", "pole_angles", "pole_warnings"):
                        hi[name][rows] = getattr(outcome.hi, name)
            fields = {name: (None if getattr(inputs, name) is None else np.asarray(getattr(inputs, name)))
                      for name in INPUT_FIELDS}
            return ChunkResult(np.asarray(self.frames), q, status, error, bound, fields, hi)

        def write_solved(self, chunks: list[ChunkResult]) -> dict:
            """Key the chain from its solved chunks (in frame order) and end the job; the report."""
            gathered = ChunkResult(
                frames=np.concatenate([c.frames for c in chunks]),
                q=np.concatenate([c.q for c in chunks]),
                status=np.concatenate([c.status for c in chunks]),
                error=np.concatenate([c.error for c in chunks]),
                bound=np.concatenate([c.bound for c in chunks]),
                inputs={name: (None if chunks[0].inputs[name] is None
                               else np.concatenate([c.inputs[name] for c in chunks])) for name in INPUT_FIELDS},
                hi=None if chunks[0].hi is None else {
                    name: (chunks[0].hi[name] if name == "n0" else np.concatenate([c.hi[name] for c in chunks]))
                    for name in chunks[0].hi},
            )
            if not np.array_equal(gathered.frames, self.frames):
                raise bake.BakeError("The solved chunks do not cover the frame range.")
            chain = self.chain
            if getattr(chain, "blockers", None) is None:  # set by sampling, which ran elsewhere
                chain.blockers = bake.fcurve_sampling_blockers(self.scene, self.obj, chain.rig, chain.settings)
            chain.inputs = solving.FrameInputs(**gathered.inputs)
            self._gathered = gathered
            try:
                self._solve_and_write(chain)
            except bake.BakeError:
                self.cancel()
                raise
            self._index = len(self._chains)
            report = self.finish()[0]
            return report

        def _solve(self, chain):
            """The gathered chunks in place of a solve (BakeJob calls this from ``_solve_and_write``)."""
            g = self._gathered
            status = np.array([Status(s) for s in g.status], dtype=object)
            return g.q, status, g.error, g.bound, self.flips()

        def flips(self) -> list[dict]:
            """Solver-plane flips over the whole baked sequence (HI): frame, turn, pole crossing, pole distance."""
            g = self._gathered
            if g.hi is None:
                return []
            hi = g.hi
            sphere = type("Sphere", (), {"n0": hi["n0"]})()
            solved = HISolveResult(result=None, ee_axes=None, ee_axes_sphere=hi["ee_axes_sphere"],
                                   zero_plane_normals=None, solver_normals=hi["solver_normals"], swivel=None,
                                   pole_angles=hi["pole_angles"], pole_warnings=hi["pole_warnings"],
                                   map_singular=None, sphere=sphere)
            threshold = float(self.chain.settings.flip_threshold)
            report = find_flips(solved, warning_angle=threshold)
            flips = []
            for k, turn, crossing in zip(report.frames, report.turns, report.pole_crossing):
                distance = float(min(hi["pole_angles"][k - 1], hi["pole_angles"][k]))
                flips.append({
                    "frame": int(self.frames[k]),
                    "turn_degrees": float(np.degrees(turn)),
                    "pole_crossing": bool(crossing),
                    "pole_distance_degrees": float(np.degrees(distance)),
                    "warned": bool(hi["pole_warnings"][k - 1] or hi["pole_warnings"][k]),
                })
            return flips

    _JOB_CLASS = ChunkedBakeJob
    return _JOB_CLASS


def chain_statistics(job, bake_report: dict, seconds: float) -> dict:
    """The ``--report`` entry of one baked chain."""
    g = job._gathered
    excess = np.maximum(g.error - g.bound, 0.0)
    counts = Counter(str(s) for s in g.status)
    entry = {
        "armature": job.obj.name,
        "chain": job.chain.settings.name,
        "method": job.chain.settings.method,
        "frames": int(len(g.frames)),
        "frame_start": int(g.frames[0]),
        "frame_end": int(g.frames[-1]),
        "step": int(job.options.frame_step),
        "status_counts": {s: int(counts.get(s, 0)) for s in bake_report["status_counts"]},
        "max_error": float(g.error.max()),
        "median_error": float(statistics.median(g.error.tolist())),
        "max_error_over_lower_bound": float(excess.max()),
        "max_error_over_lower_bound_frame": int(g.frames[int(np.argmax(excess))]),
        "flips": bake_report["flip_frames"],
        "sampling": bake_report.get("sampling"),
        "seconds": seconds,
    }
    if g.hi is not None:
        entry["pole_warning_frames"] = int(g.hi["pole_warnings"].sum())
        entry["min_pole_distance_degrees"] = float(np.degrees(np.nanmin(g.hi["pole_angles"])))
    return entry


# --------------------------------------------------------------------------- files
def open_blend(path: Path) -> None:
    bpy = _bpy()
    if not path.is_file():
        raise BatchError(f"{path}: no such file")
    with open(path, "rb") as handle:
        magic = handle.read(7)
    # Blender files start with "BLENDER"; compressed ones with the gzip or zstd magic.
    if magic[:7] != b"BLENDER" and magic[:2] != b"\x1f\x8b" and magic[:4] != b"\x28\xb5\x2f\xfd":
        raise BatchError(f"{path}: not a .blend file")
    try:
        bpy.ops.wm.open_mainfile(filepath=str(path), load_ui=False)
    except RuntimeError as error:
        reason = str(error).strip().splitlines()[-1] if str(error).strip() else "unreadable"
        raise BatchError(f"{path}: cannot be opened ({reason})") from None


def select_chains(options: BatchOptions) -> list[tuple[object, object]]:
    """(armature object, chain settings) pairs to bake, in file order; BatchError for a missing one."""
    bpy = _bpy()
    armatures = [obj for obj in bpy.data.objects if obj.type == "ARMATURE"]
    if not options.chains:
        found = [(obj, chain) for obj in armatures for chain in obj.ik_solvers.chains if chain.enabled]
        if not found:
            raise BatchError("the file has no enabled IK chain")
        return _with_targets(found)
    selected = []
    for selector in options.chains:
        matches = [(obj, chain) for obj in armatures if selector.armature in (None, obj.name)
                   for chain in obj.ik_solvers.chains if chain.name == selector.chain]
        if not matches:
            raise BatchError(f"no IK chain '{selector}'")
        if len(matches) > 1:
            raise BatchError(f"chain name '{selector}' is on several armatures; write ARMATURE:{selector.chain}")
        selected.append(matches[0])
    return _with_targets(selected)


def _with_targets(selected: list) -> list:
    """``selected`` unchanged, once every chain is known to have a target (checked before any bake)."""
    for obj, chain in selected:
        if chain.target is None:
            raise BatchError(f"chain '{obj.name}:{chain.name}' has no target")
    return selected


def solve_chunks_in_workers(job, chunks: list[np.ndarray], jobs: int, workdir: Path) -> list[ChunkResult]:
    """Snapshot the current state, let ``jobs`` processes solve the chunks, read their results."""
    bpy = _bpy()
    snapshot = workdir / "snapshot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(snapshot), copy=True, compress=False)
    processes = []
    for worker, indices in enumerate(assign_chunks(len(chunks), jobs)):
        task = {
            "blend": str(snapshot),
            "armature": job.obj.name,
            "chain": job.chain.settings.name,
            "frame_range": [int(job.options.frame_start), int(job.options.frame_end)],
            "step": int(job.options.frame_step),
            "chunks": {str(i): chunks[i].tolist() for i in indices},
            "out": str(workdir),
        }
        task_path = workdir / f"task{worker}.json"
        task_path.write_text(json.dumps(task))
        processes.append((task_path, subprocess.Popen(worker_command(task_path), stdout=subprocess.DEVNULL,
                                                      stderr=subprocess.PIPE, text=True)))
    failures = []
    for task_path, process in processes:
        _, stderr = process.communicate()
        if process.returncode != 0:
            lines = [line for line in stderr.strip().splitlines() if line.strip()]
            failures.append(lines[-1] if lines else f"worker exited with {process.returncode}")
    if failures:
        raise BatchError(f"a worker failed: {failures[0]}")
    return [ChunkResult.load(workdir / f"chunk{i}.npz") for i in range(len(chunks))]


def worker_command(task_path: Path) -> list[str]:
    """The command that runs one worker the same way this process runs (bpy module or Blender)."""
    bpy = _bpy()
    script = str(Path(__file__).resolve())
    if getattr(bpy.app, "module", False):
        return [sys.executable, script, "--worker", str(task_path)]
    return [bpy.app.binary_path, "-b", "--factory-startup", "--python", script, "--", "--worker", str(task_path)]


def run_worker(task_path: Path) -> int:
    """Worker side: open the snapshot, solve the assigned chunks, save one .npz per chunk."""
    bpy = _bpy()
    task = json.loads(task_path.read_text())
    try:
        open_blend(Path(task["blend"]))
        obj = bpy.data.objects.get(task["armature"])
        if obj is None:
            raise BatchError(f"no armature '{task['armature']}' in the snapshot")
        job = make_job(obj, task["chain"], tuple(task["frame_range"]), task["step"])
        out = Path(task["out"])
        for index, frames in task["chunks"].items():
            job.solve_chunk(np.array(frames, dtype=job.frames.dtype)).save(out / f"chunk{index}.npz")
    except (BatchError, _bake_module().BakeError) as error:
        print(f"ik_batch worker: {error}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def bake_file(path: Path, options: BatchOptions, already_open: bool = False) -> dict:
    """Bake the selected chains of one file and save it; the file's report entry (BatchError on failure)."""
    bpy = _bpy()
    bake = _bake_module()
    started = time.perf_counter()
    if not already_open:
        open_blend(path)
    scene = bpy.context.scene
    frames = options.frames or (scene.frame_start, scene.frame_end)
    selected = select_chains(options)
    originals = {}
    if options.method is not None:
        for obj, chain in selected:
            originals[(obj.name, chain.name)] = chain.method
            chain.method = options.method
    entries = []
    with tempfile.TemporaryDirectory(prefix="ik_batch_") as workdir:
        for obj, chain in selected:
            chain_started = time.perf_counter()
            job = make_job(obj, chain.name, frames, options.step)
            chunks = plan_chunks(job.frames, options.chunk_size)
            try:
                if options.jobs == 1 or len(chunks) == 1:
                    results = [job.solve_chunk(frames_) for frames_ in chunks]
                else:
                    results = solve_chunks_in_workers(job, chunks, options.jobs, Path(workdir))
                bake_report = job.write_solved(results)
            except bake.BakeError as error:
                job.cancel()
                raise BatchError(f"{obj.name}:{chain.name}: {error}") from None
            entry = chain_statistics(job, bake_report, time.perf_counter() - chain_started)
            entries.append(entry)
            if not options.quiet:
                counts = ", ".join(f"{n} {s.lower()}" for s, n in entry["status_counts"].items() if n)
                print(f"{path.name} {entry['armature']}:{entry['chain']} [{entry['method']}] {entry['frames']} frames: "
                      f"{counts}; max error {entry['max_error']:.3g}, over bound {entry['max_error_over_lower_bound']:.3g}, "
                      f"{len(entry['flips'])} flips, {entry['seconds']:.2f} s")
    for obj, chain in selected:
        if (obj.name, chain.name) in originals:
            chain.method = originals[(obj.name, chain.name)]
    output = options.output_path(path)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        # No .blend1 backups next to a fresh output; --in-place keeps Blender's usual backup.
        paths = bpy.context.preferences.filepaths
        save_version = paths.save_version
        paths.save_version = save_version if options.in_place else 0
        try:
            bpy.ops.wm.save_as_mainfile(filepath=str(output), copy=True)
        except RuntimeError as error:
            raise BatchError(f"{output}: cannot be saved ({str(error).strip().splitlines()[-1]})") from None
        finally:
            paths.save_version = save_version
    return {"input": str(path), "output": None if output is None else str(output), "ok": True,
            "chains": entries, "seconds": time.perf_counter() - started}


def main(argv: list[str]) -> int:
    args = script_args(argv)
    try:
        if "--worker" in args:
            return run_worker(build_parser().parse_args(args).worker)
        opened = None
        if "-h" not in args and "--help" not in args:
            bpy = _bpy()
            if not getattr(bpy.app, "module", False) and bpy.data.filepath:
                opened = Path(bpy.data.filepath)
        options = parse_options(args, opened)
    except UsageError as error:
        print(f"ik_batch: {error}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as done:  # --help
        return int(done.code or 0)
    reports, failed = [], False
    for index, path in enumerate(options.files):
        try:
            reports.append(bake_file(path, options, already_open=(opened is not None and index == 0)))
        except Exception as error:  # noqa: BLE001 — one file's failure must not lose the others
            failed = True
            message = str(error) if isinstance(error, BatchError) else (
                f"unexpected {type(error).__name__}: {(str(error).strip().splitlines() or [''])[-1]}")
            if not message.startswith(str(path)):
                message = f"{path}: {message}"
            print(f"ik_batch: {message}", file=sys.stderr)
            reports.append({"input": str(path), "output": None, "ok": False, "error": message, "chains": []})
    if options.report is not None:
        options.report.parent.mkdir(parents=True, exist_ok=True)
        options.report.write_text(json.dumps({"jobs": options.jobs, "chunk_size": options.chunk_size,
                                              "files": reports}, indent=2))
    return EXIT_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Headless batch bake of IK chains over .blend files (SPEC §7).

Two ways to run it::

    blender -b FILE.blend --python scripts/ik_batch.py -- [FILE.blend ...] [options]
    python scripts/ik_batch.py FILE.blend [FILE.blend ...] [options]      # with the bpy module
    python scripts/ik_batch.py --manifest SHOTS.json [options]            # inputs with their outputs

Per file: open it, pick the chains (default: every enabled chain on every armature), bake each
over the frame range through the add-on's bake machinery (the public steps of
``ik_solvers.blender.bake.BakeJob``: sample, solve, write_solved), and save the result as a new file (``--output``), or over the input only with ``--in-place``.

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
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Blender's own Python (`blender -b FILE --python scripts/ik_batch.py`) has neither the project
# installed nor scripts/ on sys.path: there, and only there, use this checkout. In `.venv` the
# project is installed (`make venv`) and Python puts scripts/ first on sys.path itself.
_HERE = Path(__file__).resolve().parent
for _name, _folder in (("ik_solvers", _HERE.parent), ("_cli", _HERE)):
    if importlib.util.find_spec(_name) is None:
        sys.path.insert(0, str(_folder))

import numpy as np  # noqa: E402
from _cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser, UsageError, import_bpy, one_line  # noqa: E402
from _cli import report as report_problem  # noqa: E402
from _cli import script_args as script_args  # noqa: E402  (part of this script's interface)

from ik_solvers.core import METHOD_FACTS  # noqa: E402

PROG = "ik_batch"
DEFAULT_CHUNK_SIZE = 100
"""Frames per chunk: big enough for the core's batched solve to pay off, small enough that a long
range splits over a few processes."""

METHOD_NAMES = tuple(method.value for method in METHOD_FACTS)
"""``--method`` choices: the core's table of methods (pure numpy, so ``--help`` needs no bpy)."""


class BatchError(Exception):
    """A problem with one file (exit 2); the message is one line."""


# --------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
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
    parser.add_argument("--manifest", type=Path, metavar="FILE",
                        help="more inputs, each with its own output if given: a JSON list of "
                             "{\"input\": PATH, \"output\": PATH} (or of input paths), or a text file with one "
                             "INPUT or INPUT<TAB>OUTPUT per line (# comments); relative paths are taken from the "
                             "manifest's folder; inputs without an output follow --output / --in-place / --dry-run")
    parser.add_argument("--report", type=Path, metavar="FILE.json", help="write per-file, per-chain statistics")
    parser.add_argument("--quiet", action="store_true", help="no per-chain lines on stdout")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: a chunk task file
    return parser


@dataclass(frozen=True)
class ChainSelector:
    armature: str | None
    chain: str

    @classmethod
    def parse(cls, text: str) -> ChainSelector:
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
    outputs: tuple[tuple[Path, Path], ...] = ()
    """(input, output) pairs given by ``--manifest``: these inputs are saved there."""

    def output_path(self, source: Path) -> Path | None:
        """Where the baked version of ``source`` is saved (None: not saved)."""
        if self.dry_run:
            return None
        explicit = dict(self.outputs)
        if source in explicit:
            return explicit[source]
        if self.in_place:
            return source
        assert self.output is not None  # parse_options: --output, --in-place or --dry-run
        defaulted = [f for f in self.files if f not in explicit]
        if len(defaulted) == 1 and self.output.suffix.lower() == ".blend" and not self.output.is_dir():
            return self.output
        return self.output / source.name


def read_manifest(path: Path) -> list[tuple[Path, Path | None]]:
    """The (input, output or None) pairs of a ``--manifest`` file (see ``--help``); UsageError if unreadable.

    JSON when the text starts with ``[``, else lines of ``INPUT`` or ``INPUT<TAB>OUTPUT``. Relative
    paths are relative to the manifest's folder, so a manifest moves with its files.
    """
    try:
        text = path.read_text()
    except OSError as error:
        raise UsageError(f"--manifest {path}: cannot be read ({error.strerror})") from None
    base = path.resolve().parent
    rows: list[tuple[object, object]] = []
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as error:
            raise UsageError(f"--manifest {path}: not valid JSON ({error})") from None
        for item in items:
            if isinstance(item, dict) and set(item) <= {"input", "output"} and "input" in item:
                rows.append((item["input"], item.get("output")))
            else:
                rows.append((item, None))
    else:
        for line in text.splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                given, _, output = line.strip().partition("\t")
                rows.append((given.strip(), output.strip() or None))
    entries: list[tuple[Path, Path | None]] = []
    for number, (source, target) in enumerate(rows, 1):
        if not isinstance(source, str) or not source or not (target is None or isinstance(target, str) and target):
            raise UsageError(f"--manifest {path}: entry {number} is not an input path with an optional output path")
        entries.append((base / source, None if target is None else base / target))
    if not entries:
        raise UsageError(f"--manifest {path}: lists no input file")
    return entries


def parse_options(args: list[str], opened_file: Path | None = None) -> BatchOptions:
    """Check the script's arguments (``script_args``); ``opened_file`` is the file Blender opened.

    Raises UsageError for anything wrong with the command line itself.
    """
    ns = build_parser().parse_args(args)
    manifest = read_manifest(ns.manifest) if ns.manifest is not None else []
    explicit = tuple((source, target) for source, target in manifest if target is not None)
    files = list(ns.files) + [source for source, _ in manifest]
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
    defaulted = [f for f in files if f not in dict(explicit)]
    if defaulted and ns.output is None and not ns.in_place and not ns.dry_run:
        raise UsageError("say where to save: --output PATH, --in-place, or --dry-run")
    resolved = [f.resolve() for f in files]
    if len(set(resolved)) != len(resolved):
        raise UsageError("the same input file is given twice")
    if ns.output is not None:
        if len(defaulted) > 1 and ns.output.suffix.lower() == ".blend":
            raise UsageError("--output must be a directory when baking several files")
        names = [f.name for f in defaulted]
        if len(defaulted) > 1 and len(set(names)) != len(names):
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
        outputs=explicit,
    )
    saved: dict[Path, Path] = {}
    for source, path in zip(resolved, files):
        target = options.output_path(path)
        if target is None:
            continue
        if target.resolve() == source and not (options.in_place and path in defaulted):
            flag = "--output" if path in defaulted else "--manifest"
            raise UsageError(f"{flag} would overwrite the input {source}; use --in-place for that")
        if target.resolve() in saved:
            raise UsageError(f"{saved[target.resolve()]} and {source} would both be saved to {target}")
        saved[target.resolve()] = source
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
    """bpy with the add-on registered (``_cli.import_bpy``)."""
    return import_bpy()


def _bake_module():
    _bpy()
    from ik_solvers.blender import bake

    return bake


def make_job(obj, chain_name: str, frames: tuple[int, int], step: int):
    """A ``BakeJob`` for one chain (BatchError when the chain cannot be baked)."""
    bpy = _bpy()
    bake = _bake_module()
    from ik_solvers.blender.errors import IKSolversError

    try:
        return bake.BakeJob(bpy.context, obj, bake.BakeOptions(frames[0], frames[1], step, (chain_name,)))
    except IKSolversError as error:
        raise BatchError(str(error)) from None


def solve_chunk(job, frames: np.ndarray):
    """Sample and solve ``frames`` (a run of the job's frames) of the job's one chain, as the bake would."""
    (chain,) = job.chains
    return job.solve(chain, job.sample(chain, frames))


def save_solved(solved, path: Path) -> None:
    """Write a chunk's ``SolvedFrames`` for the parent process (``load_solved`` reads it back)."""
    solved.save(path)


def load_solved(path: Path):
    """The ``SolvedFrames`` that ``save_solved`` wrote, bit for bit."""
    _bpy()
    from ik_solvers.blender.frames import SolvedFrames

    return SolvedFrames.load(path)


def chain_statistics(job, solved, bake_report, seconds: float) -> dict:
    """The ``--report`` entry of one baked chain: the add-on's ``BakeReport`` under the batch's names."""
    entry = {
        "armature": bake_report.armature,
        "chain": bake_report.chain,
        "method": bake_report.method,
        "frames": bake_report.frames,
        "frame_start": bake_report.frame_start,
        "frame_end": bake_report.frame_end,
        "step": bake_report.frame_step,
        "status_counts": bake_report.status_counts,
        "max_error": bake_report.max_error,
        "median_error": bake_report.median_error,
        "max_error_over_lower_bound": bake_report.max_excess,
        "max_error_over_lower_bound_frame": bake_report.max_excess_frame,
        "flips": bake_report.flip_frames,
        "sampling": bake_report.sampling,
        "seconds": seconds,
    }
    if bake_report.pole_warning_frames is not None:
        entry["pole_warning_frames"] = bake_report.pole_warning_frames
        entry["min_pole_distance_degrees"] = bake_report.min_pole_distance_degrees
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
        reason = one_line(error) or "unreadable"
        raise BatchError(f"{path}: cannot be opened ({reason})") from None


def select_chains(options: BatchOptions) -> list[tuple[Any, Any]]:
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


def solve_chunks_in_workers(job, chunks: list[np.ndarray], jobs: int, workdir: Path) -> list:
    """Snapshot the current state, let ``jobs`` processes solve the chunks, read their results."""
    bpy = _bpy()
    snapshot = workdir / "snapshot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(snapshot), copy=True, compress=False)
    processes = []
    for worker, indices in enumerate(assign_chunks(len(chunks), jobs)):
        task = {
            "blend": str(snapshot),
            "armature": job.obj.name,
            "chain": job.chains[0].name,
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
    for _task_path, process in processes:
        _, stderr = process.communicate()
        if process.returncode != 0:
            failures.append(one_line(stderr) or f"worker exited with {process.returncode}")
    if failures:
        raise BatchError(f"a worker failed: {failures[0]}")
    return [load_solved(workdir / f"chunk{i}.npz") for i in range(len(chunks))]


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
            save_solved(solve_chunk(job, np.array(frames, dtype=job.frames.dtype)), out / f"chunk{index}.npz")
    except (BatchError, _bake_module().IKSolversError) as error:
        report_problem(f"{PROG} worker", error)
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
                    parts = [solve_chunk(job, frames_) for frames_ in chunks]
                else:
                    parts = solve_chunks_in_workers(job, chunks, options.jobs, Path(workdir))
                solved = bake.SolvedFrames.concatenate(parts)
                bake_report = job.write_solved(job.chains[0], solved)
                job.finish()
            except bake.IKSolversError as error:
                job.cancel()
                raise BatchError(f"{obj.name}:{chain.name}: {error}") from None
            entry = chain_statistics(job, solved, bake_report, time.perf_counter() - chain_started)
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
            raise BatchError(f"{output}: cannot be saved ({one_line(error)})") from None
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
        report_problem(PROG, error, usage=True)
        return EXIT_USAGE
    except SystemExit as done:  # --help
        return int(done.code or 0)
    reports, failed = [], False
    for index, path in enumerate(options.files):
        try:
            reports.append(bake_file(path, options, already_open=(opened is not None and index == 0)))
        except Exception as error:  # one file's failure must not lose the others
            failed = True
            message = str(error) if isinstance(error, BatchError) else (
                f"unexpected {type(error).__name__}: {one_line(error)}")
            if not message.startswith(str(path)):
                message = f"{path}: {message}"
            report_problem(PROG, message)
            reports.append({"input": str(path), "output": None, "ok": False, "error": message, "chains": []})
    if options.report is not None:
        options.report.parent.mkdir(parents=True, exist_ok=True)
        options.report.write_text(json.dumps({"jobs": options.jobs, "chunk_size": options.chunk_size,
                                              "files": reports}, indent=2))
    return EXIT_FAILED if failed else EXIT_OK


if __name__ == "__main__":
    sys.exit(main(sys.argv))

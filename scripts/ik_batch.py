"""Headless batch bake of IK chains over .blend files (SPEC §7).

Two ways to run it::

    blender -b FILE.blend --python scripts/ik_batch.py -- [FILE.blend ...] [options]
    python scripts/ik_batch.py FILE.blend [FILE.blend ...] [options]      # with the bpy module
    python scripts/ik_batch.py --manifest SHOTS.json [options]            # inputs with their outputs

Per file: open it, pick the chains (default: every enabled chain on every armature), bake each
over the frame range through the add-on's bake machinery (the public steps of
``ik_solvers.blender.bake.BakeJob``: sample, solve, write_solved), and save the result as a new file (``--output``), or over the input only with ``--in-place``.
An armature with ``solve_together`` is baked as one body (``body_bake.BodyBakeJob``, SPEC §8): all its
enabled chains at once, also when ``--chain`` names one of them (said on stderr); ``_batch_work``.

``--jobs N`` solves fixed chunks of ``--chunk-size`` frames in N worker processes (each loads a
snapshot of the file and samples and solves its chunks; the parent writes the keys once). The chunks
depend on the frame range and the chunk size alone, never on N, and every frame starts from the same
pose (the chain's pose when the bake starts; the preferred pose for HI), so every N gives the same
keys bit for bit as ``--jobs 1`` (which solves the same chunks in-process).

Before any file is opened, every path the run writes is checked against every input and each
other, an existing output is replaced only with ``--overwrite`` and every folder written into is
probed (``_batch_paths``). One run at a time bakes into an output; the file is saved under a name of
its own beside it, re-opened and its keys checked (``_batch_rigs``), and moved into place only when
every check passed (``_batch_output``). Progress goes to stderr (``[ik_batch] ...``), the per-chain
results to stdout (none with ``--quiet``), the report to ``--report`` (``_batch_report``).

Exit status (``EXIT_HELP``, docs/batch-report.md, a farm's retry logic): 0 ok, 1 usage error, 2 bad
input or failed work, 3 internal error (retry). One line on stderr per problem; the other files are
still processed and saved.
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
if importlib.util.find_spec("ik_solvers") is None or importlib.util.find_spec("_cli") is None:
    # A job upload of this file alone (one FILE parameter): say what it needs, no traceback; retrying cannot help.
    print(f"ik_batch: {_HERE} lacks this project's scripts/ modules or ../ik_solvers/: run ik_batch.py from a "
          "checkout (or a bundle packed by farm/pack_bundle.py), not on its own", file=sys.stderr)
    raise SystemExit(1)

import _openjd  # noqa: E402
import numpy as np  # noqa: E402
from _batch_chunks import assign_chunks, plan_chunks  # noqa: E402  (part of this script's interface)
from _batch_errors import BatchError, WorkerCrash  # noqa: E402  (part of this script's interface)
from _batch_output import OutputError, output_lock, publish, staged  # noqa: E402
from _batch_paths import WriteError, check_writable, check_written_paths, read_manifest  # noqa: E402
from _batch_progress import Progress, cap_jobs  # noqa: E402
from _batch_report import report_document, work_entries, write_report  # noqa: E402
from _batch_rigs import BakedChain, ChainSelector, RigError, check_libraries, missing_keys  # noqa: E402
from _batch_rigs import select_chains as select_rig_chains  # noqa: E402
from _batch_work import BodyWork, ChainWork, plan_work  # noqa: E402
from _cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Parser, UsageError, import_bpy, one_line  # noqa: E402
from _cli import report as _report_line  # noqa: E402
from _cli import script_args as script_args  # noqa: E402  (part of this script's interface)

from ik_solvers.core import METHOD_FACTS  # noqa: E402

report_problem = _openjd.with_fail_lines(_report_line)  # each problem also an openjd_fail line on a farm

PROG = "ik_batch"
EXIT_INTERNAL = 3
"""An unexpected exception (a bug, or the machine): worth a retry, unlike 1 and 2."""
FRAME_MAX = 1_048_574
"""Blender's last frame (``Scene.frame_end``'s hard maximum, the bake operator's cap)."""
EXIT_HELP = """exit status (for a farm's retry logic):
  0  ok: every file baked, saved and its keys found in the saved file
  1  usage error: bad option or value, paths that collide, an existing output without --overwrite,
     a --report that is not an ik_batch report (do not retry: fix the command)
  2  bad input or failed work: bad/missing file or library, no such chain, a linked chain or action,
     no target, a failed bake or check (nothing saved then), a folder that cannot be written, another
     run baking into the same output (do not retry: the same run fails the same way)
  3  internal error: an unexpected exception or a crashed worker process (retry)"""
DEFAULT_CHUNK_SIZE = 100
"""Frames per chunk: big enough for the core's batched solve to pay off, small enough that a long
range splits over a few processes."""

METHOD_NAMES = tuple(method.value for method in METHOD_FACTS)
"""``--method`` choices: the core's table of methods (pure numpy, so ``--help`` needs no bpy)."""


# --------------------------------------------------------------------------- command line
def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="ik_batch.py",
        description="Bake the IK chains of .blend files to rotation keys, headless (SPEC §7).",
        epilog=EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="*", type=Path,
                        help="input .blend files (under `blender -b FILE`, FILE comes first)")
    parser.add_argument("--chain", action="append", default=[], metavar="[ARMATURE:]NAME",
                        help="bake this chain (repeatable); default every enabled chain of every editable "
                             "armature (a library override, not the linked original behind it). ARMATURE is "
                             "a local armature or override by name ('Rig [v2]' too), or a linked one by "
                             "Blender's full name 'NAME [LIBRARY]', e.g. 'Rig [rig.blend]:Arm' (linked armatures "
                             "are refused: bake an override). The text is split at the ':' whose left part is an "
                             "armature with that chain, else it is all one chain name ('Left:Arm'); ':NAME' is "
                             "NAME on any armature")
    parser.add_argument("--frames", nargs=2, type=int, metavar=("START", "END"),
                        help=f"inclusive frame range within 0..{FRAME_MAX} (default the scene's)")
    parser.add_argument("--step", type=int, default=1, help="key every STEP frames; the end frame is always keyed")
    parser.add_argument("--reduce-keys", type=float, default=0.0, metavar="E",
                        help="keep the fewest Bézier keys that hold every joint and tip within E scene units of "
                             "the full bake at every frame (docs/key-reduction.md); 0 (default): a key per frame "
                             "(a body, solve_together, is refused with E above 0)")
    parser.add_argument("--method", type=str.upper, choices=METHOD_NAMES,
                        help="solve every chain with this method (the file's setting is kept in the output; "
                             "a body, solve_together, ignores it)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="worker processes for the frame chunks (default 1); capped by the CPUs and by "
                             "the available memory (about 0.5 GB each), said on stderr")
    parser.add_argument("--chunk-size", type=int, default=DEFAULT_CHUNK_SIZE,
                        help=f"frames per chunk (default {DEFAULT_CHUNK_SIZE}); the result does not depend on --jobs")
    save = parser.add_mutually_exclusive_group()
    save.add_argument("--output", type=Path,
                      help="save-as path: a .blend file for one input, else a directory (created if missing)")
    save.add_argument("--in-place", action="store_true", help="overwrite each input file with its baked version")
    save.add_argument("--dry-run", action="store_true", help="bake in memory and report, save nothing")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an output file that exists (Blender keeps the old one as FILE.blend1); "
                             "without it an existing output is a usage error")
    parser.add_argument("--manifest", type=Path, metavar="FILE",
                        help="more inputs, each with its own output if given: a JSON list of "
                             "{\"input\": PATH, \"output\": PATH} (or of input paths), or a text file with one "
                             "INPUT or INPUT<TAB>OUTPUT per line (# comments); relative paths are taken from the "
                             "manifest's folder; inputs without an output follow --output / --in-place / --dry-run")
    parser.add_argument("--report", type=Path, metavar="FILE.json",
                        help="write per-file, per-chain statistics (docs/batch-report.md); replaces only an "
                             "earlier ik_batch report")
    parser.add_argument("--quiet", action="store_true",
                        help="no per-chain lines on stdout (progress and problems still go to stderr)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # internal: a chunk task file
    return parser


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
    overwrite: bool = False
    reduce_keys: float = 0.0
    """The world-space bound of reduced keys (scene units); 0: not reduced."""
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
    if not 0.0 <= ns.reduce_keys < float("inf"):
        raise UsageError("--reduce-keys must be a distance of at least 0")
    if not 1 <= ns.chunk_size <= FRAME_MAX + 1:
        raise UsageError(f"--chunk-size must be between 1 and {FRAME_MAX + 1}")
    if ns.frames is not None:
        for frame in ns.frames:
            if not 0 <= frame <= FRAME_MAX:
                raise UsageError(f"--frames: {frame} is outside Blender's frame range 0..{FRAME_MAX}")
        if ns.frames[1] < ns.frames[0]:
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
        overwrite=ns.overwrite,
        reduce_keys=ns.reduce_keys,
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


# --------------------------------------------------------------------------- bpy side
def _bpy():
    """bpy with the add-on registered (``_cli.import_bpy``)."""
    return import_bpy()


def _bake_module():
    _bpy()
    from ik_solvers.blender import bake

    return bake


def make_work(obj, chain_name: str | None, frames: tuple[int, int], step: int, reduce_keys: float = 0.0):
    """The ``ChainWork`` of one chain, its keys reduced within ``reduce_keys`` if not 0, or with ``chain_name``
    None the ``BodyWork`` of ``obj``'s body (``_batch_work``); BatchError when it cannot be baked."""
    bpy = _bpy()
    bake = _bake_module()
    from ik_solvers.blender import body_bake
    from ik_solvers.blender.frames import HIFrames

    try:
        if chain_name is not None:
            options = bake.BakeOptions(frames[0], frames[1], step, (chain_name,), reduce_keys=reduce_keys > 0.0,
                                       key_error=reduce_keys)
            return ChainWork(bake.BakeJob(bpy.context, obj, options), bake.SolvedFrames)
        names = tuple(chain.name for chain in obj.ik_solvers.chains if chain.enabled)
        job = body_bake.BodyBakeJob(bpy.context, obj, bake.BakeOptions(frames[0], frames[1], step, names,
                                                                       reduce_keys=reduce_keys > 0.0,
                                                                       key_error=reduce_keys))
        return BodyWork(job, body_bake.BodySolved, HIFrames)
    except bake.IKSolversError as error:  # a chain's sentence names it (errors.chain_context); the field is kept
        where = "" if chain_name is not None else f"armature '{obj.name}': "
        raise BatchError(where + str(error), error.field) from error


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
    """(armature object, chain settings) pairs to bake, in file order (``_batch_rigs``: overrides rather than the
    linked originals; linked rigs and actions, missing libraries refused) but parents' chains first; BatchError."""
    bpy = _bpy()
    from ik_solvers.blender.chain_order import settings_parents_first  # as the bake operator orders them
    try:
        check_libraries(bpy.data.libraries, lambda lib: bpy.path.abspath(lib.filepath, library=lib.library))
        return settings_parents_first(select_rig_chains(list(bpy.data.objects), options.chains))
    except RigError as error:
        raise BatchError(str(error)) from None


def solve_chunks_in_workers(work, chunks: list[np.ndarray], jobs: int, workdir: Path) -> list:
    """Snapshot the current state, let ``jobs`` processes solve the chunks of ``work``, read their results."""
    bpy = _bpy()
    snapshot = workdir / "snapshot.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(snapshot), copy=True, compress=False)
    processes = []
    for worker, indices in enumerate(assign_chunks(len(chunks), jobs)):
        task = {
            "blend": str(snapshot),
            "armature": work.job.obj.name,  # a local armature or override: select_chains refuses linked ones
            **work.task(),
            "frame_range": [int(work.job.options.frame_start), int(work.job.options.frame_end)],
            "step": int(work.job.options.frame_step),
            "chunks": {str(i): chunks[i].tolist() for i in indices},
            "out": str(workdir),
        }
        task_path = workdir / f"task{worker}.json"
        task_path.write_text(json.dumps(task))
        processes.append((task_path, subprocess.Popen(worker_command(task_path), stdout=subprocess.DEVNULL,
                                                      stderr=subprocess.PIPE, text=True)))
    failures, crashed = [], False
    for task_path, process in processes:
        _, stderr = process.communicate()
        if process.returncode != 0:
            field = task_path.with_suffix(".field")  # run_worker's error's field, if it had one
            failures.append((one_line(stderr) or f"worker exited with {process.returncode}",
                             (field.read_text() if field.exists() else "") or None))
            crashed = crashed or process.returncode != EXIT_FAILED  # a signal, memory, a bug: exit 3
    if failures:
        message = f"a worker failed: {failures[0][0]}"
        raise WorkerCrash(message) if crashed else BatchError(message, failures[0][1])
    return [work.load(workdir / f"chunk{i}.npz") for i in range(len(chunks))]


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
        obj = bpy.data.objects.get((task["armature"], None))  # the local one, not a linked namesake
        if obj is None:
            raise BatchError(f"no armature '{task['armature']}' in the snapshot")
        work = make_work(obj, task.get("chain"), tuple(task["frame_range"]), task["step"])
        out = Path(task["out"])
        for index, frames in task["chunks"].items():
            work.save(work.solve(np.array(frames, dtype=work.job.frames.dtype)), out / f"chunk{index}.npz")
    except (BatchError, _bake_module().IKSolversError) as error:
        report_problem(f"{PROG} worker", error)
        task_path.with_suffix(".field").write_text(getattr(error, "field", None) or "")  # for the report
        return EXIT_FAILED
    return EXIT_OK


def bake_file(path: Path, options: BatchOptions, progress: Progress, already_open: bool = False) -> dict:
    """Bake the selected chains of one file, save it and check the saved keys; the file's report entry
    (BatchError on failure)."""
    bpy = _bpy()
    bake = _bake_module()
    started = time.perf_counter()
    progress.start_file(path)
    if not already_open:
        open_blend(path)
    scene = bpy.context.scene
    frames = options.frames or (scene.frame_start, scene.frame_end)
    selected = select_chains(options)
    pieces, notes = plan_work(selected, named=bool(options.chains), method=options.method)
    originals = {}
    if options.method is not None:
        for obj, chain in selected:
            originals[(obj.name, chain.name)] = chain.method
            chain.method = options.method
    entries, baked, roots = [], [], []
    jobs, capped = cap_jobs(options.jobs)
    for note in ([capped] if capped else []) + notes:
        progress.note(note)
    with tempfile.TemporaryDirectory(prefix="ik_batch_") as workdir:
        for index, (obj, chain_name) in enumerate(pieces, 1):
            work_started = time.perf_counter()
            work = make_work(obj, chain_name, frames, options.step, options.reduce_keys)
            chunks = plan_chunks(work.job.frames, options.chunk_size)
            try:
                if jobs == 1 or len(chunks) == 1:
                    parts = [work.solve(frames_) for frames_ in chunks]
                else:
                    parts = solve_chunks_in_workers(work, chunks, jobs, Path(workdir))
                bake_reports = work.write(work.join(parts))
                work.job.finish()
            except bake.IKSolversError as error:
                work.job.cancel()
                raise BatchError(f"{work.label}: {error}", error.field) from error
            seconds = time.perf_counter() - work_started  # a body's chains: the body's time each
            root = work.root_entry()  # a body's root, with reduced keys; else None
            entries += work_entries(path.name, bake_reports, root, seconds, options.quiet)
            roots += [root] if root is not None else []
            baked += work.baked()
            progress.chain(path, work.label, index, len(pieces), len(work.job.frames), seconds)
    for obj, chain in selected:
        if (obj.name, chain.name) in originals:
            chain.method = originals[(obj.name, chain.name)]
    mismatched = [entry for entry in entries if entry["evaluated_mismatch_frames"]]
    output = None if mismatched else options.output_path(path)  # a failed check saves nothing
    if output is not None:
        save_checked(output, baked, replace=options.overwrite or output == path)
    result = {"input": str(path), "output": None if output is None else str(output), "ok": not mismatched,
              "error_field": None, "chains": entries, **({"body_roots": roots} if roots else {}),
              "seconds": time.perf_counter() - started}
    if mismatched:
        first = mismatched[0]
        result["error"] = (f"{path}: {first['armature']}:{first['chain']}: Blender's evaluation of the baked keys "
                           f"differs from the solve on {len(first['evaluated_mismatch_frames'])} frames "
                           f"(first {first['evaluated_mismatch_frames'][0]})")
    return result


def save_checked(output: Path, baked: list[BakedChain], replace: bool) -> None:
    """Save the open file beside ``output`` under a name of its own, re-open it, check every baked chain's
    keys, and only then move it to ``output`` (``_batch_output``); else BatchError, ``output`` as it was.
    ``replace``: an existing output may be replaced (kept as ``.blend1``); else it is an OutputError."""
    bpy = _bpy()
    from ik_solvers.blender import compat

    paths = bpy.context.preferences.filepaths
    save_version = paths.save_version
    with staged(output) as temporary:
        paths.save_version = 0  # the temporary name is new: no .blend1 of it
        try:
            bpy.ops.wm.save_as_mainfile(filepath=str(temporary), copy=True)
        except RuntimeError as error:
            raise BatchError(f"{output}: cannot be saved ({one_line(error)})") from None
        finally:
            paths.save_version = save_version
        open_blend(temporary)
        for chain in baked:
            problem = missing_keys(bpy.data.objects, chain, compat.channelbag_for_assigned_slot)
            if problem is not None:
                raise BatchError(f"{output}: the keys did not survive the save: {problem}")
        publish(temporary, output, replace=replace, versions=max(1, save_version))  # OutputError


def main(argv: list[str]) -> int:
    """Run the batch; any exception that escapes the per-file handling is an internal error (exit 3)."""
    try:
        return run(argv)
    except KeyboardInterrupt:
        report_problem(PROG, "interrupted")
        return EXIT_INTERNAL
    except Exception as error:  # a bug or the machine, never a traceback: one line, and a farm retries
        report_problem(PROG, f"internal error: {type(error).__name__}: {one_line(error)}")
        return EXIT_INTERNAL


def run(argv: list[str]) -> int:
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
        outputs = {path: output for path in options.files if (output := options.output_path(path)) is not None}
        check_written_paths(options.files, outputs, options.report, in_place=options.in_place,
                            overwrite=options.overwrite)
    except UsageError as error:
        report_problem(PROG, error, usage=True)
        return EXIT_USAGE
    except SystemExit as done:  # --help
        return int(done.code or 0)
    try:
        check_writable([*outputs.values(), *([options.report] if options.report is not None else [])])
    except WriteError as error:
        report_problem(PROG, error)
        return EXIT_FAILED
    reports, status = [], EXIT_OK
    progress = _openjd.make_progress(len(options.files))
    for index, path in enumerate(options.files):
        try:
            with output_lock(options.output_path(path)):  # one run at a time per output
                entry = bake_file(path, options, progress, already_open=(opened is not None and index == 0))
        except Exception as error:  # one file's failure must not lose the others
            expected = isinstance(error, (BatchError, OutputError))
            status = max(status, EXIT_FAILED if expected else EXIT_INTERNAL)
            message = str(error) if expected else f"internal error: {type(error).__name__}: {one_line(error)}"
            if not message.startswith(str(path)):
                message = f"{path}: {message}"
            report_problem(PROG, message)
            entry = {"input": str(path), "output": None, "ok": False, "error": message,
                     "error_field": getattr(error, "field", None), "chains": []}
        else:
            if not entry["ok"]:
                status = max(status, EXIT_FAILED)
                report_problem(PROG, entry["error"])
        progress.end_file()
        reports.append(entry)
    if options.report is not None:
        document = report_document(reports, exit_code=status, jobs=options.jobs, chunk_size=options.chunk_size,
                                   blender_version=_bpy().app.version_string)
        try:
            write_report(options.report, document)
        except OSError as error:
            report_problem(PROG, f"--report {options.report}: cannot be written ({error.strerror or error})")
            return max(status, EXIT_FAILED)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))

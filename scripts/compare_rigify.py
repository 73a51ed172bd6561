"""Issue 11's table on Rigify's rigs: our methods against Blender's IK constraint, measured on Blender's evaluation.

Every rig of ``_rigify_rigs.BUILDERS`` × every solver of ``SOLVERS`` (ours: HI, the default a new
chain of that length gets, SDLS without its reference-pose pull, ANALYTIC with pole, CCD, FABRIK;
Blender's IK constraint with and without pole), each in a fresh scene, solved and measured by
``_rigify_runs.py``; bake ratio = Blender's ``nla.bake`` time (without pole) / ours. Writes
``OUT/rows.json``, ``OUT/rows.csv`` and ``OUT/table.md``; ``--doc FILE`` pastes the tables between
``<!-- rigify:start -->`` and ``<!-- rigify:end -->`` (docs/comparison.md's Rigify section, where
``compare_native.py`` pastes the same tables). ``--sweep W,W,…`` instead measures the default of
longer chains at each reference weight (``OUT/sweep.md``).

    .venv/bin/python scripts/compare_rigify.py --out DIR [--frames 40] [--rigs NAME …] [--repeats 3]
                                               [--doc docs/comparison.md]
"""

from __future__ import annotations

import csv
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main
from _measure import (
    BACKWARD_DEGREES,
    FLIP_TURN_DEGREES,
    MISSED_MM,
    check_markers,
    markers,
    paste_between_markers,
)
from _measure import format_number as _fmt
from _rigify_rigs import BUILDERS, fresh_scene
from _rigify_runs import (
    add_blender_ik,
    add_chain,
    bake_blender,
    bake_ours,
    bake_report,
    count_warned_flips,
    measure,
    pole_warning_frames,
)

RIGIFY_MARKERS = markers("rigify")
"""The marker lines around the Rigify tables in a doc (docs/comparison.md)."""
SOLVERS = (
    ("HI", {"method": "HI"}),
    ("default", {"method": None}),
    ("SDLS, no pull", {"method": "SDLS", "reference_weight": 0.0, "bones_min": 3}),
    ("ANALYTIC+pole", {"method": "ANALYTIC", "pole": True}),
    ("CCD", {"method": "CCD"}),
    ("FABRIK", {"method": "FABRIK"}),
    ("Blender IK", {"blender": True, "pole": False}),
    ("Blender IK+pole", {"blender": True, "pole": True}),
)
"""Table rows per rig: label → how to run it (ours: ``add_chain`` options; Blender's IK constraint).
``bones_min``: only on chains of at least that many bones ("SDLS, no pull" is the default of longer
chains without its reference-pose pull, for comparison)."""


def run(name: str, label: str, spec: dict, frames: int, repeats: int = 3) -> dict:
    """One row: build ``name`` in a fresh scene, solve with ``spec``, measure from Blender's evaluation.

    The measures are of the first bake (ours: from the rest pose); the bake time is the least of
    ``repeats`` bakes of the same range (the machine is shared: the minimum is the stable number)."""
    fresh_scene()
    setup = BUILDERS[name](frames=frames)
    row = {"rig": name, "solver": label, "bones": len(setup.bones), "reach_m": setup.reach}
    if spec.get("blender"):
        add_blender_ik(setup, spec["pole"])
        result = measure(setup)
        seconds = min(bake_blender(setup) for _ in range(repeats))
        report = None
    else:
        if spec["method"] == "ANALYTIC" and len(setup.bones) != 2:
            return {**row, "skipped": "two-bone only"}
        if len(setup.bones) < spec.get("bones_min", 0):
            return {**row, "skipped": f"chains of {spec['bones_min']}+ bones only"}
        import ik_solvers

        ik_solvers.register()
        try:
            chain = add_chain(setup, spec["method"], pole=spec.get("pole", False),
                              reference_weight=spec.get("reference_weight"))
            pull = f", pull {chain.reference_weight:.2g}" if chain.reference_weight else ""
            row["solver"] = label if spec["method"] else f"default ({chain.method}{pull})"
            try:
                seconds = bake_ours(setup)
            except RuntimeError as error:
                return {**row, "skipped": f"bake failed: {error}"}
            result = measure(setup)  # the first bake's keys, from the rest pose
            report = bake_report(chain)
            seconds = min([seconds] + [bake_ours(setup) for _ in range(repeats - 1)])
            warnings = pole_warning_frames(setup, chain)
        finally:
            ik_solvers.unregister()
    reachable = setup.reachable_mask()
    errors_mm = result.errors * 1000.0
    missed = np.flatnonzero(reachable & (errors_mm > MISSED_MM)) + 1
    if report is not None:
        not_reached = set(report.get("not_reached_frames", ()))
        starts = {int(setup.path_frames(p)[0]) for p in setup.paths}  # the target jumps between paths there
        flips = [f for f in report.get("flip_frames", ()) if int(f["frame"]) not in starts]
        row.update(misses_unreported=int(sum(int(f) not in not_reached for f in missed)),
                   flips_warned=count_warned_flips(setup.frame_end, result.flips, report, warnings),
                   flips_reported=len(flips), flips_reported_warned=int(sum(bool(f.get("warned")) for f in flips)))
    row.update(
        frames=setup.frame_end,
        reachable_frames=int(reachable.sum()),
        max_reachable_mm=float(errors_mm[reachable].max()),
        misses=int((errors_mm[reachable] > MISSED_MM).sum()),
        max_excess_mm=float(((result.errors - result.bounds) * 1000.0)[~reachable].max()),
        flips=len(result.flips),
        flips_unwarned=len(result.flips) - (count_warned_flips(setup.frame_end, result.flips, report, warnings) if report else 0),
        backward_frames=int(result.backward[reachable].any(axis=1).sum()),
        bake_seconds=seconds,
        bake_repeats=repeats,
        flips_by_path={p: sum(int(f in setup.path_frames(p)) for f in result.flips) for p in setup.paths},
        backward_by_path={p: int(result.backward[setup.path_frames(p) - 1].any(axis=1).sum()) for p in setup.paths},
        max_error_mm_by_path={p: float(errors_mm[setup.path_frames(p) - 1].max()) for p in setup.paths},
    )
    return row


def measure_all(out_dir: Path | None = None, frames: int = 40, rigs: Sequence[str] | None = None,
                log: Callable[[str], object] = print, repeats: int = 3) -> list[dict]:
    """Every rig × solver of ``SOLVERS``; bake ratio = Blender's ``nla.bake`` time (without pole) /
    ours. Writes ``rows.json``, ``rows.csv`` and ``table.md`` into ``out_dir`` if given."""
    rows = []
    started = time.perf_counter()
    for name in rigs or BUILDERS:
        block = []
        for label, spec in SOLVERS:
            block.append(run(name, label, spec, frames, repeats))
            log(f"{name:18s} {block[-1]['solver']:22s} {time.perf_counter() - started:6.0f} s")
        blender = next(r for r in block if r["solver"] == "Blender IK")
        for row in block:
            if "bake_seconds" in row:
                row["bake_ratio"] = blender["bake_seconds"] / row["bake_seconds"]
        rows += block
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "rows.json").write_text(json.dumps(rows, indent=2))
        columns = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
        with open(out_dir / "rows.csv", "w", newline="") as handle:
            writer = csv.DictWriter(handle, columns)
            writer.writeheader()
            writer.writerows(rows)
        (out_dir / "table.md").write_text(tables_markdown(rows, frames))
    return rows


def table_markdown(rows: list[dict], frames: int) -> str:
    """The summary table: one row per rig × solver, with a caption saying how each column is measured."""
    repeats = max((row.get("bake_repeats", 1) for row in rows), default=1)
    caption = (
        f"{frames} frames per path; errors from Blender's evaluation of the baked keys (ours) or the live "
        f"constraint (Blender). Miss: reachable frame off by > {MISSED_MM:g} mm; unreported: a miss the bake's "
        f"report does not list as not reached. Backward: reachable frames with a joint bent > "
        f"{BACKWARD_DEGREES:g}° to the wrong side of its rest bend. Flips: a joint's bend normal turning > "
        f"{FLIP_TURN_DEGREES:g}° between frames of a path, split into unwarned / warned (warned: the frame or "
        "the one before is in our bake report's flip frames or its frames bending a joint against its preferred "
        "way, or has HI's pole warning on; Blender warns of "
        "nothing). Excess below 0 (float32 noise, under 1e-4 mm) shows as 0. Bake "
        f"ratio: Blender's `nla.bake` time (no pole) / this solver's bake time, least of {repeats} bakes each."
    )
    header = ("| rig | solver | max reachable error mm | misses | max excess (out of reach) mm "
              "| flips unwarned / warned | backward frames | bake µs / frame | bake ratio |")
    lines = [caption, "", header, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if "skipped" in row:
            continue
        misses = f"{row['misses']} of {row['reachable_frames']}"
        if row.get("misses_unreported"):
            misses += f" ({row['misses_unreported']} unreported)"
        flips = f"{row['flips_unwarned']} / {row['flips'] - row['flips_unwarned']}"
        lines.append(
            f"| {row['rig']} | {row['solver']} | {_fmt(row['max_reachable_mm'])} "
            f"| {misses} | {_fmt(max(row['max_excess_mm'], 0.0))} | {flips} "
            f"| {row['backward_frames']} | {_fmt(row['bake_seconds'] / row['frames'] * 1e6)} "
            f"| {_fmt(row['bake_ratio'], 2)} |")
    return "\n".join(lines) + "\n"


def per_path_markdown(rows: list[dict]) -> str:
    """Per rig, one table solver × path: ``max error mm / backward frames / flips``."""
    lines = []
    for rig in dict.fromkeys(r["rig"] for r in rows):
        block = [r for r in rows if r["rig"] == rig and "skipped" not in r]
        paths = list(block[0]["flips_by_path"])
        lines += [f"#### {rig} ({block[0]['bones']} bones, reach {block[0]['reach_m']:.3f} m)", "",
                  "Cells: max error mm / backward frames / flips.", "",
                  "| solver | " + " | ".join(paths) + " |", "|---|" + "---:|" * len(paths)]
        for row in block:
            cells = [f"{_fmt(row['max_error_mm_by_path'][p])} / {row['backward_by_path'][p]} "
                     f"/ {row['flips_by_path'][p]}" for p in paths]
            lines.append(f"| {row['solver']} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def tables_markdown(rows: list[dict], frames: int) -> str:
    """The summary table, then the per-path tables: what ``table.md`` holds and ``--doc`` pastes."""
    return table_markdown(rows, frames) + "\n" + per_path_markdown(rows)


SWEEP_RIGS = ("human_leg_foot", "human_spine", "horse_hind_leg", "wolf_hind_leg", "horse_hind_leg_toe",
              "wolf_hind_leg_toe")
"""The rigs of three or more bones, where the reference-pose pull of SDLS was measured."""


def reference_weight_sweep(weights: Sequence[float], frames: int = 40, rigs: Sequence[str] = SWEEP_RIGS,
                           log: Callable[[str], object] = print) -> str:
    """The default method of longer chains (SDLS) at each ``reference_weight``: a markdown table of
    backward frames (reachable, by path), flips, max reachable error, not-reached frames and the
    excess over the bound out of reach, per rig and weight."""
    import ik_solvers

    lines = [f"{frames} frames per path; measures as in the Rigify table.", "",
             "| rig | reference_weight | backward frames | backward by path | flips | max reachable error mm "
             "| not reached (of which out of reach) | max excess out of reach mm |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    for name in rigs:
        for weight in weights:
            fresh_scene()
            ik_solvers.register()
            try:
                setup = BUILDERS[name](frames=frames)
                chain = add_chain(setup, "SDLS", reference_weight=weight)
                bake_ours(setup, chain.name)
                result = measure(setup)
                report = bake_report(chain) or {}
            finally:
                ik_solvers.unregister()
            reachable = setup.reachable_mask()
            by_path = {p: int(result.backward[setup.path_frames(p) - 1].any(axis=1).sum())
                       for p in setup.paths if setup.reachable[p]}
            not_reached = report.get("not_reached_frames", [])
            outside = sum(int(not reachable[f - 1]) for f in not_reached)
            lines.append(
                f"| {name} | {weight:g} | {int(result.backward[reachable].any(axis=1).sum())} "
                f"| {', '.join(f'{p} {v}' for p, v in by_path.items() if v) or '–'} | {len(result.flips)} "
                f"| {_fmt(result.errors[reachable].max() * 1000)} | {len(not_reached)} ({outside}) "
                f"| {_fmt(((result.errors - result.bounds)[~reachable]).max() * 1000)} |")
            log(lines[-1])
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    return run_main("compare_rigify.py", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="compare_rigify.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--frames", type=int, default=40, help="frames per target path (default 40)")
    parser.add_argument("--rigs", nargs="+", choices=tuple(BUILDERS), help="rigs (default: all)")
    parser.add_argument("--repeats", type=int, default=3, help="bakes timed per row, the least counts (default 3)")
    parser.add_argument("--doc", type=Path, help="markdown file to paste the tables into, between the markers "
                                                 f"{RIGIFY_MARKERS[0]} and {RIGIFY_MARKERS[1]}")
    parser.add_argument("--sweep", type=_weights,
                        help="instead: the default of longer chains at these reference weights (e.g. 0,0.1,1), "
                             "written to OUT/sweep.md")
    args = parser.parse_args(argv)
    if args.frames < 2 or args.repeats < 1:
        raise UsageError("--frames must be at least 2 and --repeats at least 1")
    if args.doc is not None:
        check_markers(args.doc, *RIGIFY_MARKERS)  # before the run, not after it
    import_bpy(register_addon=False)  # each row registers the add-on in its own fresh scene
    if args.sweep is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "sweep.md").write_text(reference_weight_sweep(args.sweep, args.frames, args.rigs or SWEEP_RIGS))
        return 0
    rows = measure_all(args.out, args.frames, args.rigs, repeats=args.repeats)
    table = tables_markdown(rows, args.frames)
    if args.doc is not None:
        paste_between_markers(args.doc, *RIGIFY_MARKERS, table + "\n")
    print(table)
    return 0


def _weights(text: str) -> list[float]:
    return [float(weight) for weight in text.split(",")]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

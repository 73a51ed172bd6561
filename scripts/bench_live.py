"""Live benchmark (issue 12): moving the target + depsgraph update, ours live against Blender's IK constraint.

For the two-bone arm and the 10-bone chain of ``bench_bake``, in one run: the median cost of
``target.location = …; view_layer.update()`` (a) with nothing solving, (b) with Blender's IK
constraint on the tip bone, (c) with our live mode on (the chain's default method, ``chains.default_method``:
HI). Issue 12's goal: (c) ≤ 3 × (b). Also timed: our handler's own work for a target move (the quick
path, ``live_quick.quick_update``) and for an update that checks the whole armature (``update_live_chains``),
an update right after a move with nothing changed since ("2nd upd": what is left to do after our
pose write; Blender evaluates the tags our handler sets in a second pass of the same update, which
runs no post-update handlers, so this is Blender's empty update), the check of Blender's evaluation
of a live write ("check": ``live_check.check_written``, the timer's work, at most every 0.1 s and not
per move; also in the body row), and a single solve of each chain
(the core's ``solve`` for one target, goal ≤ 1 ms for the 10-bone chain; and the one-target HI
solve of the quick path, ``solve_hi_one``).

With ``--body`` (or only it, ``--body-only``), issue 22's row: the five-goal body of
``compare_body.py`` on Rigify's human metarig (its set-up: both ankles, both wrists, the head, the
hips as body root), one goal Empty (``wrist.L``) moved per update along a small path round its rest
place, (a) with nothing solving, (b) with Blender's five IK constraints (one tree) and (c) with our
live body (one chain Live, the five solved together); the goal: (c) ≤ 3 × (b). Also timed: our
handler's work for a goal move (``body_live.update_live_body``, forced) and its parts as it runs
them: the body (kept between moves, ``body_live.live_body_spec``), sampling the goals, the core's
solve, the write (pose, each goal's status, the armature as written).

Prints a table per kind and writes ``DIR/bench_live.csv`` (chains), ``DIR/bench_live_body.csv``
(the body) and ``DIR/bench_live.json`` (both).

    .venv/bin/python scripts/bench_live.py [--out DIR] [--moves K] [--body | --body-only]
"""

from __future__ import annotations

import csv
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main
from bench_bake import RIGS, default_case, fresh_scene, target_path

GOAL_RATIO = 3.0
SINGLE_SOLVE_GOAL_US = 1000.0
LIVE_RIGS = ("arm (2 bones)", "chain (10 bones)")


def _moves(bpy, obj, target, tip: str, path: np.ndarray) -> tuple[list[float], float]:
    """µs of each move + update along ``path``, and the largest evaluated tip-to-target distance."""
    view_layer = bpy.context.view_layer
    times, errors = [], []
    for position in path:
        started = time.perf_counter()
        target.location = tuple(position)
        view_layer.update()
        times.append((time.perf_counter() - started) * 1e6)
        errors.append(np.linalg.norm(np.array(obj.matrix_world @ obj.pose.bones[tip].tail) - position))
    return times, float(max(errors))


def _scene(bpy, rig_name: str):
    obj, target, tip, length = fresh_scene(bpy, rig_name, 2)
    target.animation_data_clear()
    return obj, target, tip, length


def measure(bpy, rig_name: str, moves: int) -> dict:
    from ik_solvers.blender import live, live_quick

    centre, radius = RIGS[rig_name][3], RIGS[rig_name][4]
    path = target_path(moves, centre, radius)
    row: dict[str, Any] = {"rig": rig_name, "moves": moves}

    obj, target, tip, length = _scene(bpy, rig_name)
    _moves(bpy, obj, target, tip, path[:20])
    times, _ = _moves(bpy, obj, target, tip, path)
    row["nothing_us"] = statistics.median(times)

    obj, target, tip, length = _scene(bpy, rig_name)
    constraint = obj.pose.bones[tip].constraints.new("IK")
    constraint.target, constraint.chain_count = target, length
    _moves(bpy, obj, target, tip, path[:20])
    times, row["blender_tip_error_max"] = _moves(bpy, obj, target, tip, path)
    row["blender_us"] = statistics.median(times)

    obj, target, tip, length = _scene(bpy, rig_name)
    method, _, weight = default_case(rig_name)
    chain = obj.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target = "Chain", tip, length, target
    chain.method, chain.reference_weight = method, weight
    bpy.context.view_layer.objects.active = obj
    if method == "HI":
        bpy.ops.ik_solvers.capture_preferred_pose()
    bpy.ops.ik_solvers.live_toggle()
    _moves(bpy, obj, target, tip, path[:20])
    times, row["ours_tip_error_max"] = _moves(bpy, obj, target, tip, path)
    row["ours_us"] = statistics.median(times)
    row["ours_us_p95"] = float(np.percentile(times, 95))
    row["method"] = method + (f" rw={weight:g}" if weight else "")
    scene, depsgraph = bpy.context.scene, bpy.context.evaluated_depsgraph_get()
    handler, full = [], []
    for position in path[: min(moves, 200)]:
        target.location = tuple(position)
        bpy.context.view_layer.update()
        for record in live.state.chains.values():  # as if the inputs were new: the quick path solves and writes again
            record.quick_solved = None
        started = time.perf_counter()
        assert live_quick.quick_update(scene, depsgraph), "a target move should take the quick path"
        handler.append((time.perf_counter() - started) * 1e6)
        started = time.perf_counter()
        live.update_live_chains(scene, depsgraph, force=True)
        full.append((time.perf_counter() - started) * 1e6)
        bpy.context.view_layer.update()  # that write, made outside an update, is an update of the armature
    row["handler_us"] = statistics.median(handler)
    row["full_update_us"] = statistics.median(full)
    second = []
    for position in path[: min(moves, 200)]:
        target.location = tuple(position)
        bpy.context.view_layer.update()  # solves, writes the pose and evaluates it
        started = time.perf_counter()
        bpy.context.view_layer.update()  # anything our write left behind
        second.append((time.perf_counter() - started) * 1e6)
    row["second_pass_us"] = statistics.median(second)
    row["check_us"] = check_us(bpy, target, path[: min(moves, 200)])
    row["single_solve_us"], row["single_quick_solve_us"] = single_solve_us(obj, chain, path[:200])
    bpy.ops.ik_solvers.live_toggle()
    row["ratio_ours_over_blender"] = row["ours_us"] / row["blender_us"]
    row["ratio_extra_ours_over_blender"] = (row["ours_us"] - row["nothing_us"]) / max(
        row["blender_us"] - row["nothing_us"], 1e-9)
    return row


def check_us(bpy, target, path: np.ndarray) -> float:
    """Median µs of the check of Blender's evaluation of a live write (``live_check.check_written``, the
    timer's function, run at most every ``CHECK_DELAY`` seconds) after each move along ``path``."""
    from ik_solvers.blender import live_check

    times = []
    for position in path:
        target.location = tuple(position)
        bpy.context.view_layer.update()
        started = time.perf_counter()
        live_check.check_written()
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def single_solve_us(obj, chain, targets: np.ndarray) -> tuple[float, float]:
    """Median µs of the core's ``solve`` for one target of this chain (its spec's method and options),
    and of ``solve_hi_one`` (the one-target HI solve live mode's quick path runs; NaN for another method)."""
    from ik_solvers.blender.rig import read_chain
    from ik_solvers.blender.spec import chain_spec
    from ik_solvers.core import Method, preferred_pose, solve, solve_hi_one

    spec = chain_spec(obj, chain, read_chain(obj, chain.tip_bone, chain.chain_length))
    root = np.linalg.inv(np.array(obj.matrix_world))
    local = targets @ root[:3, :3].T + root[:3, 3]
    batch, one = [], []
    preferred = preferred_pose(spec.rig.chain, spec.reference)
    for target in local:
        started = time.perf_counter()
        solve(spec.rig.chain, target, spec.method, spec.options, initial=spec.reference)
        batch.append((time.perf_counter() - started) * 1e6)
        if spec.method is Method.HI:
            started = time.perf_counter()
            solve_hi_one(preferred, tuple(target), tolerance=spec.options.tolerance)
            one.append((time.perf_counter() - started) * 1e6)
    return statistics.median(batch), statistics.median(one) if one else float("nan")


# --------------------------------------------------------------------------- the body (issue 22)
BODY_MOVED_GOAL = "wrist.L"
"""The goal an Empty of which is moved per timed move (a small path round its rest place)."""
BODY_PATH_RADIUS = 0.05


def _body_setup(bpy):
    """compare_body's metarig and five goal Empties, unkeyed (each move is the only change)."""
    from compare_body import BodySetup

    setup = BodySetup(2)
    for target in setup.targets.values():
        target.animation_data_clear()
    bpy.context.view_layer.update()
    return setup


def _body_moves(bpy, setup, path: np.ndarray) -> tuple[list[float], float]:
    """µs of each move of the moved goal + update along ``path``, and the largest evaluated error of that goal."""
    from compare_body import GOALS

    target, tip = setup.targets[BODY_MOVED_GOAL], GOALS[BODY_MOVED_GOAL][0]
    return _moves(bpy, setup.rig, target, tip, path)


def measure_body(bpy, moves: int) -> dict:
    """Ours live (five chains solved together) against Blender's five IK constraints (one tree), per goal move."""
    from compare_body import add_blender, add_ours

    row: dict[str, Any] = {"rig": "body (5 goals)", "moves": moves, "method": "body"}
    setup = _body_setup(bpy)
    path = target_path(moves, setup.rest_joints[BODY_MOVED_GOAL][-1], BODY_PATH_RADIUS)
    _body_moves(bpy, setup, path[:20])
    times, _ = _body_moves(bpy, setup, path)
    row["nothing_us"] = statistics.median(times)

    setup = _body_setup(bpy)
    add_blender(setup)
    _body_moves(bpy, setup, path[:20])
    times, row["blender_tip_error_max"] = _body_moves(bpy, setup, path)
    row["blender_us"] = statistics.median(times)

    setup = _body_setup(bpy)
    add_ours(setup)
    rig = setup.rig
    bpy.context.view_layer.objects.active = rig
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        assert bpy.ops.ik_solvers.live_toggle() == {"FINISHED"}
    _body_moves(bpy, setup, path[:20])
    times, row["ours_tip_error_max"] = _body_moves(bpy, setup, path)
    row["ours_us"] = statistics.median(times)
    row["ours_us_p95"] = float(np.percentile(times, 95))
    row.update(body_breakdown_us(bpy, setup, path[: min(moves, 200)]))
    second = []
    for position in path[: min(moves, 200)]:
        setup.targets[BODY_MOVED_GOAL].location = tuple(position)
        bpy.context.view_layer.update()
        started = time.perf_counter()
        bpy.context.view_layer.update()
        second.append((time.perf_counter() - started) * 1e6)
    row["second_pass_us"] = statistics.median(second)
    row["check_us"] = check_us(bpy, setup.targets[BODY_MOVED_GOAL], path[: min(moves, 200)])
    row["ratio_ours_over_blender"] = row["ours_us"] / row["blender_us"]
    row["ratio_extra_ours_over_blender"] = (row["ours_us"] - row["nothing_us"]) / max(
        row["blender_us"] - row["nothing_us"], 1e-9)
    return row


def body_breakdown_us(bpy, setup, path: np.ndarray) -> dict[str, float]:
    """Median µs of our handler's work for a goal move (``body_live.update_live_body``, forced) and of
    its parts run one by one as it runs them: the body (kept, or read again: ``live_body_spec``), sampling
    its goals, the solve, the write (pose and status)."""
    from ik_solvers.blender import body, body_live

    rig = setup.rig
    depsgraph = bpy.context.evaluated_depsgraph_get()
    live = [chain for chain in rig.ik_solvers.chains if chain.use_live]
    chains = body.body_chain_settings(rig)
    parts: dict[str, list[float]] = {key: [] for key in ("handler_us", "read_us", "sample_us", "solve_us", "write_us")}
    for position in path:
        setup.targets[BODY_MOVED_GOAL].location = tuple(position)
        bpy.context.view_layer.update()
        started = time.perf_counter()
        assert body_live.update_live_body(rig, live, depsgraph, force=True) == 1
        parts["handler_us"].append((time.perf_counter() - started) * 1e6)
        record = body_live.bodies[rig.session_uid]  # the parts as the next update runs them: the body kept
        bpy.context.view_layer.update()
        started = time.perf_counter()
        spec, _, fresh = body_live.live_body_spec(rig, record, chains)
        parts["read_us"].append((time.perf_counter() - started) * 1e6)
        started = time.perf_counter()
        inputs = body.sample_body(rig, spec, depsgraph)
        parts["sample_us"].append((time.perf_counter() - started) * 1e6)
        started = time.perf_counter()
        result = body.solve_body_inputs(spec, inputs)
        parts["solve_us"].append((time.perf_counter() - started) * 1e6)
        started = time.perf_counter()
        body_live.write_live_body(rig, record, result, inputs, fresh)
        parts["write_us"].append((time.perf_counter() - started) * 1e6)
        bpy.context.view_layer.update()
    return {key: statistics.median(values) for key, values in parts.items()}


_LEAD = (("rig", "rig", 18, "text"),)
_VERSUS = (("nothing", "nothing_us", 9, "us"), ("Blender IK", "blender_us", 12, "us"), ("ours live", "ours_us", 11, "us"),
           ("ours/Blender", "ratio_ours_over_blender", 14, "ratio"), ("goal ≤3×", "ratio_ours_over_blender", 10, "met"))
CHAIN_COLUMNS = (*_LEAD, ("method", "method", 14, "text"), *_VERSUS, ("handler", "handler_us", 9, "us"),
                 ("full upd", "full_update_us", 10, "us"), ("2nd upd", "second_pass_us", 9, "us"),
                 ("check", "check_us", 8, "us"), ("1 solve", "single_solve_us", 9, "us"), ("1 quick", "single_quick_solve_us", 9, "us"))
BODY_COLUMNS = (*_LEAD, *_VERSUS, ("handler", "handler_us", 9, "us"), ("read", "read_us", 8, "us"),
                ("sample", "sample_us", 8, "us"), ("solve", "solve_us", 8, "us"), ("write", "write_us", 8, "us"),
                ("2nd upd", "second_pass_us", 9, "us"), ("check", "check_us", 8, "us"))
"""(title, row key, width, kind) of each printed column."""


def print_table(rows: list[dict], columns: tuple, note: str) -> None:
    def cell(kind: str, width: int, value: Any) -> str:
        if kind == "text":
            return f"{value:<{width}}"
        if kind == "ratio":
            return f"{value:>{width - 1}.1f}×"
        if kind == "met":
            return f"{'met' if value <= GOAL_RATIO else 'NOT':>{width}}"
        return f"{value:>{width}.0f}"

    header = "".join(f"{title:<{width}}" if kind == "text" else f"{title:>{width}}" for title, _, width, kind in columns)
    print(f"{header}   ({note})")
    print("-" * len(header))
    for row in rows:
        print("".join(cell(kind, width, row[key]) for _, key, width, kind in columns))


def print_chain_table(rows: list[dict]) -> None:
    print_table(rows, CHAIN_COLUMNS, "µs, medians")
    chain10 = rows[-1]["single_solve_us"]
    print(f"single 10-bone solve: {chain10:.0f} µs median (goal ≤ {SINGLE_SOLVE_GOAL_US:.0f} µs: "
          f"{'met' if chain10 <= SINGLE_SOLVE_GOAL_US else 'NOT met'})")


def _write_csv(path: Path, rows: list[dict]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _main(argv: list[str] | None) -> int:
    parser = Parser(prog="bench_live.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/bench_live"))
    parser.add_argument("--moves", type=int, default=300, help="target moves timed per case")
    parser.add_argument("--body", action="store_true", help="also the five-goal body on Rigify's human metarig")
    parser.add_argument("--body-only", action="store_true", help="only the body row")
    args = parser.parse_args(argv)
    if args.moves < 1:
        raise UsageError("--moves needs at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    bpy = import_bpy()
    import ik_solvers

    bpy.ops.wm.read_homefile(use_empty=True)
    try:
        rows = [] if args.body_only else [measure(bpy, rig_name, args.moves) for rig_name in LIVE_RIGS]
        body_rows = [measure_body(bpy, args.moves)] if args.body or args.body_only else []
    finally:
        ik_solvers.unregister()
    if rows:
        print_chain_table(rows)
        _write_csv(args.out / "bench_live.csv", rows)
    if body_rows:
        print_table(body_rows, BODY_COLUMNS, "µs, medians; one goal moved, five solved")
        _write_csv(args.out / "bench_live_body.csv", body_rows)
    meta = {"blender": bpy.app.version_string, "moves": args.moves, "goal_ratio": GOAL_RATIO,
            "single_solve_goal_us": SINGLE_SOLVE_GOAL_US, "cpus": os.cpu_count()}
    (args.out / "bench_live.json").write_text(json.dumps({"meta": meta, "rows": rows, "body_rows": body_rows},
                                                         indent=1))
    print(f"wrote {args.out} (bench_live.json and the CSV of each table)")
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_main("bench_live", lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

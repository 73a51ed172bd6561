"""Our methods against Blender's own IK constraint (Standard and iTaSC), same rigs, same target paths, one run.

Rigs: the two-bone arm (0.30 / 0.28, elbow bent) with a pole target, and a 10-bone chain (0.1 each,
slight zigzag) without one. Target paths, ``--frames`` frames each, one after the other on one
timeline: ``reachable``, ``out_of_reach``, ``near_root``, ``pole_crossing`` (across the root→pole
axis, 2° off it), ``bend_circle`` (two full turns in the bend plane), ``behind`` (behind the
shoulder) and ``normal_crossing`` (across the bend plane's normal axis: the HI default map's pole).

Per rig and solver:

- time per frame: *solve* (Blender: ``frame_set`` with the constraint minus with it muted; ours: the
  batched core solve of all frames) and *bake* (Blender: ``nla.bake`` with visual keying; ours: the
  ``ik_solvers.bake`` operator, sampling and key writing included);
- tip error on Blender's own evaluation (the live constraint; our baked keys), median / max over the
  reachable frames, and the excess over the geometric lower bound on the out-of-reach frames;
- bend-plane flips (the plane normal turning by more than 30° between frames, within a path) per
  1,000 frames, and for HI whether each was warned (pole warning on the frame or the one before);
- history independence: the pose evaluated (Blender) or solved (ours) in sequential, reversed and
  shuffled frame order; the largest difference from the sequential result.

Rigify rigs (``--rigs`` names from ``scripts/_rigify_rigs.py``'s ``BUILDERS``: the human arm, leg,
leg with foot and spine, the horse and wolf hind legs, the generated rig's FK arm): Rigify's own
metarigs with paths over the reachable volume (crouch, kick, stride, reach across and behind, fold,
out of reach), ``--rigify-frames`` frames each, measured by ``compare_rigify.measure_all`` (ours with
the default method, HI, ANALYTIC+pole, CCD, FABRIK; Blender's IK with and without pole); written to
``DIR/rigify/`` and pasted between ``<!-- rigify:start -->`` and ``<!-- rigify:end -->``.

Writes ``--out DIR``: ``results.json``, ``summary.csv``, ``per_path.csv``, ``tables.md`` and
figures; ``--doc FILE`` pastes ``tables.md`` into FILE between ``<!-- tables:start -->`` and
``<!-- tables:end -->``.

    .venv/bin/python scripts/compare_native.py --out docs/comparison [--frames 300] [--rigify-frames 40] [--doc docs/comparison.md]
"""

from __future__ import annotations

import csv
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # 3×3 algebra: threads only add latency

import compare_rigify
import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main
from _measure import (
    MISSED_MM,
    check_markers,
    evaluate_chain,
    flip_frames,
    lower_bounds,
    markers,
    normal_turns,
    paste_between_markers,
    plane_normals,
    tip_errors,
    warned_flips,
)
from _measure import format_number as _fmt
from _rigify_rigs import BUILDERS
from _rigs import build_armature, key_location_every_frame, nla_bake_pose

NATIVE_RIGS = ("arm", "chain10")
RIGIFY_RIGS = tuple(BUILDERS)
"""Rigs built here, and Rigify's (``_rigify_rigs.BUILDERS``)."""
TABLE_MARKERS = markers("tables")
"""The marker lines around this script's own tables in a doc (docs/comparison.md)."""

PATHS = ("reachable", "out_of_reach", "near_root", "pole_crossing", "bend_circle", "behind", "normal_crossing")
BLENDER_SOLVERS = {
    "Blender Standard": ("LEGACY", None),
    "Blender iTaSC": ("ITASC", None),
}
"""label → (``pose.ik_solver``, iTaSC ``reiteration_method`` or None for Blender's default)."""


@dataclass(frozen=True)
class RigSpec:
    name: str
    bones: tuple  # (name, head, tail, parent)
    root: np.ndarray
    forward: np.ndarray  # rest direction root → tip
    bend: np.ndarray  # in the bend plane, ⟂ forward: the side the chain bends to
    pole: np.ndarray | None  # pole target position (world) or None
    methods: tuple[str, ...]  # ours; "HI+pole" = HI with the Pole Object map


def arm_spec() -> RigSpec:
    root = np.array([0.0, 0.0, 1.4])
    bones = (("upper_arm", root, root + [0.3, 0.0, 0.0], None),
             ("forearm", root + [0.3, 0.0, 0.0], root + [0.57, 0.08, -0.01], "upper_arm"))
    # The elbow sits on the -y side of the shoulder → tip line: the arm bends toward -y.
    return RigSpec("arm", bones, root, np.array([1.0, 0.0, 0.0]), np.array([0.0, -1.0, 0.0]),
                   root + [0.3, -0.5, 0.0], ("ANALYTIC", "HI+pole", "HI", "DLS", "SDLS", "FABRIK", "CCD"))


def chain10_spec() -> RigSpec:
    root = np.array([0.0, 0.0, 1.0])
    bones, head = [], root.copy()
    for index in range(10):
        angle = math.radians(6.0 if index % 2 else -4.0)  # a slight zigzag, bending toward +y overall
        tail = head + 0.1 * np.array([math.cos(angle), math.sin(angle), 0.0])
        bones.append((f"b{index}", head.copy(), tail, f"b{index - 1}" if index else None))
        head = tail
    return RigSpec("chain10", tuple(bones), root, np.array([1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0]), None,
                   ("HI", "DLS", "SDLS", "PSEUDO_INVERSE", "FABRIK", "CCD"))


def reach_of(spec: RigSpec) -> float:
    return float(sum(np.linalg.norm(np.asarray(t) - np.asarray(h)) for _, h, t, _ in spec.bones))


# --------------------------------------------------------------------------- target paths
def target_paths(spec: RigSpec, frames: int) -> dict[str, np.ndarray]:
    """World target positions ``(frames, 3)`` per path, around the rig's root."""
    reach = reach_of(spec)
    e, p = spec.forward, spec.bend
    pole_axis = p if spec.pole is None else (spec.pole - spec.root) / np.linalg.norm(spec.pole - spec.root)
    n = np.cross(e, p)
    u = np.arange(frames) / frames
    wave = 2.0 * math.pi * u

    def wander(radius):
        az = 0.9 * np.sin(2 * wave)
        el = 0.5 * np.sin(3 * wave + 1.0)
        d = (np.cos(el) * np.cos(az))[:, None] * e + (np.cos(el) * np.sin(az))[:, None] * n \
            + np.sin(el)[:, None] * (-p)
        return spec.root + radius[:, None] * d

    behind_dir = -e[None] + (0.5 * np.sin(2 * wave))[:, None] * n + (0.35 * np.cos(3 * wave))[:, None] * (-p)
    behind_dir /= np.linalg.norm(behind_dir, axis=1, keepdims=True)
    return {
        "reachable": wander(reach * (0.6 + 0.25 * np.sin(6 * wave))),
        "out_of_reach": wander(reach * (1.05 + 0.35 * (0.5 + 0.5 * np.sin(4 * wave)))),
        "near_root": wander(reach * (0.03 + 0.12 * (0.5 + 0.5 * np.sin(6 * wave)))),
        # Back and forth across the root → pole axis, 2° to the side of it.
        "pole_crossing": spec.root + 0.6 * reach * (pole_axis + 0.035 * e)[None]
        + (0.35 * reach * np.sin(3 * wave))[:, None] * n,
        "bend_circle": spec.root + 0.7 * reach * (np.cos(2 * wave)[:, None] * e + np.sin(2 * wave)[:, None] * p),
        "behind": spec.root + 0.6 * reach * behind_dir,
        # Back and forth across the bend plane's normal axis (the HI default map's pole), 2° off it.
        "normal_crossing": spec.root + 0.6 * reach * (n + 0.035 * e)[None]
        + (0.35 * reach * np.sin(3 * wave))[:, None] * p,
    }


# --------------------------------------------------------------------------- scene
def fresh_scene(spec: RigSpec, targets: np.ndarray):
    """Empty scene with the rig, a target keyed at every frame (linear) and the pole Empty."""
    bpy = import_bpy()
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, len(targets)
    # A fixed base bone (a clavicle) the chain hangs from, connected: iTaSC gives an unparented or
    # disconnected chain root translational freedom, which no other solver here has.
    base = {"name": "base", "head": spec.root - 0.1 * spec.forward, "tail": spec.root}
    chain = [{"name": name, "head": head, "tail": tail, "parent": parent or "base"}
             for name, head, tail, parent in spec.bones]
    rig = build_armature([base, *chain], name=spec.name)
    target = bpy.data.objects.new("Target", None)
    scene.collection.objects.link(target)
    key_location_every_frame(target, targets)
    pole = None
    if spec.pole is not None:
        pole = bpy.data.objects.new("Pole", None)
        pole.location = tuple(spec.pole)
        scene.collection.objects.link(pole)
    scene.frame_set(1)
    return rig, target, pole


def choose_pole_angle(rig, constraint, bones: list[str], target) -> float:
    """Blender's pole angle that keeps the rest bend: of 0, ±90°, 180°, the one whose solve of the
    rest tip position moves the joints least (Blender leaves it to the user)."""
    bpy = import_bpy()
    rest = np.array([tuple(rig.matrix_world @ rig.pose.bones[b].head) for b in bones])
    saved = target.animation_data.action
    target.animation_data.action = None
    target.location = tuple(rig.matrix_world @ rig.pose.bones[bones[-1]].tail)
    best, best_angle = np.inf, 0.0
    for angle in (0.0, math.pi / 2, -math.pi / 2, math.pi):
        constraint.pole_angle = angle
        bpy.context.view_layer.update()
        moved = np.array([tuple(rig.matrix_world @ rig.pose.bones[b].head) for b in bones])
        if np.abs(moved - rest).max() < best:
            best, best_angle = np.abs(moved - rest).max(), angle
    constraint.pole_angle = best_angle
    target.animation_data.action = saved
    return best_angle


# --------------------------------------------------------------------------- runs
def stats(joints, targets, bound, flips, warned, frames_total) -> dict:
    error = tip_errors(joints, targets)
    reachable = bound <= 0.0
    excess = error - bound
    return {
        "reachable_median_mm": float(np.median(error[reachable]) * 1000),
        "reachable_max_mm": float(error[reachable].max() * 1000),
        "reachable_missed": int((error[reachable] > MISSED_MM / 1000).sum()),
        "reachable_frames": int(reachable.sum()),
        "excess_median_mm": float(np.median(excess[~reachable]) * 1000) if (~reachable).any() else None,
        "excess_max_mm": float(excess[~reachable].max() * 1000) if (~reachable).any() else None,
        "flips": len(flips),
        "flips_per_1000": 1000.0 * len(flips) / frames_total,
        "flips_warned": None if warned is None else int(sum(warned)),
        "_error": error,
    }


def per_path(joints, targets, bound, flips, warned, path_length: int) -> dict:
    rows = {}
    for index, name in enumerate(PATHS):
        part = slice(index * path_length, (index + 1) * path_length)
        error = tip_errors(joints[part], targets[part])
        reachable = bound[part] <= 0.0
        in_path = [k for k in flips if part.start <= k < part.stop]
        rows[name] = {
            "reachable_frames": int(reachable.sum()),
            "reachable_max_mm": float(error[reachable].max() * 1000) if reachable.any() else None,
            "excess_max_mm": float((error - bound[part])[~reachable].max() * 1000) if (~reachable).any() else None,
            "flips": len(in_path),
            "flips_warned": None if warned is None else int(sum(w for k, w in zip(flips, warned) if k in in_path)),
        }
    return rows


def run_blender(spec: RigSpec, solver: tuple[str, str | None], targets_path: np.ndarray, path_length: int,
                seed: int) -> dict:
    bpy = import_bpy()
    rig, target, pole = fresh_scene(spec, targets_path)
    bones = [b[0] for b in spec.bones]
    n = len(targets_path)
    rig.pose.ik_solver = solver[0]
    if solver[1] is not None:
        rig.pose.ik_param.reiteration_method = solver[1]
    constraint = rig.pose.bones[bones[-1]].constraints.new("IK")
    constraint.target, constraint.chain_count = target, len(bones)
    if pole is not None:
        constraint.pole_target = pole
        choose_pole_angle(rig, constraint, bones, target)
    sequential = np.arange(1, n + 1)
    constraint.mute = True
    _, _, base_seconds = evaluate_chain(rig, bones, target, sequential)
    constraint.mute = False
    bpy.context.scene.frame_set(1)
    joints, targets, seconds = evaluate_chain(rig, bones, target, sequential)
    rng = np.random.default_rng(seed)
    history = {}
    for order_name, order in (("reversed", sequential[::-1]), ("shuffled", rng.permutation(sequential))):
        rows, _, _ = evaluate_chain(rig, bones, target, order)
        other = np.empty_like(rows)
        other[order - 1] = rows  # back in frame order
        history[order_name] = float(np.abs(other - joints).max() * 1000)
    bound = lower_bounds(rig, bones[-1], len(bones), targets)
    flips = flip_frames(normal_turns(plane_normals(joints), path_length))
    # Bake: nla.bake with visual keying (the constraint stays; we only time the bake itself).
    bake_seconds = nla_bake_pose(rig, n, clear_constraints=False)
    out = stats(joints, targets, bound, flips, None, n)
    out.update(solve_us=max(seconds - base_seconds, 0.0) / n * 1e6, eval_us=seconds / n * 1e6,
               bake_us=bake_seconds / n * 1e6, history_mm=history, history_unit="mm (joint positions)",
               per_path=per_path(joints, targets, bound, flips, None, path_length))
    return out


def run_ours(spec: RigSpec, method: str, targets_path: np.ndarray, path_length: int, seed: int) -> dict:
    bpy = import_bpy()
    from ik_solvers.blender.sampling import sample_fcurves
    from ik_solvers.blender.solving import prepare_solve, run_solve
    from ik_solvers.blender.spec import chain_spec

    rig, target, pole = fresh_scene(spec, targets_path)
    bones = [b[0] for b in spec.bones]
    n = len(targets_path)
    chain = rig.ik_solvers.chains.add()
    chain.name, chain.tip_bone, chain.chain_length, chain.target = "Chain", bones[-1], len(bones), target
    chain.method = "HI" if method.startswith("HI") else method
    chain.tolerance = 1e-5  # 0.01 mm: the precision an animator needs, and Blender's constraint gets
    if pole is not None and method in ("ANALYTIC", "HI+pole"):
        chain.pole_target = pole
        if method == "HI+pole":
            chain.zero_plane_map = "POLE_OBJECT"
    bpy.context.view_layer.objects.active = rig
    with bpy.context.temp_override(active_object=rig, object=rig, selected_objects=[rig]):
        bpy.ops.ik_solvers.capture_preferred_pose()
        started = time.perf_counter()
        result = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=1, frame_end=n, chain="Chain")
        bake_seconds = time.perf_counter() - started
    assert result == {"FINISHED"}, result
    joints, targets, _ = evaluate_chain(rig, bones, target, np.arange(1, n + 1))
    # The solve alone, and in other frame orders (the bake solves all frames as one batch).
    bpy.context.scene.frame_set(1)
    chain_spec_ = chain_spec(rig, chain)
    inputs = sample_fcurves(rig, chain_spec_, chain_spec_.rig, np.arange(1, n + 1))
    prepared = prepare_solve(chain_spec_, inputs)
    started = time.perf_counter()
    result = run_solve(prepared)
    solve_seconds = time.perf_counter() - started
    rng = np.random.default_rng(seed)
    history = {}
    for order_name, order in (("reversed", np.arange(n)[::-1]), ("shuffled", rng.permutation(n))):
        permuted = prepare_solve(chain_spec_, inputs.select(order))
        q = np.empty_like(result.q)
        q[order] = run_solve(permuted).q
        history[order_name] = float(np.abs(q - result.q).max())
    bound = lower_bounds(rig, bones[-1], len(bones), targets)
    flips = flip_frames(normal_turns(plane_normals(joints), path_length))
    warned = None if result.hi is None else warned_flips(flips, result.hi.pole_warnings)
    out = stats(joints, targets, bound, flips, warned, n)
    out.update(solve_us=solve_seconds / n * 1e6, bake_us=bake_seconds / n * 1e6, history_rad=history,
               history_unit="rad (joint values)", per_path=per_path(joints, targets, bound, flips, warned, path_length),
               status_counts=json.loads(chain.last_bake_report)["status_counts"])
    return out


# --------------------------------------------------------------------------- output
def history_text(run: dict) -> str:
    if "history_mm" in run:
        worst = max(run["history_mm"].values())
        return "identical" if worst == 0.0 else f"differs, up to {_fmt(worst)} mm"
    worst = max(run["history_rad"].values())
    return "identical" if worst == 0.0 else f"differs, up to {_fmt(worst)} rad"


def tables_markdown(results: dict, frames: int) -> str:
    lines = [f"Frames per path: {frames} ({frames * len(PATHS)} per rig and solver). Errors are measured on "
             "Blender's evaluation (the live constraint; our baked keys). µs are per frame.", ""]
    for rig_name, runs in results.items():
        lines += [f"#### {rig_name}", "",
                  "| solver | solve µs | bake µs | reachable median mm | reachable max mm "
                  f"| reachable frames missed by > {MISSED_MM:g} mm | excess over bound, max mm "
                  "| flips / 1000 frames | flips warned | history (seq vs reversed / shuffled) |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for name, run in runs.items():
            warned = "never (no warning)" if run["flips_warned"] is None else f"{run['flips_warned']} of {run['flips']}"
            if run["flips"] == 0:
                warned = "–"
            lines.append(
                f"| {name} | {_fmt(run['solve_us'])} | {_fmt(run['bake_us'])} | {_fmt(run['reachable_median_mm'])} "
                f"| {_fmt(run['reachable_max_mm'])} | {run['reachable_missed']} of {run['reachable_frames']} "
                f"| {_fmt(run['excess_max_mm'])} | {_fmt(run['flips_per_1000'])} "
                f"| {warned} | {history_text(run)} |")
        lines += ["", f"Flips per path ({rig_name}; warned in brackets for HI):", "",
                  "| solver | " + " | ".join(PATHS) + " |", "|---|" + "---:|" * len(PATHS)]
        for name, run in runs.items():
            cells = []
            for path in PATHS:
                row = run["per_path"][path]
                cell = str(row["flips"])
                if row["flips_warned"] is not None and row["flips"]:
                    cell += f" ({row['flips_warned']})"
                cells.append(cell)
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", f"Reachable max error per path, mm ({rig_name}; – : no reachable frame):", "",
                  "| solver | " + " | ".join(PATHS) + " |", "|---|" + "---:|" * len(PATHS)]
        for name, run in runs.items():
            lines.append(f"| {name} | " + " | ".join(_fmt(run["per_path"][p]["reachable_max_mm"]) for p in PATHS) + " |")
        lines.append("")
    return "\n".join(lines)


def write_csvs(out: Path, results: dict) -> None:
    with open(out / "summary.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["rig", "solver", "solve_us", "bake_us", "reachable_median_mm", "reachable_max_mm",
                         "reachable_missed", "reachable_frames", "excess_median_mm", "excess_max_mm", "flips", "flips_per_1000", "flips_warned", "history"])
        for rig_name, runs in results.items():
            for name, run in runs.items():
                writer.writerow([rig_name, name, run["solve_us"], run["bake_us"], run["reachable_median_mm"],
                                 run["reachable_max_mm"], run["reachable_missed"], run["reachable_frames"],
                                 run["excess_median_mm"], run["excess_max_mm"], run["flips"],
                                 run["flips_per_1000"], run["flips_warned"], history_text(run)])
    with open(out / "per_path.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["rig", "solver", "path", "reachable_frames", "reachable_max_mm", "excess_max_mm", "flips",
                         "flips_warned"])
        for rig_name, runs in results.items():
            for name, run in runs.items():
                for path, row in run["per_path"].items():
                    writer.writerow([rig_name, name, path, row["reachable_frames"], row["reachable_max_mm"],
                                     row["excess_max_mm"], row["flips"], row["flips_warned"]])


def plot(out: Path, results: dict, frames: int) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = []
    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5))
    for ax, (rig_name, runs) in zip(np.atleast_1d(axes), results.items()):
        labels = list(runs)
        x = np.arange(len(labels))
        ax.bar(x - 0.2, [runs[k]["solve_us"] for k in labels], 0.4, label="solve")
        ax.bar(x + 0.2, [runs[k]["bake_us"] for k in labels], 0.4, label="bake")
        ax.set_yscale("log")
        ax.set_xticks(x, labels, rotation=40, ha="right", fontsize=8)
        ax.set_ylabel("µs per frame")
        ax.set_title(f"{rig_name}: time per frame")
        ax.legend()
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(out / "time_per_frame.png", dpi=110)
    plt.close(fig)
    names.append("time_per_frame.png")

    for rig_name, runs in results.items():
        fig, ax = plt.subplots(figsize=(11, 4.5))
        for name, run in runs.items():
            ax.plot(np.maximum(run["_error"], 1e-8) * 1000, lw=0.8, label=name)
        for index in range(1, len(PATHS)):
            ax.axvline(index * frames, color="0.5", lw=0.6)
        for index, path in enumerate(PATHS):
            ax.text((index + 0.5) * frames, 1.02, path, transform=ax.get_xaxis_transform(), ha="center", fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("tip-to-target distance (mm)")
        ax.set_xlabel("frame")
        ax.legend(fontsize=7, ncol=4)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        name = f"error_{rig_name}.png"
        fig.savefig(out / name, dpi=110)
        plt.close(fig)
        names.append(name)

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4.5))
    for ax, (rig_name, runs) in zip(np.atleast_1d(axes), results.items()):
        labels = list(runs)
        matrix = np.array([[runs[k]["per_path"][p]["flips"] for p in PATHS] for k in labels])
        ax.imshow(matrix, cmap="Reds", aspect="auto")
        for i in range(len(labels)):
            for j in range(len(PATHS)):
                ax.text(j, i, str(matrix[i, j]), ha="center", va="center", fontsize=8)
        ax.set_xticks(range(len(PATHS)), PATHS, rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(labels)), labels, fontsize=8)
        ax.set_title(f"{rig_name}: bend-plane flips per path ({frames} frames each)")
    fig.tight_layout()
    fig.savefig(out / "flips.png", dpi=110)
    plt.close(fig)
    names.append("flips.png")
    return names


def main(argv: list[str]) -> int:
    return run_main("compare_native", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="compare_native.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--frames", type=int, default=300, help="frames per target path (default 300)")
    parser.add_argument("--rigs", nargs="+", choices=NATIVE_RIGS + RIGIFY_RIGS, default=list(NATIVE_RIGS + RIGIFY_RIGS))
    parser.add_argument("--rigify-frames", type=int, default=40, help="frames per path on the Rigify rigs (default 40)")
    parser.add_argument("--repeats", type=int, default=3, help="Rigify rigs: bakes timed per row, the least counts")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffled frame order")
    parser.add_argument("--doc", type=Path, help="markdown file to paste the tables into (between markers)")
    args = parser.parse_args(argv)
    if args.frames < 20:
        raise UsageError("--frames must be at least 20")
    if args.rigify_frames < 2 or args.repeats < 1:
        raise UsageError("--rigify-frames must be at least 2 and --repeats at least 1")
    native = [r for r in args.rigs if r in NATIVE_RIGS]
    rigify = [r for r in args.rigs if r in RIGIFY_RIGS]
    if args.doc is not None:  # before the run, not after it
        for wanted, doc_markers in ((native, TABLE_MARKERS), (rigify, compare_rigify.RIGIFY_MARKERS)):
            if wanted:
                check_markers(args.doc, *doc_markers)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if native:
        _native(args, native, started)
    if rigify:
        _rigify(args, rigify)
    print(f"Wrote {args.out} in {time.perf_counter() - started:.0f} s.")
    return 0


def _rigify(args, rigs: list[str]) -> None:
    """The Rigify rigs through ``compare_rigify.measure_all`` (which registers the add-on per row)."""
    bpy = import_bpy(register_addon=False)
    if hasattr(bpy.types.Object, "ik_solvers"):
        import ik_solvers

        ik_solvers.unregister()
    rows = compare_rigify.measure_all(args.out / "rigify", args.rigify_frames, rigs, repeats=args.repeats,
                                      log=lambda line: print(line, flush=True))
    tables = compare_rigify.tables_markdown(rows, args.rigify_frames)
    if args.doc is not None:
        paste_between_markers(args.doc, *compare_rigify.RIGIFY_MARKERS, tables + "\n")
    print(tables)


def _native(args, rigs: list[str], started: float) -> None:
    results = {}
    for spec in (arm_spec() if r == "arm" else chain10_spec() for r in rigs):
        targets = np.concatenate(list(target_paths(spec, args.frames).values()))
        runs = {}
        for label, solver in BLENDER_SOLVERS.items():
            runs[label] = run_blender(spec, solver, targets, args.frames, args.seed)
            print(f"{spec.name:8s} {label:18s} done ({time.perf_counter() - started:.0f} s)", flush=True)
        for method in spec.methods:
            runs[method] = run_ours(spec, method, targets, args.frames, args.seed)
            print(f"{spec.name:8s} {method:18s} done ({time.perf_counter() - started:.0f} s)", flush=True)
        results[spec.name] = runs
    tables = tables_markdown(results, args.frames)
    (args.out / "tables.md").write_text(tables)
    write_csvs(args.out, results)
    figures = plot(args.out, results, args.frames)
    public = {rig: {name: {k: v for k, v in run.items() if not k.startswith("_")} for name, run in runs.items()}
              for rig, runs in results.items()}
    (args.out / "results.json").write_text(json.dumps({"frames_per_path": args.frames, "paths": PATHS,
                                                       "figures": figures, "results": public}, indent=2))
    if args.doc is not None:
        paste_between_markers(args.doc, *TABLE_MARKERS, tables + "\n")
    print(tables)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

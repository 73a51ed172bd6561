"""The demo (README's first command, ``make demo``): what the add-on does, from an empty scene to baked keys.

Builds a character armature with an arm and a leg, animated Empty targets that swing past the
arm's pole (hand raised over the shoulder), reach out of range and come back, configures IK
chains, bakes them with the add-on's own operator (``ik_solvers.bake``) and measures the result
on Blender's own evaluation of the baked keys. The arm is baked once per method (DLS, CCD, FABRIK,
analytic, then HI, which stays in the file) so the figures compare them on the same path.

Writes under ``--out DIR``:

- ``demo.blend``: the scene, arm baked with HI (swivel solver), leg with HI and a knee pole.
- ``report.json``: per chain and method, the bake's report (status counts, errors, flips) plus
  what Blender's evaluated pose shows (median / max tip error, error over the lower bound, plane
  flips per frame), and for HI the pole distance and warnings per frame.
- ``error_per_frame.png``: tip-to-target distance per frame, per method, against the lower bound.
- ``pole_distance.png``: the HI arm's pole distance and swivel per frame, warned frames shaded,
  flips marked; and the bend-plane turn per frame for every method.
- ``side_view.png``: the chains at a few frames, seen from the side, with their targets.
- ``body-solve.png``: the body scene (``_demo_body``): Rigify's human metarig posed by one body solve
  of five goals (ankles, wrists, head; the hips carried), each goal's status and error; the report's
  ``body`` has them too. ``--body`` makes this picture alone (``--out docs`` refreshes
  docs/body-solve.png).

Usage: python scripts/demo.py --out DIR [--frames N] [--body]
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from _cli import Parser, UsageError, import_bpy, run_main
from _demo_body import outcomes, plot_body, pose_body
from _measure import (
    FLIP_TURN_DEGREES,
    evaluate_chain,
    flip_frames,
    joint_normals,
    lower_bounds,
    normal_turns,
    tip_errors,
    warned_flips,
)

ARM_METHODS = ("DLS", "CCD", "FABRIK", "ANALYTIC", "HI")
"""Methods the arm is baked with, in order; the last one stays in ``demo.blend``."""
SHOULDER = np.array([0.2, 0.0, 1.45])
HIP = np.array([0.1, 0.0, 0.95])


# --------------------------------------------------------------------------- scene
def build_armature(name: str, bones: list[dict], location=(0.0, 0.0, 0.0)):
    """An armature object from ``{name, head, tail, parent?, roll?}`` dicts (children connected)."""
    bpy = import_bpy()
    data = bpy.data.armatures.new(name)
    obj = bpy.data.objects.new(name, data)
    bpy.context.scene.collection.objects.link(obj)
    obj.location = location
    bpy.context.view_layer.objects.active = obj
    bpy.ops.object.mode_set(mode="EDIT")
    for spec in bones:
        bone = data.edit_bones.new(spec["name"])
        bone.head, bone.tail, bone.roll = spec["head"], spec["tail"], spec.get("roll", 0.0)
        if spec.get("parent"):
            bone.parent = data.edit_bones[spec["parent"]]
            bone.use_connect = True
    bpy.ops.object.mode_set(mode="OBJECT")
    return obj


def add_empty(name: str, location, size: float = 0.05, display: str = "SPHERE"):
    bpy = import_bpy()
    obj = bpy.data.objects.new(name, None)
    obj.empty_display_type = display
    obj.empty_display_size = size
    obj.location = tuple(location)
    bpy.context.scene.collection.objects.link(obj)
    return obj


def key_positions(obj, frames: np.ndarray, positions: np.ndarray) -> None:
    """Linear location keys (the path is sampled densely enough that the shape is the path's)."""
    for frame, position in zip(frames, positions):
        obj.location = tuple(position)
        obj.keyframe_insert("location", frame=int(frame))
    channelbag = obj.animation_data.action.layers[0].strips[0].channelbag(obj.animation_data.action_slot)
    for fcurve in channelbag.fcurves:
        for point in fcurve.keyframe_points:
            point.interpolation = "LINEAR"


def hand_path(u: np.ndarray) -> np.ndarray:
    """The hand target over ``u ∈ [0, 1]``: out to the side, up over the shoulder (through the arm's
    pole), out of reach to the side, back in front of the chest."""
    keys_u = np.array([0.0, 0.15, 0.35, 0.45, 0.55, 0.75, 0.9, 1.0])
    keys = SHOULDER + np.array([
        [0.40, -0.15, -0.20],  # out to the side, in front
        [0.25, -0.10, 0.25],
        [0.003, -0.004, 0.45],  # straight over the shoulder: the EE axis passes within 1° of the pole
        [-0.10, -0.05, 0.30],
        [0.20, -0.10, 0.35],
        [0.75, -0.05, 0.00],   # 0.75 from the shoulder: out of the arm's 0.58 reach
        [0.30, -0.35, -0.05],  # back in front of the chest
        [0.40, -0.15, -0.20],
    ])
    return np.stack([np.interp(u, keys_u, keys[:, k]) for k in range(3)], 1)


def foot_path(u: np.ndarray) -> np.ndarray:
    """The foot target: two walking steps, then a reach down past the leg's length and back."""
    phase = 4.0 * math.pi * u
    forward = 0.25 * np.sin(phase)
    lift = 0.12 * np.clip(np.cos(phase), 0.0, None)
    down = np.where((u > 0.7) & (u < 0.85), 0.2 * np.sin(np.pi * (u - 0.7) / 0.15), 0.0)
    return np.stack([np.full_like(u, HIP[0]), forward - 0.05, 0.12 + lift - down], 1)


def build_scene(frame_count: int):
    """The demo scene; returns (armature, {chain name: target})."""
    bpy = import_bpy()
    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    scene.frame_start, scene.frame_end = 1, frame_count
    s = SHOULDER
    rig = build_armature("Character", [
        {"name": "spine", "head": (0.0, 0.0, 0.95), "tail": (0.0, 0.0, 1.45)},
        # The elbow is bent back (+y) in the rest pose: the arm's bend plane is horizontal, so its
        # poles (the preferred plane's normal) point straight up and down from the shoulder.
        {"name": "upper_arm", "head": tuple(s), "tail": tuple(s + [0.3, 0.04, 0.0]), "roll": 0.0},
        {"name": "forearm", "head": tuple(s + [0.3, 0.04, 0.0]), "tail": tuple(s + [0.58, 0.0, 0.0]),
         "parent": "upper_arm"},
        {"name": "thigh", "head": tuple(HIP), "tail": tuple(HIP + [0.0, -0.04, -0.43])},
        {"name": "shin", "head": tuple(HIP + [0.0, -0.04, -0.43]), "tail": tuple(HIP + [0.0, 0.0, -0.85]),
         "parent": "thigh"},
    ])
    frames = np.arange(1, frame_count + 1)
    u = (frames - 1) / max(frame_count - 1, 1)
    hand = add_empty("HandTarget", hand_path(u[:1])[0])
    foot = add_empty("FootTarget", foot_path(u[:1])[0])
    knee_pole = add_empty("KneePole", HIP + [0.0, -0.6, -0.45], size=0.04, display="CUBE")
    # Keys every few frames; linear in between is the path's own sampling.
    keyed = np.unique(np.r_[np.arange(1, frame_count + 1, 4), frame_count])
    key_positions(hand, keyed, hand_path((keyed - 1) / max(frame_count - 1, 1)))
    key_positions(foot, keyed, foot_path((keyed - 1) / max(frame_count - 1, 1)))
    settings = rig.ik_solvers
    for name, tip, target in (("Arm", "forearm", hand), ("Leg", "shin", foot)):
        chain = settings.chains.add()
        chain.name, chain.tip_bone, chain.chain_length, chain.target = name, tip, 2, target
        chain.method = "HI"
        chain.max_iterations = 100
        chain.tolerance = 1e-5
    # The swivel angle is the animator's control of the HI bend plane: key an elbow raise at the end.
    arm = settings.chains["Arm"]
    for fraction, degrees in ((0.0, 0.0), (0.8, 0.0), (0.9, -40.0), (1.0, 0.0)):
        arm.swivel_angle = math.radians(degrees)
        arm.keyframe_insert("swivel_angle", frame=1 + round(fraction * (frame_count - 1)))
    arm.swivel_angle = 0.0
    leg = settings.chains["Leg"]
    leg.zero_plane_map = "POLE_OBJECT"
    leg.pole_target = knee_pole
    scene.frame_set(1)
    with operator_context(rig):
        for index in range(len(settings.chains)):
            settings.active_chain_index = index
            bpy.ops.ik_solvers.capture_preferred_pose()
    return rig, {"Arm": hand, "Leg": foot}


def operator_context(obj):
    bpy = import_bpy()
    bpy.context.view_layer.objects.active = obj
    return bpy.context.temp_override(active_object=obj, object=obj, selected_objects=[obj])


# --------------------------------------------------------------------------- baking and measuring
def bake(rig, chain_name: str, frame_count: int) -> dict:
    """Bake one chain with the add-on's operator; its report (the chain's ``last_bake_report``)."""
    bpy = import_bpy()
    with operator_context(rig):
        result = bpy.ops.ik_solvers.bake("EXEC_DEFAULT", frame_start=1, frame_end=frame_count, chain=chain_name)
    if result != {"FINISHED"}:
        raise RuntimeError(f"bake of {chain_name} returned {result}")
    return json.loads(rig.ik_solvers.chains[chain_name].last_bake_report)


def evaluated_chain(rig, bones: list[str], target, frame_count: int) -> dict[str, np.ndarray]:
    """Blender's evaluation of the baked keys per frame: joint positions (N, len(bones) + 1, 3), targets (N, 3)."""
    joints, targets, _ = evaluate_chain(rig, bones, target, range(1, frame_count + 1))
    return {"joints": joints, "targets": targets}


STRAIGHT_SINE = 0.02
"""A two-bone chain bent by less than about 1° (sine of the bend) has no meaningful bend plane."""


def plane_turns(joints: np.ndarray) -> np.ndarray:
    """Turn (degrees) of the bend-plane normal (the first inner joint's) per frame, (N,): from the last
    frame that had a plane (a straight chain has none: 0 there, and the turn across a straight stretch
    lands on the frame after it)."""
    return normal_turns(joint_normals(joints, STRAIGHT_SINE)[:, 0])


def hi_diagnostics(rig, chain_name: str, frame_count: int) -> dict[str, Any]:
    """Pole distance, warnings and swivel per frame of an HI chain: the add-on's own solve of every
    frame's sampled inputs (history independent, so it is what the bake solved)."""
    bpy = import_bpy()
    from ik_solvers.blender.sampling import FrameInputs, sample_inputs
    from ik_solvers.blender.solving import prepare_solve, run_solve
    from ik_solvers.blender.spec import chain_spec

    spec = chain_spec(rig, rig.ik_solvers.chains[chain_name])
    scene = bpy.context.scene
    samples = []
    for frame in range(1, frame_count + 1):
        scene.frame_set(frame)
        samples.append(sample_inputs(rig, spec, depsgraph=bpy.context.evaluated_depsgraph_get()))
    hi = run_solve(prepare_solve(spec, FrameInputs.stack(samples))).hi
    return {
        "pole_degrees": np.degrees(hi.pole_angles),
        "warnings": np.asarray(hi.pole_warnings, bool),
        "swivel_degrees": np.degrees(hi.swivel),
        "threshold_degrees": math.degrees(spec.flip_threshold),
    }


def measure(rig, chain_name: str, bones: list[str], target, frame_count: int, bake_report: dict,
            warnings: np.ndarray | None = None) -> dict:
    """What Blender's evaluation of the baked keys shows for one chain and method.

    ``warnings (N,)``: the HI pole warnings per frame; a flip counts as warned when the frame
    before or after it was warned. Other methods have no warning to give.
    """
    evaluated = evaluated_chain(rig, bones, target, frame_count)
    error = tip_errors(evaluated["joints"], evaluated["targets"])
    chain = rig.ik_solvers.chains[chain_name]
    bound = lower_bounds(rig, chain.tip_bone, chain.chain_length, evaluated["targets"])
    turns = plane_turns(evaluated["joints"])
    reachable = bound <= 0.0
    excess = np.maximum(error - bound, 0.0)
    flips = [frame + 1 for frame in flip_frames(turns)]
    return {
        "bake": bake_report,
        "evaluated": {
            "median_error_reachable": float(np.median(error[reachable])) if reachable.any() else None,
            "max_error_reachable": float(error[reachable].max()) if reachable.any() else None,
            "max_excess_out_of_reach": float(excess[~reachable].max()) if (~reachable).any() else None,
            "reachable_frames": int(reachable.sum()),
            "flip_frames": flips,
            "flips_warned": None if warnings is None else warned_flips([frame - 1 for frame in flips], warnings),
        },
        "_series": {"error": error, "bound": bound, "turns": turns, "joints": evaluated["joints"],
                    "targets": evaluated["targets"]},
    }


# --------------------------------------------------------------------------- figures
def plot_errors(path: Path, arm: dict, leg: dict) -> None:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(9, 7), sharex=True)
    for ax, (title, runs) in zip(axes, (("Arm (hand target)", arm), ("Leg (foot target, HI + knee pole)", leg))):
        frames = np.arange(1, len(next(iter(runs.values()))["_series"]["error"]) + 1)
        bound = next(iter(runs.values()))["_series"]["bound"]
        ax.fill_between(frames, 0, bound * 1000, color="0.85", label="lower bound (out of reach)")
        for method, run in runs.items():
            ax.plot(frames, np.maximum(run["_series"]["error"], 1e-7) * 1000, lw=1.2, label=method)
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_ylabel("tip-to-target distance (mm)")
        ax.set_title(title)
        ax.legend(fontsize=8, ncol=3)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("frame")
    fig.suptitle("Target vs tip, Blender's evaluation of the baked keys")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_poles(path: Path, diagnostics: dict, arm: dict, flips: list[dict]) -> None:
    import matplotlib.pyplot as plt

    frames = np.arange(1, len(diagnostics["pole_degrees"]) + 1)
    fig, axes = plt.subplots(3, 1, figsize=(9, 8), sharex=True)
    ax = axes[0]
    ax.plot(frames, diagnostics["pole_degrees"], color="C4", label="EE axis to nearer pole")
    ax.axhline(diagnostics["threshold_degrees"], color="C3", ls="--", lw=1, label="warning threshold")
    warned = diagnostics["warnings"]
    ax.fill_between(frames, 0, 90, where=warned, color="C3", alpha=0.15, step="mid", label="warned frames")
    ax.set_ylabel("pole distance (°)")
    ax.set_ylim(0, 90)
    ax.set_title("HI arm: pole distance per frame")
    axes[1].plot(frames, diagnostics["swivel_degrees"], color="C0")
    axes[1].set_ylabel("swivel ψ (°)")
    axes[1].set_title("HI arm: swivel angle (the animator's control; 0 = the zero plane)")
    for method, run in arm.items():
        axes[2].plot(frames, run["_series"]["turns"], lw=1, label=method)
    axes[2].axhline(FLIP_TURN_DEGREES, color="0.3", ls=":", lw=1)
    axes[2].set_ylabel("bend-plane turn per frame (°)")
    axes[2].set_title("Bend-plane turn between frames (Blender's evaluation), every method")
    axes[2].legend(fontsize=8, ncol=5)
    for flip in flips:
        for ax in axes:
            ax.axvline(flip["frame"], color="C3", lw=1.5, alpha=0.7)
        axes[0].annotate(f"flip {flip['turn_degrees']:.0f}°", (flip["frame"], 80), color="C3", fontsize=8,
                         ha="left")
    axes[0].legend(fontsize=8, loc="upper right")
    axes[-1].set_xlabel("frame")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_side_view(path: Path, arm: dict, leg: dict, frame_count: int) -> None:
    import matplotlib.pyplot as plt

    picks = np.unique(np.linspace(0, frame_count - 1, 6).round().astype(int))
    fig, axes = plt.subplots(1, 2, figsize=(10, 5.5))
    colors = plt.cm.viridis(np.linspace(0, 0.9, len(picks)))
    for ax, (title, series, x_axis, x_label) in zip(axes, (
        ("Front view (x–z): arm, HI", arm["HI"]["_series"], 0, "x (m)"),
        ("Side view (y–z): leg, HI + knee pole", leg["HI"]["_series"], 1, "y (m)"),
    )):
        for color, k in zip(colors, picks):
            joints, target = series["joints"][k], series["targets"][k]
            ax.plot(joints[:, x_axis], joints[:, 2], "-o", color=color, ms=3, lw=2, label=f"frame {k + 1}")
            ax.plot(target[x_axis], target[2], "x", color=color, ms=8, mew=2)
        ax.plot(series["targets"][:, x_axis], series["targets"][:, 2], color="0.7", lw=0.8, zorder=0,
                label="target path")
        ax.set_aspect("equal")
        ax.set_xlabel(x_label)
        ax.set_ylabel("z (m)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("The baked chains at a few frames (× = target)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------- main
def _public(run: dict) -> dict:
    return {k: v for k, v in run.items() if not k.startswith("_")}


def print_table(arm: dict, leg: dict) -> None:
    print(f"{'chain':<5} {'method':<9} {'conv':>5} {'unreach':>7} {'other':>5} {'median mm':>10} {'max mm':>9} "
          f"{'excess mm':>10} {'flips':>5} {'warned':>6} {'bake s':>7}")
    for chain, runs in (("Arm", arm), ("Leg", leg)):
        for method, run in runs.items():
            counts = run["bake"]["status_counts"]
            other = sum(counts.values()) - counts["CONVERGED"] - counts["UNREACHABLE"]
            ev = run["evaluated"]

            def mm(value):
                return "-" if value is None else f"{value * 1000:.3f}"

            warned = "-" if ev["flips_warned"] is None else sum(ev["flips_warned"])
            print(f"{chain:<5} {method:<9} {counts['CONVERGED']:>5} {counts['UNREACHABLE']:>7} {other:>5} "
                  f"{mm(ev['median_error_reachable']):>10} {mm(ev['max_error_reachable']):>9} "
                  f"{mm(ev['max_excess_out_of_reach']):>10} {len(ev['flip_frames']):>5} {warned!s:>6} "
                  f"{run['bake']['seconds']:>7.3f}")


def body_scene(path: Path) -> dict[str, dict[str, Any]]:
    """The body scene (``_demo_body``): solve it, draw it to ``path``, print and return each goal's outcome."""
    posed = pose_body()
    plot_body(path, posed)
    body = outcomes(posed)
    print(f"Body solve (Rigify's human metarig, hips moved {posed['hips_moved'] * 100:.1f} cm): " + ", ".join(
        f"{goal} {g['status'].lower().replace('_', ' ')} ({g['error_mm']:.3g} mm)" for goal, g in body.items()))
    return body


def main(argv: list[str]) -> int:
    return run_main("demo", lambda: _main(argv))


def _main(argv: list[str]) -> int:
    parser = Parser(prog="demo.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument("--frames", type=int, default=240, help="frames of animation (default 240)")
    parser.add_argument("--body", action="store_true",
                        help="only the body scene: write OUT/body-solve.png (Rigify's metarig posed by a body solve)")
    args = parser.parse_args(argv)
    if args.frames < 10:
        raise UsageError("--frames must be at least 10")
    started = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    bpy = import_bpy()
    if args.body:
        body = body_scene(args.out / "body-solve.png")
        print(f"Wrote {args.out / 'body-solve.png'} in {time.perf_counter() - started:.1f} s.")
        return 0
    rig, targets = build_scene(args.frames)
    arm_bones, leg_bones = ["upper_arm", "forearm"], ["thigh", "shin"]
    arm = {}
    for method in ARM_METHODS:
        rig.ik_solvers.chains["Arm"].method = method
        report = bake(rig, "Arm", args.frames)
        warnings = hi_diagnostics(rig, "Arm", args.frames)["warnings"] if method == "HI" else None
        arm[method] = measure(rig, "Arm", arm_bones, targets["Arm"], args.frames, report, warnings)
    leg_report = bake(rig, "Leg", args.frames)
    leg_warnings = hi_diagnostics(rig, "Leg", args.frames)["warnings"]
    leg = {"HI": measure(rig, "Leg", leg_bones, targets["Leg"], args.frames, leg_report, leg_warnings)}
    diagnostics = hi_diagnostics(rig, "Arm", args.frames)
    bpy.context.scene.frame_set(1)
    blend = (args.out / "demo.blend").resolve()
    bpy.context.preferences.filepaths.save_version = 0
    bpy.ops.wm.save_as_mainfile(filepath=str(blend))

    figures = {"error_per_frame": "error_per_frame.png", "pole_distance": "pole_distance.png",
               "side_view": "side_view.png"}
    plot_errors(args.out / figures["error_per_frame"], arm, leg)
    plot_poles(args.out / figures["pole_distance"], diagnostics, arm, arm["HI"]["bake"]["flip_frames"])
    plot_side_view(args.out / figures["side_view"], arm, leg, args.frames)
    figures["body_solve"] = "body-solve.png"
    body = body_scene(args.out / figures["body_solve"])
    report = {
        "frames": args.frames,
        "blend": "demo.blend",
        "figures": figures,
        "chains": {
            "Arm": {method: _public(run) for method, run in arm.items()},
            "Leg": {method: _public(run) for method, run in leg.items()},
        },
        "hi_arm_per_frame": {
            "pole_distance_degrees": diagnostics["pole_degrees"].round(4).tolist(),
            "pole_warning": diagnostics["warnings"].tolist(),
            "swivel_degrees": diagnostics["swivel_degrees"].round(4).tolist(),
            "warning_threshold_degrees": diagnostics["threshold_degrees"],
        },
        "body": body,
        "seconds": None,
    }
    report["seconds"] = round(time.perf_counter() - started, 2)
    (args.out / "report.json").write_text(json.dumps(report, indent=2))

    print_table(arm, leg)
    warned = int(diagnostics["warnings"].sum())
    print(f"\nHI arm: {warned} frames within {diagnostics['threshold_degrees']:.0f}° of a pole (warned); "
          f"flips reported by the bake at frames {[f['frame'] for f in arm['HI']['bake']['flip_frames']]}.")
    print(f"Wrote {args.out / 'demo.blend'}, {args.out / 'report.json'} and "
          f"{', '.join(str(args.out / name) for name in figures.values())} in {report['seconds']:.1f} s.")
    print("Open demo.blend in Blender (with the IK Solvers extension for the chain settings) and play the "
          "animation: the keys are plain rotation keys.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

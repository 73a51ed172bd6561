"""The key reduction's own cost (issue 23): the benchmark's 40 reduction problems (``bench_keys``'
8 paths × 5 bounds) captured once, then reduced by two source trees alternately, the fastest of a
few runs each, with their key counts and whether both trees keep the same keys bit for bit.

    .venv/bin/python scripts/bench_keys_speed.py capture --out PROBLEMS.npz
    .venv/bin/python scripts/bench_keys_speed.py time --problems PROBLEMS.npz --old OLD_TREE [--new NEW_TREE]

``capture`` bakes every rig and path as ``bench_keys.run_case`` does (a full bake before each reduced
one) and saves what the core's ``reduce_keys`` is given. ``time`` runs each tree in its own
subprocess (``PYTHONPATH`` = the tree; ``time.process_time``; the trees alternate, ``--repeats``
times, the fastest kept per tree and problem) and prints the ratio of the sums and of the medians,
and each tree's keys. ``OLD_TREE``: e.g. ``git archive main | tar -x -C /tmp/old``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from _cli import Parser, run_main

MODES = ("QUATERNION", "AXIS_ANGLE", "XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
CHAIN_FIELDS = ("offsets", "rest_rotations", "axes", "lower", "upper", "weights", "tip_offset", "root_position",
                "root_rotation")


def _mode_of(rotate: Any) -> str:
    """The Blender rotation mode whose conversion ``rotate`` is (probed on random channel values)."""
    from ik_solvers.blender.key_reduction import rotations_of_mode

    probe = np.random.default_rng(0).normal(size=(5, 4))
    for mode in MODES:
        width = 3 if len(mode) == 3 else 4
        if np.array_equal(rotate(probe[:, :width]), rotations_of_mode(mode)(probe[:, :width])):
            return mode
    raise ValueError("an unknown rotation conversion")


def capture(out: Path) -> int:
    """Bake the benchmark's 40 cases and save every reduction's inputs to ``out``."""
    import bench_keys
    from _cli import import_bpy
    from _measure import evaluate_chain
    from _rigs import key_path

    from ik_solvers.blender import key_reduction

    bpy = import_bpy()
    saved: dict[str, np.ndarray] = {}
    fit = key_reduction.reduction_steps
    names: list[str] = []

    def capturing(*args: Any, **kwargs: Any) -> Any:
        frames, values, rotations, chain, key_error = args[:5]
        prefix = f"p{len(names)}_"
        names.append(prefix)
        saved[prefix + "frames"] = np.asarray(frames, dtype=float)
        for joint, channels in enumerate(values):
            saved[prefix + f"values{joint}"] = np.asarray(channels, dtype=float)
        saved[prefix + "modes"] = np.array([_mode_of(rotate) for rotate in rotations])
        saved[prefix + "kinds"] = np.array([kind.value for kind in chain.kinds])
        for name in CHAIN_FIELDS:
            saved[prefix + name] = getattr(chain, name)
        saved[prefix + "scalars"] = np.array([key_error, kwargs.get("scale", 1.0)])
        if kwargs.get("keep") is not None:
            saved[prefix + "keep"] = np.asarray(kwargs["keep"], dtype=int)
        return fit(*args, **kwargs)

    frames = 10 * bench_keys.KEY_EVERY + 1
    for rig_name in bench_keys.RIGS:
        for path_name in ("smooth", "recorded"):
            rig, chain, bones, target = bench_keys.RIGS[rig_name]()
            bpy.context.scene.frame_start, bpy.context.scene.frame_end = 1, frames
            bpy.context.scene.frame_set(1)
            rest, _, _ = evaluate_chain(rig, bones, target, [1])
            reach = float(np.linalg.norm(np.diff(rest[0], axis=0), axis=1).sum())
            jitter = bench_keys.JITTER if path_name == "recorded" else 0.0
            key_path(target, bench_keys.target_path(rest[0, 0], rest[0, -1], reach, 10, jitter, 0))
            bench_keys.bake(rig, chain, frames, repeats=1)
            for bound_mm in bench_keys.BOUNDS_MM:
                bench_keys.bake(rig, chain, frames, repeats=1)
                key_reduction.reduction_steps = capturing
                try:
                    bench_keys.bake(rig, chain, frames, bound_mm * 1e-3, repeats=1)
                finally:
                    key_reduction.reduction_steps = fit
                print(f"{rig_name} {path_name} {bound_mm} mm: problem {len(names) - 1}", flush=True)
            bpy.ops.wm.read_homefile(use_empty=True)
    saved["count"] = np.array(len(names))
    np.savez(out, **saved)
    print(f"wrote {len(names)} problems to {out}")
    return 0


def load_problems(path: Path) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The saved problems as ``reduce_keys`` arguments (positional, keywords), for the tree imported."""
    from ik_solvers.blender.key_reduction import rotations_of_mode  # (imports bpy: untimed)
    from ik_solvers.core import Chain, JointKind

    data = np.load(path)
    problems = []
    for index in range(int(data["count"])):
        prefix = f"p{index}_"
        modes = [str(mode) for mode in data[prefix + "modes"]]
        values = [data[prefix + f"values{joint}"] for joint in range(len(modes))]
        chain = Chain(kinds=tuple(JointKind(int(v)) for v in data[prefix + "kinds"]),
                      **{name: data[prefix + name] for name in CHAIN_FIELDS})
        key_error, scale = data[prefix + "scalars"]
        keep = data[prefix + "keep"] if prefix + "keep" in data else None
        # As the add-on does: the joints that share a callable are converted in one call.
        rotations = [rotations_of_mode(mode) for mode in modes]
        problems.append(((data[prefix + "frames"], values, rotations, chain, float(key_error)),
                         {"scale": float(scale), "keep": keep}))
    return problems


def run_tree(path: Path) -> int:
    """(In the tree's subprocess) reduce every problem; print each one's seconds, keys and digest."""
    from ik_solvers.core.key_reduction import reduce_keys

    out, problems = [], load_problems(path)
    for args, kwargs in problems[:4]:  # warm up (imports, caches)
        reduce_keys(*args, **kwargs)
    for args, kwargs in problems:
        started = time.process_time()
        reduced = reduce_keys(*args, **kwargs)
        seconds = time.process_time() - started
        digest = hashlib.sha256(reduced.indices.tobytes())
        for controls in reduced.controls:
            digest.update(np.ascontiguousarray(controls).tobytes())
        out.append({"seconds": seconds, "keys": int(reduced.keys_after), "digest": digest.hexdigest()[:16],
                    "max_error": reduced.max_error, "key_error": reduced.key_error})
    print(json.dumps(out))
    return 0


def time_trees(problems: Path, trees: dict[str, Path], repeats: int) -> int:
    """Both trees alternately, ``repeats`` times: the fastest per tree and problem, the ratios, the keys."""
    runs: dict[str, list[list[dict[str, Any]]]] = {name: [] for name in trees}
    for repeat in range(repeats):
        for name, tree in (list(trees.items()) if repeat % 2 == 0 else list(trees.items())[::-1]):
            env = dict(os.environ, PYTHONPATH=str(tree), OPENBLAS_NUM_THREADS="1")
            result = subprocess.run([sys.executable, __file__, "run", "--problems", str(problems)], env=env,
                                    cwd=Path(__file__).parent, capture_output=True, text=True, check=True)
            runs[name].append(json.loads(result.stdout.strip().splitlines()[-1]))
            print(f"run {repeat + 1} {name}: {sum(r['seconds'] for r in runs[name][-1]):.3f} s", flush=True)
    fastest = {name: np.min([[r["seconds"] for r in run] for run in runs[name]], axis=0) for name in trees}
    first = {name: runs[name][0] for name in trees}
    for name in trees:
        seconds, keys = fastest[name], [r["keys"] for r in first[name]]
        over = [r for r in first[name] if r["max_error"] > r["key_error"]]
        print(f"{name}: {1e3 * seconds.sum():.0f} ms for {len(seconds)} reductions, median {1e3 * np.median(seconds):.1f} "
              f"ms ({1e3 * seconds.min():.1f}-{1e3 * seconds.max():.1f}), {sum(keys)} keys per curve in all, "
              f"{len(over)} over their bound")
    old, new = list(trees)
    ratios = fastest[new] / fastest[old]
    same = sum(a["digest"] == b["digest"] for a, b in zip(first[old], first[new]))
    key_change = [b["keys"] - a["keys"] for a, b in zip(first[old], first[new])]
    print(f"{new} / {old}: sum {fastest[new].sum() / fastest[old].sum():.3f}, median of ratios {np.median(ratios):.3f} "
          f"({ratios.min():.3f}-{ratios.max():.3f}), medians {np.median(fastest[new]) / np.median(fastest[old]):.3f}; "
          f"same keys bit for bit in {same}/{len(ratios)}; keys {sum(key_change):+d} "
          f"(per problem: {[c for c in key_change if c]})")
    return 0


def _main(argv: list[str]) -> int:
    parser = Parser(prog="bench_keys_speed.py", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("capture").add_argument("--out", type=Path, required=True)
    timing = commands.add_parser("time")
    timing.add_argument("--problems", type=Path, required=True)
    timing.add_argument("--old", type=Path, required=True, help="the tree to compare against")
    timing.add_argument("--new", type=Path, default=Path(__file__).resolve().parents[1], help="default: this tree")
    timing.add_argument("--repeats", type=int, default=3)
    commands.add_parser("run").add_argument("--problems", type=Path, required=True)
    args = parser.parse_args(argv)
    if args.command == "capture":
        return capture(args.out)
    if args.command == "run":
        return run_tree(args.problems)
    return time_trees(args.problems, {"old": args.old, "new": args.new}, args.repeats)


def main(argv: list[str]) -> int:
    return run_main("bench_keys_speed", lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""HI solver benchmark (issue 4): batched frames per second for a two-bone arm and a 4-bone chain.

``benchmark_hi(n_frames)`` returns and prints the figures so the core benchmark can fold them in;
``main`` also writes ``DIR/bench_hi.json``. Workload per chain: targets in random directions at
0.1–1.1 of the reach (so about a tenth out of reach), a random swivel per frame, default map.
The best of ``repeats`` runs is reported, by wall clock and by this process's CPU time (the
machine may be shared: CPU time is what the solve itself costs); nothing here asserts a speed.

    .venv/bin/python scripts/bench_hi.py [--out DIR] [--frames N] [--repeats R]

Targets (issue 4): two bones ≥ 500,000 frames/s, 4-bone in-plane ≥ 50,000 frames/s.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
from _cli import Parser, UsageError, run_main

from ik_solvers.core import Chain, JointKind, Status, preferred_pose, solve_hi

GOALS = {"two_bone": 500_000.0, "four_bone": 50_000.0}


def bent_chain(lengths: list[float]) -> tuple[Chain, np.ndarray]:
    """Ball-jointed chain along +x with a preferred pose bent in its xy plane."""
    chain = Chain.straight(lengths, JointKind.BALL)
    preferred = np.zeros(chain.n_dof)
    preferred[2] = 0.4
    preferred[5::3] = -0.5
    return chain, preferred


def workload(chain: Chain, n_frames: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    directions = rng.normal(size=(n_frames, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    targets = directions * (rng.uniform(0.1, 1.1, n_frames) * chain.reach)[:, None]
    return targets, rng.uniform(-np.pi, np.pi, n_frames)


def benchmark_hi(n_frames: int = 200_000, repeats: int = 3) -> dict:
    """Frames per second of batched ``solve_hi`` (best of ``repeats``), printed and returned.

    Returns ``{"two_bone": {...}, "four_bone": {...}}``, each with ``frames``, ``seconds``,
    ``frames_per_second`` (wall clock), ``frames_per_cpu_second``, ``goal``, ``converged`` and
    ``unreachable`` (frame counts).
    """
    results = {}
    for name, lengths in (("two_bone", [1.0, 0.8]), ("four_bone", [1.0, 0.9, 0.75, 0.55])):
        chain, preferred = bent_chain(lengths)
        pref = preferred_pose(chain, preferred)  # checked once, as the Blender layer does per chain
        targets, swivel = workload(chain, n_frames)
        solve_hi(chain, targets[:100], pref, swivel=swivel[:100])  # warm caches
        best, best_cpu = np.inf, np.inf
        for _ in range(repeats):
            start, start_cpu = time.perf_counter(), time.process_time()
            solved = solve_hi(chain, targets, pref, swivel=swivel)
            best = min(best, time.perf_counter() - start)
            best_cpu = min(best_cpu, time.process_time() - start_cpu)
        status = solved.result.status
        results[name] = {
            "frames": n_frames,
            "seconds": best,
            "frames_per_second": n_frames / best,
            "frames_per_cpu_second": n_frames / best_cpu,
            "goal": GOALS[name],
            "converged": int(np.sum(status == Status.CONVERGED)),
            "unreachable": int(np.sum(status == Status.UNREACHABLE)),
        }
        print(
            f"HI {name:9s}: {n_frames / best:12,.0f} frames/s, {n_frames / best_cpu:12,.0f} per CPU second "
            f"(goal {GOALS[name]:,.0f}); "
            f"{results[name]['converged']} converged, {results[name]['unreachable']} unreachable of {n_frames}"
        )
    return results


def main(argv: list[str] | None = None) -> int:
    return run_main("bench_hi.py", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = Parser(prog="bench_hi.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/bench_hi"), help="folder for bench_hi.json")
    parser.add_argument("--frames", type=int, default=200_000, help="frames per batch (default 200000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per chain; the best counts (default 3)")
    args = parser.parse_args(argv)
    if args.frames <= 0 or args.repeats <= 0:
        raise UsageError("--frames and --repeats must be positive")
    results = benchmark_hi(args.frames, args.repeats)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_hi.json").write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

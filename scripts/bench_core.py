"""Core solver benchmark: every method, batched vs a per-target loop, on four chains (issue 2).

Prints a table and writes ``DIR/bench_core.csv`` and ``DIR/bench_core.json``. Numbers are
measured in one run on this machine and compared as ratios (batched / looped); nothing here
asserts a speed.

    .venv/bin/python scripts/bench_core.py [--out DIR] [--targets N] [--loop-sample K] [--repeats R]
"""

from __future__ import annotations

import csv
import json
import sys
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from _cli import Parser, UsageError, run_main

from ik_solvers.core import Chain, JointKind, Method, SolveOptions, Status, solve, two_bone_planar


@dataclass(frozen=True)
class Case:
    name: str
    chain: Chain
    planar: bool


def cases() -> list[Case]:
    return [
        Case("planar 2-link", Chain.planar([1.0, 1.0]), True),
        Case("3D arm 0.30/0.28", Chain.straight([0.30, 0.28], [JointKind.BALL, JointKind.HINGE]), False),
        Case("10-bone (2 axes/joint)", Chain.straight([0.3] * 10, JointKind.UNIVERSAL), False),
        Case("30-bone (2 axes/joint)", Chain.straight([0.1] * 30, JointKind.UNIVERSAL), False),
    ]


def make_targets(case: Case, n: int, seed: int = 0) -> np.ndarray:
    """``n`` targets, the first half reachable (0.15–0.95 of reach), the rest out of reach (1.05–1.35)."""
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    if case.planar:
        d[:, 2] = 0.0
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    half = n // 2
    ratio = np.concatenate([rng.uniform(0.15, 0.95, half), rng.uniform(1.05, 1.35, n - half)])
    return d * (ratio * case.chain.reach)[:, None]


def method_setups(case: Case) -> list[tuple[str, Method, SolveOptions, dict]]:
    """(label, method, options, extras): the defaults plus the tuned fast configurations."""
    tight: dict[str, Any] = dict(max_iterations=100, tolerance=1e-6)
    setups: list[tuple[str, Method, SolveOptions, dict]] = [
        ("CCD", Method.CCD, SolveOptions(**tight), {}),
        ("FABRIK", Method.FABRIK, SolveOptions(**tight), {}),
        ("JT line search", Method.JACOBIAN_TRANSPOSE, SolveOptions(**tight), {}),
        ("pseudo-inverse", Method.PSEUDO_INVERSE, SolveOptions(**tight), {}),
        ("DLS λ=0.05", Method.DLS, SolveOptions(**tight), {}),
        ("DLS fast (FABRIK warm start, λ=0.03)", Method.DLS, SolveOptions(damping=0.03, max_step_angle=0.8, warm_start_passes=1, **tight), {}),
        ("SDLS", Method.SDLS, SolveOptions(**tight), {}),
        ("SDLS fast (FABRIK warm start)", Method.SDLS, SolveOptions(max_step_angle=0.8, warm_start_passes=1, **tight), {}),
    ]
    if case.chain.n_joints == 2:
        start = np.zeros(case.chain.n_dof)
        start[-1] = 0.3  # a bent start fixes the bend plane
        setups.insert(0, ("analytic", Method.ANALYTIC, SolveOptions(tolerance=1e-9), {"initial": start}))
    return setups


def timed(fn, repeats: int) -> tuple[float, Any]:
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def bench_case(case: Case, n_targets: int, loop_sample: int, repeats: int) -> list[dict]:
    targets = make_targets(case, n_targets)
    reachable = np.arange(n_targets) < n_targets // 2
    rows = []
    for label, method, options, extras in method_setups(case):
        seconds, result = timed(partial(solve, case.chain, targets, method, options, **extras), repeats)
        sample = np.linspace(0, n_targets - 1, loop_sample).astype(int)
        sample = np.concatenate([sample[reachable[sample]], sample[~reachable[sample]]])
        looped = []
        for i in sample:
            t0 = time.perf_counter()
            solve(case.chain, targets[i], method, options, **extras)
            looped.append(time.perf_counter() - t0)
        per_target = np.array(looped)
        sample_reachable = reachable[sample]
        reach_ok = result.status[reachable] == Status.CONVERGED
        far_ok = result.status[~reachable] == Status.UNREACHABLE
        # A separate batched run on the reachable half alone: the headline "solves/s to 1e-6".
        reach_seconds, _ = timed(partial(solve, case.chain, targets[reachable], method, options, **extras), repeats)
        row = {
            "chain": case.name,
            "method": label,
            "targets": n_targets,
            "batched_solves_per_s": n_targets / seconds,
            "batched_us_per_solve": seconds / n_targets * 1e6,
            "batched_reachable_solves_per_s": reachable.sum() / reach_seconds,
            "looped_solves_per_s": 1.0 / per_target.mean(),
            "looped_median_us": float(np.median(per_target) * 1e6),
            "looped_median_us_reachable": float(np.median(per_target[sample_reachable]) * 1e6),
            "looped_median_us_unreachable": float(np.median(per_target[~sample_reachable]) * 1e6),
            "speedup_batched_over_looped": per_target.mean() / (seconds / n_targets),
            "reachable_converged_pct": 100.0 * reach_ok.mean(),
            "unreachable_at_bound_pct": 100.0 * far_ok.mean(),
            "mean_iterations": float(result.iterations.mean()),
            "max_error_reachable": float(result.error[reachable].max()),
            "max_excess_unreachable": float((result.error - result.lower_bound)[~reachable].max()),
        }
        rows.append(row)
        print(
            f"{case.name:24s} {label:28s} batched {row['batched_solves_per_s']:>11,.0f}/s "
            f"({row['batched_us_per_solve']:7.2f} µs)  reach-only {row['batched_reachable_solves_per_s']:>10,.0f}/s  "
            f"looped median {row['looped_median_us']:8.0f} µs (reachable {row['looped_median_us_reachable']:7.0f})  "
            f"×{row['speedup_batched_over_looped']:6.1f}  "
            f"conv {row['reachable_converged_pct']:5.1f}%  bound {row['unreachable_at_bound_pct']:5.1f}%  "
            f"it {row['mean_iterations']:5.1f}",
            flush=True,
        )
    return rows


def bench_closed_form(n_targets: int, repeats: int) -> dict:
    """The planar closed form alone (both branches, reachability, residual)."""
    targets = make_targets(cases()[0], n_targets)[:, :2]
    seconds, _ = timed(lambda: two_bone_planar(1.0, 1.0, targets), repeats)
    t0 = time.perf_counter()
    for t in targets[:1000]:
        two_bone_planar(1.0, 1.0, t[None])
    looped = (time.perf_counter() - t0) / 1000
    row = {
        "chain": "planar 2-link",
        "method": "two_bone_planar (closed form)",
        "targets": n_targets,
        "batched_solves_per_s": n_targets / seconds,
        "batched_us_per_solve": seconds / n_targets * 1e6,
        "looped_median_us": looped * 1e6,
        "speedup_batched_over_looped": looped / (seconds / n_targets),
    }
    print(f"{'planar 2-link':24s} {'two_bone_planar':28s} batched {row['batched_solves_per_s']:>11,.0f}/s  looped {looped * 1e6:6.1f} µs", flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    return run_main("bench_core.py", lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = Parser(prog="bench_core.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/bench"))
    parser.add_argument("--targets", type=int, default=10_000)
    parser.add_argument("--loop-sample", type=int, default=100, help="targets timed one by one per method")
    parser.add_argument("--repeats", type=int, default=3, help="batched runs per method; the fastest counts")
    parser.add_argument("--skip-hi", action="store_true", help="leave out the HI solver rows")
    parser.add_argument("--chains", nargs="+", type=int, choices=range(4), default=range(4), metavar="K",
                        help="only these chains: 0 planar 2-link, 1 3D arm, 2 10-bone, 3 30-bone")
    args = parser.parse_args(argv)
    if args.targets < 2 or args.loop_sample < 2 or args.repeats < 1:
        raise UsageError("--targets and --loop-sample need at least 2, --repeats at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [bench_closed_form(args.targets, args.repeats)]
    for index, case in enumerate(cases()):
        if index not in args.chains:
            continue
        rows += bench_case(case, args.targets, args.loop_sample, args.repeats)
    if not args.skip_hi:
        from bench_hi import benchmark_hi

        hi = benchmark_hi(args.targets)
        rows += [{"chain": name, "method": "HI", "batched_solves_per_s": rate} for name, rate in hi.items()]
    fields = list(dict.fromkeys(key for row in sorted(rows, key=len, reverse=True) for key in row))
    with open(args.out / "bench_core.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "bench_core.json").write_text(json.dumps(rows, indent=1))
    print(f"wrote {args.out / 'bench_core.csv'} and {args.out / 'bench_core.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

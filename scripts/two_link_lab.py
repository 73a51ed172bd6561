"""Two-link lab (SPEC §4.1): the planar two-bone chain, analytically and by fixed-step Jacobian transpose.

Writes under ``--out DIR``:

- ``analytic.json``: closed-form table, a list of
  ``{"l1", "l2", "target": [x, y], "reachable", "min_residual", "branches": [[θ1, θ2], ...]}``
  (two branches inside the annulus, one where they merge on its boundary or out of reach).
- ``gradient_check.json``: central differences (h = 1e-6) of ``F = ½|p − t|²`` against the
  analytic gradient ``g = Jᵀ(p − t)`` (and of the tip against ``J``) at three non-singular poses,
  plus the gradient at each sweep case's start.
- ``summary.csv``: ``case,eta,budget,target_error,length_error_max,objective_increases,status``.
- ``iterations.csv``: ``case,eta,step,theta1,theta2,px,py,target_error,length_error,objective``,
  every state of the longest budget's run, the start included as step 0.
- ``step_bound.json``: the global descent bound ``2/L`` for the regular case (also printed).
- ``arm_<case>_eta<η>_budget<B>.png`` per run and ``error_vs_step.png``.

The sweep is plain Jacobian transpose ``θ ← θ − η Jᵀ(p − t)`` with a fixed step: no line search,
no per-step clamp, no restart. A bad step is reported as it is.

Usage: python scripts/two_link_lab.py --out DIR [--lengths L1 L2] [--target X Y [Z]]
       [--start T1 T2] [--etas η ...] [--budgets B ...]
Bad input (a zero or tiny bone length, a NaN target, a zero step, a target off the plane) exits
with status 1 and a one-line message.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from _cli import Parser, UsageError, run_main

from ik_solvers.core import (
    Chain,
    IKInputError,
    Method,
    SolveOptions,
    bone_length_errors,
    forward_kinematics,
    position_jacobian,
    solve,
    two_bone_planar,
    two_link_step_bound,
)

# (l1, l2, target) rows of the analytic table, in SPEC §4.1's order.
ANALYTIC_CASES = (
    (1.0, 1.0, (1.0, 1.0)),
    (1.0, 1.0, (3.0, 0.0)),
    (1.0, 0.5, (0.1, 0.0)),
    (1.0, 0.5, (0.5, 0.0)),
    (1.0, 0.5, (1.5, 0.0)),
    (0.5, 1.0, (0.0, 0.0)),
    (1.0, 1.0, (0.0, 0.0)),
    (1.0, 1.0, (1.0, 0.0)),
)
REGULAR_TARGET = (1.0, 1.0)
REGULAR_START = (0.2, 0.4)
# The tip of the straight chain points past this target: the gradient vanishes there.
STRAIGHT_TARGET = (1.0, 0.0)
STRAIGHT_START = (0.0, 0.0)
ETAS = (0.05, 0.2, 2.0)
BUDGETS = (10, 40, 200)
# The core stops a target once its error is within tolerance; the lab wants the state after the
# whole budget, so the tolerance is set far below anything the sweep reaches (it must be > 0).
SWEEP_TOLERANCE = 1e-15
FINITE_DIFFERENCE_STEP = 1e-6
# Three poses away from θ2 ∈ {0, π}, where the two-link Jacobian loses rank.
GRADIENT_CHECK_POSES = ((0.2, 0.4), (1.1, -0.8), (-2.3, 1.9))

SUMMARY_COLUMNS = ("case", "eta", "budget", "target_error", "length_error_max", "objective_increases", "status")
ITERATION_COLUMNS = (
    "case", "eta", "step", "theta1", "theta2", "px", "py", "target_error", "length_error", "objective",
)
BONE_COLOURS = ("tab:blue", "tab:green")


@dataclass(frozen=True)
class Case:
    """One start/target pair of the step sweep."""

    name: str
    target: np.ndarray  # (3,) world target; z must be 0 for the planar chain
    start: np.ndarray  # (2,) joint angles, radians


@dataclass(frozen=True)
class Run:
    """A fixed-step run of exactly ``budget`` updates.

    ``trajectory`` is ``(budget + 1, 2)``: the start, then the state after each update.
    """

    case: Case
    eta: float
    budget: int
    trajectory: np.ndarray
    status: str
    objective_increases: int


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="two_link_lab.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("out/two_link_lab"), help="output folder")
    parser.add_argument("--lengths", type=float, nargs=2, default=(1.0, 1.0), metavar=("L1", "L2"),
                        help="bone lengths of the sweep chain (default 1 1)")
    parser.add_argument("--target", type=float, nargs="+", default=REGULAR_TARGET, metavar="X",
                        help="regular-case target X Y [Z]; Z must be 0 (default 1 1)")
    parser.add_argument("--start", type=float, nargs=2, default=REGULAR_START, metavar=("T1", "T2"),
                        help="regular-case start angles in radians (default 0.2 0.4)")
    parser.add_argument("--etas", type=float, nargs="+", default=ETAS, help="fixed steps η (default 0.05 0.2 2)")
    parser.add_argument("--budgets", type=int, nargs="+", default=BUDGETS, help="update budgets (default 10 40 200)")
    return parser


# ------------------------------------------------------------------ analytic table
def analytic_table() -> list[dict]:
    """SPEC §4.1's closed-form rows, from the core's ``two_bone_planar``."""
    rows = []
    for l1, l2, target in ANALYTIC_CASES:
        solution = two_bone_planar(l1, l2, np.array([target]))
        count = int(solution.branch_count[0])
        rows.append({
            "l1": l1,
            "l2": l2,
            "target": list(target),
            "reachable": bool(solution.reachable[0]),
            "min_residual": float(solution.residual[0]),
            "branches": solution.branches[0, :count].tolist(),
        })
    return rows


# ------------------------------------------------------------------ gradient check
def objective_gradients(chain: Chain, q: np.ndarray, target: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Objective ``F (N,)`` and analytic gradient ``g = Jᵀ(p − t) (N, 2)`` at joint angles ``q (N, 2)``."""
    pose = forward_kinematics(chain, q)
    residual = pose.tips - target
    gradient = np.einsum("nid,ni->nd", position_jacobian(chain, pose), residual)
    return 0.5 * np.sum(residual**2, axis=-1), gradient


def gradient_check(chain: Chain, target: np.ndarray, cases: list[Case]) -> dict:
    """Analytic gradient and Jacobian against central differences at ``GRADIENT_CHECK_POSES``."""
    h = FINITE_DIFFERENCE_STEP
    poses = np.array(GRADIENT_CHECK_POSES)
    _, analytic = objective_gradients(chain, poses, target)
    jacobians = position_jacobian(chain, forward_kinematics(chain, poses))
    numeric = np.empty_like(analytic)
    numeric_jacobians = np.empty_like(jacobians)
    for k in range(poses.shape[1]):
        shift = np.zeros(poses.shape[1])
        shift[k] = h
        f_plus, _ = objective_gradients(chain, poses + shift, target)
        f_minus, _ = objective_gradients(chain, poses - shift, target)
        numeric[:, k] = (f_plus - f_minus) / (2.0 * h)
        tips_plus = forward_kinematics(chain, poses + shift).tips
        tips_minus = forward_kinematics(chain, poses - shift).tips
        numeric_jacobians[:, :, k] = (tips_plus - tips_minus) / (2.0 * h)
    gradient_difference = np.abs(numeric - analytic).max(axis=1)
    start_gradients = {
        case.name: objective_gradients(chain, case.start[None], case.target)[1][0].tolist() for case in cases
    }
    return {
        "h": h,
        "target": target[:2].tolist(),
        "poses": [
            {
                "theta": pose.tolist(),
                "analytic_gradient": a.tolist(),
                "numeric_gradient": n.tolist(),
                "max_abs_difference": float(d),
            }
            for pose, a, n, d in zip(poses, analytic, numeric, gradient_difference)
        ],
        "max_abs_gradient_difference": float(gradient_difference.max()),
        "max_abs_jacobian_difference": float(np.abs(numeric_jacobians - jacobians).max()),
        "start_gradients": start_gradients,
    }


# ------------------------------------------------------------------ step sweep
def fixed_step_run(chain: Chain, case: Case, eta: float, budget: int) -> Run:
    """Jacobian transpose with step ``eta``, no line search and no clamp, for ``budget`` updates."""
    options = SolveOptions(
        step=eta, max_step_angle=None, max_iterations=budget, tolerance=SWEEP_TOLERANCE, record_trajectory=True
    )
    result = solve(chain, case.target[None], Method.JACOBIAN_TRANSPOSE, options, initial=case.start)
    assert result.trajectory is not None  # record_trajectory=True
    trajectory = result.trajectory[:, 0]
    # The core stops updating a target once it has converged or stalled (the step moved nothing);
    # such a state is a fixed point of the update, so the remaining updates repeat the last row.
    missing = budget + 1 - trajectory.shape[0]
    trajectory = np.concatenate([trajectory, np.repeat(trajectory[-1:], missing, axis=0)])
    return Run(case, eta, budget, trajectory, result.status[0].value, int(result.objective_increases[0]))


def run_states(chain: Chain, run: Run) -> dict[str, np.ndarray]:
    """Tip, target error, bone-length error and objective ``(budget + 1,)`` along a run."""
    pose = forward_kinematics(chain, run.trajectory)
    error = np.linalg.norm(pose.tips - run.case.target, axis=-1)
    return {
        "tips": pose.tips,
        "positions": pose.positions,
        "target_error": error,
        "length_error": bone_length_errors(chain, pose),
        "objective": 0.5 * error**2,
    }


def summary_row(chain: Chain, run: Run) -> dict:
    states = run_states(chain, run)
    return {
        "case": run.case.name,
        "eta": run.eta,
        "budget": run.budget,
        "target_error": float(states["target_error"][-1]),
        "length_error_max": float(states["length_error"].max()),
        "objective_increases": run.objective_increases,
        "status": run.status,
    }


def iteration_rows(chain: Chain, run: Run) -> list[dict]:
    states = run_states(chain, run)
    return [
        {
            "case": run.case.name,
            "eta": run.eta,
            "step": step,
            "theta1": float(theta[0]),
            "theta2": float(theta[1]),
            "px": float(states["tips"][step, 0]),
            "py": float(states["tips"][step, 1]),
            "target_error": float(states["target_error"][step]),
            "length_error": float(states["length_error"][step]),
            "objective": float(states["objective"][step]),
        }
        for step, theta in enumerate(run.trajectory)
    ]


# ------------------------------------------------------------------ output
def write_csv(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def plot_run(chain: Chain, run: Run, path: Path) -> None:
    import matplotlib.pyplot as plt

    states = run_states(chain, run)
    reach = float(chain.reach)
    fig, ax = plt.subplots(figsize=(5, 5))
    start, final = states["positions"][0], states["positions"][-1]
    for bone, colour in enumerate(BONE_COLOURS):
        ax.plot(start[bone : bone + 2, 0], start[bone : bone + 2, 1], color=colour, lw=1.5, ls=":", alpha=0.6)
        ax.plot(final[bone : bone + 2, 0], final[bone : bone + 2, 1], color=colour, lw=4,
                label=f"bone {bone + 1}", solid_capstyle="round")
    ax.plot(states["tips"][:, 0], states["tips"][:, 1], color="orange", lw=1, marker=".", ms=3,
            label="tip trajectory")
    ax.plot(*run.case.target[:2], "o", color="red", ms=8, label="target")
    ax.plot(0.0, 0.0, "ko", ms=4)
    ax.set_xlim(-1.15 * reach, 1.15 * reach)
    ax.set_ylim(-1.15 * reach, 1.15 * reach)
    ax.set_aspect("equal")
    ax.grid(alpha=0.3)
    ax.set_title(f"{run.case.name}, η={run.eta:g}, {run.budget} updates\n"
                 f"{run.status}, error {states['target_error'][-1]:.3g}  (dotted: start)", fontsize=9)
    ax.legend(loc="lower left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def plot_error_vs_step(chain: Chain, runs: list[Run], step_bound: float, path: Path) -> None:
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(run.case.name for run in runs))
    fig, axes = plt.subplots(1, len(names), figsize=(5.5 * len(names), 4), squeeze=False)
    for ax, name in zip(axes[0], names):
        for run in runs:
            if run.case.name == name:
                error = run_states(chain, run)["target_error"]
                # Log axis: an exact zero would vanish from the plot, so floor it at the smallest double.
                ax.semilogy(np.arange(error.size), np.maximum(error, np.finfo(float).tiny), label=f"η={run.eta:g}")
        ax.set_xlabel("update")
        ax.set_ylabel("|p − t|")
        ax.set_title(f"{name} (regular-case bound 2/L = {step_bound:.3g})" if name == "regular" else
                     f"{name} (every η gives the same line)")
        ax.grid(alpha=0.3, which="both")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def run_plan(args: argparse.Namespace) -> dict:
    """Everything the lab computes, before any file is written (bad input raises IKInputError)."""
    if len(args.target) not in (2, 3):
        raise UsageError(f"--target takes X Y [Z], got {len(args.target)} numbers")
    l1, l2 = args.lengths
    chain = Chain.planar([l1, l2])
    regular_target = np.zeros(3)
    regular_target[: len(args.target)] = args.target
    if np.isfinite(regular_target[2]) and regular_target[2] != 0.0:
        # The core now reaches the nearest in-plane point of an off-plane target (issue 11);
        # the lab is a planar experiment (SPEC §4.1), so it still refuses one.
        raise UsageError(f"--target lies {regular_target[2]:.3g} off the planar chain's plane (z must be 0)")
    cases = [
        Case("regular", regular_target, np.array(args.start, dtype=float)),
        Case("straight", np.array([*STRAIGHT_TARGET, 0.0]), np.array(STRAIGHT_START)),
    ]
    # Build every option set first so a bad step or budget is refused before any solve runs.
    for eta in args.etas:
        for budget in args.budgets:
            SolveOptions(step=eta, max_step_angle=None, max_iterations=budget, tolerance=SWEEP_TOLERANCE)
    runs = [fixed_step_run(chain, case, eta, budget) for case in cases for eta in args.etas for budget in args.budgets]
    longest = max(args.budgets)
    trajectories = [run for run in runs if run.budget == longest]
    bound = two_link_step_bound(l1, l2, regular_target[:2])
    r = float(np.linalg.norm(regular_target[:2]))
    return {
        "chain": chain,
        "analytic": analytic_table(),
        "gradient": gradient_check(chain, regular_target, cases),
        "runs": runs,
        "trajectories": trajectories,
        "step_bound": {
            "case": "regular",
            "l1": l1,
            "l2": l2,
            "target": regular_target[:2].tolist(),
            "r": r,
            "L": l1 * l2 + l1 * r + 2.0 * l2 * r,
            "step_bound": bound,
            "etas_below_bound": [eta for eta in args.etas if eta < bound],
        },
    }


def write_outputs(out: Path, plan: dict) -> None:
    chain = plan["chain"]
    out.mkdir(parents=True, exist_ok=True)
    (out / "analytic.json").write_text(json.dumps(plan["analytic"], indent=2) + "\n")
    (out / "gradient_check.json").write_text(json.dumps(plan["gradient"], indent=2) + "\n")
    (out / "step_bound.json").write_text(json.dumps(plan["step_bound"], indent=2) + "\n")
    write_csv(out / "summary.csv", SUMMARY_COLUMNS, [summary_row(chain, run) for run in plan["runs"]])
    write_csv(out / "iterations.csv", ITERATION_COLUMNS,
              [row for run in plan["trajectories"] for row in iteration_rows(chain, run)])
    import matplotlib

    matplotlib.use("Agg")
    for run in plan["runs"]:
        plot_run(chain, run, out / f"arm_{run.case.name}_eta{run.eta:g}_budget{run.budget}.png")
    plot_error_vs_step(chain, plan["trajectories"], plan["step_bound"]["step_bound"], out / "error_vs_step.png")


def main(argv: list[str] | None = None) -> int:
    return run_main("two_link_lab.py", lambda: _main(argv), usage_errors=(IKInputError,))


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    plan = run_plan(args)  # every input is checked here, before anything is written
    write_outputs(args.out, plan)
    bound = plan["step_bound"]
    print(f"step bound 2/L = {bound['step_bound']:.6g} (L = {bound['L']:.6g}) for the regular case")
    print(f"gradient check: max |numeric − analytic| = {plan['gradient']['max_abs_gradient_difference']:.3g}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Solver race (SPEC §4.2): every method on one fixed set of reachable and unreachable targets.

The protocol of ``seeds/solver-race-unity.txt`` on our core: a 4-bone ball-joint chain (lengths
1.0, 0.9, 0.75, 0.55, reach 3.2) from its straight rest pose; ``--samples`` reachable targets at
radius ratio [0.15, 0.95] of the reach and as many unreachable at [1.05, 1.35], uniform random
directions, drawn once from ``--seed`` and shared by every series and step.

Step scale: the article sweeps one "step scale" {0.0001 … 0.05} for every solver. In our core only
the fixed-step Jacobian transpose has that knob (``SolveOptions.step`` = η, the same
``Δθ = η Jᵀ e`` as the article's), so ``jt_fixed`` is swept over it; every other series runs once
at its own natural setting (CCD / FABRIK full sweeps, DLS and SDLS full damped steps, pseudo-inverse
α = 1, JT with a backtracking line search) and shows up as one point with an empty ``step``.
No per-step angle clamp is applied unless ``--max-step-angle`` is given (the article has none).

Each (series, step) is ONE batched ``solve`` over all targets; the runtime per target is that
call's wall time (the fastest of ``--repeats``) divided by the number of targets (so it is the
same for both categories). A small
sample of targets is also solved one at a time (``--loop-samples`` per category) for a per-target
time without batching.

Writes under ``--out DIR``:

- ``race_points.csv``: ``series,step,category,success_rate,mean_iterations,mean_runtime_ms,
  mean_final_error,mean_deviation_deg,score`` — one row per series × step × category. Success is
  status CONVERGED for a reachable target and UNREACHABLE (error within tolerance of the geometric
  lower bound) for an unreachable one; ``mean_iterations`` is over successes (``nan`` if none);
  deviation is the rotation angle of each joint relative to the start pose, averaged over joints
  and targets, in degrees; ``score`` is the composite of its (series, step) pair.
- ``race_checks.csv``: ``series,step,category,samples,loop_runtime_ms,max_success_iterations,
  max_final_error,max_bound_gap,goal_misses`` — worst cases behind the means; ``goal_misses``
  counts the targets that miss issue 3's bar (reachable: error ≤ 1e-3, unreachable: error within
  1e-6 of the lower bound, either within 16 iterations).
- ``race_best.csv``: ``series,best_step,score``, best first.
- ``race_table.md``: the tables of ``docs/solver-race.md`` for this run.
- ``race_reachable.png``, ``race_unreachable.png``, ``race_score.png`` (lines over the step
  scale) and ``race_best.png`` (bars).

Composite score, as the article's benchmark defines it (its ``IKBenchmarkScoreFormula``), here in
[0, 1] (the article prints it ×100): per (series, step) pair
``0.20 N↑(reachable success) + 0.10 N↓(reachable iterations of successes, the budget if none)
+ 0.10 N↓(reachable runtime) + 0.10 N↓(reachable error) + 0.20 N↓(reachable deviation)
+ 0.05 N↓(unreachable runtime) + 0.15 N↓(unreachable error) + 0.10 N↓(unreachable deviation)``,
with ``N↑(x) = (x − min)/(max − min)``, ``N↓(x) = (max − x)/(max − min)`` over all pairs of the run
(a metric whose spread is below 1e-6 counts 1 for every pair, as in the article's code).

Usage: python scripts/solver_race.py --out DIR [--budget N] [--tolerance T] [--samples K]
       [--seed S] [--loop-samples M] [--repeats R] [--doc FILE] [--max-step-angle A]
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _cli import Parser, UsageError, run_main
from _measure import check_markers, paste_between_markers

from ik_solvers.core import Chain, IKInputError, JointKind, Method, SolveOptions, Status, solve

BONE_LENGTHS = (1.0, 0.9, 0.75, 0.55)
STEP_SCALES = (0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05)
# The article's sample seed (its IKBenchmarkExperimentPlan); numpy draws other numbers from it
# than C#'s System.Random, so the targets are the same in kind, not the same points.
DEFAULT_SEED = 20260406
CATEGORIES = (("reachable", 0.15, 0.95), ("unreachable", 1.05, 1.35))
# The article seeds each category's generator apart by this stride.
CATEGORY_SEED_STRIDE = 1009
# A metric whose spread over all points is below this scores 1 everywhere (the article's threshold).
FLAT_SPAN = 1e-6
# (category, metric, higher is better, weight): the article's composite score.
SCORE_TERMS = (
    ("reachable", "success_rate", True, 0.20),
    ("reachable", "mean_iterations", False, 0.10),
    ("reachable", "mean_runtime_ms", False, 0.10),
    ("reachable", "mean_final_error", False, 0.10),
    ("reachable", "mean_deviation_deg", False, 0.20),
    ("unreachable", "mean_runtime_ms", False, 0.05),
    ("unreachable", "mean_final_error", False, 0.15),
    ("unreachable", "mean_deviation_deg", False, 0.10),
)
# The bar for "our best method" (issue 3): at tolerance 1e-3, every reachable target
# within 16 iterations, every unreachable one within 1e-6 of its lower bound.
GOAL_ITERATIONS = 16
GOAL_TOLERANCE = 1e-3
GOAL_BOUND_GAP = 1e-6

POINT_COLUMNS = (
    "series", "step", "category", "success_rate", "mean_iterations", "mean_runtime_ms",
    "mean_final_error", "mean_deviation_deg", "score",
)
CHECK_COLUMNS = (
    "series", "step", "category", "samples", "loop_runtime_ms", "max_success_iterations",
    "max_final_error", "max_bound_gap", "goal_misses",
)
BEST_COLUMNS = ("series", "best_step", "score")


@dataclass(frozen=True)
class Series:
    """One racer: a core method with fixed settings; ``swept`` ones take the step scale as ``step``."""

    name: str
    method: Method
    settings: tuple[tuple[str, object], ...] = ()
    swept: bool = False

    def steps(self) -> tuple[float | None, ...]:
        return STEP_SCALES if self.swept else (None,)

    def options(self, step: float | None, budget: int, tolerance: float, max_step_angle: float | None) -> SolveOptions:
        fields: dict[str, Any] = dict(self.settings)
        if self.swept:
            fields["step"] = step
        return SolveOptions(max_iterations=budget, tolerance=tolerance, max_step_angle=max_step_angle, **fields)


SERIES = (
    Series("ccd", Method.CCD),
    Series("jt_fixed", Method.JACOBIAN_TRANSPOSE, swept=True),
    Series("dls_0.03", Method.DLS, (("damping", 0.03),)),
    Series("dls_0.1", Method.DLS, (("damping", 0.1),)),
    Series("dls_0.3", Method.DLS, (("damping", 0.3),)),
    Series("sdls", Method.SDLS),  # the core's default damping schedule
    Series("pseudo_inverse", Method.PSEUDO_INVERSE, (("step", None),)),  # α = 1: the full Gauss–Newton step
    Series("fabrik", Method.FABRIK),
    Series("jt_line_search", Method.JACOBIAN_TRANSPOSE, (("step", None),)),
    # Beyond the article: one FABRIK pass bends the straight start before the
    # Jacobian iterations (the pass counts as an iteration).
    Series("sdls_fabrik_start", Method.SDLS, (("warm_start_passes", 1),)),
    Series("pinv_fabrik_start", Method.PSEUDO_INVERSE, (("step", None), ("warm_start_passes", 1))),
)


@dataclass(frozen=True)
class Targets:
    """The race's target set: ``positions (2K, 3)``, reachable ones first; ``categories (2K,)`` names."""

    positions: np.ndarray
    categories: np.ndarray


@dataclass(frozen=True)
class Point:
    """One (series, step) solved on every target."""

    series: str
    step: float | None
    metrics: dict[str, dict[str, float]]  # category -> metric -> value
    score: float = math.nan


def race_chain() -> Chain:
    return Chain.straight(BONE_LENGTHS, JointKind.BALL)


def race_targets(reach: float, samples: int, seed: int) -> Targets:
    """``samples`` targets per category, radius ratio uniform in its range, direction uniform on the sphere."""
    positions, names = [], []
    for index, (name, low, high) in enumerate(CATEGORIES):
        rng = np.random.default_rng(seed + CATEGORY_SEED_STRIDE * index)
        ratio = rng.uniform(low, high, samples)
        z = rng.uniform(-1.0, 1.0, samples)
        azimuth = rng.uniform(0.0, 2.0 * np.pi, samples)
        ring = np.sqrt(1.0 - z**2)
        directions = np.stack([ring * np.cos(azimuth), ring * np.sin(azimuth), z], axis=-1)
        positions.append(directions * (ratio * reach)[:, None])
        names += [name] * samples
    return Targets(np.concatenate(positions), np.array(names))


def joint_deviation_degrees(rotations: np.ndarray) -> np.ndarray:
    """Mean rotation angle ``(N,)`` over joints, degrees, of quaternions ``(N, n, 4)`` ``(w, x, y, z)``."""
    return np.degrees(2.0 * np.arccos(np.clip(np.abs(rotations[..., 0]), 0.0, 1.0))).mean(axis=-1)


def _timed_solve(chain: Chain, targets: np.ndarray, series: Series, options: SolveOptions):
    start = time.perf_counter()
    result = solve(chain, targets, series.method, options)
    return result, time.perf_counter() - start


def race_point(
    chain: Chain, targets: Targets, series: Series, step: float | None, args: argparse.Namespace
) -> tuple[Point, list[dict]]:
    """Solve every target in one batch; the category means and the worst-case checks."""
    options = series.options(step, args.budget, args.tolerance, args.max_step_angle)
    _timed_solve(chain, targets.positions[:2], series, options)  # warm-up, as the article does
    # The fastest of a few identical solves: other processes on the machine only ever add time,
    # and the score weighs runtime, so a noisy timing would reorder close series.
    result, seconds = _timed_solve(chain, targets.positions, series, options)
    for _ in range(args.repeats - 1):
        seconds = min(seconds, _timed_solve(chain, targets.positions, series, options)[1])
    runtime_ms = 1e3 * seconds / targets.positions.shape[0]
    deviation = joint_deviation_degrees(result.rotations)
    metrics, checks = {}, []
    for name, _, _ in CATEGORIES:
        rows = np.flatnonzero(targets.categories == name)
        wanted = Status.CONVERGED if name == "reachable" else Status.UNREACHABLE
        success = result.status[rows] == wanted
        gap = result.error[rows] - result.lower_bound[rows]
        goal_error = GOAL_TOLERANCE if name == "reachable" else GOAL_BOUND_GAP
        goal_met = (gap <= goal_error) & (result.iterations[rows] <= GOAL_ITERATIONS)
        iterations = result.iterations[rows][success]
        loop = rows[: args.loop_samples]
        loop_seconds = [_timed_solve(chain, targets.positions[k : k + 1], series, options)[1] for k in loop]
        metrics[name] = {
            "success_rate": float(success.mean()),
            "mean_iterations": float(iterations.mean()) if iterations.size else math.nan,
            "mean_runtime_ms": runtime_ms,
            "mean_final_error": float(result.error[rows].mean()),
            "mean_deviation_deg": float(deviation[rows].mean()),
        }
        checks.append({
            "series": series.name,
            "step": _step_text(step),
            "category": name,
            "samples": int(rows.size),
            "loop_runtime_ms": 1e3 * float(np.mean(loop_seconds)) if loop_seconds else math.nan,
            "max_success_iterations": int(iterations.max()) if iterations.size else math.nan,
            "max_final_error": float(result.error[rows].max()),
            "max_bound_gap": float(gap.max()),
            "goal_misses": int((~goal_met).sum()),
        })
    return Point(series.name, step, metrics), checks


def with_scores(points: list[Point], budget: int) -> list[Point]:
    """The article's composite score of every point, min–max normalised over all of them."""
    def value(point: Point, category: str, metric: str) -> float:
        raw = point.metrics[category][metric]
        # The article counts a point without successes as having used the whole budget.
        return float(budget) if metric == "mean_iterations" and math.isnan(raw) else raw

    scores = np.zeros(len(points))
    for category, metric, higher_is_better, weight in SCORE_TERMS:
        values = np.array([value(p, category, metric) for p in points])
        low, high = values.min(), values.max()
        if high - low < FLAT_SPAN:
            normalised = np.ones_like(values)
        else:
            normalised = (values - low if higher_is_better else high - values) / (high - low)
        scores += weight * normalised
    return [Point(p.series, p.step, p.metrics, float(s)) for p, s in zip(points, scores)]


def best_points(points: list[Point]) -> list[Point]:
    """Each series' highest-scoring point (the first on ties), best first."""
    best: dict[str, Point] = {}
    for point in points:
        if point.series not in best or point.score > best[point.series].score:
            best[point.series] = point
    return sorted(best.values(), key=lambda p: -p.score)


def goal_rows(points: list[Point], checks: list[dict]) -> list[dict]:
    """Each point against the issue's bar (see GOAL_*), those closest to it first."""
    by_key = {(c["series"], c["step"], c["category"]): c for c in checks}
    rows = []
    for point in points:
        reach = by_key[(point.series, _step_text(point.step), "reachable")]
        away = by_key[(point.series, _step_text(point.step), "unreachable")]
        rows.append({
            "series": point.series,
            "step": point.step,
            "reachable_misses": reach["goal_misses"],
            "unreachable_misses": away["goal_misses"],
            "max_iterations": reach["max_success_iterations"],
            "max_unreachable_iterations": away["max_success_iterations"],
            "max_reachable_error": reach["max_final_error"],
            "max_bound_gap": away["max_bound_gap"],
            "meets": reach["goal_misses"] == 0 and away["goal_misses"] == 0,
        })
    return sorted(rows, key=lambda r: (r["reachable_misses"] + r["unreachable_misses"], r["max_bound_gap"]))


# ------------------------------------------------------------------ output
def _step_text(step: float | None) -> str:
    return "" if step is None else repr(step)


def write_csv(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def point_rows(points: list[Point]) -> list[dict]:
    return [
        {"series": p.series, "step": _step_text(p.step), "category": name, **p.metrics[name], "score": p.score}
        for p in points
        for name, _, _ in CATEGORIES
    ]


def _fmt(value: float, digits: int = 3) -> str:
    if isinstance(value, float) and math.isnan(value):
        return "—"
    return f"{value:.{digits}g}"


def markdown_tables(points: list[Point], checks: list[dict], args: argparse.Namespace) -> str:
    """This run's tables for docs/solver-race.md."""
    loop: dict[tuple[str, str], list[float]] = {}
    for c in checks:
        if not math.isnan(c["loop_runtime_ms"]):
            loop.setdefault((c["series"], c["step"]), []).append(c["loop_runtime_ms"])
    lines = [
        f"Budget {args.budget}, tolerance {args.tolerance:g}, {args.samples} targets per category, "
        f"seed {args.seed}, max step angle {args.max_step_angle if args.max_step_angle is not None else 'none'}.",
        "",
        "| series | step | score | reach success | reach iters | reach error | reach dev ° "
        "| unreach success | unreach error | unreach dev ° | ms/target (batch) | ms/target (loop) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in points:
        r, u = p.metrics["reachable"], p.metrics["unreachable"]
        loop_ms = float(np.mean(loop.get((p.series, _step_text(p.step)), [math.nan])))
        lines.append(
            f"| {p.series} | {_step_text(p.step) or '—'} | {p.score:.3f} | {r['success_rate']:.3f} "
            f"| {_fmt(r['mean_iterations'])} | {_fmt(r['mean_final_error'])} | {r['mean_deviation_deg']:.1f} "
            f"| {u['success_rate']:.3f} | {_fmt(u['mean_final_error'], 4)} | {u['mean_deviation_deg']:.1f} "
            f"| {r['mean_runtime_ms']:.4f} | {_fmt(loop_ms)} |"
        )
    lines += ["", "Best step per series (composite score, 0–1):", "", "| series | best step | score |",
              "|---|---|---|"]
    for p in best_points(points):
        lines.append(f"| {p.series} | {_step_text(p.step) or '—'} | {p.score:.3f} |")
    lines += [
        "",
        f"Goal check (issue 3): every reachable target within {GOAL_TOLERANCE:g} in at most {GOAL_ITERATIONS} "
        f"iterations, every unreachable one within {GOAL_BOUND_GAP:g} of its lower bound in at most "
        f"{GOAL_ITERATIONS}; misses count the targets that fail (of {args.samples} per category).",
        "",
    ]
    if not math.isclose(args.tolerance, GOAL_TOLERANCE):
        # The core stops a target once it is within the run's tolerance, so at any other tolerance
        # the iteration counts and final errors do not answer the question.
        lines.append(f"Not evaluated: this run's tolerance is {args.tolerance:g}, not {GOAL_TOLERANCE:g}.")
        return "\n".join(lines) + "\n"
    lines += [
        "| series | step | reachable misses | unreachable misses | max iterations (reachable / unreachable successes) "
        "| worst reachable error | worst gap to bound | meets |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in goal_rows(points, checks):
        lines.append(
            f"| {g['series']} | {_step_text(g['step']) or '—'} | {g['reachable_misses']} | {g['unreachable_misses']} "
            f"| {_fmt(g['max_iterations'])} / {_fmt(g['max_unreachable_iterations'])} "
            f"| {_fmt(g['max_reachable_error'])} | {_fmt(g['max_bound_gap'])} | {'yes' if g['meets'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def race_markers(name: str) -> tuple[str, str]:
    """The marker lines ``<!-- race-table:NAME -->`` and ``<!-- /race-table:NAME -->`` around a run's tables."""
    return f"<!-- race-table:{name} -->", f"<!-- /race-table:{name} -->"


def paste_into_doc(doc: Path, name: str, table: str) -> None:
    """Replace what stands between ``<!-- race-table:NAME -->`` and ``<!-- /race-table:NAME -->`` in ``doc``."""
    paste_between_markers(doc, *race_markers(name), table)


def _plot_metric(ax, points: list[Point], category: str, metric: str, log_y: bool = False) -> None:
    for index, series in enumerate(SERIES):
        colour = f"C{index % 10}"
        mine = [p for p in points if p.series == series.name]
        if not mine:
            continue
        values = [p.metrics[category][metric] if metric != "score" else p.score for p in mine]
        if series.swept:
            ax.plot([p.step for p in mine], values, "o-", color=colour, label=series.name)
        else:
            # No step parameter: the same value at every step scale.
            ax.plot(STEP_SCALES, [values[0]] * len(STEP_SCALES), "--", color=colour, label=series.name)
    ax.set_xscale("log")
    if log_y:
        ax.set_yscale("log")
    ax.set_xlabel("step scale (jt_fixed: η)")
    ax.grid(alpha=0.3, which="both")


def plot_category(points: list[Point], category: str, title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    panels = (
        ("success_rate", "success rate", False),
        ("mean_final_error", "mean final error", True),
        ("mean_deviation_deg", "mean joint deviation (°)", False),
        ("mean_iterations", "mean iterations of successes", False),
    )
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    for ax, (metric, label, log_y) in zip(axes.flat, panels):
        _plot_metric(ax, points, category, metric, log_y)
        ax.set_ylabel(label)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_scores(points: list[Point], title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    _plot_metric(ax, points, "reachable", "score")
    ax.set_ylabel("composite score")
    ax.set_ylim(0.0, 1.0)
    ax.legend(fontsize=7)
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_best(points: list[Point], title: str, path: Path) -> None:
    import matplotlib.pyplot as plt

    best = best_points(points)[::-1]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.barh([p.series + (f" (η={p.step:g})" if p.step is not None else "") for p in best], [p.score for p in best])
    for y, p in enumerate(best):
        ax.text(p.score + 0.01, y, f"{p.score:.3f}", va="center", fontsize=8)
    ax.set_xlim(0.0, 1.1)
    ax.set_xlabel("best composite score")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="solver_race.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("out/solver_race"), help="output folder")
    parser.add_argument("--budget", type=int, default=16, help="iteration budget (default 16, the article's)")
    parser.add_argument("--tolerance", type=float, default=0.1, help="position tolerance (default 0.1, the article's)")
    parser.add_argument("--samples", type=int, default=200, help="targets per category (default 200)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"target seed (default {DEFAULT_SEED})")
    parser.add_argument("--loop-samples", type=int, default=5,
                        help="targets per category also solved one at a time for the loop timing (default 5)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="time each batch this many times and keep the fastest (default 3)")
    parser.add_argument("--doc", type=Path, default=None,
                        help="also paste race_table.md into this markdown file, between the markers "
                             "<!-- race-table:NAME --> and <!-- /race-table:NAME --> (NAME: the --out folder's name)")
    parser.add_argument("--max-step-angle", type=float, default=None,
                        help="per-step joint angle clamp in radians (default: none, as in the article)")
    return parser


def main(argv: list[str] | None = None) -> int:
    return run_main("solver_race.py", lambda: _main(argv), usage_errors=(IKInputError,))


def _main(argv: list[str] | None) -> int:
    # Every input is checked before anything runs or is written.
    args = build_parser().parse_args(argv)
    if args.samples <= 0:
        raise UsageError(f"--samples must be positive, got {args.samples}")
    if args.repeats <= 0:
        raise UsageError(f"--repeats must be positive, got {args.repeats}")
    if args.doc is not None:
        check_markers(args.doc, *race_markers(args.out.name))  # the markers must be there before anything runs
    if args.loop_samples < 0:
        raise UsageError(f"--loop-samples must not be negative, got {args.loop_samples}")
    chain = race_chain()
    # Refuse a bad budget, tolerance or clamp before anything runs.
    for series in SERIES:
        for step in series.steps():
            series.options(step, args.budget, args.tolerance, args.max_step_angle)

    targets = race_targets(chain.reach, args.samples, args.seed)
    started = time.perf_counter()
    points, checks = [], []
    for series in SERIES:
        for step in series.steps():
            point, point_checks = race_point(chain, targets, series, step, args)
            points.append(point)
            checks += point_checks
    points = with_scores(points, args.budget)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "race_points.csv", POINT_COLUMNS, point_rows(points))
    write_csv(out / "race_checks.csv", CHECK_COLUMNS, checks)
    write_csv(out / "race_best.csv", BEST_COLUMNS,
              [{"series": p.series, "best_step": _step_text(p.step), "score": p.score} for p in best_points(points)])
    table = markdown_tables(points, checks, args)
    (out / "race_table.md").write_text(table)
    if args.doc is not None:
        paste_into_doc(args.doc, out.name, table)
    import matplotlib

    matplotlib.use("Agg")
    setting = f"budget {args.budget}, tolerance {args.tolerance:g}"
    plot_category(points, "reachable", f"Reachable targets ({setting})", out / "race_reachable.png")
    plot_category(points, "unreachable", f"Unreachable targets ({setting}; success = UNREACHABLE status)",
                  out / "race_unreachable.png")
    plot_scores(points, f"Composite score ({setting})", out / "race_score.png")
    plot_best(points, f"Best score per series ({setting})", out / "race_best.png")
    best = best_points(points)[0]
    print(f"{len(points)} points x {targets.positions.shape[0]} targets in {time.perf_counter() - started:.1f} s; "
          f"best: {best.series} (step {_step_text(best.step) or '—'}) score {best.score:.3f}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

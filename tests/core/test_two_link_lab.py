"""scripts/two_link_lab.py (SPEC §4.1): its outputs, checked against hand geometry, and its refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import csv_rows, load_script, script_path

SCRIPT = script_path("two_link_lab")

lab = load_script("two_link_lab")


@pytest.fixture(scope="module")
def lab_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("two_link_lab")
    assert lab.main(["--out", str(out)]) == 0
    return out


def _planar_tip(l1: float, l2: float, theta1: float, theta2: float) -> np.ndarray:
    """Hand FK of the planar two-link arm (independent of the core)."""
    return np.array([
        l1 * np.cos(theta1) + l2 * np.cos(theta1 + theta2),
        l1 * np.sin(theta1) + l2 * np.sin(theta1 + theta2),
    ])


def test_output_files_and_columns_are_exactly_as_specified(lab_out):
    with (lab_out / "summary.csv").open() as handle:
        assert handle.readline().strip() == "case,eta,budget,target_error,length_error_max,objective_increases,status"
    with (lab_out / "iterations.csv").open() as handle:
        assert handle.readline().strip() == (
            "case,eta,step,theta1,theta2,px,py,target_error,length_error,objective"
        )
    table = json.loads((lab_out / "analytic.json").read_text())
    assert len(table) == 8
    for row in table:
        assert set(row) == {"l1", "l2", "target", "reachable", "min_residual", "branches"}
    bound = json.loads((lab_out / "step_bound.json").read_text())
    assert bound["step_bound"] == pytest.approx(2.0 / (1.0 + np.sqrt(2.0) + 2.0 * np.sqrt(2.0)), rel=1e-14)
    assert (lab_out / "error_vs_step.png").stat().st_size > 0
    # One arm figure per (case, η, budget) run.
    assert len(list(lab_out.glob("arm_*.png"))) == 2 * 3 * 3


def test_summary_has_every_case_step_and_budget(lab_out):
    rows = csv_rows(lab_out / "summary.csv")
    keys = {(r["case"], float(r["eta"]), int(r["budget"])) for r in rows}
    assert keys == {(c, e, b) for c in ("regular", "straight") for e in (0.05, 0.2, 2.0) for b in (10, 40, 200)}
    assert len(rows) == 18


def test_objective_never_rises_below_the_step_bound(lab_out):
    bound = json.loads((lab_out / "step_bound.json").read_text())["step_bound"]
    rows = [r for r in csv_rows(lab_out / "iterations.csv") if r["case"] == "regular" and float(r["eta"]) < bound]
    assert {float(r["eta"]) for r in rows} == {0.05, 0.2}
    for eta in (0.05, 0.2):
        objective = np.array([float(r["objective"]) for r in rows if float(r["eta"]) == eta])
        assert objective.size == 201
        assert np.all(np.diff(objective) <= 1e-12)
    summary = [r for r in csv_rows(lab_out / "summary.csv") if r["case"] == "regular" and float(r["eta"]) < bound]
    assert all(int(r["objective_increases"]) == 0 for r in summary)


def test_a_step_far_above_the_bound_raises_the_objective(lab_out):
    """η = 2 is over five times 2/L: the fixed step overshoots and F goes up (reported, not hidden)."""
    summary = [r for r in csv_rows(lab_out / "summary.csv") if r["case"] == "regular" and r["eta"] == "2.0"]
    assert all(int(r["objective_increases"]) > 0 for r in summary)


def test_trajectory_rows_match_hand_kinematics(lab_out):
    rows = csv_rows(lab_out / "iterations.csv")
    start = rows[0]
    assert (start["case"], int(start["step"])) == ("regular", 0)
    assert (float(start["theta1"]), float(start["theta2"])) == (0.2, 0.4)
    for row in rows[::37]:
        tip = _planar_tip(1.0, 1.0, float(row["theta1"]), float(row["theta2"]))
        assert np.allclose(tip, [float(row["px"]), float(row["py"])], atol=1e-12)
        target = (1.0, 1.0) if row["case"] == "regular" else (1.0, 0.0)
        assert float(row["target_error"]) == pytest.approx(np.hypot(*(tip - target)), abs=1e-12)
        assert float(row["objective"]) == pytest.approx(0.5 * float(row["target_error"]) ** 2, abs=1e-12)
        assert float(row["length_error"]) < 1e-14


def test_summary_error_is_the_state_after_exactly_budget_updates(lab_out):
    trajectories = csv_rows(lab_out / "iterations.csv")
    for row in csv_rows(lab_out / "summary.csv"):
        state = next(
            t for t in trajectories
            if t["case"] == row["case"] and t["eta"] == row["eta"] and int(t["step"]) == int(row["budget"])
        )
        assert float(row["target_error"]) == pytest.approx(float(state["target_error"]), abs=1e-12)
        assert float(row["length_error_max"]) < 1e-14


def test_fixed_step_0_2_reaches_the_regular_target_linearly(lab_out):
    errors = {int(r["budget"]): float(r["target_error"]) for r in csv_rows(lab_out / "summary.csv")
              if r["case"] == "regular" and r["eta"] == "0.2"}
    assert errors[10] > errors[40] > errors[200]
    assert errors[200] < 1e-5


def test_straight_case_has_zero_gradient_and_stalls_at_error_one(lab_out):
    gradient = json.loads((lab_out / "gradient_check.json").read_text())["start_gradients"]["straight"]
    assert gradient == [0.0, 0.0]
    rows = [r for r in csv_rows(lab_out / "summary.csv") if r["case"] == "straight"]
    assert len(rows) == 9
    for row in rows:
        assert row["status"] == "STALLED"
        assert float(row["target_error"]) == 1.0
        assert int(row["objective_increases"]) == 0
    path = [r for r in csv_rows(lab_out / "iterations.csv") if r["case"] == "straight"]
    assert len(path) == 3 * 201  # padded to the full budget although the core stops at once
    assert all(float(r["theta1"]) == 0.0 and float(r["theta2"]) == 0.0 for r in path)


def test_gradient_matches_central_differences(lab_out):
    check = json.loads((lab_out / "gradient_check.json").read_text())
    assert check["h"] == 1e-6
    assert len(check["poses"]) == 3
    for pose in check["poses"]:
        theta2 = pose["theta"][1]
        assert abs(np.sin(theta2)) > 0.1  # away from the singular θ2 ∈ {0, π}
        # Hand gradient of ½|p − t|² for the regular target (1, 1).
        t1, t2 = pose["theta"]
        residual = _planar_tip(1.0, 1.0, t1, t2) - np.array([1.0, 1.0])
        jacobian = np.array([
            [-np.sin(t1) - np.sin(t1 + t2), -np.sin(t1 + t2)],
            [np.cos(t1) + np.cos(t1 + t2), np.cos(t1 + t2)],
        ])
        assert np.allclose(pose["analytic_gradient"], jacobian.T @ residual, atol=1e-14)
    assert check["max_abs_gradient_difference"] < 1e-8
    assert check["max_abs_jacobian_difference"] < 1e-8


def test_analytic_branches_reproduce_the_target(lab_out):
    for row in json.loads((lab_out / "analytic.json").read_text()):
        l1, l2, target = row["l1"], row["l2"], np.array(row["target"])
        r = np.hypot(*target)
        expected_residual = abs(r - np.clip(r, abs(l1 - l2), l1 + l2))
        assert row["min_residual"] == pytest.approx(expected_residual, abs=1e-15)
        assert row["reachable"] == (abs(l1 - l2) <= r <= l1 + l2)
        for theta1, theta2 in row["branches"]:
            miss = np.hypot(*(_planar_tip(l1, l2, theta1, theta2) - target))
            if row["reachable"]:
                assert miss < 1e-12
            else:
                assert miss == pytest.approx(row["min_residual"], abs=1e-12)


def test_analytic_branch_counts():
    rows = {(r["l1"], r["l2"], tuple(r["target"])): r for r in lab.analytic_table()}
    assert len(rows[(1.0, 1.0, (1.0, 1.0))]["branches"]) == 2
    assert len(rows[(1.0, 1.0, (1.0, 0.0))]["branches"]) == 2
    # On the annulus boundary the two branches merge into one.
    assert len(rows[(1.0, 0.5, (1.5, 0.0))]["branches"]) == 1
    assert len(rows[(1.0, 0.5, (0.5, 0.0))]["branches"]) == 1
    missed = rows[(1.0, 1.0, (3.0, 0.0))]
    assert (missed["reachable"], missed["min_residual"]) == (False, 1.0)
    inside = rows[(1.0, 0.5, (0.1, 0.0))]
    assert (inside["reachable"], inside["min_residual"]) == (False, pytest.approx(0.4, abs=1e-15))
    assert rows[(0.5, 1.0, (0.0, 0.0))]["min_residual"] == 0.5


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--lengths", "0", "1"], "lengths"),
        (["--lengths", "1", "1e-10"], "too small length"),
        (["--target", "nan", "1"], "finite"),
        (["--etas", "0"], "step"),
        (["--target", "1", "1", "0.5"], "off the planar chain's plane"),
        (["--budgets", "0"], "max_iterations"),
        (["--no-such-option"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_refused_with_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "lab"
    assert lab.main(["--out", str(out), *args]) == 1
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1
    assert not out.exists()


def test_exit_codes_of_the_script_process(tmp_path):
    """Run as the README says, from another folder and with no PYTHONPATH: the installed project
    (`make venv`: editable install) is what makes `import ik_solvers` work (issue 9)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*args):
        return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=tmp_path, capture_output=True, text=True,
                              env=env)

    assert run("--help").returncode == 0
    unknown = run("--out", str(tmp_path / "x"), "--frobnicate")
    assert unknown.returncode == 1
    assert "unrecognized arguments" in unknown.stderr
    assert run("--out", str(tmp_path / "y"), "--etas", "0").returncode == 1

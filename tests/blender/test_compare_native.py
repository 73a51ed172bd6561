"""scripts/compare_native.py on a short run of the arm: the files, and numbers that must hold whatever
the machine — Blender's Standard solver and our closed forms reach reachable targets, the closed
forms meet the lower bound, solves are history independent, pole-target setups flip on the pole axis."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_short_arm_run(tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("# title\n<!-- tables:start -->\nold\n<!-- tables:end -->\ntail\n")
    process = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "compare_native.py"), "--out", str(tmp_path / "out"),
         "--frames", "40", "--rigs", "arm", "--doc", str(doc)],
        capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert process.returncode == 0, process.stderr
    out = tmp_path / "out"
    for name in ("results.json", "summary.csv", "per_path.csv", "tables.md", "time_per_frame.png", "error_arm.png",
                 "flips.png"):
        assert (out / name).is_file(), name
    text = doc.read_text()
    assert "old" not in text and text.endswith("<!-- tables:end -->\ntail\n") and "| Blender Standard |" in text
    results = json.loads((out / "results.json").read_text())["results"]["arm"]
    assert set(results) == {"Blender Standard", "Blender iTaSC", "ANALYTIC", "HI+pole", "HI", "DLS", "SDLS",
                            "FABRIK", "CCD"}
    standard, analytic = results["Blender Standard"], results["ANALYTIC"]
    assert standard["reachable_max_mm"] < 0.5 and standard["reachable_missed"] == 0
    assert standard["history_mm"] == {"reversed": 0.0, "shuffled": 0.0}
    for method in ("ANALYTIC", "HI", "HI+pole"):
        assert results[method]["reachable_max_mm"] < 0.01, method  # float32 keys on a 0.6 m arm
        assert results[method]["excess_max_mm"] < 0.01, method
        assert results[method]["history_rad"] == {"reversed": 0.0, "shuffled": 0.0}, method
    # Both pole-target setups flip where the target crosses the root → pole axis, and nowhere else.
    for run in (standard, analytic):
        flips = {path: row["flips"] for path, row in run["per_path"].items()}
        assert flips["pole_crossing"] > 0 and flips["reachable"] == 0 == flips["out_of_reach"]
    with open(out / "summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["solver"] for row in rows] == list(results)


def test_rigify_rig_run(tmp_path):
    """A Rigify rig through compare_native: ``_rigify_rigs.measure_all``'s rows and table under ``rigify/``,
    pasted between the doc's Rigify markers; Blender's constraint and HI reach every reachable frame."""
    doc = tmp_path / "doc.md"
    doc.write_text("# title\n<!-- tables:start -->\nnative\n<!-- tables:end -->\n<!-- rigify:start -->\nold\n"
                   "<!-- rigify:end -->\ntail\n")
    process = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "compare_native.py"), "--out", str(tmp_path / "out"),
         "--rigs", "human_leg_foot", "--rigify-frames", "10", "--repeats", "1", "--doc", str(doc)],
        capture_output=True, text=True, env=dict(os.environ), timeout=300)
    assert process.returncode == 0, process.stderr
    rows = json.loads((tmp_path / "out" / "rigify" / "rows.json").read_text())
    by = {row["solver"]: row for row in rows if "skipped" not in row}
    assert set(by) == {"HI", "default (HI)", "SDLS, no pull", "CCD", "FABRIK", "Blender IK",
                       "Blender IK+pole"}
    for label in ("HI", "Blender IK", "Blender IK+pole"):
        assert by[label]["misses"] == 0, label
    assert by["HI"]["backward_frames"] == 0
    text = doc.read_text()
    assert "\nnative\n" in text and "\nold\n" not in text and text.endswith("<!-- rigify:end -->\ntail\n")
    assert "| human_leg_foot | Blender IK |" in text and "#### human_leg_foot" in text

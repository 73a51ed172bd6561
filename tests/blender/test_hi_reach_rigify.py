"""HI reach honesty on Rigify's metarigs (SPEC §5, issue 20): near the root of the horse's hind leg and
of the shark's tail HI stopped 160–260 mm off and called the target UNREACHABLE, with a lower bound
equal to the error, while the geometric bound is 0. Now HI reaches them, bending a joint against its
preferred way, and the bake report lists those frames; every error is read from Blender's evaluated
pose bones after the bake (``scripts/hi_reach.py`` measures the same on five chains)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import _rigify_runs as runs
import hi_reach

FRAMES = 40
REACHED = 1e-5
"""0.01 mm on these ~1 m chains: the solve's tolerance (runs.TOLERANCE) and Blender's float32 slack."""


pytestmark = pytest.mark.usefixtures("rigify_enabled")


@pytest.mark.parametrize("name", ["horse hind leg", "shark tail"])
def test_near_root_targets_are_reached_and_the_bent_back_frames_reported(addon, name):
    setup = hi_reach.near_root_setup(name, FRAMES)
    ratio = np.linalg.norm(setup.targets - setup.rest_joints[0], axis=1) / setup.reach
    assert ratio.max() < setup.min_preferred_ratio  # nearer than every rest bend allows: HI's old bound > 0
    chain = runs.add_chain(setup, "HI")
    runs.bake_ours(setup, chain.name)
    measured = runs.measure(setup, np.arange(1, setup.frame_end + 1))
    assert measured.errors.max() <= REACHED, measured.errors.max()
    assert np.all(measured.bounds == 0.0)
    report = runs.bake_report(chain)
    assert report is not None
    assert report["status_counts"]["UNREACHABLE"] == 0
    assert report["status_counts"]["CONVERGED"] == setup.frame_end
    assert report["max_excess"] <= REACHED
    # Every frame is nearer than the rest bends allow: each one bends a joint against its way, listed.
    assert report["against_bend_frame_count"] == setup.frame_end
    assert [f["frame"] for f in report["against_bend_frames"]] == list(range(1, setup.frame_end + 1))
    assert all(f["joints"] and 0 not in f["joints"] for f in report["against_bend_frames"])
    # Recomputed from Blender's pose: the listed joints are the ones bent past straight the other way
    # (_measure's backward joints, joint k of the report being inner joint k − 1 there).
    listed = np.zeros_like(measured.backward)
    for row, f in enumerate(report["against_bend_frames"]):
        listed[row, [j - 1 for j in f["joints"]]] = True
    clear = np.abs(measured.bends) > 0.01  # degrees: a joint straight to float32 rounding has no side
    np.testing.assert_array_equal(listed[clear], measured.backward[clear])
    assert chain.bake_against_bend_frames == setup.frame_end  # what the panel shows
    # ik_batch --report carries the same list, valid against docs/batch-report.schema.json.
    import _batch_report
    import jsonschema

    from ik_solvers.blender.report import BakeReport

    entry = _batch_report.chain_statistics(BakeReport.from_json(chain.last_bake_report), 0.0)
    assert entry["against_bend_frame_count"] == setup.frame_end
    assert entry["against_bend_frames"] == report["against_bend_frames"]
    schema = json.loads((Path(__file__).resolve().parents[2] / "docs" / "batch-report.schema.json").read_text())
    jsonschema.validate(entry, {**schema["$defs"]["chain"], "$defs": schema["$defs"]}, cls=jsonschema.Draft202012Validator)

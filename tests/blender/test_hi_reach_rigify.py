"""HI reach honesty on Rigify's metarigs (SPEC §5, issue 20): near the root of the horse's hind leg and
of the shark's tail HI stopped 160–260 mm off and called the target UNREACHABLE, with a lower bound
equal to the error, while the geometric bound is 0. Now HI reaches them, bending a joint against its
preferred way, and the bake report lists those frames; every error is read from Blender's evaluated
pose bones after the bake."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
import _rigify_rigs as rr
import _rigify_runs as runs

FRAMES = 40
REACHED = 1e-5
"""0.01 mm on these ~1 m chains: the solve's tolerance (runs.TOLERANCE) and Blender's float32 slack."""


@pytest.fixture(scope="module", autouse=True)
def rigify_enabled():
    """Rigify on for this module's tests, off afterwards so other modules see the usual add-ons."""
    import addon_utils

    was_loaded = addon_utils.check("rigify")[1]
    yield
    if not was_loaded and addon_utils.check("rigify")[1]:
        addon_utils.disable("rigify", default_set=True)


def _near_root_paths(joints: np.ndarray) -> dict[str, np.ndarray]:
    """Targets nearer the start joint than the chain reaches with every joint bent its rest way (and
    farther than the free chain's least distance): along the rest EE axis, swinging a little aside."""
    lengths = np.linalg.norm(np.diff(joints, axis=0), axis=1)
    reach = lengths.sum()
    least = max(0.0, 2.0 * lengths.max() - reach)
    curled = rr.min_preferred_ratio(joints) * reach
    assert curled > least + 0.05 * reach  # the old HI bound: far from the geometric one
    r = np.linspace(least + 0.05 * reach, curled - 0.03 * reach, FRAMES)
    axis = (joints[-1] - joints[0]) / np.linalg.norm(joints[-1] - joints[0])
    offset = joints[1] - joints[0]
    side = offset - (offset @ axis) * axis
    side /= np.linalg.norm(side)
    swing = np.linspace(-0.3, 0.3, FRAMES)
    directions = np.cos(swing)[:, None] * axis + np.sin(swing)[:, None] * side
    return {"near_root": joints[0] + r[:, None] * directions}


def _horse(_frames: int) -> rr.RigifySetup:
    rig = rr._add_metarig("armature_horse_metarig_add")
    bones = ("thigh.L", "lower_leg.L", "hind_foot.L")
    joints, _ = rr.rest_geometry(rig, bones)
    return rr.make_setup("horse_near_root", rig, bones, _near_root_paths(joints), {"near_root": True})


def _shark(_frames: int) -> rr.RigifySetup:
    rig = rr._add_metarig("armature_shark_metarig_add")
    bones = ("spine.002", "spine.001", "spine")
    joints, _ = rr.rest_geometry(rig, bones)
    return rr.make_setup("shark_near_root", rig, bones, _near_root_paths(joints), {"near_root": True})


@pytest.mark.parametrize("build", [_horse, _shark], ids=["horse_hind_leg", "shark_tail"])
def test_near_root_targets_are_reached_and_the_bent_back_frames_reported(addon, build):
    rr.enable_rigify()
    setup = build(FRAMES)
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

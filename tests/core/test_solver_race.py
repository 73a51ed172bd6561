"""scripts/solver_race.py (SPEC §4.2): files and columns, the shared target set, the composite score."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import csv_rows, load_script

SAMPLES = 10

race = load_script("solver_race")


def _header(path: Path) -> str:
    with path.open() as handle:
        return handle.readline().strip()


@pytest.fixture(scope="module")
def race_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("race")
    assert race.main(["--out", str(out), "--samples", str(SAMPLES), "--loop-samples", "1", "--repeats", "2"]) == 0
    return out


def test_files_and_columns(race_out):
    assert _header(race_out / "race_points.csv") == (
        "series,step,category,success_rate,mean_iterations,mean_runtime_ms,mean_final_error,mean_deviation_deg,score"
    )
    assert _header(race_out / "race_best.csv") == "series,best_step,score"
    assert _header(race_out / "race_checks.csv").startswith("series,step,category,samples,")
    for name in ("race_reachable.png", "race_unreachable.png", "race_score.png", "race_best.png", "race_table.md"):
        assert (race_out / name).stat().st_size > 0


def test_one_row_per_series_step_and_category(race_out):
    rows = csv_rows(race_out / "race_points.csv")
    expected_points = len(race.STEP_SCALES) + len(race.SERIES) - 1  # only jt_fixed is swept
    assert len(rows) == 2 * expected_points
    keys = {(r["series"], r["step"], r["category"]) for r in rows}
    assert len(keys) == len(rows)
    assert {r["series"] for r in rows} == {
        "ccd", "jt_fixed", "dls_0.03", "dls_0.1", "dls_0.3", "sdls", "pseudo_inverse", "fabrik", "jt_line_search",
        "sdls_fabrik_start", "pinv_fabrik_start",
    }
    assert sorted(float(r["step"]) for r in rows if r["series"] == "jt_fixed" and r["category"] == "reachable") == [
        0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
    ]
    assert all(r["step"] == "" for r in rows if r["series"] != "jt_fixed")


def test_metrics_are_in_range_and_score_is_shared_by_a_pair(race_out):
    rows = csv_rows(race_out / "race_points.csv")
    scores = {}
    for r in rows:
        assert 0.0 <= float(r["success_rate"]) <= 1.0
        assert 0.0 <= float(r["score"]) <= 1.0
        assert float(r["mean_final_error"]) >= 0.0
        assert 0.0 <= float(r["mean_deviation_deg"]) <= 180.0
        iterations = float(r["mean_iterations"])
        assert math.isnan(iterations) == (float(r["success_rate"]) == 0.0)
        if not math.isnan(iterations):
            assert 1.0 <= iterations <= 16.0
        scores.setdefault((r["series"], r["step"]), set()).add(r["score"])
    assert all(len(s) == 1 for s in scores.values())
    # Min–max normalised over real, different methods: the scores must spread.
    values = [float(next(iter(s))) for s in scores.values()]
    assert max(values) > min(values)


def test_unreachable_targets_never_beat_their_lower_bound(race_out):
    """Unreachable targets start at least 5% of the reach (3.2) beyond it."""
    for r in csv_rows(race_out / "race_points.csv"):
        if r["category"] == "unreachable":
            assert float(r["mean_final_error"]) >= 0.05 * 3.2 - 1e-12


def test_best_file_picks_each_series_highest_score(race_out):
    rows = csv_rows(race_out / "race_points.csv")
    best = csv_rows(race_out / "race_best.csv")
    assert len(best) == len(race.SERIES)
    assert [float(b["score"]) for b in best] == sorted((float(b["score"]) for b in best), reverse=True)
    for b in best:
        mine = [r for r in rows if r["series"] == b["series"] and r["category"] == "reachable"]
        top = max(mine, key=lambda r: float(r["score"]))
        assert b["best_step"] == top["step"]
        assert float(b["score"]) == pytest.approx(float(top["score"]))


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A second run (no loop timing) that records every batched solve's targets."""
    out = tmp_path_factory.mktemp("race_recorded")
    batches = []
    real_solve = race.solve

    def recording_solve(chain, targets, method, options):
        if targets.shape[0] == 2 * SAMPLES:
            batches.append(targets.copy())
        return real_solve(chain, targets, method, options)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(race, "solve", recording_solve)
        assert race.main(["--out", str(out), "--samples", str(SAMPLES), "--loop-samples", "0", "--repeats", "1"]) == 0
    return out, batches


def test_every_series_sees_the_same_targets(recorded_run):
    _, batches = recorded_run
    assert len(batches) == len(race.STEP_SCALES) + len(race.SERIES) - 1
    for targets in batches:
        np.testing.assert_array_equal(targets, batches[0])
    radius = np.linalg.norm(batches[0], axis=1) / 3.2
    assert np.all((radius[:SAMPLES] >= 0.15) & (radius[:SAMPLES] <= 0.95))
    assert np.all((radius[SAMPLES:] >= 1.05) & (radius[SAMPLES:] <= 1.35))


def test_targets_are_fixed_by_the_seed():
    a = race.race_targets(3.2, 50, 7)
    b = race.race_targets(3.2, 50, 7)
    c = race.race_targets(3.2, 50, 8)
    np.testing.assert_array_equal(a.positions, b.positions)
    assert not np.allclose(a.positions, c.positions)
    assert list(a.categories[:50]) == ["reachable"] * 50 and list(a.categories[50:]) == ["unreachable"] * 50


def test_outcomes_are_deterministic(race_out, recorded_run):
    timed = {"mean_runtime_ms", "score"}  # wall-clock times, and the score that weighs them
    first = csv_rows(race_out / "race_points.csv")
    second = csv_rows(recorded_run[0] / "race_points.csv")
    for a, b in zip(first, second, strict=True):
        assert {k: v for k, v in a.items() if k not in timed} == {k: v for k, v in b.items() if k not in timed}


def _point(name, success, iterations, runtime, error, deviation, far_error):
    return race.Point(name, None, {
        "reachable": {"success_rate": success, "mean_iterations": iterations, "mean_runtime_ms": runtime,
                      "mean_final_error": error, "mean_deviation_deg": deviation},
        "unreachable": {"success_rate": 0.0, "mean_iterations": math.nan, "mean_runtime_ms": runtime,
                        "mean_final_error": far_error, "mean_deviation_deg": deviation},
    })


def test_composite_score_by_hand():
    good = _point("good", 1.0, 4.0, 1.0, 0.01, 10.0, 0.5)
    bad = _point("bad", 0.0, math.nan, 3.0, 1.0, 50.0, 2.5)
    # "mid": half-way on every metric; no successes count as the whole budget (16) of iterations.
    mid = _point("mid", 0.5, 10.0, 2.0, 0.505, 30.0, 1.5)
    scores = {p.series: p.score for p in race.with_scores([good, bad, mid], budget=16)}
    assert scores["good"] == pytest.approx(1.0)
    assert scores["bad"] == pytest.approx(0.0)
    # Iterations: (16 − 10) / (16 − 4) = 0.5, like every other term.
    assert scores["mid"] == pytest.approx(0.5)


def test_a_flat_metric_scores_full_marks():
    """The article's rule: a metric whose spread is below 1e-6 gives every point its weight."""
    a = _point("a", 1.0, 4.0, 1.0, 0.01, 10.0, 0.5)
    b = _point("b", 1.0, 4.0, 1.0, 0.01, 10.0 + 1e-9, 0.5)
    assert [p.score for p in race.with_scores([a, b], budget=16)] == pytest.approx([1.0, 1.0])


def test_joint_deviation_in_degrees():
    half = np.sqrt(0.5)
    rotations = np.array([[[1.0, 0, 0, 0], [half, 0, 0, half]], [[0.0, 1, 0, 0], [-half, 0, half, 0]]])
    # 0° and 90° → 45°; 180° and 90° (q and −q are one rotation) → 135°.
    assert race.joint_deviation_degrees(rotations) == pytest.approx([45.0, 135.0])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--budget", "0"], "max_iterations"),
        (["--tolerance", "0"], "tolerance"),
        (["--tolerance", "nan"], "tolerance"),
        (["--samples", "0"], "--samples"),
        (["--max-step-angle", "-1"], "max_step_angle"),
        (["--repeats", "0"], "--repeats"),
        (["--doc", "no/such/file.md"], "is not a file"),
        (["--no-such-option"], "unrecognized arguments"),
    ],
)
def test_bad_input_is_refused_with_one_line(tmp_path, capsys, args, message):
    out = tmp_path / "race"
    assert race.main(["--out", str(out), *args]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists()


def test_doc_block_is_replaced_and_the_rest_kept(race_out, tmp_path):
    doc = tmp_path / "doc.md"
    name = race_out.name
    doc.write_text(f"intro\n<!-- race-table:{name} -->\nstale\n<!-- /race-table:{name} -->\noutro\n")
    race.paste_into_doc(doc, name, (race_out / "race_table.md").read_text())
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith(f"<!-- /race-table:{name} -->\noutro\n")
    assert "stale" not in text
    assert (race_out / "race_table.md").read_text() in text


def test_a_doc_without_the_block_is_refused_before_the_run(tmp_path, capsys):
    doc = tmp_path / "doc.md"
    doc.write_text("no markers here\n")
    assert race.main(["--out", str(tmp_path / "run"), "--doc", str(doc)]) == 1
    assert "race-table:run" in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


def test_help_exits_zero(capsys):
    assert race.main(["--help"]) == 0
    assert "--samples" in capsys.readouterr().out

"""scripts/bench_body.py --quick: the body benchmark runs and writes its figures (a smoke test, not a timing)."""

from __future__ import annotations

import json

from conftest import csv_rows, load_script


def test_bench_body_quick_writes_json_csv_and_png(tmp_path):
    bench = load_script("bench_body")
    assert bench.main(["--out", str(tmp_path), "--quick"]) == 0
    figures = json.loads((tmp_path / "bench_body.json").read_text())
    assert figures["frames"] == 100 and figures["success_percent"] >= 99.0
    assert figures["bit_equal_when_solved_alone_reversed"] is True
    rows = csv_rows(tmp_path / "bench_body_goals.csv")
    assert {row["goal"] for row in rows} == {"leg.L", "leg.R", "spine", "arm.L", "arm.R"}
    assert (tmp_path / "bench_body.png").stat().st_size > 10_000


def test_bench_body_rejects_bad_counts(tmp_path, capsys):
    bench = load_script("bench_body")
    assert bench.main(["--out", str(tmp_path), "--frames", "0"]) == 1
    assert "must be positive" in capsys.readouterr().err


def test_bench_body_throws_the_left_hand_and_the_goals_above_it_hold(tmp_path, capsys):
    """``--throw-left-hand M``: the left hand's goals thrown off (mostly out of reach, the lowest priority),
    the feet and head still reached on every set; a negative spread is refused."""
    bench = load_script("bench_body")
    assert bench.main(["--out", str(tmp_path), "--quick", "--throw-left-hand", "0.8"]) == 0
    figures = json.loads((tmp_path / "bench_body.json").read_text())
    assert figures["left_hand_thrown_m"] == 0.8 and figures["success_percent"] < 50.0
    reached = {row["goal"]: float(row["reached_percent"]) for row in csv_rows(tmp_path / "bench_body_goals.csv")}
    assert reached["leg.L"] == reached["leg.R"] == reached["spine"] == 100.0 and reached["arm.L"] < 50.0
    assert bench.main(["--out", str(tmp_path), "--throw-left-hand", "-1"]) == 1
    assert "not negative" in capsys.readouterr().err

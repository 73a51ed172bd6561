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

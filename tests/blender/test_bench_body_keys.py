"""scripts/bench_body_keys.py --quick (issues 22, 23): the metarig body's reduced keys against Decimate at the
same world error, the bound held by Blender's evaluation and the report's measure equal to it, outputs written."""

from __future__ import annotations

import csv
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_body_keys.py"

pytestmark = pytest.mark.usefixtures("rigify_enabled")


def test_bench_body_keys_quick_compares_with_decimate_at_the_same_world_error(addon, tmp_path):
    spec = importlib.util.spec_from_file_location("bench_body_keys", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--out", str(tmp_path), "--quick"]) == 0
    (row,) = csv.DictReader(open(tmp_path / "bench_body_keys.csv"))
    bound = float(row["E_mm"])
    assert 0.0 < float(row["ours_max_mm"]) <= bound and float(row["decimate_max_mm"]) <= bound, row
    assert abs(float(row["reported_max_mm"]) - float(row["ours_max_mm"])) < 1e-3 * bound  # the report's is Blender's
    assert int(row["mismatch_frames"]) == 0
    assert int(row["ours_keys"]) < int(row["decimate_keys"]) <= int(row["keys_full"])
    assert (tmp_path / "bench_body_keys.png").stat().st_size > 5_000

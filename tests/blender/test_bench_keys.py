"""scripts/bench_keys.py --quick (issue 23): both methods on the demo arm's two paths, every bound
held by Blender's evaluation, the outputs written."""

from __future__ import annotations

import csv
import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_keys.py"


def test_bench_keys_quick_compares_with_decimate_at_the_same_world_error(addon, tmp_path):
    spec = importlib.util.spec_from_file_location("bench_keys", SCRIPT)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--out", str(tmp_path), "--quick"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "bench_keys.csv")))
    assert [(r["path"], float(r["E_mm"])) for r in rows] == [("smooth", 0.3), ("smooth", 1.0),
                                                               ("recorded", 0.3), ("recorded", 1.0)]
    for row in rows:
        bound = float(row["E_mm"])
        assert 0.0 < float(row["ours_max_mm"]) <= bound and float(row["decimate_max_mm"]) <= bound, row
        assert int(row["ours_keys"]) < int(row["keys_full"]) and int(row["decimate_keys"]) <= int(row["keys_full"])
        assert float(row["ratio"]) == int(row["ours_keys"]) / int(row["decimate_keys"])
        assert 0.0 < float(row["merge_seconds"]) < float(row["reduce_seconds"])  # the merge is part of the reduction
    for path in ("smooth", "recorded"):
        fractions = [float(r["ours_fraction"]) for r in rows if r["path"] == path]
        assert fractions[1] <= fractions[0]  # a looser bound keeps no more keys
    report = json.loads((tmp_path / "bench_keys.json").read_text())
    assert len(report["rows"]) == 4 and len(report["figure"]["full"]) == 37
    assert (tmp_path / "bench_keys.png").stat().st_size > 10_000

"""scripts/bench_keys_spans.py (issue 23): one segment per span of the smooth target, fitted five
ways; the free handle times' fit, as Blender evaluates it, is the model's and holds 0.1 mm where
the reduction's fit cannot; merged with it, the kept keys are fewer and still hold 0.1 mm."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "bench_keys_spans.py"


def test_free_handle_times_fit_a_span_that_fixed_times_miss(addon, tmp_path):
    spec = importlib.util.spec_from_file_location("bench_keys_spans", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    out = tmp_path / "spans.md"
    assert script.main(["--rigs", "rigify_arm", "--spans", "2", "--merge", "--out", str(out)]) == 0
    rows = [line.split("|")[1:-1] for line in out.read_text().splitlines()]
    spans = [[float(cell) for cell in row[2:]] for row in rows if row[1].strip().startswith("span ")]
    assert len(spans) == 2
    for linear_ls, linear_minimax, exact, free, blender, batched, batched_blender in spans:
        assert linear_ls > 0.1 and free < 0.1 and batched < 0.1  # the reduction's fit misses 0.1 mm, free times hold it
        assert linear_minimax <= linear_ls and free <= exact <= linear_minimax
        # Blender's evaluation of the written handles is the model's
        assert abs(blender - free) <= 0.002 and abs(batched_blender - batched) <= 0.002
    merged = next(row[1] for row in rows if "merged with free handle times" in row[1])
    kept, fewer = re.search(r"(\d+) → (\d+)", merged).groups()
    assert int(fewer) < int(kept)
    assert float(re.search(r"Blender evaluates it ([0-9.]+) mm", merged).group(1)) <= 0.1

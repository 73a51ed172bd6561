"""How bake cost grows with chain length (issue 12): µs per frame for 2–30 bones, ours and Blender's.

For each chain length, one run bakes the same disconnected chain (``bench_bake.chain_specs``) over
the same animated target with Blender's IK constraint + ``nla.bake`` and with ``ik_solvers.bake``
for each method (SDLS also with ``reference_weight`` 0.1), the chain's default method marked, plus
the floor: our bake of the default method with the solve taken out (sampling the target, writing
the keys and checking them on Blender's evaluation). Ratios, not absolute times,
are what carries over to other machines.

Prints a table and writes ``DIR/bench_growth.csv``, ``DIR/bench_growth.json`` and ``DIR/bench_growth.png``.

    .venv/bin/python scripts/bench_growth.py [--out DIR] [--frames N] [--repeats R] [--bones 2 3 5 10 20 30]
"""

from __future__ import annotations

import csv
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from _cli import Parser, UsageError, import_bpy, run_main
from bench_bake import RIGS, blender_bake, chain_rig, default_case, our_bake

METHODS = [("HI", 0.0), ("ANALYTIC", 0.0), ("DLS", 0.0), ("SDLS", 0.0), ("SDLS", 0.1), ("CCD", 0.0), ("FABRIK", 0.0)]
"""(method, reference_weight); ANALYTIC only for two bones."""


def label(method: str, weight: float) -> str:
    return method + (f" rw={weight:g}" if weight else "")


def _main(argv: list[str] | None) -> int:
    parser = Parser(prog="bench_growth.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/bench_growth"))
    parser.add_argument("--frames", type=int, default=1000, help="animated target frames per bake")
    parser.add_argument("--repeats", type=int, default=1, help="bakes per case; the fastest counts")
    parser.add_argument("--bones", type=int, nargs="+", default=[2, 3, 5, 10, 20, 30], help="chain lengths")
    args = parser.parse_args(argv)
    if args.frames < 2 or args.repeats < 1 or min(args.bones) < 2:
        raise UsageError("--frames needs at least 2, --repeats at least 1, --bones at least 2")
    args.out.mkdir(parents=True, exist_ok=True)
    bpy = import_bpy()
    import ik_solvers

    bpy.ops.wm.read_homefile(use_empty=True)
    rows = []
    try:
        for n in args.bones:
            name = f"chain ({n} bones)"
            RIGS[name] = chain_rig(n)
            default_method, _, default_weight = default_case(name)
            blender = blender_bake(bpy, name, args.frames, args.repeats)
            found = [dict(blender, series="Blender IK + nla.bake")]
            for method, weight in METHODS:
                if method == "ANALYTIC" and n != 2:
                    continue
                row = our_bake(bpy, name, args.frames, args.repeats, method, False, weight)
                default = (method, weight) == (default_method, default_weight)
                found.append(dict(row, series=f"ours {label(method, weight)}" + (" [default]" if default else "")))
            floor = our_bake(bpy, name, args.frames, args.repeats, default_method, False, default_weight, floor=True)
            found.append(dict(floor, series="floor (sample + write keys, no solve)"))
            for row in found:
                row.update(bones=n, frames=args.frames, us_per_frame=row["seconds"] / args.frames * 1e6,
                           ratio_blender_over_ours=blender["seconds"] / row["seconds"])
                print(f"{n:>3} bones  {row['series']:<40}{row['us_per_frame']:>10.1f} µs/frame"
                      f"{row['ratio_blender_over_ours']:>8.2f}×  {row.get('statuses', '')}", flush=True)
            rows += found
    finally:
        ik_solvers.unregister()
    fields = ["bones", "series", "frames", "seconds", "us_per_frame", "ratio_blender_over_ours", "tip_error_max",
              "statuses"]
    with open(args.out / "bench_growth.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    meta = {"blender": bpy.app.version_string, "frames": args.frames, "repeats": args.repeats, "cpus": os.cpu_count()}
    (args.out / "bench_growth.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    plot(args.out / "bench_growth.png", rows, args.frames)
    print(f"wrote {args.out / 'bench_growth.csv'}, {args.out / 'bench_growth.json'}, {args.out / 'bench_growth.png'}")
    return 0


def plot(path: Path, rows: list[dict], frames: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    for series in dict.fromkeys(row["series"] for row in rows):
        mine = sorted((row for row in rows if row["series"] == series), key=lambda row: row["bones"])
        style = {"color": "black", "linewidth": 2.5} if series.startswith("Blender") else \
            {"color": "gray", "linestyle": "--"} if series.startswith("floor") else \
            {"color": "navy", "linewidth": 2.5, "marker": "s"} if series.endswith("[default]") else {}
        ax.plot([row["bones"] for row in mine], [row["us_per_frame"] for row in mine], label=series,
                **{"marker": "o", **style})
    ax.set_xscale("log")
    ax.set_yscale("log")
    bones = sorted({row["bones"] for row in rows})
    ax.set_xticks(bones, [str(b) for b in bones])
    ax.set_xlabel("bones in the chain")
    ax.set_ylabel("µs per frame (log)")
    ax.set_title(f"Bake cost per frame against chain length ({frames} frames, same run)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    return run_main("bench_growth", lambda: _main(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Gather the per-file reports of a farm bake (farm/ik_bake/template.yaml) into one summary JSON.

Usage::

    .venv/bin/python scripts/farm_summary.py --reports OUT/reports --out OUT/summary.json [--fail-if-any-failed] [INPUT.blend ...]

Each task of the farm job ran ``ik_batch.py INPUT --report OUT/reports/NAME.json``. Given the job's
input files, a file whose report is missing (its task crashed or never ran) or says ``"ok": false``
(bad file, missing chain or target, failed bake) is listed under ``failed_files``; without them,
every ``*.json`` in ``--reports`` is read. The summary holds the counts (files, chains, frames,
statuses, flips), the worst frames (largest error over the geometric lower bound, one per chain)
and the failed files. Needs only the standard library, so any Python (or Blender's) can run it.

Exit status: 0 the summary is written (failed files are data, not an error of this step), 1 usage
error, 2 an unreadable report or an unwritable summary, or, with ``--fail-if-any-failed`` (the farm
template's Summary step, so that the job ends failed), a file that failed (the summary is written first).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

# Blender's own Python (`blender -b --python scripts/farm_summary.py -- ...`) does not put scripts/
# on sys.path (see ik_batch.py).
if importlib.util.find_spec("_cli") is None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import _openjd
from _cli import EXIT_FAILED, EXIT_OK, Parser, report, run_main, script_args

SCHEMA_VERSION = 1
WORST_FRAMES = 10
"""Chains listed under ``worst_frames`` (largest error over the lower bound first)."""


class SummaryError(Exception):
    """A report cannot be read or the summary cannot be written (exit 2)."""


def report_path(reports: Path, source: Path) -> Path:
    """Where the farm template's Bake task writes the report of ``source`` (``NAME.json``)."""
    return reports / f"{source.stem}.json"


def read_reports(reports: Path, inputs: list[Path]) -> list[dict[str, Any]]:
    """One entry of ik_batch's ``files`` list per input (a stand-in for a missing report)."""
    if inputs:
        expected: dict[Path, str | None] = {report_path(reports, source): str(source) for source in inputs}
    else:
        expected = {path: None for path in sorted(reports.glob("*.json"))}
    entries: list[dict[str, Any]] = []
    for path, source in expected.items():
        if not path.is_file():
            entries.append({"input": source, "ok": False, "chains": [],
                            "error": f"no report {path}: the task crashed or did not run"})
            continue
        try:
            files = json.loads(path.read_text())["files"]
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise SummaryError(f"{path}: not an ik_batch report ({error})") from None
        entries += files
    return entries


def summarise(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The summary of ik_batch ``files`` entries (see the module docstring)."""
    chains = [dict(chain, input=entry["input"]) for entry in entries if entry.get("ok") for chain in entry["chains"]]
    statuses: Counter[str] = Counter()
    for chain in chains:
        statuses.update(chain["status_counts"])
    worst = sorted(chains, key=lambda c: c["max_error_over_lower_bound"], reverse=True)[:WORST_FRAMES]
    return {
        "schema_version": SCHEMA_VERSION,
        "files": len(entries),
        "files_ok": sum(1 for entry in entries if entry.get("ok")),
        "files_failed": sum(1 for entry in entries if not entry.get("ok")),
        "chains": len(chains),
        "frames": sum(chain["frames"] for chain in chains),
        "status_counts": dict(sorted(statuses.items())),
        "flips": sum(len(chain["flips"]) for chain in chains),
        "worst_frames": [
            {"input": c["input"], "armature": c["armature"], "chain": c["chain"], "method": c["method"],
             "frame": c["max_error_over_lower_bound_frame"], "error_over_lower_bound": c["max_error_over_lower_bound"],
             "max_error": c["max_error"]}
            for c in worst
        ],
        "failed_files": [{"input": entry["input"], "error": entry.get("error", "")}
                         for entry in entries if not entry.get("ok")],
        "outputs": [entry["output"] for entry in entries if entry.get("ok") and entry.get("output")],
        "seconds": sum(entry.get("seconds", 0.0) for entry in entries),
    }


def _main(argv: list[str]) -> int:
    parser = Parser(prog="farm_summary.py", description=__doc__.splitlines()[0])
    parser.add_argument("inputs", nargs="*", type=Path, help="the job's input .blend files")
    parser.add_argument("--reports", type=Path, required=True, help="folder of the per-file reports")
    parser.add_argument("--out", type=Path, required=True, help="summary JSON to write")
    parser.add_argument("--fail-if-any-failed", action="store_true",
                        help="exit 2 when a file failed or has no report (after writing the summary)")
    args = parser.parse_args(argv)
    try:
        summary = summarise(read_reports(args.reports, args.inputs))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    except (SummaryError, OSError) as error:
        report("farm_summary", error)
        return EXIT_FAILED
    print(f"{summary['files_ok']} of {summary['files']} files baked, {summary['chains']} chains, "
          f"{summary['frames']} frames; {summary['files_failed']} failed; wrote {args.out}")
    if args.fail_if_any_failed and summary["failed_files"]:
        first = summary["failed_files"][0]
        reason = first["error"] if str(first["error"]).startswith(str(first["input"])) else f"{first['input']}: {first['error']}"
        _openjd.fail(f"{summary['files_failed']} of {summary['files']} files failed (listed in {args.out}); first {reason}")
        return EXIT_FAILED
    _openjd.status(f"{summary['files_ok']} of {summary['files']} files baked")
    return EXIT_OK


def main(argv: list[str]) -> int:
    return run_main("farm_summary", lambda: _main(script_args(argv)))


if __name__ == "__main__":
    sys.exit(main(sys.argv))

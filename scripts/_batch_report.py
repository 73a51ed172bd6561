"""ik_batch's ``--report`` JSON: versioned, documented in docs/batch-report.md and checked against
docs/batch-report.schema.json by the tests.

``SCHEMA_VERSION`` counts changes a reader must know about: bump it when a field changes meaning or
goes away (adding a field does not).
"""

from __future__ import annotations

import json
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 2
"""1: the unversioned report of round 1 (``jobs``, ``chunk_size``, ``files``); 2: versions, exit code,
the evaluated check of the baked keys."""


def addon_version() -> str:
    """The add-on's version from its ``blender_manifest.toml`` (inside the package when installed as an
    extension, beside it in a checkout); ``"unknown"`` if neither is readable."""
    import ik_solvers

    package = Path(ik_solvers.__file__).resolve().parent
    for manifest in (package / "blender_manifest.toml", package.parent / "blender_manifest.toml"):
        try:
            return str(tomllib.loads(manifest.read_text())["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            continue
    return "unknown"


def evaluated_fields(bake_report: Any) -> dict[str, Any]:
    """The check of the baked keys on Blender's own evaluation, when the add-on's ``BakeReport`` has it.

    ``evaluated_max_error`` (scene units over the lower bound), ``evaluated_mismatch_frames`` (frames
    where Blender's evaluated tip differs from the solve), ``evaluated_frames_checked``; None /
    [] / 0 from an add-on without the check.
    """
    mismatches = getattr(bake_report, "evaluated_mismatch_frames", None)
    return {
        "evaluated_max_error": getattr(bake_report, "evaluated_max_error", None),
        "evaluated_mismatch_frames": [int(f) for f in mismatches] if mismatches is not None else [],
        "evaluated_frames_checked": int(getattr(bake_report, "evaluated_frames_checked", 0) or 0),
    }


REDUCTION_FIELDS = ("keys_before", "keys_after", "key_error", "reduced_max_error", "reduced_error_p99")
"""With ``--reduce-keys``: the chain's rotation keys before / after, the bound, the max and 99th
percentile world error of the reduced keys (scene units); None when keys are not reduced."""


def chain_statistics(bake_report: Any, seconds: float) -> dict[str, Any]:
    """The ``--report`` entry of one baked chain: the add-on's ``BakeReport`` under the batch's names."""
    entry = {
        "armature": bake_report.armature,
        "chain": bake_report.chain,
        "method": bake_report.method,
        "frames": bake_report.frames,
        "frame_start": bake_report.frame_start,
        "frame_end": bake_report.frame_end,
        "step": bake_report.frame_step,
        "status_counts": bake_report.status_counts,
        "max_error": bake_report.max_error,
        "median_error": bake_report.median_error,
        "max_error_over_lower_bound": bake_report.max_excess,
        "max_error_over_lower_bound_frame": bake_report.max_excess_frame,
        "flips": bake_report.flip_frames,
        "sampling": bake_report.sampling,
        "seconds": seconds,
        **evaluated_fields(bake_report),
        **{name: getattr(bake_report, name, None) for name in REDUCTION_FIELDS},
    }
    if bake_report.pole_warning_frames is not None:
        entry["pole_warning_frames"] = bake_report.pole_warning_frames
        entry["min_pole_distance_degrees"] = bake_report.min_pole_distance_degrees
    against = getattr(bake_report, "against_bend_frame_count", None)  # HI only; absent from an add-on before it
    if against is not None:
        entry["against_bend_frame_count"] = against
        entry["against_bend_frames"] = bake_report.against_bend_frames
    orientation = getattr(bake_report, "max_orientation_error_degrees", None)  # an add-on before Rotation: absent
    if orientation is not None:
        entry["max_orientation_error_degrees"] = orientation
    goals = getattr(bake_report, "goals", None)  # a chain of a body bake (SPEC §8) only
    if goals is not None:
        entry["goals"] = goals
    return entry


def chain_line(file_name: str, entry: dict[str, Any]) -> str:
    """The one line on stdout for a baked chain's ``chain_statistics`` entry."""
    status_counts = entry["goals"]["status_counts"] if "goals" in entry else entry["status_counts"]  # a body's goal
    counts = ", ".join(f"{n} {status.lower().replace('_', ' ')}" for status, n in status_counts.items() if n)
    return (f"{file_name} {entry['armature']}:{entry['chain']} [{entry['method']}] {entry['frames']} frames: "
            f"{counts}; max error {entry['max_error']:.3g}, over bound {entry['max_error_over_lower_bound']:.3g}, "
            f"{len(entry['flips'])} flips, {entry['seconds']:.2f} s" + reduction_text(entry))


def work_entries(file_name: str, bake_reports: list[Any], root: dict[str, Any] | None, seconds: float,
                 quiet: bool) -> list[dict[str, Any]]:
    """The report entries of one piece of work's chains (``chain_statistics``), each one's line printed, and
    the body root's (``root``: ``BodyWork.root_entry``, or None), unless ``quiet``."""
    entries = [chain_statistics(bake_report, seconds) for bake_report in bake_reports]
    if not quiet:
        for entry in entries:
            print(chain_line(file_name, entry))
        if root is not None:
            print(body_root_line(file_name, root))
    return entries


def body_root_line(file_name: str, entry: dict[str, Any]) -> str:
    """One line for a body root's reduced keys (``BodyWork.root_entry``)."""
    return f"{file_name}: {entry['armature']}: body root '{entry['bone']}'{reduction_text(entry)}"


def reduction_text(entry: dict[str, Any]) -> str:
    """``chain_line``'s end for reduced keys: keys before → after, the world error; else empty."""
    if entry.get("keys_after") is None:
        return ""
    return (f"; keys {entry['keys_before']} -> {entry['keys_after']}, world error max "
            f"{entry['reduced_max_error']:.3g}, p99 {entry['reduced_error_p99']:.3g} (bound {entry['key_error']:.3g})")


def report_document(files: list[dict], *, exit_code: int, jobs: int, chunk_size: int,
                    blender_version: str) -> dict[str, Any]:
    """The whole report: versions and settings first, then one entry per input file."""
    return {
        "schema_version": SCHEMA_VERSION,
        "tool": "ik_batch",
        "addon_version": addon_version(),
        "blender_version": blender_version,
        "exit_code": exit_code,
        "jobs": jobs,
        "chunk_size": chunk_size,
        "files": files,
    }


def write_report(path: Path, document: dict[str, Any]) -> None:
    """Write ``document`` to ``path`` through a temporary file in the same folder, so a reader (or a
    crash) never sees half a report and an old report is replaced whole. Raises OSError."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as stream:
            # mkstemp's 0600 would hide the report from the farm's other users: the mode of any new file instead.
            umask = os.umask(0)
            os.umask(umask)
            os.fchmod(stream.fileno(), 0o666 & ~umask)
            json.dump(document, stream, indent=2)
            stream.write("\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise

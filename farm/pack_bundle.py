"""Fill a Deadline Cloud job bundle's ``tools/`` folder with what its tasks run (docs/farm.md).

Usage::

    python farm/pack_bundle.py [BUNDLE]

``BUNDLE`` defaults to farm/ik_bake; another folder gets a copy of its template.yaml and
parameter_values.yaml too, so it is a complete bundle to hand on. ``tools/`` gets ``scripts/`` (ik_batch.py,
its modules and farm_summary.py), the ``ik_solvers`` package and the add-on's manifest (its version goes
into every report), copied afresh, so the job's ``ToolsDir`` (default ``tools``) is uploaded with the job
by job attachments and the workers need nothing of this project but a Python with bpy or Blender.
Standard library only.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUNDLE = REPO / "farm" / "ik_bake"
SCRIPTS = ("ik_batch.py", "farm_summary.py", "_cli.py", "_openjd.py", "_batch_*.py")
"""What the tasks import from scripts/ (ik_batch's modules are all named ``_batch_*``)."""


def pack(bundle: Path) -> Path:
    """Write ``bundle/tools`` (replacing an old one) and, for a bundle elsewhere, its template files."""
    bundle.mkdir(parents=True, exist_ok=True)
    if bundle.resolve() != BUNDLE.resolve():
        for name in ("template.yaml", "parameter_values.yaml"):
            shutil.copy2(BUNDLE / name, bundle / name)
    tools = bundle / "tools"
    shutil.rmtree(tools, ignore_errors=True)
    (tools / "scripts").mkdir(parents=True)
    for pattern in SCRIPTS:
        for script in sorted((REPO / "scripts").glob(pattern)):
            shutil.copy2(script, tools / "scripts" / script.name)
    shutil.copytree(REPO / "ik_solvers", tools / "ik_solvers", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(REPO / "blender_manifest.toml", tools / "blender_manifest.toml")
    return tools


def main(argv: list[str]) -> int:
    if len(argv) > 2 or any(arg.startswith("-") for arg in argv[1:]):
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 1
    tools = pack(Path(argv[1]) if len(argv) == 2 else BUNDLE)
    print(f"packed {sum(1 for p in tools.rglob('*') if p.is_file())} files into {tools}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

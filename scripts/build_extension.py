"""Build the IK Solvers extension zip with Blender's own extension tooling.

Stages ``ik_solvers/`` (without ``__pycache__``) and the top-level ``blender_manifest.toml`` into a
temporary folder (``blender_ext.py`` wants the manifest at the source root), validates it with
``blender_ext.py validate`` and builds it with ``blender_ext.py build``. Both run under
``sys.executable`` as subprocesses; ``blender_ext.py`` and Blender's tag list are found in the
installed ``bpy``'s own data folder (``bpy.utils.resource_path('LOCAL')``, ``bpy/<major.minor>/``),
so any bpy version works.

Usage: python scripts/build_extension.py [--out DIR]   (DIR defaults to ``dist``)
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from _cli import Parser, import_bpy, run_main

REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_NAME = "ik_solvers"
MANIFEST_NAME = "blender_manifest.toml"


class BuildError(Exception):
    """A build step failed; the message is one line for the user."""


def _bpy_data_dir() -> Path:
    """Blender's data folder as ``bpy`` itself reports it (``<site-packages>/bpy/<major.minor>``)."""
    try:
        bpy = import_bpy(register_addon=False)
    except ImportError:
        raise BuildError("the bpy module is not installed (run 'make venv')") from None
    data_dir = Path(bpy.utils.resource_path("LOCAL"))
    if not data_dir.is_dir():
        raise BuildError(f"bpy data folder not found: {data_dir}")
    return data_dir


def _tool_paths() -> tuple[Path, Path]:
    """Return (blender_ext.py, tags.py) inside the installed bpy wheel."""
    data_dir = _bpy_data_dir()
    blender_ext = data_dir / "scripts" / "addons_core" / "bl_pkg" / "cli" / "blender_ext.py"
    tags = data_dir / "scripts" / "modules" / "_bpy_internal" / "extensions" / "tags.py"
    for path in (blender_ext, tags):
        if not path.is_file():
            raise BuildError(f"Blender extension tool not found: {path}")
    return blender_ext, tags


def _stage(source_root: Path, stage_dir: Path) -> Path:
    """Copy the package and the manifest into ``stage_dir/ik_solvers``; return that folder."""
    package = source_root / PACKAGE_NAME
    manifest = source_root / MANIFEST_NAME
    if not (package / "__init__.py").is_file():
        raise BuildError(f"package not found: {package / '__init__.py'}")
    if not manifest.is_file():
        raise BuildError(f"manifest not found: {manifest}")
    staged = stage_dir / PACKAGE_NAME
    shutil.copytree(package, staged, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy2(manifest, staged / MANIFEST_NAME)
    return staged


def _run(args: list[str], step: str) -> str:
    """Run ``args``; return stdout, or raise BuildError with the tool's error line."""
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
        # blender_ext.py reports "FATAL_ERROR: <reason>", sometimes followed by hint lines.
        fatal = [line for line in lines if line.startswith("FATAL_ERROR:")]
        if fatal:
            detail = fatal[0].removeprefix("FATAL_ERROR:").strip()
        else:
            detail = lines[-1] if lines else f"exit code {proc.returncode}"
        raise BuildError(f"blender_ext.py {step} failed: {detail}")
    return proc.stdout


def build(out_dir: Path, source_root: Path = REPO_ROOT) -> Path:
    """Validate and build the extension zip into ``out_dir``; return the zip's path."""
    blender_ext, tags = _tool_paths()
    out_dir = out_dir.resolve()
    out_dir.mkdir(parents=True, exist_ok=True)  # blender_ext.py requires an existing folder
    with tempfile.TemporaryDirectory(prefix="ik_solvers_stage_") as tmp:
        staged = _stage(source_root, Path(tmp))
        tool = [sys.executable, str(blender_ext)]
        _run(tool + ["validate", str(staged), "--valid-tags", str(tags)], "validate")
        before = set(out_dir.glob("*.zip"))
        output = _run(
            tool
            + [
                "build",
                "--source-dir", str(staged),
                "--output-dir", str(out_dir),
                "--valid-tags", str(tags),
            ],
            "build",
        )
    zips = _built_zips(output, out_dir, before)
    if len(zips) != 1:
        raise BuildError(f"expected one zip in {out_dir}, found {len(zips)}")
    return zips[0]


def _built_zips(output: str, out_dir: Path, before: set[Path]) -> list[Path]:
    """Find the zip the build wrote: named in its output, else the newly created one."""
    named = []
    for line in output.splitlines():
        # blender_ext.py prints e.g. 'created: "/path/ik_solvers-0.1.0.zip", 1234 bytes'
        if line.startswith("created:") and '"' in line:
            named.append(Path(line.split('"')[1]))
    if named:
        return named
    new = sorted(set(out_dir.glob("*.zip")) - before)
    return new or sorted(out_dir.glob(f"{PACKAGE_NAME}-*.zip"))


def main(argv: list[str] | None = None) -> int:
    return run_main("build_extension", lambda: _main(argv), usage_errors=(BuildError,))


def _main(argv: list[str] | None) -> int:
    parser = Parser(prog="build_extension.py", description="Build the IK Solvers extension zip.")
    parser.add_argument("--out", default="dist", type=Path, help="output folder (default: dist)")
    args = parser.parse_args(argv)
    print(build(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

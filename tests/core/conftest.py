"""Shared helpers for the core tests of scripts: load ``scripts/<name>.py`` as a module, read its CSVs."""

from __future__ import annotations

import csv
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[2]


def script_path(name: str) -> Path:
    return REPO_ROOT / "scripts" / f"{name}.py"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` imported as the module ``name``, so tests can call its ``main(argv)``."""
    spec = importlib.util.spec_from_file_location(name, script_path(name))
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def csv_rows(path: Path) -> list[dict]:
    """A CSV file's rows, each a dict keyed by the header."""
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))

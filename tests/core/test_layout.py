"""The core's layout (issue 9): no import cycles, no imports hidden in functions, small modules."""

from __future__ import annotations

import ast
from pathlib import Path

import ik_solvers.core

CORE = Path(ik_solvers.core.__file__).parent


def _modules() -> dict[str, Path]:
    return {
        ".".join(path.relative_to(CORE.parent).with_suffix("").parts).removesuffix(".__init__"): path
        for path in CORE.rglob("*.py")
    }


def _imports(name: str, path: Path) -> set[str]:
    """Core modules ``name`` imports at module level (relative imports resolved)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            found.add(".".join(base + ([node.module] if node.module else [])))
    return found


def test_no_import_is_hidden_inside_a_function():
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner = [n for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom))]
                assert not inner, f"{name}.{node.name} imports inside the function"


def test_core_modules_import_each_other_without_cycles():
    modules = _modules()
    graph = {name: {d for d in _imports(name, path) if d in modules} for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, trail: list[str]) -> None:
        if name in trail:
            raise AssertionError("import cycle: " + " → ".join(trail[trail.index(name):] + [name]))
        if name in done:
            return
        for dependency in sorted(graph[name]):
            # A package's __init__ importing its own modules is how a package is built, not a cycle.
            if not dependency.startswith(name + "."):
                visit(dependency, trail + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_no_core_module_is_over_400_lines():
    for name, path in _modules().items():
        assert len(path.read_text().splitlines()) <= 400, name


def test_no_two_test_modules_share_a_file_name():
    """pytest imports test modules by file name (rootdir mode without packages): two files of one name in
    tests/core and tests/blender stop the whole run at collection (it happened twice when branches met)."""
    tests = Path(__file__).resolve().parents[1]
    names: dict[str, list[Path]] = {}
    for path in tests.rglob("test_*.py"):
        names.setdefault(path.name, []).append(path.relative_to(tests))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}

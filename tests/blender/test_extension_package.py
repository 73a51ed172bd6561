"""The built extension zip installs into a Blender extensions repository, enables as
``bl_ext.<repo>.ik_solvers`` and solves a chain: any absolute import inside the package breaks this."""

from __future__ import annotations

import importlib.util
import sys
import zipfile
from pathlib import Path

import addon_utils
import bpy
import numpy as np
import pytest
from conftest import add_empty, build_arm, evaluated_tip

REPO_ROOT = Path(__file__).resolve().parents[2]
REPO_MODULE = "ik_solvers_package_test"
ADDON_MODULE = f"bl_ext.{REPO_MODULE}.ik_solvers"


def _build_extension(out_dir: Path) -> Path:
    spec = importlib.util.spec_from_file_location("build_extension", REPO_ROOT / "scripts" / "build_extension.py")
    build_extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build_extension)
    assert build_extension.main(["--out", str(out_dir)]) == 0
    zips = sorted(out_dir.glob("ik_solvers-*.zip"))
    assert len(zips) == 1
    return zips[0]


class _BlockRepoPackage:
    """Import hook refusing the top-level ``ik_solvers``: the repository's copy is on sys.path in
    the test run, so without this an absolute import inside the installed extension would quietly
    resolve to it instead of failing as it does in a user's Blender."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname == "ik_solvers" or fullname.startswith("ik_solvers."):
            raise ImportError(f"absolute import of {fullname!r} from the installed extension")
        return None


@pytest.fixture
def repo_package_hidden():
    stashed = {name: sys.modules.pop(name) for name in list(sys.modules)
               if name == "ik_solvers" or name.startswith("ik_solvers.")}
    sys.meta_path.insert(0, _BlockRepoPackage)
    try:
        with pytest.raises(ImportError, match="absolute import"):
            importlib.import_module("ik_solvers.core")
        yield
    finally:
        sys.meta_path.remove(_BlockRepoPackage)
        sys.modules.update(stashed)


@pytest.fixture
def installed_extension(scene, tmp_path, repo_package_hidden):
    """The built zip extracted into a temporary user repository and enabled; removed afterwards."""
    zip_path = _build_extension(tmp_path / "dist")
    repo_dir = tmp_path / "repo"
    with zipfile.ZipFile(zip_path) as archive:
        names = archive.namelist()
        archive.extractall(repo_dir / "ik_solvers")
    repo = bpy.context.preferences.extensions.repos.new(
        name="IK Solvers package test", module=REPO_MODULE, custom_directory=str(repo_dir), source="USER",
    )
    try:
        module = addon_utils.enable(ADDON_MODULE, default_set=True, handle_error=_raise)
        yield module, names
    finally:
        addon_utils.disable(ADDON_MODULE, default_set=True)
        bpy.context.preferences.extensions.repos.remove(repo)
        for name in [m for m in sys.modules if m.startswith(f"bl_ext.{REPO_MODULE}")]:
            del sys.modules[name]


def _raise(error: BaseException) -> None:
    raise error


def test_zip_holds_the_package_and_manifest_only(installed_extension):
    _, names = installed_extension
    assert "blender_manifest.toml" in names
    assert "__init__.py" in names and "blender/operators.py" in names and "core/solve.py" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith(("tests/", "scripts/"))]


def test_installed_extension_solves_through_its_operator(installed_extension):
    module, _ = installed_extension
    assert module is not None and module.__name__ == ADDON_MODULE
    operator_class = bpy.types.Operator.bl_rna_get_subclass_py("IK_SOLVERS_OT_solve")
    assert operator_class.__module__.startswith(f"{ADDON_MODULE}.blender")  # the installed copy, not the repo's
    obj = build_arm()
    target = add_empty(location=(0.35, 0.25, 1.25))
    chain = obj.ik_solvers.chains.add()
    chain.tip_bone, chain.chain_length, chain.target, chain.method = "forearm", 2, target, "SDLS"
    assert bpy.ops.ik_solvers.solve() == {"FINISHED"}
    assert chain.last_status == "CONVERGED"
    assert np.linalg.norm(evaluated_tip(obj, "forearm") - np.array(target.location)) < 2e-6
    for idname in ("chain_add", "bake", "live_toggle", "capture_preferred_pose"):
        getattr(bpy.ops.ik_solvers, idname).get_rna_type()  # registered by the installed package


def test_disabling_removes_everything(installed_extension):
    addon_utils.disable(ADDON_MODULE, default_set=True)
    assert not hasattr(bpy.types.Object, "ik_solvers")
    assert bpy.types.Operator.bl_rna_get_subclass_py("IK_SOLVERS_OT_solve") is None
    assert not hasattr(bpy.types, "VIEW3D_PT_ik_solvers")

"""scripts/ik_batch.py, issue 21: nothing it writes is lost or half-written, and nothing it leaves looks
like a finished bake unless it is one — two runs on one output, failed checks with --in-place and
--output, a --report onto a file that is not ours. (What it reads: test_ik_batch_inputs.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_ik_batch import SCRIPT, baked_a_chain, baked_keys, build_scene_file, ik_batch, run_batch, sha256

assert ik_batch  # importing it put scripts/ on sys.path
import _batch_output  # noqa: E402


@pytest.fixture
def scene_file(addon, tmp_path) -> Path:
    return build_scene_file(tmp_path / "shot.blend")


def start_batch(*args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(SCRIPT), *map(str, args)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))


def test_two_runs_on_one_output_never_corrupt_it_and_a_loser_never_exits_0(scene_file, tmp_path):
    """A duplicated farm task: two processes bake the same input into the same output at once. Blender
    saved both through the fixed name ``shot.blend@`` (one run ended with an unreadable output while a
    process exited 0 with its report ok), and without --overwrite both replaced the output. Now one
    run at a time bakes into an output: the other fails that file (exit 2, its report not ok, no
    output), or, started after the first finished, replaces it only with --overwrite, with the same
    keys (without, it stops at the existing output: exit 1); the output is a whole bake either way, and nothing else is left in its folder."""
    out = tmp_path / "out" / "shot.blend"
    for flags, expected in (((), {"shot.blend"}), (("--overwrite",), {"shot.blend", "shot.blend1"})):
        runs = [start_batch(scene_file, "--output", out, *flags, "--frames", "1", "300", "--quiet",
                            "--report", tmp_path / f"r{i}.json") for i in range(2)]
        codes = [run.wait(timeout=300) for run in runs]
        stderr = [run.stderr.read() for run in runs]
        assert sorted(codes) in ([0, 2], [0, 0], [0, 1]), stderr
        if not flags:  # the output did not exist when the first started: only one may write it
            # The loser found the winner's lock (2), or, started late on a loaded machine (bpy's import
            # takes seconds), the winner's finished output, which it refuses without --overwrite (1).
            assert sorted(codes) in ([0, 2], [0, 1]), stderr
        for i, code in enumerate(codes):
            if code == 1:
                assert "exists; pass --overwrite to replace it" in stderr[i], stderr[i]
                continue
            (entry,) = json.loads((tmp_path / f"r{i}.json").read_text())["files"]
            assert entry["ok"] is (code == 0) and entry["output"] == (str(out) if code == 0 else None)
            if code == 2:
                assert "another ik_batch run is baking into it" in entry["error"] or "appeared while baking" in entry["error"]
        keys = baked_keys(out)
        assert len(keys) == 5 * 4 and all(len(co) == 300 for co in keys.values())
        assert set(os.listdir(out.parent)) == expected  # no lock, no temporary, no shot.blend@


def test_a_run_does_not_bake_into_an_output_another_run_is_writing(scene_file, tmp_path):
    """The lock, deterministically: while another run holds an output's lock, a run with --overwrite
    onto it fails that file before any work (exit 2) and leaves the output as it was."""
    out = tmp_path / "shot_ik.blend"
    out.write_bytes(scene_file.read_bytes())
    before = sha256(out)
    with _batch_output.output_lock(out):
        process = run_batch(scene_file, "--output", out, "--overwrite", "--report", tmp_path / "r.json", check_rc=2)
    assert f"{out}: another ik_batch run is baking into it" in process.stderr
    assert not baked_a_chain(process)
    assert sha256(out) == before and sorted(os.listdir(tmp_path)) == ["r.json", "shot.blend", "shot_ik.blend"]
    run_batch(scene_file, "--output", out, "--overwrite")  # the lock is gone with its holder
    assert sha256(Path(f"{out}1")) == before and len(baked_keys(out)) == 5 * 4


def fail_the_check(monkeypatch, check: str) -> None:
    """Make one of the checks after the bake fail: Blender's evaluation of the baked keys differing from
    the solve (the add-on's ``BakeReport``), or keys missing in the saved file."""
    if check == "evaluated":
        import _batch_report

        real = _batch_report.evaluated_fields

        def mismatching(bake_report):
            return dict(real(bake_report), evaluated_max_error=0.25, evaluated_mismatch_frames=[7, 8])

        monkeypatch.setattr(_batch_report, "evaluated_fields", mismatching)
    else:
        monkeypatch.setattr(ik_batch, "missing_keys", lambda *_args: "'Rig:Arm' has no action in the saved file")


@pytest.mark.parametrize("check", ["evaluated", "saved keys"])
def test_in_place_replaces_the_input_only_after_every_check_passed(scene_file, tmp_path, monkeypatch, check):
    """``--in-place`` on a file whose check after the bake fails exited 2 but replaced the input anyway
    (and a retry pushed the original out of ``.blend1``): now the input, with no ``.blend1``, stays as
    it was, and the report names no output."""
    before = sha256(scene_file)
    fail_the_check(monkeypatch, check)
    report = tmp_path / "r.json"
    for _retry in range(2):
        assert ik_batch.main(["ik_batch.py", str(scene_file), "--in-place", "--quiet", "--report", str(report)]) == 2
        assert sha256(scene_file) == before
        assert sorted(os.listdir(tmp_path)) == ["r.json", "shot.blend"]  # no .blend1, no temporary
    (entry,) = json.loads(report.read_text())["files"]
    assert entry["ok"] is False and entry["output"] is None


@pytest.mark.parametrize("check", ["evaluated", "saved keys"])
def test_a_file_that_fails_leaves_no_output_that_looks_baked(scene_file, tmp_path, monkeypatch, check):
    """An exit-2 run left an output that looked complete (a whole .blend with keys where a pipeline
    looks for the bake): now a failed file leaves no output, and an existing one (``--overwrite``)
    stays as it was, without a ``.blend1``."""
    fail_the_check(monkeypatch, check)
    out = tmp_path / "out" / "shot_ik.blend"
    args = ["ik_batch.py", str(scene_file), "--output", str(out), "--quiet", "--report", str(tmp_path / "r.json")]
    assert ik_batch.main(args) == 2
    assert os.listdir(out.parent) == []
    out.write_bytes(scene_file.read_bytes())
    before = sha256(out)
    assert ik_batch.main([*args, "--overwrite"]) == 2
    assert sha256(out) == before and os.listdir(out.parent) == ["shot_ik.blend"]
    (entry,) = json.loads((tmp_path / "r.json").read_text())["files"]
    assert entry["ok"] is False and entry["output"] is None


def test_report_replaces_only_a_file_ik_batch_wrote(scene_file, tmp_path):
    """``--report package.json`` replaced any JSON object with a ``files`` list (an npm manifest) and
    exited 0: a report is recognised by its ``"tool": "ik_batch"`` and ``schema_version`` (or the
    unversioned report's exact fields), anything else is a usage error, untouched."""
    manifest = tmp_path / "package.json"
    for text in ('{"name": "shot-tools", "version": "1.0.0", "files": ["dist"]}\n', '{"files": []}\n',
                 '{"tool": "other", "schema_version": 2, "files": []}\n'):
        manifest.write_text(text)
        process = run_batch(scene_file, "--dry-run", "--report", manifest, check_rc=1)
        assert f"--report {manifest} exists and is not an ik_batch report" in process.stderr
        assert manifest.read_text() == text and "[ik_batch]" not in process.stderr  # before any work
    report = tmp_path / "r.json"
    for earlier in ('{"jobs": 1, "chunk_size": 100, "files": []}\n', None):  # schema 1, then our own
        if earlier is not None:
            report.write_text(earlier)
        run_batch(scene_file, "--dry-run", "--chain", "Arm", "--report", report)
        assert json.loads(report.read_text())["tool"] == "ik_batch"



def test_publish_replaces_only_when_allowed_and_keeps_the_old_file(tmp_path):
    """The last step alone: an output that appeared while baking (another run, anything) is not replaced
    without --overwrite; with it, the old file is kept as NAME.blend1 (older ones shifted as Blender's
    save_version does) and the new one takes its place whole."""
    out = tmp_path / "shot.blend"
    for name, text in (("shot.blend", "old"), ("shot.blend1", "older"), ("new", "new")):
        (tmp_path / name).write_text(text)
    with pytest.raises(_batch_output.OutputError, match="appeared while baking"):
        _batch_output.publish(tmp_path / "new", out, replace=False, versions=1)
    assert out.read_text() == "old"
    _batch_output.publish(tmp_path / "new", out, replace=True, versions=2)
    assert [(tmp_path / n).read_text() for n in ("shot.blend", "shot.blend1", "shot.blend2")] == ["new", "old", "older"]
    assert sorted(os.listdir(tmp_path)) == ["shot.blend", "shot.blend1", "shot.blend2"]
    (tmp_path / "fresh").write_text("fresh")
    _batch_output.publish(tmp_path / "fresh", tmp_path / "fresh.blend", replace=False, versions=1)
    assert (tmp_path / "fresh.blend").read_text() == "fresh"  # a hard link: the temporary name goes with staged()

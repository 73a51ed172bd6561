"""Every command README.md and docs/*.md tell a reader to run, run as written (issue 19).

The commands are read from the docs themselves, so a new one is covered without touching this file:
every fenced ``sh`` block, and every inline code span that starts like a command (``.venv/bin/python …``,
``python …``, ``scripts/NAME.py …``,
``PYTHONPATH=…``, ``make …``). Each runs under ``bash -euo pipefail`` in a sandbox that looks like a
checkout (``scripts/``, ``ik_solvers/``, ``farm/``, the Makefile linked; ``docs/`` copied, so
nothing here writes into the real docs) whose ``.venv/bin/python`` and ``blender`` are stand-ins:

- a script command runs with its own arguments plus ``--help`` (the script exists, imports, and
  every option the doc gives before ``--help`` is known to argparse with a valid value);
- a command that pastes tables into a doc (``--doc FILE``) really runs, on a small case (fewer
  frames, rigs and samples; ``--out`` in the sandbox), into the sandbox's copy of the doc, and the
  copy must change between its markers and nowhere else;
- ``make TARGET`` is ``make -n TARGET`` (the target exists; nothing is built); ``.venv/bin/openjd``
  is the real openjd-cli, so the farm template gets the documented job parameters as written, with
  the stand-in Python answering ``--help`` for ik_batch and farm_summary (``tests/farm`` bakes for real).

Commands that cannot run here (``deadline``: no farm) or would write into the checkout are listed in
``NOT_RUN``; ``python scripts/…`` (a Python without the project) fails without running.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
INLINE_COMMAND = re.compile(r"`((?:\.venv/bin/python |PYTHONPATH=\S+ |make |python3? |scripts/\S+\.py )[^`]+)`")
FENCED_SH = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)
MARKED_TABLE = re.compile(r"(<!-- (?:(\S+):start|race-table:(\S+)) -->\n).*?(<!-- (?:\2:end|/race-table:\3) -->)",
                          re.DOTALL)
"""A pasted table: ``<!-- NAME:start -->`` … ``<!-- NAME:end -->`` or ``<!-- race-table:NAME -->`` … ``<!-- /race-table:NAME -->``."""
NOT_RUN = {
    "deadline": "submits to a Deadline Cloud farm, which this machine has none of",
    "farm/pack_bundle.py": "writes the bundle's tools/ into the checkout itself (tests/farm runs it)",
}
"""Commands that run these programs are not run (the doc's block or span is left out whole), each for its reason."""


def not_run(command: str) -> bool:
    """Whether a line of ``command`` runs a program of :data:`NOT_RUN` (its first word, or the script a Python runs)."""
    for line in command.splitlines():
        words = line.split()
        if words and any(word in NOT_RUN for word in words[:2]):
            return True
    return False
BARE_PYTHON = re.compile(r"^\s*python3? scripts/", re.MULTILINE)
"""A script run by whatever ``python`` is on the reader's PATH: it has neither bpy nor the project."""
OPENJD = shutil.which("openjd", path=str(Path(sys.executable).parent)) or shutil.which("openjd")
MAKE = shutil.which("make")

SMALL = {
    "compare_native.py": {"--frames": "20", "--rigs": "arm", "--rigify-frames": "2", "--repeats": "1"},
    "compare_body.py": {"--frames": "2", "--repeats": "1"},
    "compare_metarigs.py": {"--frames": "2", "--chains": "human_arm"},
    "compare_rigify.py": {"--frames": "2", "--rigs": "human_arm", "--repeats": "1"},
    "solver_race.py": {"--budget": "8", "--samples": "2", "--loop-samples": "0", "--repeats": "1"},
}
"""The small case of each doc-updating script: these options replace the documented values (``--rigs``
keeps the first rig the doc names)."""

STAND_IN = '''
import json, os, subprocess, sys, time
from pathlib import Path

SANDBOX, LOG, PYTHON, SMALL = Path({sandbox!r}), Path({log!r}), {python!r}, {small!r}


def small_case(script, args):
    """The documented arguments with --out and --doc in the sandbox and the small case's options."""
    wanted = dict(SMALL.get(Path(script).name, {{}}))
    out, k = [], 0
    while k < len(args):
        option, values = args[k], []
        k += 1
        while k < len(args) and not args[k].startswith("--"):
            values.append(args[k])
            k += 1
        if option == "--out":
            values = [str(SANDBOX / "out" / Path(values[0]).name)]
        elif option == "--doc":
            values = [str(SANDBOX / "docs" / Path(values[0]).name)]
        elif option in wanted:
            given = wanted.pop(option)
            values = values[:1] if option == "--rigs" and values else [given]
        out += [option, *values]
    for option, value in wanted.items():
        out += [option, value]
    return out


argv = sys.argv[1:]
if argv[:1] == ["--as-blender"]:  # blender -b [FILE] --python SCRIPT -- ARGS
    script = argv[argv.index("--python") + 1]
    argv = [script, "--", *argv[argv.index("--") + 1:]] if "--" in argv else [script]
if "--doc" in argv:
    command, mode = [PYTHON, argv[0], *small_case(argv[0], argv[1:])], "small case"
else:
    command, mode = [PYTHON, *argv, "--help"], "help"
env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [{repo!r}, {scripts!r}, os.environ.get("PYTHONPATH")])))
started = time.perf_counter()
done = subprocess.run(command, env=env, stdout=subprocess.PIPE if mode == "help" else None)
with LOG.open("a") as log:
    log.write(json.dumps({{"documented": sys.argv, "ran": command, "mode": mode, "rc": done.returncode,
                          "seconds": round(time.perf_counter() - started, 2)}}) + "\\n")
sys.exit(done.returncode)
'''


def documented_commands(doc: Path) -> list[str]:
    """The doc's fenced ``sh`` blocks and inline commands, each a bash script as written."""
    text = doc.read_text()
    inline = [match.group(1) for match in INLINE_COMMAND.finditer(text)]
    return FENCED_SH.findall(text) + inline


def outside_markers(text: str) -> str:
    """``text`` with what stands between each pair of table markers left out."""
    return MARKED_TABLE.sub(r"\1\4", text)


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory) -> Path:
    """A checkout look-alike with stand-in ``.venv/bin/python``, ``blender`` and ``make``."""
    assert OPENJD is not None, "openjd-cli is not installed in this environment; run `make venv`"
    assert MAKE is not None, "make is not on the PATH"
    root = tmp_path_factory.mktemp("checkout")
    for name in ("scripts", "ik_solvers", "farm", "tests", "Makefile", "pyproject.toml", "blender_manifest.toml"):
        (root / name).symlink_to(REPO / name)
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy(REPO / "README.md", root / "README.md")
    bin_dir, tools = root / ".venv" / "bin", root / ".tools"
    bin_dir.mkdir(parents=True)
    tools.mkdir()
    stand_in = root / ".stand_in.py"
    stand_in.write_text(STAND_IN.format(sandbox=str(root), log=str(root / "commands.jsonl"), python=sys.executable,
                                        small=SMALL, repo=str(REPO), scripts=str(REPO / "scripts")))
    python = f"{shlex.quote(sys.executable)} {shlex.quote(str(stand_in))}"
    for path, text in ((bin_dir / "python", f'exec {python} "$@"'), (tools / "blender", f'exec {python} --as-blender "$@"'),
                       (tools / "make", f'exec {shlex.quote(str(MAKE))} -n "$@"')):
        path.write_text(f"#!/bin/sh\n{text}\n")
        path.chmod(0o755)
    (bin_dir / "openjd").symlink_to(OPENJD)
    shots = root / "shots"  # the docs' /shots folder: the stand-in Python only reads --help
    shots.mkdir()
    for name in ("a.blend", "b.blend"):
        (shots / name).write_bytes(b"")
    return root


def run_documented(sandbox: Path, command: str) -> subprocess.CompletedProcess:
    script = "set -euo pipefail\n" + command.replace("/shots", str(sandbox / "shots"))
    env = {"PATH": f"{sandbox / '.tools'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(sandbox),
           "BLENDER_USER_RESOURCES": str(sandbox / "blender_user")}
    return subprocess.run(["bash", "-c", script], cwd=sandbox, env=env, capture_output=True, text=True, timeout=600)


def test_the_docs_have_commands():
    """The parser finds what the docs plainly contain (so a broken parser cannot pass everything)."""
    readme = documented_commands(REPO / "README.md")
    assert "make demo\nmake test\n" in readme and "make bench" in readme
    assert any("scripts/compare_rigify.py" in c for c in documented_commands(REPO / "docs" / "rigify.md"))
    assert any("openjd run farm/ik_bake/template.yaml" in c for c in documented_commands(REPO / "docs" / "farm.md"))


@pytest.mark.parametrize("doc", DOCS, ids=[doc.name for doc in DOCS])
def test_documented_commands_run_as_written(sandbox, doc):
    log = sandbox / "commands.jsonl"
    for command in documented_commands(doc):
        if not_run(command):
            continue
        assert not BARE_PYTHON.search(command), f"{doc.name}: `{command.strip()}`: run scripts with .venv/bin/python"
        pasted = [sandbox / "docs" / Path(name).name for name in re.findall(r"--doc (\S+)", command)]
        before = {path: path.read_text() for path in pasted}
        logged = len(log.read_text().splitlines()) if log.exists() else 0
        done = run_documented(sandbox, command)
        assert done.returncode == 0, f"{doc.name}: `{command.strip()}` exited {done.returncode}:\n{done.stderr[-3000:]}"
        runs = [json.loads(line) for line in log.read_text().splitlines()[logged:]] if log.exists() else []
        if ".venv/bin/python" in command or "blender " in command:
            assert runs, f"{doc.name}: `{command.strip()}` ran no script"
        for path, text in before.items():  # a doc-updating command: its small case pasted new tables
            assert any(run["mode"] == "small case" for run in runs), command
            assert path.read_text() != text, f"`{command.strip()}` left {path.name} as it was"
            assert outside_markers(path.read_text()) == outside_markers(text), f"{path.name} changed outside its markers"

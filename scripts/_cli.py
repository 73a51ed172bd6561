"""What every script here shares: the command-line conventions and the bpy bootstrap.

Conventions (README, SPEC §4 and §7):

- ``main(argv) -> int``; ``sys.exit(main(...))`` at the bottom.
- Exit status 0 ok, 1 usage error (bad option or value, or ``--help``'s 0), 2 a failure of the work
  itself (a bad input file, a missing chain, a failed bake).
- A problem is one line on stderr: ``prog: error: message`` for a usage error (as argparse words
  it), ``prog: message`` for a failure.
- Under ``blender -b FILE --python SCRIPT -- ARGS`` the script's arguments are those after ``--``.
- ``import_bpy()``: the first import of ``bpy`` gets a temporary ``BLENDER_USER_RESOURCES`` (so no
  run writes into ``~/.config/blender``) and the add-on is registered once.

The project is installed into ``.venv`` in editable mode (``make venv``), so scripts import
``ik_solvers`` like any package. Blender's own Python does not have it installed: the one script
meant to run there (``ik_batch.py``) puts its checkout on ``sys.path`` itself before importing this.
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import NoReturn

EXIT_OK, EXIT_USAGE, EXIT_FAILED = 0, 1, 2


class UsageError(Exception):
    """A command-line mistake: one line on stderr, exit status 1."""


class Parser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors raise :class:`UsageError`.

    argparse would print the usage and exit 2, which here means "bad file"; unknown options and bad
    values are usage errors (exit 1). ``--help`` still prints and raises ``SystemExit(0)``.
    """

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def script_args(argv: Sequence[str]) -> list[str]:
    """The script's own arguments from a full ``sys.argv``.

    Under ``blender -b FILE --python script.py -- ARGS`` Blender leaves its own arguments in
    ``sys.argv``: the script's are those after the first ``--``. Run by a plain Python
    (``python script.py ARGS``) they are ``argv[1:]`` (a ``--`` there is skipped as well).
    """
    if "--" in argv:
        return list(argv[list(argv).index("--") + 1:])
    return list(argv[1:])


def one_line(text: object) -> str:
    """The last non-empty line of ``text`` (Blender's errors end with the reason), or ''."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[-1] if lines else ""


def report(prog: str, message: object, *, usage: bool = False) -> None:
    """Print one problem as one line on stderr (``prog: error: …`` for a usage error)."""
    text = " ".join(str(message).split("\n")).strip()
    print(f"{prog}: error: {text}" if usage else f"{prog}: {text}", file=sys.stderr)


def run_main(prog: str, body: Callable[[], int], *, usage_errors: tuple[type[Exception], ...] = ()) -> int:
    """``body()``'s exit status, with the conventions applied.

    ``--help`` (argparse's ``SystemExit``) returns its code; a :class:`UsageError`, or one of
    ``usage_errors`` (e.g. the core's ``IKInputError`` for a rejected parameter), is reported on
    one line and returns 1.
    """
    caught: tuple[type[Exception], ...] = (UsageError, *usage_errors)
    try:
        return body()
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (EXIT_OK if done.code is None else EXIT_USAGE)
    except caught as problem:
        report(prog, problem, usage=True)
        return EXIT_USAGE


def import_bpy(register_addon: bool = True) -> ModuleType:
    """``bpy``, imported with Blender's user folders in a temporary directory, and the add-on registered.

    The temporary folder is made only when ``bpy`` is not imported yet (inside Blender it always
    is) and the caller has not chosen one (``BLENDER_USER_RESOURCES``); it is removed at exit.
    ``register_addon=False`` leaves registering to the caller.
    """
    if "bpy" not in sys.modules and not os.environ.get("BLENDER_USER_RESOURCES"):
        home = tempfile.mkdtemp(prefix="ik_solvers_blender_user_")
        os.environ["BLENDER_USER_RESOURCES"] = home
        atexit.register(shutil.rmtree, home, ignore_errors=True)
    import bpy

    if register_addon and not hasattr(bpy.types.Object, "ik_solvers"):
        import ik_solvers

        ik_solvers.register()
        from ik_solvers.blender import compat

        compat.unregister_at_exit(ik_solvers.unregister)  # bpy 4.5 hangs at exit while the add-on is still registered
    return bpy

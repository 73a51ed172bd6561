"""Kept only so ``from ik_solvers.core.hi_solver import …`` in the Blender layer still works.

The HI solver lives in the package ``ik_solvers.core.hi``; import its names from
``ik_solvers.core``. Delete this module once nothing imports it.
"""

from .hi import *  # noqa: F401,F403
from .hi import __all__  # noqa: F401

"""Top-level test setup: keep Blender away from the user's ~/.config/blender.

Runs before any test module is imported, so before anything imports ``bpy``.
"""

import os
import tempfile

_blender_home = tempfile.mkdtemp(prefix="ik_solvers_blender_user_")
os.environ["BLENDER_USER_RESOURCES"] = _blender_home
os.environ["BLENDER_USER_CONFIG"] = os.path.join(_blender_home, "config")
os.environ["BLENDER_USER_SCRIPTS"] = os.path.join(_blender_home, "scripts")

"""IK Solvers: a family of inverse-kinematics solvers for Blender armatures.

Only register()/unregister() live here; the bpy layer is imported inside them
so that ``ik_solvers.core`` stays importable without Blender.
"""


def register() -> None:
    from . import blender

    blender.register()


def unregister() -> None:
    from . import blender

    blender.unregister()

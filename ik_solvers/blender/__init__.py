"""The bpy layer: the only part of the add-on that imports bpy or mathutils.

Modules register in a fixed order (settings first, panels last) and unregister in reverse. The
settings module adds and removes ``Object.ik_solvers``; live mode adds and removes its handlers;
operators and panels register their classes through ``bpy.utils.register_classes_factory``.
"""

from . import bake_operator, live, operators, panel, properties

_MODULES = (properties, operators, bake_operator, live, panel)
"""Registration order; each module has ``register()`` / ``unregister()``."""


def register() -> None:
    for module in _MODULES:
        module.register()


def unregister() -> None:
    for module in reversed(_MODULES):
        module.unregister()

"""The bpy layer: the only part of the add-on that imports bpy or mathutils.

Submodules register in a fixed order (settings first, panels last) and unregister in reverse.
"""

import bpy

from . import bake, live, operators, panel, properties

# Each module exposes ``register()``/``unregister()`` or a ``classes`` tuple.
_modules = (properties, operators, bake, live, panel)


def _register_module(module) -> None:
    if hasattr(module, "register"):
        module.register()
    else:
        for cls in module.classes:
            bpy.utils.register_class(cls)


def _unregister_module(module) -> None:
    if hasattr(module, "unregister"):
        module.unregister()
    else:
        for cls in reversed(module.classes):
            bpy.utils.unregister_class(cls)


def register() -> None:
    for module in _modules:
        _register_module(module)
    bpy.types.Object.ik_solvers = bpy.props.PointerProperty(type=properties.IK_SOLVERS_PG_settings)


def unregister() -> None:
    del bpy.types.Object.ik_solvers
    for module in reversed(_modules):
        _unregister_module(module)

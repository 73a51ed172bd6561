"""The bpy layer: the only part of the add-on that imports bpy or mathutils.

Submodules register in a fixed order (settings first, panels last) and unregister in reverse;
``Object.ik_solvers`` is added once the settings classes exist and removed before they go.
"""

import bpy

from . import bake, live, operators, panel, properties

_MODULES = (properties, operators, bake, live, panel)
"""Registration order. Each module has ``register()``/``unregister()`` or a ``classes`` tuple."""


def _module_functions(module):
    if hasattr(module, "register"):
        return module.register, module.unregister
    return bpy.utils.register_classes_factory(module.classes)


def register() -> None:
    for module in _MODULES:
        _module_functions(module)[0]()
        if module is properties:
            bpy.types.Object.ik_solvers = bpy.props.PointerProperty(type=properties.IK_SOLVERS_PG_settings)


def unregister() -> None:
    for module in reversed(_MODULES):
        if module is properties:
            del bpy.types.Object.ik_solvers
        _module_functions(module)[1]()

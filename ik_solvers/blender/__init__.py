"""The bpy layer: the only part of the add-on that imports bpy or mathutils."""

import bpy

classes: tuple = ()

_register_classes, _unregister_classes = bpy.utils.register_classes_factory(classes)


def register() -> None:
    _register_classes()


def unregister() -> None:
    _unregister_classes()

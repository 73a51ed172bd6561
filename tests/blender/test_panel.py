"""The sidebar panels' draw() against a recording layout: every property path drawn resolves on the
real settings, every operator drawn is registered, every icon exists, the HI flip warning shows."""

from __future__ import annotations

import math
from types import SimpleNamespace

import bpy
import pytest
from conftest import add_empty, build_arm

from ik_solvers.blender import panel
from ik_solvers.blender.properties import METHOD_ITEMS

ICONS = set(bpy.types.UILayout.bl_rna.functions["label"].parameters["icon"].enum_items.keys())


class Recording:
    """What a draw() call asked for."""

    def __init__(self):
        self.props = []  # (data, property name)
        self.operators = []  # (idname, {property: value})
        self.labels = []  # (text, icon)
        self.icons = []
        self.lists = []  # template_list arguments


class OperatorProperties:
    """Stands in for the OperatorProperties a layout returns; records what the panel sets."""

    def __init__(self, settings: dict):
        object.__setattr__(self, "_settings", settings)

    def __setattr__(self, name, value):
        self._settings[name] = value


class RecordingLayout:
    """A fake ``UILayout``: records prop/operator/label calls; containers return a new recorder.

    Any layout method not listed here raises AttributeError, so a panel using one fails this
    test until the recorder learns it (rather than silently passing).
    """

    def __init__(self, recording: Recording):
        object.__setattr__(self, "recording", recording)
        object.__setattr__(self, "attributes", {})

    def __setattr__(self, name, value):  # use_property_split, alert, enabled, ...
        assert name in bpy.types.UILayout.bl_rna.properties, f"UILayout has no attribute {name!r}"
        self.attributes[name] = value

    def _child(self, *args, **kwargs):
        return RecordingLayout(self.recording)

    row = column = box = split = grid_flow = column_flow = _child

    def separator(self, **kwargs):
        pass

    def _icon(self, kwargs):
        if "icon" in kwargs:
            self.recording.icons.append(kwargs["icon"])

    def prop(self, data, property, **kwargs):
        self._icon(kwargs)
        self.recording.props.append((data, property))

    def prop_search(self, data, property, search_data, search_property, **kwargs):
        self._icon(kwargs)
        self.recording.props += [(data, property), (search_data, search_property)]

    def operator(self, operator, **kwargs):
        self._icon(kwargs)
        settings = {}
        self.recording.operators.append((operator, settings))
        return OperatorProperties(settings)

    def label(self, text="", icon="NONE", **kwargs):
        self.recording.icons.append(icon)
        self.recording.labels.append((text, icon))

    def template_list(self, listtype_name, list_id, dataptr, propname, active_dataptr, active_propname, **kwargs):
        self.recording.lists.append(listtype_name)
        self.recording.props += [(dataptr, propname), (active_dataptr, active_propname)]


PANELS = (
    panel.VIEW3D_PT_ik_solvers,
    panel.VIEW3D_PT_ik_solvers_method,
    panel.VIEW3D_PT_ik_solvers_hi,
    panel.VIEW3D_PT_ik_solvers_status,
)


def draw_all(context) -> Recording:
    recording = Recording()
    for cls in PANELS:
        if cls.poll(context):
            cls.draw(SimpleNamespace(layout=RecordingLayout(recording)), context)
    return recording


def assert_everything_resolves(recording: Recording):
    assert recording.props, "nothing was drawn"
    for data, name in recording.props:
        assert name in data.bl_rna.properties, f"{data!r} has no property {name!r}"
        data.path_resolve(name)  # raises if the path does not resolve
    for idname, settings in recording.operators:
        category, name = idname.split(".")
        op = getattr(getattr(bpy.ops, category), name)
        rna = op.get_rna_type()  # KeyError for an operator that is not registered
        for key in settings:
            assert key in rna.properties, f"{idname} has no property {key!r}"
    for listtype in recording.lists:
        assert issubclass(getattr(bpy.types, listtype), bpy.types.UIList)
    for icon in recording.icons:
        assert icon in ICONS, f"unknown icon {icon!r}"


@pytest.fixture
def armature(addon):
    obj = build_arm()
    bpy.context.view_layer.objects.active = obj
    return obj


def _add_chain(obj, method):
    chain = obj.ik_solvers.chains.add()
    chain.tip_bone, chain.chain_length, chain.target, chain.method = "forearm", 2, add_empty(), method
    return chain


def test_panels_are_registered_in_the_ik_sidebar_tab(addon):
    for cls in PANELS:
        registered = getattr(bpy.types, cls.__name__)
        assert registered.bl_space_type == "VIEW_3D" and registered.bl_region_type == "UI"
        assert registered.bl_category == "IK"
    assert {c.bl_parent_id for c in PANELS[1:]} == {"VIEW3D_PT_ik_solvers"}


def test_without_chains_the_panel_offers_to_add_one(armature):
    recording = draw_all(bpy.context)
    assert_everything_resolves(recording)
    assert [op for op, _ in recording.operators] == [
        "ik_solvers.chain_add", "ik_solvers.chain_add_with_target", "ik_solvers.chain_remove"]
    assert any("Add a chain" in text for text, _ in recording.labels)


def test_panels_hide_for_non_armatures(addon):
    bpy.context.view_layer.objects.active = add_empty()
    assert not any(cls.poll(bpy.context) for cls in PANELS)


@pytest.mark.parametrize("method", [item[0] for item in METHOD_ITEMS])
def test_every_method_draws_resolvable_settings(armature, method):
    chain = _add_chain(armature, method)
    recording = draw_all(bpy.context)
    assert_everything_resolves(recording)
    drawn = {name for data, name in recording.props if data == chain}
    assert {"tip_bone", "chain_length", "target", "method"} <= drawn
    if method == "DLS":
        assert "damping" in drawn
    if method == "JACOBIAN_TRANSPOSE":
        assert "step" in drawn
    if method == "HI":
        assert {"swivel_angle", "zero_plane_map", "pole_target", "parent_space", "flip_threshold"} <= drawn
    else:
        assert "swivel_angle" not in drawn
    operators = [op for op, _ in recording.operators]
    for idname in ("ik_solvers.solve", "ik_solvers.bake", "ik_solvers.capture_preferred_pose"):
        assert idname in operators
    assert ("ik_solvers.solve", {"all_chains": True}) in recording.operators


def test_hi_flip_warning_shows_only_near_a_pole(armature):
    chain = _add_chain(armature, "HI")
    chain.last_status = "CONVERGED"
    chain.flip_threshold = math.radians(10.0)
    chain.last_pole_distance = math.radians(25.0)
    assert not [label for label in draw_all(bpy.context).labels if label[1] == "ERROR"]
    chain.last_pole_distance = math.radians(4.0)
    warnings = [text for text, icon in draw_all(bpy.context).labels if icon == "ERROR"]
    assert len(warnings) == 1 and "4.0°" in warnings[0] and "pole" in warnings[0]


def test_status_and_bake_report_are_shown(armature):
    chain = _add_chain(armature, "DLS")
    chain.last_status, chain.last_error, chain.last_iterations = "BUDGET_EXHAUSTED", 0.00123, 100
    chain.bake_frames, chain.bake_converged, chain.bake_stalled, chain.bake_flip_frames = 50, 48, 2, 1
    texts = [text for text, _ in draw_all(bpy.context).labels]
    assert "Status: Budget Exhausted" in texts
    assert "Iterations: 100" in texts
    assert any(t.startswith("Error: 0.00123") for t in texts)
    assert "Last bake: 50 frames" in texts and "Stalled: 2" in texts and "Plane flips: 1 frame(s)" in texts


def test_chain_list_items_draw_resolvable_properties(armature):
    chain = _add_chain(armature, "CCD")
    recording = Recording()
    panel.IK_SOLVERS_UL_chains.draw_item(
        None, bpy.context, RecordingLayout(recording), armature.ik_solvers, chain, 0, armature.ik_solvers,
        "active_chain_index", 0,
    )
    assert_everything_resolves(recording)
    assert [text for text, _ in recording.labels] == ["CCD"]


def test_the_panel_says_which_method_is_in_use_and_why(armature):
    chain = _add_chain(armature, "HI")
    texts = [text for text, _ in draw_all(bpy.context).labels]
    assert any(t.startswith("HI (Swivel): default (history independent") for t in texts), texts
    chain.method = "DLS"
    texts = [text for text, _ in draw_all(bpy.context).labels]
    assert "Damped Least Squares: chosen for this chain" in texts

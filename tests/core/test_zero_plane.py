"""Zero-plane maps (SPEC §5): the default map's rules A and B, its poles, the pole-object map, the registry."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ik_solvers.core import ZERO_PLANE_MAPS, IKInputError, register_zero_plane_map
from ik_solvers.core.zero_plane import (
    DefaultZeroPlaneMap,
    PoleObjectZeroPlaneMap,
    build_zero_plane_map,
    map_singularities,
    swivel_angles,
    swivel_normals,
    zero_plane_normals,
)


def _rodrigues(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix about a unit axis, written out independently of the core."""
    x, y, z = axis
    k = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + np.sin(angle) * k + (1.0 - np.cos(angle)) * (k @ k)


def _random_frame(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A unit meridian ``a0`` and a unit pole ``n0 ⟂ a0`` in a random orientation."""
    basis, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return basis[:, 0], basis[:, 1]


frames = st.integers(min_value=0, max_value=2**31 - 1).map(lambda seed: _random_frame(np.random.default_rng(seed)))


@given(frames, st.floats(-np.pi, np.pi))
@settings(deadline=None)  # pure arithmetic; a loaded CI machine must not fail it on time
def test_rule_a_equator_normal_is_the_preferred_normal(frame, longitude):
    a0, n0 = frame
    zero_map = DefaultZeroPlaneMap(a0, n0)
    on_equator = _rodrigues(n0, longitude) @ a0
    np.testing.assert_allclose(zero_map(on_equator[None])[0], n0, atol=1e-15)


@given(frames, st.floats(-np.pi, np.pi), st.floats(-1.55, 1.55))
@settings(deadline=None)
def test_rule_b_is_the_equator_normal_carried_along_the_meridian(frame, longitude, latitude):
    """n(a) is n0 turned with the equator point e up its meridian great circle to a (hand rotation)."""
    a0, n0 = frame
    equator_point = _rodrigues(n0, longitude) @ a0
    up_the_meridian = _rodrigues(np.cross(equator_point, n0), latitude)
    axis = up_the_meridian @ equator_point
    normal = DefaultZeroPlaneMap(a0, n0)(axis[None])[0]
    np.testing.assert_allclose(normal, up_the_meridian @ n0, atol=1e-12)
    assert abs(np.linalg.norm(normal) - 1.0) < 1e-13
    assert abs(normal @ axis) < 1e-13


def test_default_map_is_continuous_away_from_the_poles():
    rng = np.random.default_rng(3)
    a0, n0 = _random_frame(rng)
    zero_map = DefaultZeroPlaneMap(a0, n0)
    axes = rng.normal(size=(20000, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    axes = axes[np.abs(axes @ n0) < np.cos(np.radians(5.0))]  # at least 5° from either pole
    nudged = axes + 1e-6 * rng.normal(size=axes.shape)
    nudged /= np.linalg.norm(nudged, axis=1, keepdims=True)
    step = np.linalg.norm(nudged - axes, axis=1)
    jump = np.linalg.norm(zero_map(nudged) - zero_map(axes), axis=1)
    # The map's derivative grows like 1 / cos(latitude): ≤ 1 / sin(5°) ≈ 11.5 here.
    assert np.max(jump / step) < 12.0


@pytest.mark.parametrize("pole_sign", [1.0, -1.0])
def test_opposite_meridians_give_opposite_normals_at_each_pole(pole_sign):
    rng = np.random.default_rng(4)
    a0, n0 = _random_frame(rng)
    zero_map = DefaultZeroPlaneMap(a0, n0)
    meridian = _rodrigues(n0, 0.7) @ a0
    near_pole = []
    for side in (meridian, -meridian):
        tilt = _rodrigues(np.cross(side, pole_sign * n0), np.pi / 2 - 1e-7)
        near_pole.append(tilt @ side)
    first, second = zero_map(np.array(near_pole))
    assert np.arccos(near_pole[0] @ (pole_sign * n0)) < 2e-7  # both really at the pole
    assert first @ second < -1.0 + 1e-12  # opposite normals: the flip is real
    # The limits are −e (north) / +e (south) along the meridian e: the exact place of the flip.
    np.testing.assert_allclose(first, -pole_sign * meridian, atol=1e-6)


def test_great_circle_through_the_pole_flips_exactly_in_the_step_that_crosses_it():
    rng = np.random.default_rng(5)
    a0, n0 = _random_frame(rng)
    meridian = _rodrigues(n0, -1.2) @ a0
    swing = np.cross(meridian, n0)
    # 360 steps once around the great circle through both poles, offset so no sample is a pole.
    angles = (np.arange(360) + 0.37) * np.radians(1.0)
    axes = np.array([_rodrigues(swing, angle) @ meridian for angle in angles])
    normals = DefaultZeroPlaneMap(a0, n0)(axes)
    turns = np.degrees(np.arccos(np.clip(np.sum(normals[1:] * normals[:-1], axis=1), -1.0, 1.0)))
    flips = np.flatnonzero(turns > 90.0) + 1
    crossing = [k for k in range(1, 360) if (angles[k - 1] - np.pi / 2) * (angles[k] - np.pi / 2) < 0
                or (angles[k - 1] - 3 * np.pi / 2) * (angles[k] - 3 * np.pi / 2) < 0]
    assert list(flips) == crossing and len(crossing) == 2
    assert np.all(np.delete(turns, flips - 1) < 1.0 + 1e-9)  # elsewhere the plane turns with the axis


def test_default_map_is_singular_exactly_at_the_poles():
    a0, n0 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    zero_map = DefaultZeroPlaneMap(a0, n0)
    axes = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, -1.0], [1e-6, 0.0, 1.0], [0.0, 1.0, 0.0]])
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    assert list(map_singularities(zero_map, axes)) == [True, True, False, False]
    normals = zero_plane_normals(zero_map, axes)  # still unit and ⟂ at the pole itself
    np.testing.assert_allclose(normals[:2], [[-1.0, 0.0, 0.0], [1.0, 0.0, 0.0]], atol=1e-15)


def test_pole_object_map_puts_the_bulge_toward_the_pole():
    rng = np.random.default_rng(6)
    a0, n0 = _random_frame(rng)
    zero_map = PoleObjectZeroPlaneMap(a0, n0)
    axes = rng.normal(size=(500, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    poles = rng.normal(size=(500, 3)) * 3.0
    normals = zero_plane_normals(zero_map, axes, poles=poles)
    pole_across = poles - np.sum(poles * axes, axis=1, keepdims=True) * axes
    bulge = np.cross(axes, normals)
    np.testing.assert_allclose(bulge, pole_across / np.linalg.norm(pole_across, axis=1, keepdims=True), atol=1e-12)
    assert not map_singularities(zero_map, axes, poles=poles).any()


def test_pole_object_map_on_the_ee_axis_is_singular_and_falls_back_to_the_default():
    a0, n0 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    zero_map = PoleObjectZeroPlaneMap(a0, n0)
    axes = np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]])
    poles = np.array([[0.0, 2.0, 0.0], [1.0, 2.0, 0.0]])
    assert list(map_singularities(zero_map, axes, poles=poles)) == [True, False]
    normals = zero_map(axes, poles=poles)
    np.testing.assert_allclose(normals[0], n0, atol=1e-15)  # y is on the equator: rule A
    np.testing.assert_allclose(np.cross(axes[1], normals[1]), [1.0, 0.0, 0.0], atol=1e-15)


def test_pole_object_map_without_poles_is_refused():
    zero_map = build_zero_plane_map("POLE_OBJECT", np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]))
    with pytest.raises(IKInputError, match="needs pole positions") as info:
        zero_map(np.array([[0.0, 1.0, 0.0]]))
    assert info.value.field == "poles"


@given(frames, st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=5))
@settings(max_examples=50, deadline=None)
def test_swivel_angles_invert_swivel_normals(frame, swivels):
    a0, n0 = frame
    rng = np.random.default_rng(len(swivels))
    axes = rng.normal(size=(len(swivels), 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    zero = DefaultZeroPlaneMap(a0, n0)(axes)
    turned = swivel_normals(axes, zero, np.array(swivels))
    # A turn about the axis keeps the normal's part along it: the map's own rounding (up to ~3e-14 for
    # an axis near the pole, where the meridian divides by a small length) and no more.
    assert np.all(np.abs(np.sum(turned * axes, axis=1)) <= np.abs(np.sum(zero * axes, axis=1)) + 1e-14)
    np.testing.assert_allclose(swivel_angles(axes, zero, turned), swivels, atol=1e-12)
    expected = [_rodrigues(a, psi) @ n for a, n, psi in zip(axes, zero, swivels)]
    np.testing.assert_allclose(turned, expected, atol=1e-14)


class _TiltedDefault:
    """A plug-in map: the default map turned 30° about each axis (and so still valid)."""

    def __init__(self, a0, n0):
        self.inner = DefaultZeroPlaneMap(a0, n0)

    def __call__(self, axes, **data):
        return swivel_normals(axes, self.inner(axes), np.radians(30.0))


def test_registered_map_is_built_by_name_with_the_preferred_frame():
    seen = {}

    def factory(a0, n0):
        seen["frame"] = (a0, n0)
        return _TiltedDefault(a0, n0)

    register_zero_plane_map("TEST_TILTED", factory)
    try:
        a0, n0 = np.array([0.0, 1.0, 0.0]), np.array([1.0, 0.0, 0.0])
        zero_map = build_zero_plane_map("TEST_TILTED", a0, n0)
        np.testing.assert_array_equal(seen["frame"][0], a0)
        np.testing.assert_array_equal(seen["frame"][1], n0)
        normals = zero_plane_normals(zero_map, a0[None])
        np.testing.assert_allclose(normals[0], _rodrigues(a0, np.radians(30.0)) @ n0, atol=1e-15)
        assert not map_singularities(zero_map, a0[None]).any()  # a map that does not say
    finally:
        ZERO_PLANE_MAPS.pop("TEST_TILTED")


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        (lambda axes, normals: 1.1 * normals, "non-unit normal at frame 0"),
        (lambda axes, normals: (normals + 0.1 * axes) / np.linalg.norm(normals + 0.1 * axes, axis=1, keepdims=True),
         "not perpendicular to the EE axis at frame 0"),
        (lambda axes, normals: np.where(np.arange(len(axes))[:, None] == 1, np.nan, normals), "non-finite normal at frame 1"),
        (lambda axes, normals: normals[:, :2], "returned shape"),
    ],
)
def test_bad_custom_maps_are_rejected_with_the_offending_frame(spoil, message):
    a0, n0 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    inner = DefaultZeroPlaneMap(a0, n0)

    def broken(axes, **data):
        return spoil(axes, inner(axes))

    axes = np.array([[0.0, 1.0, 0.0], [0.6, 0.8, 0.0]])
    with pytest.raises(IKInputError, match=message) as info:
        zero_plane_normals(broken, axes)
    assert info.value.field == "zero_plane_map"


def test_rounding_sized_errors_are_cleaned_not_rejected():
    axes = np.array([[0.0, 1.0, 0.0]])
    normals = zero_plane_normals(lambda axes, **data: np.array([[1e-9, 0.0, 1.0 + 1e-9]]), axes)
    assert abs(np.linalg.norm(normals[0]) - 1.0) < 1e-15 and abs(normals[0] @ axes[0]) < 1e-15
    np.testing.assert_allclose(normals[0], [0.0, 0.0, 1.0], atol=2e-9)


def test_unknown_maps_and_bad_frames_are_refused():
    a0, n0 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    with pytest.raises(IKInputError, match="unknown zero-plane map 'NOPE'"):
        build_zero_plane_map("NOPE", a0, n0)
    with pytest.raises(IKInputError, match="perpendicular to a0"):
        build_zero_plane_map("DEFAULT", a0, np.array([0.6, 0.0, 0.8]))
    with pytest.raises(IKInputError, match="unit vector"):
        build_zero_plane_map("DEFAULT", 2.0 * a0, n0)
    with pytest.raises(IKInputError, match="did not return a callable"):
        build_zero_plane_map(lambda a0, n0: 42, a0, n0)
    with pytest.raises(IKInputError, match="factory must be callable"):
        register_zero_plane_map("BROKEN", 42)
    assert "BROKEN" not in ZERO_PLANE_MAPS


def test_singular_directions_name_where_each_map_flips():
    from ik_solvers.core.zero_plane import map_singular_directions

    a0, n0 = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])
    axes = np.array([[0.0, 1.0, 0.0], [0.6, 0.0, 0.8]])
    poles = np.array([[0.0, 0.0, 3.0], [0.0, 0.0, 0.0]])  # the second pole sits on the start joint
    np.testing.assert_array_equal(map_singular_directions(DefaultZeroPlaneMap(a0, n0), axes, n0), [n0, n0])
    pole_map = PoleObjectZeroPlaneMap(a0, n0)
    np.testing.assert_array_equal(map_singular_directions(pole_map, axes, n0, poles=poles), [[0, 0, 1.0], n0])
    plain = lambda axes, **data: DefaultZeroPlaneMap(a0, n0)(axes)
    np.testing.assert_array_equal(map_singular_directions(plain, axes, n0), [n0, n0])

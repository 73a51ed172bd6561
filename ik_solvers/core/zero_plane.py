"""Zero-plane maps: the normal of the HI solver's zero plane for each EE-axis direction (SPEC §5).

A zero-plane map is built from the preferred pose's EE axis ``a0`` and solver-plane
normal ``n0`` (both unit, ``a0 ⟂ n0``, in the sphere's frame) and assigns to
every EE-axis direction ``a`` a unit normal ``n(a) ⟂ a``: the analogue of 3ds
Max's ``GetZeroPlaneMap(a0, n0)``. No continuous such field exists on the whole
sphere, so every map has singular points where the solver plane flips.

Registry
--------
``register_zero_plane_map(name, factory)`` makes a map available by name.
``factory(a0 (3,), n0 (3,))`` returns a callable ``map(axes (N, 3), **data) ->
normals (N, 3)``; ``data`` holds per-frame extras the map asks for (the
pole-object map takes ``poles``). A map may also carry the methods
``singular(axes, **data) -> bool (N,)`` saying where it is singular, and
``singular_directions(axes, **data) -> (N, 3)`` giving per frame the unit
direction whose two ends are its singular points (where the solver plane flips);
:func:`map_singularities` and :func:`map_singular_directions` stand in for maps
without them (none singular; the sphere's poles ``±n0``).
:func:`zero_plane_normals` calls a map and rejects (``IKInputError``) normals
that are not finite, not unit or not perpendicular to their axis.

Shipped maps: ``"DEFAULT"`` (the seed's rules A and B) and ``"POLE_OBJECT"``
(the plane through the EE axis and a pole target, as Blender's pole target and
Maya's pole vector).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np

from .array_ops import NUMPY_OPS, ArrayOps, Real
from .errors import IKInputError
from .vectors import Vec3, cross, cross3, dot, dot3, norm, norm3, stack3, unit, unit3, unit_stride, vec3

# Normals may miss unit length or perpendicularity by this much (relative) and
# are then cleaned up exactly; beyond it a map is wrong, not merely rounded.
NORMAL_TOLERANCE = 1e-6
# Below this length (of a unit vector's component) a direction is taken as
# undefined: at 1e-12 a normalised component has lost ~4 of its 16 digits.
DEGENERATE = 1e-12


class ZeroPlaneMap(Protocol):
    """``map(axes (N, 3), **data) -> normals (N, 3)``: unit normals ⟂ each unit axis."""

    def __call__(self, axes: np.ndarray, **data: np.ndarray) -> np.ndarray: ...


ZeroPlaneMapFactory = Callable[[np.ndarray, np.ndarray], ZeroPlaneMap]
"""``factory(a0 (3,), n0 (3,)) -> map``, called once per solve with the preferred pose's frame."""

ZERO_PLANE_MAPS: dict[str, ZeroPlaneMapFactory] = {}


def register_zero_plane_map(name: str, factory: ZeroPlaneMapFactory) -> None:
    """Make ``factory`` available as zero-plane map ``name`` (a later registration replaces an earlier one)."""
    if not isinstance(name, str) or not name:
        raise IKInputError("name", "a zero-plane map needs a non-empty string name")
    if not callable(factory):
        raise IKInputError("factory", f"zero-plane map {name!r}: the factory must be callable")
    ZERO_PLANE_MAPS[name] = factory


def check_sphere_frame(a0: np.ndarray, n0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(a0, n0)`` as float arrays after checking they are unit, finite and perpendicular."""
    a0 = np.asarray(a0, dtype=float)
    n0 = np.asarray(n0, dtype=float)
    for name, value in (("a0", a0), ("n0", n0)):
        if value.shape != (3,) or not np.all(np.isfinite(value)):
            raise IKInputError(name, f"expected a finite vector of shape (3,), got shape {value.shape}")
        if abs(np.linalg.norm(value) - 1.0) > NORMAL_TOLERANCE:
            raise IKInputError(name, f"must be a unit vector, has length {np.linalg.norm(value):.6g}")
    if abs(a0 @ n0) > NORMAL_TOLERANCE:
        raise IKInputError("n0", f"must be perpendicular to a0 (a0·n0 = {a0 @ n0:.3g})")
    return a0, n0


class DefaultZeroPlaneMap:
    """The seed's default map: rule A on the equator, rule B carried along meridians.

    With ``e = unit(a − (a·n0) n0)`` and latitude ``φ`` (``sin φ = a·n0``),
    ``n(a) = cos φ · n0 − sin φ · e``: the equator normal ``n0`` parallel-transported
    along the meridian great circle through ``a``. Singular at the poles ``±n0``,
    where ``e`` is undefined; there the map returns the limit along the zero
    meridian (``e = a0``), so the exact pole still gets a deterministic normal.
    """

    def __init__(self, a0: np.ndarray, n0: np.ndarray) -> None:
        self.a0, self.n0 = check_sphere_frame(a0, n0)
        self.frame = (vec3(self.a0), vec3(self.n0))

    def __call__(self, axes: np.ndarray, **data: np.ndarray) -> np.ndarray:
        return stack3(default_map_normal(NUMPY_OPS, _components(axes), *self.frame)[0])

    def singular(self, axes: np.ndarray, **data: np.ndarray) -> np.ndarray:
        """True ``(N,)`` at the poles, where the meridian (and so the normal) is undefined."""
        return default_map_normal(NUMPY_OPS, _components(axes), *self.frame)[1] <= DEGENERATE

    def singular_directions(self, axes: np.ndarray, **data: np.ndarray) -> np.ndarray:
        """The poles: ``n0`` for every frame ``(N, 3)``."""
        return np.broadcast_to(self.n0, np.shape(axes)).copy()


def _components(vectors: np.ndarray) -> Vec3:
    return (vectors[:, 0], vectors[:, 1], vectors[:, 2])  # arithmetic and sqrt only: views will do


def default_map_normal(xp: ArrayOps, axis: Vec3, a0: Vec3, n0: Vec3) -> tuple[Vec3, Real]:
    """:class:`DefaultZeroPlaneMap`'s normal for an EE axis (sphere coordinates, components), and ``cos φ``."""
    sin_lat = dot3(axis, n0)
    horizontal = (axis[0] - sin_lat * n0[0], axis[1] - sin_lat * n0[1], axis[2] - sin_lat * n0[2])
    cos_lat = norm3(xp, horizontal)
    at_pole = cos_lat <= DEGENERATE
    safe = xp.where(at_pole, 1.0, cos_lat)
    meridian = xp.choose(at_pole, a0, (horizontal[0] / safe, horizontal[1] / safe, horizontal[2] / safe))
    return (cos_lat * n0[0] - sin_lat * meridian[0], cos_lat * n0[1] - sin_lat * meridian[1],
            cos_lat * n0[2] - sin_lat * meridian[2]), cos_lat


def pole_map_normal(xp: ArrayOps, axis: Vec3, pole: Vec3, a0: Vec3, n0: Vec3) -> Vec3:
    """:class:`PoleObjectZeroPlaneMap`'s normal for an EE axis and a pole vector (sphere coordinates, components)."""
    normal = cross3(pole, axis)
    length = norm3(xp, normal)
    singular = length <= DEGENERATE * xp.maximum(norm3(xp, pole), 1e-300)
    safe = xp.where(singular, 1.0, length)
    fallback = default_map_normal(xp, axis, a0, n0)[0]
    return xp.choose(singular, fallback, (normal[0] / safe, normal[1] / safe, normal[2] / safe))


def pole_direction(xp: ArrayOps, pole: Vec3, n0: Vec3) -> Vec3:
    """:meth:`PoleObjectZeroPlaneMap.singular_directions` of one pole vector (components), before ``unit``."""
    length = norm3(xp, pole)
    far, safe = length > 0.0, xp.maximum(length, 1e-300)
    return xp.choose(far, (pole[0] / safe, pole[1] / safe, pole[2] / safe), n0)


class PoleObjectZeroPlaneMap:
    """The zero plane contains the EE axis and a pole target; the chain bulges toward the pole.

    ``data["poles"]`` ``(N, 3)``: vectors from the start joint to the pole target, in
    the sphere's frame. ``n(a) = unit(p × a)`` for the pole vector ``p``: then
    ``a × n`` — the side toward which a chain bending positively about ``n``
    bulges — points at the pole. Singular where the pole lies on the EE-axis line;
    there the default map's normal is used.
    """

    def __init__(self, a0: np.ndarray, n0: np.ndarray) -> None:
        self.fallback = DefaultZeroPlaneMap(a0, n0)

    @staticmethod
    def _poles(axes: np.ndarray, data: dict) -> np.ndarray:
        if "poles" not in data:
            raise IKInputError("poles", "the POLE_OBJECT zero-plane map needs pole positions for every frame")
        poles = np.asarray(data["poles"], dtype=float)
        poles = np.broadcast_to(poles, axes.shape) if poles.ndim == 1 else poles
        if poles.shape != axes.shape or not np.all(np.isfinite(poles)):
            raise IKInputError("poles", f"expected finite pole vectors of shape {axes.shape}, got {poles.shape}")
        return poles

    def __call__(self, axes: np.ndarray, **data: np.ndarray) -> np.ndarray:
        poles = self._poles(axes, data)
        return stack3(pole_map_normal(NUMPY_OPS, _components(axes), _components(poles), *self.fallback.frame))

    def singular(self, axes: np.ndarray, **data: np.ndarray) -> np.ndarray:
        """True ``(N,)`` where the pole lies on the EE-axis line (or on the start joint)."""
        poles = self._poles(axes, data)
        length = norm(cross(poles, axes))
        return length <= DEGENERATE * np.maximum(norm(poles), 1e-300)

    def singular_directions(self, axes: np.ndarray, **data: np.ndarray) -> np.ndarray:
        """The pole's direction from the start joint ``(N, 3)``: the plane flips where the EE axis lines up with it.

        Where the pole sits on the start joint the fallback map's poles stand in.
        """
        poles = self._poles(axes, data)
        return stack3(pole_direction(NUMPY_OPS, _components(poles), self.fallback.frame[1]))


register_zero_plane_map("DEFAULT", DefaultZeroPlaneMap)
register_zero_plane_map("POLE_OBJECT", PoleObjectZeroPlaneMap)


def build_zero_plane_map(name_or_factory: str | ZeroPlaneMapFactory, a0: np.ndarray, n0: np.ndarray) -> ZeroPlaneMap:
    """The map registered as ``name`` (or made by a factory given directly) for the frame ``(a0, n0)``."""
    a0, n0 = check_sphere_frame(a0, n0)
    if isinstance(name_or_factory, str):
        if name_or_factory not in ZERO_PLANE_MAPS:
            raise IKInputError(
                "zero_plane_map", f"unknown zero-plane map {name_or_factory!r}; registered: {sorted(ZERO_PLANE_MAPS)}"
            )
        factory = ZERO_PLANE_MAPS[name_or_factory]
    elif callable(name_or_factory):
        factory = name_or_factory
    else:
        raise IKInputError("zero_plane_map", "expected a registered map name or a factory")
    zero_map = factory(a0.copy(), n0.copy())
    if not callable(zero_map):
        raise IKInputError("zero_plane_map", f"the factory for {name_or_factory!r} did not return a callable map")
    return zero_map


def zero_plane_normals(zero_map: ZeroPlaneMap, axes: np.ndarray, **data: np.ndarray) -> np.ndarray:
    """Validated normals ``(N, 3)`` of ``zero_map`` for unit ``axes (N, 3)``.

    Normals within ``NORMAL_TOLERANCE`` of unit length and of perpendicularity
    are cleaned to exactly that (projected off the axis, renormalised); anything
    further off, non-finite or mis-shaped raises ``IKInputError`` naming the frame.
    """
    return stack3(zero_plane_normal_components(zero_map, _components(np.asarray(axes, dtype=float)), **data))


def zero_plane_normal_components(zero_map: ZeroPlaneMap, axes: Vec3, **data: np.ndarray) -> Vec3:
    """:func:`zero_plane_normals` in components (``(N,)`` arrays): the built-in maps' normals computed
    in components, any other map's from its ``(N, 3)`` call."""
    n_frames = axes[0].shape[0]
    name = getattr(zero_map, "__name__", type(zero_map).__name__)
    if type(zero_map) is DefaultZeroPlaneMap:
        normal = default_map_normal(NUMPY_OPS, axes, *zero_map.frame)[0]
    elif type(zero_map) is PoleObjectZeroPlaneMap:
        poles = zero_map._poles(np.broadcast_to(0.0, (n_frames, 3)), data)
        normal = pole_map_normal(NUMPY_OPS, axes, _components(poles), *zero_map.fallback.frame)
    else:
        normals = np.asarray(zero_map(stack3(axes), **data), dtype=float)
        if normals.shape != (n_frames, 3):
            raise IKInputError("zero_plane_map", f"map {name} returned shape {normals.shape}, expected {(n_frames, 3)}")
        normal = _components(normals)
    finite = np.isfinite(normal[0]) & np.isfinite(normal[1]) & np.isfinite(normal[2])
    if not finite.all():
        raise IKInputError("zero_plane_map", f"map {name} returned a non-finite normal at frame {int(np.argmin(finite))}")
    length, along = normal_defects(NUMPY_OPS, normal, axes)
    # One test for the usual case (every normal good); the frame at fault is looked for only if not.
    if ((np.abs(length - 1.0) <= NORMAL_TOLERANCE) & (np.abs(along) <= NORMAL_TOLERANCE)).all():
        return cleaned_normal(NUMPY_OPS, normal, axes, along)
    bad = np.flatnonzero(np.abs(length - 1.0) > NORMAL_TOLERANCE)
    if bad.size:
        k = int(bad[0])
        raise IKInputError("zero_plane_map", f"map {name} returned a non-unit normal at frame {k} (|n| = {length[k]:.6g})")
    bad = np.flatnonzero(np.abs(along) > NORMAL_TOLERANCE)
    if bad.size:
        k = int(bad[0])
        raise IKInputError(
            "zero_plane_map", f"map {name} returned a normal not perpendicular to the EE axis at frame {k} (n·a = {along[k]:.3g})"
        )
    return cleaned_normal(NUMPY_OPS, normal, axes, along)


def normal_defects(xp: ArrayOps, normal: Vec3, axis: Vec3) -> tuple[Real, Real]:
    """A map normal's length and its part along the axis (components): both checked against ``NORMAL_TOLERANCE``."""
    return norm3(xp, normal), dot3(normal, axis)


def cleaned_normal(xp: ArrayOps, normal: Vec3, axis: Vec3, along: Real) -> Vec3:
    """A checked map normal made exactly unit and ⟂ the axis (``along``: :func:`normal_defects`'s)."""
    return unit3(xp, (normal[0] - along * axis[0], normal[1] - along * axis[1], normal[2] - along * axis[2]))


def map_singularities(zero_map: ZeroPlaneMap, axes: np.ndarray, **data: np.ndarray) -> np.ndarray:
    """True ``(N,)`` where ``zero_map`` says it is singular (False everywhere for maps that do not say)."""
    singular = getattr(zero_map, "singular", None)
    if singular is None:
        return np.zeros(len(axes), dtype=bool)
    return np.asarray(singular(np.asarray(axes, dtype=float), **data), dtype=bool)


def map_singular_directions(zero_map: ZeroPlaneMap, axes: np.ndarray, n0: np.ndarray, **data: np.ndarray) -> np.ndarray:
    """Unit directions ``(N, 3)`` whose ends are ``zero_map``'s singular points per frame.

    Maps that do not say get the sphere's poles ``±n0`` (where the default map flips).
    """
    axes = np.asarray(axes, dtype=float)
    directions = getattr(zero_map, "singular_directions", None)
    if directions is None:
        return np.broadcast_to(np.asarray(n0, dtype=float), axes.shape).copy()
    directions = np.asarray(directions(axes, **data), dtype=float)
    if directions.shape != axes.shape or not np.all(np.isfinite(directions)):
        raise IKInputError("zero_plane_map", f"singular_directions returned shape {directions.shape}, expected {axes.shape}")
    return unit(directions)


def swivel_normals(axes: np.ndarray, zero_normals: np.ndarray, swivel: np.ndarray) -> np.ndarray:
    """Solver-plane normals ``(N, 3)``: the zero-plane normals turned by ``swivel (N,)`` radians about ``axes``.

    For ``n ⟂ a`` Rodrigues' formula reduces to ``cos ψ · n + sin ψ · (a × n)``.
    """
    swivel = unit_stride(swivel)  # strided sin/cos round differently (vectors.unit_stride)
    return stack3(swivel_normal(_components(axes), _components(zero_normals), np.cos(swivel), np.sin(swivel)))


def swivel_normal(axis: Vec3, zero_normal: Vec3, cos: Real, sin: Real) -> Vec3:
    """:func:`swivel_normals` in components, from the swivel's cosine and sine: ``cos ψ · n + sin ψ · (a × n)``."""
    turned = cross3(axis, zero_normal)
    return (cos * zero_normal[0] + sin * turned[0], cos * zero_normal[1] + sin * turned[1],
            cos * zero_normal[2] + sin * turned[2])


def swivel_angles(axes: np.ndarray, zero_normals: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Swivel ``(N,)`` in ``(−π, π]`` turning ``zero_normals`` into ``normals`` about ``axes`` (inverse of :func:`swivel_normals`).

    ``normals`` need not be exactly ⟂ ``axes``: only their part ⟂ the axis counts.
    """
    sin = dot(axes, cross(zero_normals, normals))
    cos = dot(zero_normals, normals)
    return np.arctan2(sin, cos)

"""Per-frame solver planes: EE axis, zero-plane normal, swivel, and the distance to the map's singular points (SPEC §5)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..array_ops import NUMPY_OPS, ROW_OPS, ArrayOps, Real
from ..errors import IKInputError
from ..vectors import (
    Rows3,
    Vec3,
    cross3,
    dot3,
    matrix_rows,
    matvec3,
    norm,
    norm3,
    rows3,
    stack3,
    tmatvec3,
    unit_stride,
    vec3,
)
from ..zero_plane import (
    NORMAL_TOLERANCE,
    ZERO_PLANE_MAPS,
    DefaultZeroPlaneMap,
    PoleObjectZeroPlaneMap,
    ZeroPlaneMap,
    ZeroPlaneMapFactory,
    build_zero_plane_map,
    cleaned_normal,
    default_map_normal,
    map_singular_directions,
    map_singularities,
    normal_defects,
    pole_map_normal,
    swivel_normal,
    zero_plane_normal_components,
)
from .parent_space import check_rotations
from .sphere import PreferredPose

DEFAULT_WARNING_ANGLE = np.radians(10.0)
"""Pole-distance warning threshold of SPEC §5 (radians)."""


def per_frame(value: np.ndarray | float, n_frames: int, field: str) -> np.ndarray:
    value = np.asarray(value, dtype=float)
    if value.ndim > 1 or value.size not in (1, n_frames):
        raise IKInputError(field, f"expected a number or shape ({n_frames},), got {value.shape}")
    if not np.all(np.isfinite(value)):
        raise IKInputError(field, "must be finite")
    if value.size == n_frames:  # one value per frame already: no broadcast (~5 us on one frame)
        return value.reshape(n_frames)
    return np.broadcast_to(value.reshape(-1), (n_frames,))


# ------------------------------------------------------------ the sphere
@dataclass(frozen=True, eq=False)
class SolverPlanes:
    """EE axes and normals of a batch, in the solving frame and in sphere coordinates.

    ``singular`` (the map's own singularity flags) and ``to_solving`` (the sphere rotations per
    frame) are computed on first use: a live solve reads neither, and they are the same computation
    whenever it runs.
    """

    r: np.ndarray
    sphere_rotations: np.ndarray | None  # checked (N, 3, 3), or None: the chain's root rotation
    root_rotation: np.ndarray
    axes: np.ndarray
    axes_sphere: np.ndarray
    zero_normals_sphere: np.ndarray
    normals: np.ndarray
    swivel: np.ndarray
    singular_directions: np.ndarray
    zero_map: ZeroPlaneMap
    map_data: dict

    @cached_property
    def to_solving(self) -> np.ndarray:
        """Sphere → solving frame rotations ``(N, 3, 3)``."""
        if self.sphere_rotations is not None:
            return self.sphere_rotations
        return np.broadcast_to(self.root_rotation, (self.r.shape[0], 3, 3))

    @cached_property
    def singular(self) -> np.ndarray:
        """True ``(N,)`` where the zero-plane map says it is singular."""
        return map_singularities(self.zero_map, self.axes_sphere, **self.map_data)


def solver_planes(
    pref: PreferredPose,
    targets: np.ndarray,
    swivel: np.ndarray | float,
    zero_plane_map: str | ZeroPlaneMapFactory,
    poles: np.ndarray | None,
    map_data: dict | None,
    sphere_rotations: np.ndarray | None,
) -> SolverPlanes:
    n_frames = targets.shape[0]
    swivel = per_frame(swivel, n_frames, "swivel")
    offsets = targets - pref.start
    r = norm(offsets)
    root = pref.chain.root_rotation
    to_solving = None
    rotation: Rows3 | None = None  # sphere → solving frame; None: the identity (exact: the products skipped)
    if sphere_rotations is None:
        if not pref.root_is_identity:
            rotation = rows3(root)
    else:
        to_solving = check_rotations(sphere_rotations, n_frames)
        rotation = matrix_rows(to_solving)
    data = dict(map_data or {})
    if poles is not None:
        poles = np.asarray(poles, dtype=float)
        poles = np.broadcast_to(poles, targets.shape) if poles.ndim == 1 else poles
        if poles.shape != targets.shape or not np.all(np.isfinite(poles)):
            raise IKInputError("poles", f"expected finite pole positions of shape {targets.shape}")
        pole_offsets = _components(poles - pref.start)
        data["poles"] = stack3(pole_offsets if rotation is None else tmatvec3(rotation, pole_offsets))
    zero_map = _zero_plane_map(pref, zero_plane_map)
    swivel = unit_stride(swivel)  # strided sin/cos round differently (vectors.unit_stride)
    row = None
    if n_frames == 1 and type(zero_map) in STATELESS_MAPS:  # live mode's full update: the same steps on floats
        row = row_plane(ROW_OPS, pref, vec3(offsets[0]), float(r[0]), None if rotation is None else rows3(
            np.array(rotation).reshape(3, 3)), vec3(data["poles"][0]) if type(zero_map) is PoleObjectZeroPlaneMap else None,
            float(swivel[0]))
    if row is not None:
        axes, axes_sphere, zero_normals, normals = (np.array([v]) for v in row)
    else:
        axis, axis_sphere = ee_axis(NUMPY_OPS, _components(offsets), r, pref.centre_radius, vec3(pref.sphere.a0), rotation)
        axes, axes_sphere = stack3(axis), stack3(axis_sphere)
        zero_normal = zero_plane_normal_components(zero_map, axis_sphere, **data)
        normal = swivel_normal(axis_sphere, zero_normal, np.cos(swivel), np.sin(swivel))
        zero_normals, normals = stack3(zero_normal), stack3(normal if rotation is None else matvec3(rotation, normal))
    return SolverPlanes(
        r=r,
        sphere_rotations=to_solving,
        root_rotation=root,
        axes=axes,
        axes_sphere=axes_sphere,
        zero_normals_sphere=zero_normals,
        normals=normals,
        swivel=swivel,
        singular_directions=_singular_directions(pref, zero_map, axes_sphere, data),
        zero_map=zero_map,
        map_data=data,
    )


STATELESS_MAPS = (DefaultZeroPlaneMap, PoleObjectZeroPlaneMap)
"""Built-in map types that keep nothing between calls: one per sphere frame serves every solve."""


def _zero_plane_map(pref: PreferredPose, name_or_factory: str | ZeroPlaneMapFactory) -> ZeroPlaneMap:
    """The map for ``pref``'s sphere frame; a built-in one is built (and checked) once per ``pref``."""
    factory = ZERO_PLANE_MAPS.get(name_or_factory) if isinstance(name_or_factory, str) else None
    if factory not in STATELESS_MAPS:
        return build_zero_plane_map(name_or_factory, pref.sphere.a0, pref.sphere.n0)
    zero_map = pref.zero_plane_maps.get(factory)
    if zero_map is None:
        zero_map = pref.zero_plane_maps[factory] = build_zero_plane_map(name_or_factory, pref.sphere.a0, pref.sphere.n0)
    return zero_map


def _singular_directions(
    pref: PreferredPose, zero_map: ZeroPlaneMap, axes_sphere: np.ndarray, data: dict
) -> np.ndarray:
    """``map_singular_directions`` for the batch; the default map's are its poles ``±n0`` whatever the
    axes (``unit(n0)`` in every row, elementwise), so that row is computed once per PreferredPose."""
    if type(zero_map) is not DefaultZeroPlaneMap:
        return map_singular_directions(zero_map, axes_sphere, pref.sphere.n0, **data)
    row = pref.zero_plane_maps.get("default singular direction")
    if row is None:
        row = pref.zero_plane_maps["default singular direction"] = map_singular_directions(
            zero_map, axes_sphere[:1], pref.sphere.n0)
    return np.broadcast_to(row, axes_sphere.shape).copy()


def pole_angles(axes_sphere: np.ndarray, poles: np.ndarray) -> np.ndarray:
    """Angle ``(N,)`` (radians, ``[0, π/2]``) between EE axes and the nearer end of ``poles`` (``(3,)`` or ``(N, 3)``)."""
    poles = np.broadcast_to(poles, np.shape(axes_sphere))
    return pole_angle(NUMPY_OPS, _components(axes_sphere), _components(poles))


def pole_angle(xp: ArrayOps, axis: Vec3, pole: Vec3) -> Real:
    """Angle (radians, ``[0, π/2]``) between an EE axis and the nearer end of a unit direction (components)."""
    return xp.atan2(norm3(xp, cross3(axis, pole)), abs(dot3(axis, pole)))


def ee_axis(xp: ArrayOps, offset: Vec3, r: Real, centre_radius: float, a0: Vec3, rotation: Rows3 | None) -> tuple[Vec3, Vec3]:
    """The EE axis (start joint → target, unit) in the solving frame and in the sphere's coordinates.

    ``offset``: target − start joint, ``r`` its length; ``rotation``: sphere → solving frame (rows),
    None for the identity. A target within ``centre_radius`` of the start joint has no axis of its
    own: the preferred one ``a0`` stands in (``direction_unique`` is False there).
    """
    at_centre = r <= centre_radius
    safe = xp.where(at_centre, 1.0, r)
    direct = (offset[0] / safe, offset[1] / safe, offset[2] / safe)
    sphere = direct if rotation is None else tmatvec3(rotation, direct)
    if not xp.any(at_centre):  # the usual case: the stand-in is not needed (the same values as selecting none)
        return direct, sphere
    preferred = a0 if rotation is None else matvec3(rotation, a0)
    chosen = xp.choose(at_centre, (*preferred, *a0), (*direct, *sphere))
    return chosen[:3], chosen[3:]


def row_plane(xp: ArrayOps, pref: PreferredPose, offset: Vec3, r: float, rotation: Rows3 | None, pole: Vec3 | None,
              swivel: float) -> tuple[Vec3, Vec3, Vec3, Vec3] | None:
    """One target's EE axis (solving frame, sphere), zero-plane normal (sphere) and solver normal (solving
    frame) on floats, a built-in map's (the pole map's where ``pole``, in sphere coordinates, is given):
    :func:`solver_planes`'s steps for one row. None where the map's normal fails its check (then the
    array path decides: it raises)."""
    a0, n0 = pref.sphere_floats
    axis, axis_sphere = ee_axis(xp, offset, r, pref.centre_radius, a0, rotation)
    if pole is None:
        normal = default_map_normal(xp, axis_sphere, a0, n0)[0]
    else:
        normal = pole_map_normal(xp, axis_sphere, pole, a0, n0)
    length, along = normal_defects(xp, normal, axis_sphere)
    if not (abs(length - 1.0) <= NORMAL_TOLERANCE and abs(along) <= NORMAL_TOLERANCE):  # NaN fails too
        return None
    zero_normal = cleaned_normal(xp, normal, axis_sphere, along)
    normal = swivel_normal(axis_sphere, zero_normal, xp.cos(swivel), xp.sin(swivel))
    return axis, axis_sphere, zero_normal, normal if rotation is None else matvec3(rotation, normal)


def _components(vectors: np.ndarray) -> Vec3:
    """Columns of ``(N, 3)`` vectors as views: the component math reads them in arithmetic only."""
    return (vectors[..., 0], vectors[..., 1], vectors[..., 2])

"""What the comparison scripts and benchmarks measure on a solved pose, written once, and how their
tables get into the docs.

Used by ``compare_native.py``, the Rigify evidence (``_rigify_runs.py``, ``compare_rigify.py``),
``demo.py`` and ``bench_bake.py``. Every measure here takes world joint positions as Blender
evaluates them (``evaluate_chain``, or the caller's own reading), never the add-on's FK:

- ``tip_errors``: the tip-to-target distance per frame;
- ``lower_bounds`` / ``rest_lower_bounds``: the geometric lower bound on that distance (the core's
  ``error_lower_bounds``, SPEC §3.3, on the chain as the add-on reads it / as its world rest joints
  give it), so an out-of-reach frame is judged by its excess over the bound;
- ``joint_normals`` (the bend normal of each inner joint) and ``plane_normals`` (one bend plane
  through the root and the tip, the HI solver's definition), NaN where a pose has no plane;
- ``normal_turns`` and ``flip_frames``: how far a normal turned since the last frame of the same
  path that had one, and the frames where that exceeds ``FLIP_TURN_DEGREES``; ``warned_flips``;
- ``bend_angles`` and ``backward_joints``: each inner joint's signed bend about its rest bend axis,
  and the joints bent to the other side;
- doc tables: ``check_markers`` (before a long run) and ``paste_between_markers`` replace what
  stands between two marker lines of a Markdown file; ``format_number`` is the tables' number format.

Import ``bpy`` the way the calling script needs before calling the Blender readers here.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from _cli import UsageError

from ik_solvers.core.hi.flips import DEFAULT_TURN_THRESHOLD

if TYPE_CHECKING:
    import bpy

FLIP_TURN_DEGREES = round(float(np.degrees(DEFAULT_TURN_THRESHOLD)), 9)  # 30.0, not 29.999999999999996
"""A bend-plane turn above this between consecutive frames of a path is a flip (the HI solver's own threshold)."""
MISSED_MM = 1.0
"""A reachable frame whose tip ends farther than this from the target is a miss."""
BACKWARD_DEGREES = 1.0
"""A joint bent this far (or more) to the opposite side of its rest bend counts as backward: well
above float32 noise of Blender's evaluation (~1e-4°), well below any bend an animator would see."""
JOINT_PLANELESS_SINE = float(np.sin(np.radians(1.0)))
"""A joint bent less than 1° (sine of the bend) has no bend plane of its own: its normal is NaN."""
PLANELESS_SPREAD = 1e-3
"""A pose whose joints all lie within this fraction of the reach from the root → tip axis (a straight
or fully folded chain) has no bend plane worth comparing: its normal is float32 noise."""


# --------------------------------------------------------------------------- Blender's evaluation
def evaluate_chain(rig: bpy.types.Object, bones: Sequence[str], target: bpy.types.Object,
                   frames: Iterable[int]) -> tuple[np.ndarray, np.ndarray, float]:
    """Blender's evaluation at each of ``frames`` (1-based, in the order given): world joints
    ``(F, len(bones) + 1, 3)`` (bone heads, then the tip bone's tail), the target's world location
    ``(F, 3)``, and the seconds the ``frame_set`` calls took."""
    import bpy

    scene = bpy.context.scene
    assert scene is not None, "a script's Blender session always has a scene"
    frames = [int(frame) for frame in frames]
    joints = np.empty((len(frames), len(bones) + 1, 3))
    targets = np.empty((len(frames), 3))
    assert rig.pose is not None, f"{rig.name} is not an armature"
    chain = [rig.pose.bones[b] for b in bones]
    seconds = 0.0
    for row, frame in enumerate(frames):
        started = time.perf_counter()
        scene.frame_set(frame)
        seconds += time.perf_counter() - started
        world = rig.matrix_world
        joints[row, :-1] = [(world @ b.head)[:] for b in chain]
        joints[row, -1] = (world @ chain[-1].tail)[:]
        targets[row] = target.matrix_world.translation[:]
    return joints, targets, seconds


def tip_errors(joints: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Tip-to-target distances ``(F,)`` (scene units) of joints ``(F, n + 1, 3)`` and targets ``(F, 3)``."""
    return np.linalg.norm(joints[:, -1] - targets, axis=1)


def lower_bounds(rig: bpy.types.Object, tip: str, length: int, targets: np.ndarray) -> np.ndarray:
    """The geometric lower bound ``(F,)`` on the tip error for world ``targets (F, 3)``: the core's
    ``error_lower_bounds`` on the chain of ``length`` bones ending at ``tip`` as the add-on reads it,
    in the chain's root space, scaled back to world units."""
    from ik_solvers.blender.rig import read_chain
    from ik_solvers.blender.root_space import root_matrices_world, world_to_root
    from ik_solvers.core import error_lower_bounds

    read = read_chain(rig, tip, length)
    root = root_matrices_world(rig, read)
    scale = float(np.cbrt(np.linalg.det(root[:3, :3])))
    return error_lower_bounds(read.chain, world_to_root(targets, root[None])) * scale


def rest_lower_bounds(rest_joints: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The same bound ``(F,)`` for a chain given by its world rest joints ``(n + 1, 3)`` (its segment
    lengths and root) and world ``targets (F, 3)``: the core's ``error_lower_bounds`` in world units."""
    from ik_solvers.core import Chain, error_lower_bounds

    lengths = np.linalg.norm(np.diff(rest_joints, axis=0), axis=1)
    return error_lower_bounds(Chain.straight(lengths), np.asarray(targets) - rest_joints[0])


# --------------------------------------------------------------------------- bend planes and flips
def joint_normals(joints: np.ndarray, min_sine: float = JOINT_PLANELESS_SINE) -> np.ndarray:
    """Bend normals ``(F, n - 1, 3)`` of each inner joint of joints ``(F, n + 1, 3)``: unit ``u × w``
    of the two segments at it; NaN for a joint whose bend has a sine below ``min_sine``."""
    segments = np.diff(joints, axis=1)
    u, w = segments[:, :-1], segments[:, 1:]
    normal = np.cross(u, w)
    length = np.linalg.norm(normal, axis=-1)
    sine = length / np.maximum(np.linalg.norm(u, axis=-1) * np.linalg.norm(w, axis=-1), 1e-300)
    unit = normal / np.maximum(length, 1e-300)[..., None]
    return np.where((sine < min_sine)[..., None], np.nan, unit)


def plane_normals(joints: np.ndarray, planeless: float = PLANELESS_SPREAD) -> np.ndarray:
    """Bend-plane normals ``(F, 3)`` of poses ``(F, n + 1, 3)`` (the core's ``pose_plane_normals``: the
    plane through the root and the tip nearest the other joints), NaN where every joint lies within
    ``planeless`` · reach of the root → tip axis or the tip that close to the root."""
    from ik_solvers.core import pose_plane_normals

    normals = pose_plane_normals(joints)
    offsets = joints - joints[:, :1]
    reach = np.linalg.norm(np.diff(joints, axis=1), axis=-1).sum(axis=1)
    axis_length = np.linalg.norm(offsets[:, -1], axis=-1)
    axes = offsets[:, -1] / np.maximum(axis_length, 1e-300)[:, None]
    inner = offsets[:, 1:-1]
    across = inner - np.einsum("nji,ni->nj", inner, axes)[..., None] * axes[:, None]
    spread = np.linalg.norm(across, axis=-1).max(axis=1)
    flat = (spread < planeless * reach) | (axis_length < planeless * reach)
    return np.where(flat[:, None], np.nan, normals)


def normal_turns(normals: np.ndarray, path_length: int | None = None) -> np.ndarray:
    """Degrees ``(F,)`` each frame's normal turned since the last frame of the same path that had one.

    ``normals`` is ``(F, 3)`` (one plane per pose) or ``(F, k, 3)`` (one per joint: each joint is
    compared with its own last normal and the frame gets the largest turn); NaN rows have no normal.
    Paths are consecutive runs of ``path_length`` frames (default: all frames are one path). A frame
    without a normal, or with none before it in its path, turns 0°.
    """
    normals = np.asarray(normals, dtype=float)
    if normals.ndim == 2:
        normals = normals[:, None]
    count = len(normals)
    path_length = path_length or count
    turns = np.zeros(count)
    for start in range(0, count, path_length):
        previous = np.full(normals.shape[1:], np.nan)
        for frame in range(start, min(start + path_length, count)):
            normal = normals[frame]
            defined = np.all(np.isfinite(normal), axis=1)
            both = defined & np.all(np.isfinite(previous), axis=1)
            if both.any():
                cosines = np.einsum("ki,ki->k", previous[both], normal[both])
                turns[frame] = np.degrees(np.arccos(np.clip(cosines, -1.0, 1.0))).max()
            previous = np.where(defined[:, None], normal, previous)
    return turns


def flip_frames(turns: np.ndarray, threshold: float = FLIP_TURN_DEGREES) -> list[int]:
    """0-based frames whose turn (``normal_turns``) exceeds ``threshold`` degrees."""
    return [int(frame) for frame in np.flatnonzero(np.asarray(turns) > threshold)]


def warned_flips(flips: Iterable[int], warnings: np.ndarray) -> list[bool]:
    """Per 0-based flip frame: whether the warning ``(F,)`` was on at that frame or the one before."""
    warnings = np.asarray(warnings, bool)
    return [bool(warnings[k] or (k > 0 and warnings[k - 1])) for k in flips]


# --------------------------------------------------------------------------- backward joints
def bend_angles(joints: np.ndarray, rotations: np.ndarray, rest_bend_axes: np.ndarray) -> np.ndarray:
    """Signed bend ``(F, n - 1)`` of each inner joint about its rest bend axis, degrees.

    Joint ``k`` bends from ``u = p_k − p_{k−1}`` to ``w = p_{k+1} − p_k``; both are taken into the
    parent bone's (bone ``k−1``) frame, ``rotations (F, n, 3, 3)`` (world, orthonormal), and the angle
    is ``atan2((u × w)·h, u·w)`` with ``h = rest_bend_axes[k − 1]`` (``(n − 1, 3)``, in that bone's
    rest frame). Positive: the rest side (a rest pose gives its own rest bends); NaN for a joint whose
    axis is NaN (no preferred side). Measured in the parent's frame, a limb that turns as a whole is
    not miscounted.
    """
    u = joints[:, 1:-1] - joints[:, :-2]
    w = joints[:, 2:] - joints[:, 1:-1]
    parent = rotations[:, :-1]
    u_local = np.einsum("fkji,fkj->fki", parent, u)
    w_local = np.einsum("fkji,fkj->fki", parent, w)
    sine = np.einsum("fki,ki->fk", np.cross(u_local, w_local), rest_bend_axes)
    cosine = np.einsum("fki,fki->fk", u_local, w_local)
    return np.degrees(np.arctan2(sine, cosine))


def backward_joints(angles: np.ndarray, threshold: float = BACKWARD_DEGREES) -> np.ndarray:
    """``(F, n - 1)`` bool: joints bent to the opposite side of their rest bend by more than ``threshold``°."""
    return np.nan_to_num(angles, nan=0.0) < -threshold


# --------------------------------------------------------------------------- doc tables
def markers(name: str) -> tuple[str, str]:
    """The pair of marker lines ``<!-- NAME:start -->`` … ``<!-- NAME:end -->`` around a pasted table."""
    return f"<!-- {name}:start -->", f"<!-- {name}:end -->"


def check_markers(doc: Path, start: str, end: str) -> None:
    """Raise :class:`UsageError` unless ``doc`` is a file with exactly one ``start`` marker and one
    ``end`` marker after it (checked before a long run, so that it never ends in a traceback)."""
    if not doc.is_file():
        raise UsageError(f"--doc {doc} is not a file")
    text = doc.read_text()
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise UsageError(f"{doc} needs exactly one {start} ... {end} block")


def paste_between_markers(doc: Path, start: str, end: str, table: str) -> None:
    """Replace what stands between the ``start`` and ``end`` markers of ``doc`` with ``table``
    (``start``, a newline, ``table``, ``end``; the rest of the file is kept as it is)."""
    check_markers(doc, start, end)
    head, rest = doc.read_text().split(start)
    doc.write_text(f"{head}{start}\n{table}{end}{rest.split(end)[1]}")


def format_number(value: float | str | None, digits: int = 3) -> str:
    """A table cell: ``digits`` significant digits, whole numbers from 1000 up, '–' for None."""
    if value is None:
        return "–"
    if isinstance(value, str):
        return value
    return f"{value:.{digits}g}" if abs(value) < 1000 else f"{value:.0f}"

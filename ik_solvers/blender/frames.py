"""A bake's per-frame records: what was sampled, what was solved, and their own serialisation
(``scripts/ik_batch.py`` solves chunks in other processes and gathers them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..core import SolveResult, Status
from .sampling import FrameInputs

if TYPE_CHECKING:
    from ..core.result import PlaneDiagnostics


@dataclass(frozen=True, eq=False)
class SampledFrames:
    """One chain's solve inputs at some frames, as :meth:`BakeJob.sample` read them.

    Attributes
    ----------
    frames : ndarray of int, shape (M,)
        The sampled frames, in the order asked for.
    inputs : FrameInputs
        Target, root frame, pole, … per frame (world space, batch axis ``M``).
    geometry : ndarray of bytes (dtype object), shape (M,)
        Per frame, the key of the chain's shape (its bones' pose location and scale) there: frames
        with one key are solved with one rig.
    """

    frames: np.ndarray
    inputs: FrameInputs
    geometry: np.ndarray


@dataclass(frozen=True, eq=False)
class HIFrames:
    """What flip detection needs of an HI solve, per frame (batch axis ``M`` first).

    Attributes
    ----------
    solver_normals : ndarray, shape (M, 3)
        Solver-plane normals in the solving frame.
    ee_axes_sphere : ndarray, shape (M, 3)
        Unit EE axes in the swivel sphere's coordinates.
    pole_angles : ndarray, shape (M,)
        Angle from the EE axis to the nearer pole (radians).
    pole_warnings : ndarray of bool, shape (M,)
        The HI solve's warning that the pole angle is below its warning angle.
    poles : ndarray, shape (M, 3)
        The sphere's pole ``n0`` each frame was solved with (one per chain shape).
    singular_directions : ndarray, shape (M, 3)
        Where the zero-plane map in use is singular (±n0 for the default map, the
        pole target's line for the pole-object map): what a pole crossing crosses.
    against_bend : ndarray of bool, shape (M, n)
        Joints bent against their preferred sense (``HISolveResult.against_bend``).
    """

    solver_normals: np.ndarray
    ee_axes_sphere: np.ndarray
    pole_angles: np.ndarray
    pole_warnings: np.ndarray
    poles: np.ndarray
    singular_directions: np.ndarray
    against_bend: np.ndarray

    @classmethod
    def of(cls, h: PlaneDiagnostics) -> HIFrames:
        """The records of an HI solve's diagnostics (a chain's ``result.hi``, a body limb's ``GoalResult.hi``)."""
        assert h.singular_directions is not None  # solve_hi always sets it
        return cls(solver_normals=h.solver_normals, ee_axes_sphere=h.ee_axes_sphere, pole_angles=h.pole_angles,
                   pole_warnings=h.pole_warnings, poles=np.broadcast_to(h.sphere.n0, h.solver_normals.shape).copy(),
                   singular_directions=h.singular_directions, against_bend=np.asarray(h.against_bend))

    def select(self, rows: np.ndarray) -> HIFrames:
        """The records at ``rows``."""
        return HIFrames(**{f.name: getattr(self, f.name)[rows] for f in fields(HIFrames)})


@dataclass(frozen=True, eq=False)
class SolvedFrames:
    """One chain's solve at some frames, as :meth:`BakeJob.solve` gives it and
    :meth:`BakeJob.write_solved` keys it (possibly solved in another process and gathered with
    :meth:`concatenate`).

    Attributes
    ----------
    frames : ndarray of int, shape (M,)
        The solved frames.
    q : ndarray, shape (M, n_dof)
        Joint variables per frame (radians; ball joints as rotation vectors).
    status : ndarray of Status (dtype object), shape (M,)
    error, bound : ndarray, shape (M,)
        Tip error and its lower bound per frame (scene units).
    hi : HIFrames or None
        The HI extras (None for other methods).
    seconds : float
        Time the solve took (the report adds the writing to it).
    orientation_error : ndarray, shape (M,), or None
        Angle (radians) between the tip bone's and the target's orientation, for a chain with Rotation.
    """

    frames: np.ndarray
    q: np.ndarray
    status: np.ndarray
    error: np.ndarray
    bound: np.ndarray
    hi: HIFrames | None
    seconds: float
    orientation_error: np.ndarray | None = None

    @classmethod
    def concatenate(cls, parts: list[SolvedFrames]) -> SolvedFrames:
        """One solve from consecutive parts (all of one chain and method), in the order given."""

        def joined(values: Iterable[np.ndarray]) -> np.ndarray:
            return np.concatenate(list(values))

        hi = None
        if parts[0].hi is not None:
            hi = HIFrames(**{f.name: joined(getattr(p.hi, f.name) for p in parts) for f in fields(HIFrames)})
        return cls(
            frames=joined(p.frames for p in parts),
            q=joined(p.q for p in parts),
            status=joined(p.status for p in parts),
            error=joined(p.error for p in parts),
            bound=joined(p.bound for p in parts),
            hi=hi,
            seconds=sum(p.seconds for p in parts),
            orientation_error=None if parts[0].orientation_error is None
            else joined(_orientation_errors(p) for p in parts),
        )

    @classmethod
    def from_result(cls, frames: np.ndarray, result: SolveResult, error: np.ndarray, bound: np.ndarray,
                    seconds: float) -> SolvedFrames:
        """The records of one core solve of ``frames`` (errors already in scene units)."""
        hi = None if result.hi is None else HIFrames.of(result.hi)
        return cls(frames=np.asarray(frames), q=result.q, status=result.status, error=error, bound=bound,
                   hi=hi, seconds=seconds, orientation_error=result.orientation_error)

    def save(self, path: Path) -> None:
        """Write these records to an ``.npz`` file (:meth:`load` reads them back bit for bit)."""
        arrays = {"frames": self.frames, "q": self.q, "status": np.array([s.value for s in self.status], dtype="U32"),
                  "error": self.error, "bound": self.bound, "seconds": np.array(self.seconds)}
        if self.hi is not None:
            arrays.update({f"hi_{f.name}": getattr(self.hi, f.name) for f in fields(HIFrames)})
        if self.orientation_error is not None:
            arrays["orientation_error"] = self.orientation_error
        np.savez(path, **arrays)

    @classmethod
    def load(cls, path: Path) -> SolvedFrames:
        """The records :meth:`save` wrote, bit for bit."""
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        hi = {k[3:]: v for k, v in arrays.items() if k.startswith("hi_")}
        return cls(
            frames=arrays["frames"], q=arrays["q"],
            status=np.array([Status(s) for s in arrays["status"]], dtype=object),
            error=arrays["error"], bound=arrays["bound"], hi=HIFrames(**hi) if hi else None,
            seconds=float(arrays["seconds"]), orientation_error=arrays.get("orientation_error"),
        )


def stitch(parts: list[SolvedFrames], n: int, rows_of: list[np.ndarray], frames: np.ndarray) -> SolvedFrames:
    """One record of ``n`` frames from parts solved at the given rows (one part per chain shape)."""
    first = parts[0]
    if len(parts) == 1 and len(rows_of[0]) == n:  # one shape: the rows are every frame, in order
        return replace(first, frames=np.asarray(frames))
    q = np.empty((n, first.q.shape[1]))
    status = np.empty(n, dtype=object)
    error, bound = np.empty(n), np.empty(n)
    orientation = None if first.orientation_error is None else np.empty(n)
    hi = None
    if first.hi is not None:
        hi = HIFrames(**{f.name: np.empty((n,) + getattr(first.hi, f.name).shape[1:],
                                          dtype=getattr(first.hi, f.name).dtype) for f in fields(HIFrames)})
    for part, rows in zip(parts, rows_of):
        q[rows], status[rows], error[rows], bound[rows] = part.q, part.status, part.error, part.bound
        if orientation is not None:
            orientation[rows] = _orientation_errors(part)
        if hi is not None:
            for f in fields(HIFrames):
                getattr(hi, f.name)[rows] = getattr(part.hi, f.name)
    return SolvedFrames(frames=np.asarray(frames), q=q, status=status, error=error, bound=bound, hi=hi,
                        seconds=sum(p.seconds for p in parts), orientation_error=orientation)


def _orientation_errors(part: SolvedFrames) -> np.ndarray:
    """A part's orientation errors (every part of a chain with Rotation has them)."""
    assert part.orientation_error is not None  # the first part has them, so the chain has Rotation
    return part.orientation_error

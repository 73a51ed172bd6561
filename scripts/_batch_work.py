"""What ik_batch bakes as one piece of work (SPEC §7, §8): a chain alone (the add-on's ``bake.BakeJob``)
or, on an armature with ``solve_together``, its body (``body_bake.BodyBakeJob``: every enabled chain
solved together, the body root's location and rotation keyed too).

Both are driven the same way: solve frame chunks (in this process, or in worker processes that save
each chunk's records to an ``.npz`` for the parent to load), join the chunks in frame order, key them
once, and say which keys the saved file must hold. A body, like a chain, solves every frame from its
reference pose alone, so neither the chunks nor ``--jobs`` change a bit of its keys.

The classes wrap the add-on's jobs through their public steps and are given its record classes;
this module does not import bpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from _batch_rigs import BakedChain

from ik_solvers.core.body import GoalStatus


def solves_together(obj: Any) -> bool:
    """Whether ``obj``'s enabled chains are one body (``Object.ik_solvers.solve_together``)."""
    return bool(obj.ik_solvers.solve_together)


def plan_work(selected: Sequence[tuple[Any, Any]], named: bool,
              method: str | None = None) -> tuple[list[tuple[Any, str | None]], list[str]]:
    """The pieces of work for the selected (armature, chain) pairs, in order: ``(armature, chain name)``
    for a chain baked alone, ``(armature, None)`` once for a body, whichever of its chains were selected;
    and the sentences to say: when the chains were ``named`` (``--chain``), that a body's chain is baked
    with the whole body; with a ``method`` (``--method``), that it does not apply to a body."""
    work: list[tuple[Any, str | None]] = []
    notes = []
    for obj, chain in selected:
        piece = (obj, None if solves_together(obj) else chain.name)
        if not any(o is obj and name == piece[1] for o, name in work):
            work.append(piece)
        if named and piece[1] is None:
            members = ", ".join(c.name for c in obj.ik_solvers.chains if c.enabled)
            notes.append(f"chain '{obj.name}:{chain.name}' is solved together with the other enabled chains of "
                         f"'{obj.name}' (solve_together): baking its whole body ({members})")
        if method is not None and piece[1] is None:
            notes.append(f"--method {method} does not apply to the body of '{obj.name}': a body solve ignores "
                         "the chains' methods")
    return work, notes


@dataclass(eq=False)
class ChainWork:
    """One chain baked alone: ``job`` is a ``BakeJob`` of that chain, ``records`` the add-on's ``SolvedFrames``."""

    job: Any
    records: Any

    @property
    def label(self) -> str:
        return f"{self.job.obj.name}:{self.job.chains[0].name}"

    def task(self) -> dict[str, Any]:
        """What a worker needs besides the file and the frames to make the same work (``make_work``)."""
        return {"chain": self.job.chains[0].name}

    def solve(self, frames: np.ndarray) -> Any:
        """Sample and solve ``frames`` (a run of the job's frames), as the bake would."""
        (chain,) = self.job.chains
        return self.job.solve(chain, self.job.sample(chain, frames))

    def save(self, solved: Any, path: Path) -> None:
        solved.save(path)

    def load(self, path: Path) -> Any:
        """What :meth:`save` wrote, bit for bit."""
        return self.records.load(path)

    def join(self, parts: list[Any]) -> Any:
        return self.records.concatenate(parts)

    def write(self, solved: Any) -> list[Any]:
        """Key the joined chunks and check them with Blender's evaluation; the chain's ``BakeReport``."""
        return [self.job.write_solved(self.job.chains[0], solved)]

    def root_entry(self) -> dict[str, Any] | None:
        """A chain has no body root: None (``BodyWork.root_entry``)."""
        return None

    def baked(self) -> list[BakedChain]:
        """The keys the saved file must hold: every joint bone's rotation at the kept frames."""
        chain = self.job.chains[0]
        keyed = self.job.key_frames if chain.reduced is None else self.job.key_frames[chain.reduced.indices]
        return [BakedChain(self.job.obj.name, chain.name, tuple(chain.rig.joint_bones), tuple(float(f) for f in keyed))]


@dataclass(eq=False)
class BodyWork:
    """An armature's body: ``job`` is a ``BodyBakeJob``, ``records`` the add-on's ``BodySolved`` and
    ``hi_records`` its ``HIFrames`` (a limb's HI diagnostics)."""

    job: Any
    records: Any
    hi_records: Any

    @property
    def label(self) -> str:
        return f"{self.job.obj.name}:body ({', '.join(chain.name for chain in self.job.chains)})"

    def task(self) -> dict[str, Any]:
        return {"body": True}

    def solve(self, frames: np.ndarray) -> Any:
        return self.job.solve(frames, self.job.sample(frames))

    def save(self, solved: Any, path: Path) -> None:
        """Write a chunk's ``BodySolved`` to an ``.npz`` (:meth:`load` reads it back bit for bit)."""
        arrays = {"frames": solved.frames, "q": solved.q, "root_location": solved.root_location,
                  "status": np.array([[s.value for s in row] for row in solved.status], dtype="U32"),
                  "error": solved.error, "bound": solved.bound, "seconds": np.array(solved.seconds)}
        for k, turn in enumerate(solved.orientation_error):
            if turn is not None:
                arrays[f"orientation_error{k}"] = turn
        for k, hi in enumerate(solved.hi):
            if hi is not None:
                arrays.update({f"hi{k}_{f.name}": getattr(hi, f.name) for f in fields(hi)})
        np.savez(path, **arrays)

    def load(self, path: Path) -> Any:
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        count = arrays["status"].shape[0]
        hi = []
        for k in range(count):
            prefix = f"hi{k}_"
            found = {name[len(prefix):]: value for name, value in arrays.items() if name.startswith(prefix)}
            hi.append(self.hi_records(**found) if found else None)
        return self.records(
            frames=arrays["frames"], q=arrays["q"], root_location=arrays["root_location"],
            status=np.array([[GoalStatus(s) for s in row] for row in arrays["status"]], dtype=object),
            error=arrays["error"], bound=arrays["bound"],
            orientation_error=tuple(arrays.get(f"orientation_error{k}") for k in range(count)),
            seconds=float(arrays["seconds"]), hi=tuple(hi))

    def join(self, parts: list[Any]) -> Any:
        """One ``BodySolved`` of consecutive chunks, in the order given."""
        first = parts[0]

        def along_frames(values: list[Any], axis: int = 0) -> Any:
            return None if values[0] is None else np.concatenate(values, axis=axis)

        count = first.status.shape[0]
        hi = tuple(None if first.hi[k] is None else self.hi_records(**{
            f.name: along_frames([getattr(p.hi[k], f.name) for p in parts]) for f in fields(first.hi[k])})
            for k in range(count))
        return self.records(
            frames=along_frames([p.frames for p in parts]), q=along_frames([p.q for p in parts]),
            root_location=along_frames([p.root_location for p in parts]),
            status=along_frames([p.status for p in parts], 1), error=along_frames([p.error for p in parts], 1),
            bound=along_frames([p.bound for p in parts], 1),
            orientation_error=tuple(along_frames([p.orientation_error[k] for p in parts]) for k in range(count)),
            seconds=sum(p.seconds for p in parts), hi=hi)

    def write(self, solved: Any) -> list[Any]:
        """Key the joined chunks, check them with Blender's evaluation; a ``BakeReport`` per chain (``goals`` set)."""
        return list(self.job.write_solved(solved))

    def root_entry(self) -> dict[str, Any] | None:
        """The body root with reduced keys as the report's ``body_roots`` lists it (its location and rotation
        curves counted); None without reduced keys."""
        reduced = self.job.root_reduced
        if reduced is None:
            return None
        from ik_solvers.blender.report import reduction_fields

        return {"armature": self.job.obj.name, "bone": self.job.spec.root, **reduction_fields(reduced)}

    def baked(self) -> list[BakedChain]:
        """Every chain's joint bones and the body root: a rotation key at every baked frame (with reduced keys,
        at each one's kept frames)."""
        def kept(reduced: Any) -> tuple[float, ...]:
            keyed = self.job.key_frames if reduced is None else self.job.key_frames[reduced.indices]
            return tuple(float(f) for f in keyed)

        out = [BakedChain(self.job.obj.name, chain.name, tuple(chain.spec.rig.joint_bones), kept(chain.reduced))
               for chain in self.job.chains]
        if self.job.spec.root is not None:
            out.append(BakedChain(self.job.obj.name, "body root", (self.job.spec.root,), kept(self.job.root_reduced)))
        return out

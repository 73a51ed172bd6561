"""The body solve: several chains' goals at once on one tree of bones (SPEC §8).

Entry point
-----------
``solve_body(body, chains, body_root=..., reference=..., ...) -> BodyResult``: one batch of frames.
``Body`` is the bone tree (parents, offsets, rest rotations, tails, joint kinds, axes, limits,
weights, as a core ``Chain`` holds them per joint); each ``BodyChain`` is a run of bones from its
start to its tip with a ``BodyGoal`` (positions ``(N, 3)``, optional rotations ``(N, 3, 3)``,
weight, priority) and its HI settings. The result holds every bone's joint variables and local
rotations, the body root's location, the world pose, and per goal and frame a ``GoalStatus``
(reached / limited / out of reach), the error and its lower bound.

How it works (docs/body-solve.md)
---------------------------------
Limbs (chains nothing hangs from) are posed by the HI solver in their start bone's parent frame;
the trunk (the body root's 6 DOF and the chains the limbs hang from) by a task-priority
Gauss-Newton started from the reference pose every frame (``trunk``), where each limb contributes
how far its goal lies beyond the HI reach. Every frame is computed from its own inputs and the
reference alone, with per-frame operations only: any batch, order or chunking gives the same bits.

Modules: ``model`` (the dataclasses and the chains' layout), ``forward`` (tree kinematics and
Jacobian columns), ``rows`` (the goals' residual rows), ``trunk`` (the prioritised solve), ``bounds``
(lower bounds per goal),
``solve`` (the entry), ``humanoid`` (a synthetic metarig-like body for tests and benchmarks).
"""

from .model import Body, BodyChain, BodyGoal, GoalStatus
from .solve import BodyResult, GoalResult, solve_body

__all__ = ["Body", "BodyChain", "BodyGoal", "BodyResult", "GoalResult", "GoalStatus", "solve_body"]

"""Chain set-up and single-frame posing: a new chain's defaults, preferred-pose capture, solving and
writing chains at the current frame, and the last-solve status kept on the settings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ..core import (
    METHOD_FACTS,
    IKInputError,
    Method,
    SolveResult,
    forward_kinematics,
    pose_plane_normals,
    preferred_pose,
    swivel_for_plane,
)
from .checks import check_chains_apart, check_editable, enabled_chain_bones
from .errors import IKSolversError, chain_context
from .identity import remember
from .rig import basis_quaternion, read_chain, write_pose
from .rig_chain import RigChain
from .root_space import root_matrices_world, world_to_root
from .sampling import sample_inputs
from .snapshots import PoseSnapshot
from .solving import PreparedSolve, prepare_solve, run_solve, world_errors
from .spec import chain_spec

if TYPE_CHECKING:
    import bpy

    from .properties import IK_SOLVERS_PG_chain

DEFAULT_REFERENCE_WEIGHT = 0.0
"""Pull toward the reference pose a new SDLS chain gets: none. Measured on the Rigify rigs of three
or more bones (docs/comparison.md, the reference_weight sweep), every weight above 0 gave more
backward knees and flips on five of six rigs, left out-of-reach frames short of the bound and baked
about 5× slower; the setting stays for chains where a user finds it helps."""


def default_method(n_bones: int) -> Method:
    """The method a new chain of ``n_bones`` bones gets: HI from two bones on, SVD-adaptive DLS for one.

    HI keeps every joint bent its preferred way at any chain length (0 backward joints and 0 flips
    on every Rigify rig measured, where SDLS, pulled or not, bends leg-and-foot knees backward), and
    is history independent. A chain HI cannot drive falls back to SDLS (:func:`set_up_new_chain`).
    """
    return Method.HI if n_bones >= 2 else Method.SDLS


def method_reason(chain_settings: IK_SOLVERS_PG_chain) -> str:
    """One line for the panel: which method the chain uses and why."""
    method = Method(chain_settings.method)
    label = METHOD_FACTS[method].label
    n_bones = int(chain_settings.chain_length)
    if method is default_method(n_bones):
        if method is Method.HI:
            return f"{label}: default (history independent, every joint keeps its bend)"
        return f"{label}: default for a single bone"
    return f"{label}: chosen for this chain"


def capture_preferred_pose(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, scene: bpy.types.Scene) -> None:
    """Store the chain's current pose as its preferred pose (IKSolversError if the chain is unusable)."""
    with chain_context(chain_settings.name):
        check_editable(obj)
        rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
    assert obj.pose is not None  # read_chain read the chain from it
    rotations = [basis_quaternion(obj.pose.bones[name]) for name in rig.bone_names]
    chain_settings.preferred_pose.clear()
    for name, quaternion in zip(rig.bone_names, rotations):
        item = chain_settings.preferred_pose.add()
        item.bone_name = name
        item.rotation = quaternion
    chain_settings.preferred_frame = scene.frame_current
    chain_settings.has_preferred_pose = True
    remember(obj, chain_settings, rig.bone_names)


def _keeping_swivel(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, rig: RigChain) -> float:
    """The swivel angle whose solver plane is the current pose's (SPEC §5: a new chain keeps its plane)."""
    positions = forward_kinematics(rig.chain, rig.q[None]).positions
    normal = pose_plane_normals(positions)
    if not np.all(np.isfinite(normal)):
        return 0.0  # a straight chain has no plane to keep
    target = chain_settings.target
    if target is None:
        goal = positions[:, -1]
    else:
        goal = world_to_root(np.array(target.matrix_world.translation, dtype=float)[None],
                             root_matrices_world(obj, rig))
    swivel = swivel_for_plane(rig.chain, goal, rig.q, normal, zero_plane_map=chain_settings.zero_plane_map)
    return float(swivel[0]) if np.all(np.isfinite(swivel)) else 0.0


def set_up_new_chain(obj: bpy.types.Object, chain_settings: IK_SOLVERS_PG_chain, scene: bpy.types.Scene) -> None:
    """A new chain's defaults (issue 11): HI with the preferred pose captured now and the swivel set
    so that adding the chain does not move it; SDLS where HI cannot drive the chain (one bone, a
    hinge start joint, a straight pose). A chain without a usable tip bone yet keeps the settings'
    defaults."""
    try:
        rig = read_chain(obj, chain_settings.tip_bone, chain_settings.chain_length)
    except IKSolversError:
        return  # no usable tip bone yet: set up once the user picks one
    capture_preferred_pose(obj, chain_settings, scene)
    method = default_method(len(rig.bone_names))
    if method is Method.HI:
        try:
            preferred_pose(rig.chain, rig.q)  # the core's checks of an HI preferred pose
            chain_settings.swivel_angle = _keeping_swivel(obj, chain_settings, rig)
        except (IKInputError, IKSolversError):
            method = Method.SDLS  # e.g. a hinge start joint: HI cannot drive this chain
    chain_settings.method = method.value
    if method is Method.SDLS:
        chain_settings.reference_weight = DEFAULT_REFERENCE_WEIGHT


def store_solve_outcome(chain_settings: IK_SOLVERS_PG_chain, status: str, message: str, result: SolveResult | None = None,
                        prepared: PreparedSolve | None = None) -> None:
    """Keep a solve's outcome on the chain's settings (:func:`store_outcome`).

    HI chains also get the pole distance, so the panel's flip warning follows the live pose.
    """
    if result is None:
        store_outcome(chain_settings, status, message)
        return
    assert prepared is not None  # a result comes with the solve it was prepared by
    error, lower_bound = world_errors(prepared, result)
    store_outcome(chain_settings, status, message, float(error[0]), float(lower_bound[0]), int(result.iterations[0]),
                  None if result.hi is None else float(result.hi.pole_angles[0]))


def store_outcome(chain_settings: IK_SOLVERS_PG_chain, status: str, message: str, error: float | None = None,
                  lower_bound: float | None = None, iterations: int | None = None,
                  pole_distance: float | None = None) -> None:
    """Keep a solve's status, message and (scene-unit) error, lower bound, iterations and HI pole
    distance on the chain's settings, writing only what changed (each write is an update)."""
    values: dict[str, str | float | int] = {"last_status": status, "last_message": message}
    if error is not None and lower_bound is not None and iterations is not None:
        values.update(last_error=error, last_lower_bound=lower_bound, last_iterations=iterations)
    if pole_distance is not None:
        values["last_pole_distance"] = pole_distance
    for name, value in values.items():
        if getattr(chain_settings, name) != value:
            setattr(chain_settings, name, value)


def solve_chains(obj: bpy.types.Object, chains: Sequence[IK_SOLVERS_PG_chain], view_layer: bpy.types.ViewLayer,
                 ) -> list[tuple[SolveResult, PreparedSolve]]:
    """Solve and write ``chains`` (settings) one after another (each sees the ones before it posed).

    Returns per chain the core ``SolveResult`` and its ``PreparedSolve``. On an IKSolversError
    every channel written so far is put back exactly before it propagates.
    """
    specs = [chain_spec(obj, chain) for chain in chains]  # every chain checked before any is posed
    check_chains_apart([(spec.name, spec.bone_names) for spec in specs],
                       enabled_chain_bones(obj, (spec.name for spec in specs)))
    snapshot = PoseSnapshot(obj)
    outcomes = []
    try:
        for index, spec in enumerate(specs):
            if index:
                view_layer.update()  # the next chain reads its rig and root from the pose just written
                spec = chain_spec(obj, chains[index])
            with chain_context(spec.name):
                prepared = prepare_solve(spec, sample_inputs(obj, spec))
                result = run_solve(prepared)
            write_pose(obj, spec.rig, result.q[0])
            outcomes.append((result, prepared))
    except Exception:  # anything: the pose goes back before the error propagates
        snapshot.restore()
        view_layer.update()
        raise
    for chain, (_, prepared) in zip(chains, outcomes):
        remember(obj, chain, prepared.spec.bone_names)
    return outcomes

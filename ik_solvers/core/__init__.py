"""Pure-numpy IK solver core: no bpy, no mathutils (SPEC §2–§3)."""

from .analytic import TwoBoneSolution, solve_analytic, two_bone_planar, two_link_step_bound
from .chain import Chain, JointKind
from .errors import IKInputError
from .kinematics import (
    Pose,
    bone_length_errors,
    error_lower_bounds,
    forward_kinematics,
    jacobian,
    position_jacobian,
    world_axes,
)
from .result import Method, SolveOptions, SolveResult, Status
from .solve import SOLVERS, register_solver, solve

__all__ = [
    "Chain",
    "IKInputError",
    "JointKind",
    "Method",
    "Pose",
    "SOLVERS",
    "SolveOptions",
    "SolveResult",
    "Status",
    "TwoBoneSolution",
    "bone_length_errors",
    "error_lower_bounds",
    "forward_kinematics",
    "jacobian",
    "position_jacobian",
    "register_solver",
    "solve",
    "solve_analytic",
    "two_bone_planar",
    "two_link_step_bound",
    "world_axes",
]

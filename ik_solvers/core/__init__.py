"""Pure-numpy IK solver core: no bpy, no mathutils (SPEC §2–§3)."""

from .analytic import TwoBoneSolution, solve_analytic, two_bone_planar, two_link_step_bound
from .chain import Chain, JointKind
from .errors import IKInputError
from .hi import (  # importing hi registers Method.HI
    FlipReport,
    HISolveResult,
    OneTargetHI,
    ParentSpace,
    PreferredPose,
    SphereFrame,
    find_flips,
    flips_from_normals,
    hi_preferred_pose,
    pose_plane_normals,
    preferred_pose,
    solve_hi,
    solve_hi_one,
    sphere_rotations_for_parent_space,
    swivel_for_plane,
)
from .kinematics import (
    Pose,
    bone_length_errors,
    error_lower_bounds,
    forward_kinematics,
    jacobian,
    position_jacobian,
    world_axes,
)
from .methods import METHOD_FACTS, MethodFacts
from .result import Method, SolveOptions, SolveResult, Status
from .solve import SOLVERS, register_solver, solve
from .zero_plane import ZERO_PLANE_MAPS, register_zero_plane_map

__all__ = [
    "Chain",
    "FlipReport",
    "HISolveResult",
    "IKInputError",
    "JointKind",
    "METHOD_FACTS",
    "Method",
    "MethodFacts",
    "OneTargetHI",
    "ParentSpace",
    "Pose",
    "PreferredPose",
    "SOLVERS",
    "SolveOptions",
    "SolveResult",
    "SphereFrame",
    "Status",
    "TwoBoneSolution",
    "ZERO_PLANE_MAPS",
    "bone_length_errors",
    "error_lower_bounds",
    "find_flips",
    "flips_from_normals",
    "forward_kinematics",
    "jacobian",
    "pose_plane_normals",
    "position_jacobian",
    "hi_preferred_pose",
    "preferred_pose",
    "register_solver",
    "register_zero_plane_map",
    "solve",
    "solve_analytic",
    "solve_hi",
    "solve_hi_one",
    "sphere_rotations_for_parent_space",
    "swivel_for_plane",
    "two_bone_planar",
    "two_link_step_bound",
    "world_axes",
]

"""One table of facts about each solver method, read by the settings enum, the panel, the batch and the tests."""

from __future__ import annotations

from dataclasses import dataclass

from .result import Method


@dataclass(frozen=True)
class MethodFacts:
    """What a method is and which settings it reads.

    Attributes
    ----------
    label : str
        Name shown to the user.
    description : str
        One-sentence tooltip.
    iterative : bool
        Iterates toward the target: reads ``max_iterations`` and ``tolerance`` (the HI solver is
        closed form or a 1-D root search run to machine precision, and reads the tolerance alone).
    jacobian : bool
        Builds a Jacobian (reports ``sigma_min``, accepts tip-orientation rows).
    uses_step : bool
        Reads ``SolveOptions.step``.
    uses_damping : bool
        Reads ``SolveOptions.damping``.
    needs_preferred_pose : bool
        Needs a captured preferred pose (the HI solver's sphere frame).
    bones : tuple of (int, int or None)
        Fewest and most moving bones the method accepts (None: no upper bound).
    """

    label: str
    description: str
    iterative: bool
    jacobian: bool
    uses_step: bool
    uses_damping: bool
    needs_preferred_pose: bool = False
    bones: tuple[int, int | None] = (1, None)


METHOD_FACTS: dict[Method, MethodFacts] = {
    Method.ANALYTIC: MethodFacts(
        "Analytic Two-Bone", "Closed-form solve of a two-bone chain",
        iterative=False, jacobian=False, uses_step=False, uses_damping=False, bones=(2, 2),
    ),
    Method.CCD: MethodFacts(
        "CCD", "Cyclic coordinate descent: each joint turns the tip toward the target, tip to root",
        iterative=True, jacobian=False, uses_step=False, uses_damping=False,
    ),
    Method.FABRIK: MethodFacts(
        "FABRIK", "Forward and backward reaching on joint positions, converted to rotations",
        iterative=True, jacobian=False, uses_step=False, uses_damping=False,
    ),
    Method.JACOBIAN_TRANSPOSE: MethodFacts(
        "Jacobian Transpose", "Gradient descent on the squared tip error",
        iterative=True, jacobian=True, uses_step=True, uses_damping=False,
    ),
    Method.PSEUDO_INVERSE: MethodFacts(
        "Pseudo-Inverse", "Gauss-Newton steps through the Jacobian's pseudo-inverse",
        iterative=True, jacobian=True, uses_step=True, uses_damping=False,
    ),
    Method.DLS: MethodFacts(
        "Damped Least Squares", "Levenberg-Marquardt steps with a fixed damping",
        iterative=True, jacobian=True, uses_step=False, uses_damping=True,
    ),
    Method.SDLS: MethodFacts(
        "SVD-Adaptive DLS",
        "Damping that grows near a singular pose and shrinks with the error (best all-round choice)",
        iterative=True, jacobian=True, uses_step=False, uses_damping=True,
    ),
    Method.HI: MethodFacts(
        "HI (Swivel)", "History-independent solver with swivel angle and preferred pose",
        iterative=False, jacobian=False, uses_step=False, uses_damping=False, needs_preferred_pose=True,
        bones=(2, None),
    ),
}
"""Facts per method, in the order the user sees them."""

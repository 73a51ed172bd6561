"""The HI pose stays continuous where the path ends near the start joint (SPEC §5, continuity; issue 20).

On the Rigify wolf's front leg the target drawn in along the rest axis to the root moved the elbow
529 mm for a 5 mm target step (a flow step carried the tip through the root, and the placement turned
the whole chain half a turn); now every joint moves at most a few times the target step. On the shark's
body, whose curled pose stops 4.3 mm off the root, the tip's heading swung 87° over the last 40 mm, so
the chain turned with it: 68 mm per 0.5 mm target step in the last 15 mm."""

from __future__ import annotations

import numpy as np
import pytest

from ik_solvers.core import Chain, JointKind, forward_kinematics, preferred_pose, solve_hi
from ik_solvers.core.hi.one_target import solve_hi_one
from ik_solvers.core.hi.reach import least_distance

STEP = 0.0005  # target step along the rest axis (m)


def _rigify_wolf_front_leg() -> Chain:
    """``front_thigh.L → front_shin.L → front_foot.L → front_toe.L`` of Blender's Rigify wolf metarig
    (``armature_wolf_metarig_add``), as ``ik_solvers.blender.rig.read_chain`` reads it at rest (ball
    joints, metres, the chain's root space; preferred pose = rest)."""
    return Chain(
        kinds=(JointKind.BALL,) * 4,
        offsets=np.array([[-0.009214944331534747, 0.21319861567005471, 0.03303312118822643],
                          [-3.505483264776288e-09, 0.26475101664356243, 3.4522510544698903e-09],
                          [1.963174331431894e-09, 0.27251112798972554, -6.880564423772384e-09],
                          [-3.4003001803117883e-10, 0.13252434463042134, -2.7674522395937373e-09]]),
        rest_rotations=np.array([
            [[0.9336323641430655, -0.3390493024766228, 0.11565543270744065],
             [0.3224648158684334, 0.6547857674165054, -0.6835729963330295],
             [0.15603541633733897, 0.6755006804429542, 0.7206606549337481]],
            [[0.9980508939301778, -0.04953924551044172, -0.0379509720485435],
             [0.05888715769850912, 0.9489225435553735, 0.30996501252656294],
             [0.020657100071502073, -0.31159568271504856, 0.949990218228577]],
            [[0.9984775790299475, 0.01768475744245946, 0.052247234651186365],
             [-0.031275174644261716, 0.9617451178339034, 0.2721547202853958],
             [-0.045435532631033546, -0.2733744276205302, 0.960834030776222]],
            [[-0.9998050143473397, 0.014538315172448423, -0.013363034006615013],
             [0.019624498007480416, 0.656360698915345, -0.7541919596477505],
             [-0.0021937100696741794, -0.7543071458705045, -0.6565180251332202]]]),
        axes=np.tile(np.eye(3), (4, 1)),
        lower=np.full(12, -np.inf),
        upper=np.full(12, np.inf),
        weights=np.ones(12),
        tip_offset=np.array([0.0, 0.08967329561710358, 0.0]),
    )


def _rigify_shark_body() -> Chain:
    """``spine.008 → spine.004 → spine.005`` of Blender's Rigify shark metarig (``armature_shark_metarig_add``,
    tip ``spine.005``), as ``read_chain`` reads it at rest (nearly straight: bends of 0.01–0.02 rad)."""
    return Chain(
        kinds=(JointKind.BALL,) * 3,
        offsets=np.array([[5.5674567603705705e-14, 0.30326604660050294, -5.56744927937558e-10],
                          [-1.5364569832350058e-13, 0.341158134447843, 1.5364559069475092e-09],
                          [-5.1440398978180174e-14, 0.26891026514001387, -5.144041304028235e-10]]),
        rest_rotations=np.array([
            [[0.9999999999817907, 6.032069724088874e-06, 1.8204002401013352e-07],
             [-6.0320664131532726e-06, 0.9981790529084118, 0.06032062912869168],
             [1.821497019472828e-07, -0.06032062912869098, 0.9981790529266213]],
            [[0.9999999800005112, 1.0170244088817894e-06, -0.00019999485942388942],
             [1.0170229915902302e-06, 0.9999482818189498, 0.010170235311741029],
             [0.00019999485943109673, -0.010170235311741119, 0.9999482618194606]],
            [[0.9999999949999985, -1.7604782566754038e-06, 9.99845155390848e-05],
             [-6.886309859254874e-13, 0.9998450237261284, 0.017604787135842268],
             [-0.0001000000131563877, -0.017604787047818607, 0.9998450187269015]]]),
        axes=np.tile(np.eye(3), (3, 1)),
        lower=np.full(9, -np.inf),
        upper=np.full(9, np.inf),
        weights=np.ones(9),
        tip_offset=np.array([0.0, 0.6143567562103271, 0.0]),
    )


def _axis_steps(chain: Chain, low: float, high: float) -> np.ndarray:
    """Largest move per joint ``(n + 1,)`` between targets ``STEP`` apart on the rest root → tip axis at
    ``low``–``high`` from the root (one batch; one target alone must agree bit for bit), every one reached."""
    pref = preferred_pose(chain, np.zeros(chain.n_dof))
    positions = forward_kinematics(chain, np.zeros((1, chain.n_dof))).positions[0]
    axis = (positions[-1] - positions[0]) / np.linalg.norm(positions[-1] - positions[0])
    targets = positions[0] + np.arange(low, high, STEP)[:, None] * axis
    solved = solve_hi(chain, targets, pref).result
    assert np.linalg.norm(solved.positions[:, -1] - targets, axis=1).max() <= 1e-9
    for k in (0, len(targets) // 2, len(targets) - 1):
        assert np.array_equal(np.array(solve_hi_one(pref, targets[k]).q), solved.q[k])
    return np.linalg.norm(np.diff(solved.positions, axis=0), axis=-1).max(axis=0)


@pytest.mark.parametrize("low, high, bound", [(0.0002, 0.06, 0.0015), (0.06, 0.7, 0.0015)])
def test_wolf_front_leg_folds_to_the_root_without_a_pop(low, high, bound):
    """The target along the rest root → tip axis, ``STEP`` apart: near the root (where it popped) and
    on out to the rest distance, no joint moves more than 3× the target step (measured after the fix:
    0.70 mm near the root, 0.63 mm farther out); batch and one target agree bit for bit."""
    chain = _rigify_wolf_front_leg()
    # The leg closes onto its root with every joint bent its own way.
    assert least_distance(preferred_pose(chain, np.zeros(12))) <= 1e-9
    steps = _axis_steps(chain, low, high)
    assert steps.max() <= bound, steps


def test_shark_body_curls_near_the_root_without_turning_on_the_spot():
    """From 1 mm above the curled pose's distance (4.3 mm: the path's end, where the distance has a
    minimum, so the pose moves like its square root) to 15 mm: 8.6 mm per 0.5 mm target step at most
    (was 68 mm); beyond, at most 4.5 mm (the heading's turn spread over the last 0.3 of the reach)."""
    chain = _rigify_shark_body()
    assert abs(least_distance(preferred_pose(chain, np.zeros(9))) - 0.004288) <= 1e-6
    assert _axis_steps(chain, 0.0053, 0.02).max() <= 0.01
    assert _axis_steps(chain, 0.02, 1.1).max() <= 0.005

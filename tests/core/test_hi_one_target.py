"""The one-target HI solve (live mode, issue 12) runs ``solve_hi``'s own per-target functions on Python
floats (``array_ops.SCALAR_OPS``) and gives its bits for N = 1, field by field, wherever ``math``'s cosine
and sine round as numpy's (array_ops; they do on this machine): live poses equal baked keys bit for
bit (tests/blender/test_live_matches_bake.py)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ik_solvers.core import (
    Chain,
    IKInputError,
    JointKind,
    SolveOptions,
    Status,
    preferred_pose,
    rotations,
    solve_hi,
)
from ik_solvers.core.array_ops import SCALAR_OPS
from ik_solvers.core.hi.one_target import OneTargetHI, solve_hi_one
from ik_solvers.core.kinematics import local_quaternions
from ik_solvers.core.zero_plane import DefaultZeroPlaneMap, register_zero_plane_map

# A hinge or universal joint bends in the preferred plane when its last axis is that plane's normal:
# these chains' preferred poses turn about z, so hinges turn about z, universal joints about y then z.
_AXES = {JointKind.BALL: [[1, 0, 0], [0, 1, 0], [0, 0, 1]], JointKind.HINGE: [[0, 0, 1]],
         JointKind.UNIVERSAL: [[0, 1, 0], [0, 0, 1]]}


def _rotation(rng: np.random.Generator) -> np.ndarray:
    m, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    return m * np.sign(np.linalg.det(m))


def _chain(kinds, lengths, root_rotation=None, root_position=(0.0, 0.0, 0.0)) -> Chain:
    n = len(kinds)
    offsets = np.zeros((n, 3))
    offsets[1:, 0] = lengths[:-1]
    n_dof = sum(k.value for k in kinds)
    return Chain(kinds=tuple(kinds), offsets=offsets, rest_rotations=np.broadcast_to(np.eye(3), (n, 3, 3)),
                 axes=[a for k in kinds for a in _AXES[k]], lower=[-np.inf] * n_dof, upper=[np.inf] * n_dof,
                 weights=[1.0] * n_dof, tip_offset=[lengths[-1], 0.0, 0.0], root_position=root_position,
                 root_rotation=np.eye(3) if root_rotation is None else root_rotation)


def _preferred(chain: Chain, turns, crooked: np.ndarray | None) -> np.ndarray:
    """Each joint turned about z by ``turns``; ball joints also by ``crooked`` (n, 3) out of the plane."""
    q = np.zeros(chain.n_dof)
    for j, (kind, start) in enumerate(zip(chain.kinds, chain.dof_start)):
        q[start + kind.value - 1] = turns[j]
        if kind is JointKind.BALL and crooked is not None:
            q[start : start + 3] += crooked[j]
    return q


def _assert_same_bits(pref, target, **kwargs) -> OneTargetHI:
    """``solve_hi_one`` against ``solve_hi`` with one target, every field bit for bit."""
    tolerance = kwargs.pop("tolerance", SolveOptions().tolerance)
    one = solve_hi_one(pref, np.asarray(target).tolist(), tolerance=tolerance, **kwargs)
    assert one is not None
    batch_kwargs = {"swivel": kwargs.get("swivel", 0.0), "zero_plane_map": kwargs.get("zero_plane_map", "DEFAULT")}
    if kwargs.get("pole") is not None:
        batch_kwargs["poles"] = np.array([kwargs["pole"]])
    if kwargs.get("sphere_rotation") is not None:
        batch_kwargs["sphere_rotations"] = kwargs["sphere_rotation"]
    hi = solve_hi(pref.chain, np.array([target], dtype=float), pref, options=SolveOptions(tolerance=tolerance),
                  **batch_kwargs)
    result = hi.result
    assert np.array(one.q).tobytes() == result.q[0].tobytes()
    expected = local_quaternions(pref.chain, result.q)[0]
    assert np.array(one.local_quaternions).tobytes() == expected.tobytes()
    for name, mine, theirs in (("error", one.error, result.error[0]), ("lower_bound", one.lower_bound, result.lower_bound[0]),
                               ("pole_angle", one.pole_angle, hi.pole_angles[0])):
        assert np.float64(mine).tobytes() == np.float64(theirs).tobytes(), name
    assert type(one.q) is tuple and type(one.q[0]) is float and type(one.error) is float
    assert one.status is result.status[0] and one.iterations == result.iterations[0]
    return one


@st.composite
def cases(draw):
    """A random chain and preferred pose, and one target with swivel, map, pole and parent space."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.sampled_from([2, 3, 5, 10]))
    crooked = draw(st.booleans())  # balls only, preferred pose out of any plane
    kinds = [JointKind.BALL] + [JointKind.BALL if crooked else draw(st.sampled_from(list(JointKind))) for _ in range(n - 1)]
    lengths = rng.uniform(0.2, 1.5, n)
    root = _rotation(rng) if draw(st.booleans()) else None
    chain = _chain(kinds, lengths, root, rng.normal(size=3) if root is not None else (0.0, 0.0, 0.0))
    turns = rng.choice([-1.0, 1.0], n) * rng.uniform(0.1, 1.2, n) * (rng.random(n) < 0.8)  # some straight joints
    try:
        pref = preferred_pose(chain, _preferred(chain, turns, 0.3 * rng.normal(size=(n, 3)) if crooked else None))
    except IKInputError:  # a straight preferred pose: no plane
        pref = preferred_pose(chain, _preferred(chain, np.full(n, 0.5), None))
    sphere_rotation = _rotation(rng) if draw(st.booleans()) else None
    to_solving = sphere_rotation if sphere_rotation is not None else chain.root_rotation
    start = pref.start
    pole_map = draw(st.booleans())
    pole = start + rng.normal(size=3) * chain.reach if pole_map or draw(st.booleans()) else None
    kind = draw(st.sampled_from(["random", "at start", "near start", "reach", "curled", "preferred", "pole", "far"]))
    direction = rng.normal(size=3)
    direction /= np.linalg.norm(direction)
    distance = {
        "random": rng.uniform(0.0, 1.3) * chain.reach,
        "at start": 0.0,
        "near start": rng.choice([1e-14, 1e-12, 1e-9]) * chain.reach,
        "reach": chain.reach * (1.0 + rng.choice([-1e-15, 0.0, 1e-15, -1e-9])),
        "curled": pref.curled_distance * (1.0 + rng.choice([-1e-12, 0.0, 1e-12])),
        "preferred": pref.preferred_distance,
        "pole": rng.uniform(0.1, 1.1) * chain.reach,
        "far": rng.uniform(1.5, 1e6) * chain.reach,
    }[kind]
    if kind == "pole":  # exactly on the map's singular line: the sphere's pole n0, or the pole target's line
        if pole_map and rng.random() < 0.7:
            direction = (pole - start) / np.linalg.norm(pole - start)
        else:
            direction = to_solving @ pref.sphere.n0 * rng.choice([-1.0, 1.0])
    if pole is not None and rng.random() < 0.15:
        pole = start.copy() if rng.random() < 0.5 else start + 2.0 * (direction * distance)  # on the start / the EE axis
    target = start + distance * direction
    swivel = float(rng.choice([0.0, rng.uniform(-np.pi, np.pi), np.pi]))
    kwargs = {"swivel": swivel, "zero_plane_map": "POLE_OBJECT" if pole_map else "DEFAULT",
              "pole": None if pole is None else pole.tolist(), "sphere_rotation": sphere_rotation}
    if rng.random() < 0.3:
        kwargs["tolerance"] = float(10.0 ** rng.uniform(-12, -1))
    return pref, target, kwargs


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(cases())
def test_one_target_gives_the_batch_bits(case):
    pref, target, kwargs = case
    _assert_same_bits(pref, target, **kwargs)


def _arm(root_rotation=None, kinds=(JointKind.BALL, JointKind.BALL)):
    chain = _chain(list(kinds), np.array([1.0, 0.8]), root_rotation)
    return preferred_pose(chain, _preferred(chain, [0.4, -0.5], None))


def _long_chain(n=10):
    chain = _chain([JointKind.BALL] * n, np.full(n, 0.3))
    return preferred_pose(chain, _preferred(chain, [0.4] + [-0.5] * (n - 1), None))


def _mixed_chain():
    kinds = [JointKind.BALL, JointKind.HINGE, JointKind.UNIVERSAL, JointKind.BALL, JointKind.HINGE]
    chain = _chain(kinds, np.array([1.0, 0.8, 0.6, 0.5, 0.3]), _rotation(np.random.default_rng(4)), (0.2, -0.1, 0.4))
    return preferred_pose(chain, _preferred(chain, [0.3, -0.6, -0.4, 0.0, -0.7], None))


_TILT = _rotation(np.random.default_rng(8))


@pytest.mark.parametrize(
    ("name", "make", "target", "kwargs", "status", "iterations"),
    [
        ("two bones in reach", _arm, [0.9, 0.7, 0.3], {"swivel": 0.4}, Status.CONVERGED, 1),
        ("two bones out of reach", _arm, [2.5, 0.7, -0.3], {}, Status.UNREACHABLE, 1),
        ("two bones nearer than |l1 − l2|", _arm, [0.05, 0.1, 0.0], {}, Status.UNREACHABLE, 1),
        ("two bones, target on the start joint", _arm, [0.0, 0.0, 0.0], {}, Status.UNREACHABLE, 1),
        ("two bones at the default map's pole", _arm, [0.0, 0.0, 1.2], {"swivel": -1.0}, Status.CONVERGED, 1),
        ("two bones, root rotated, sphere rotation",
         lambda: _arm(_TILT), [0.3, 1.1, 0.5], {"sphere_rotation": _TILT.T}, Status.CONVERGED, 1),
        ("two bones, hinge elbow", lambda: _arm(kinds=(JointKind.BALL, JointKind.HINGE)), [0.4, -0.9, 0.6], {},
         Status.CONVERGED, 1),
        ("two bones, pole map", _arm, [1.0, 0.5, 0.2], {"zero_plane_map": "POLE_OBJECT", "pole": [0.5, 0.0, 1.0]},
         Status.CONVERGED, 1),
        ("two bones, pole on the EE axis", _arm, [1.0, 0.5, 0.2], {"zero_plane_map": "POLE_OBJECT", "pole": [2.0, 1.0, 0.4]},
         Status.CONVERGED, 1),
        ("two bones, pole on the start joint", _arm, [1.0, 0.5, 0.2], {"zero_plane_map": "POLE_OBJECT", "pole": [0.0, 0.0, 0.0]},
         Status.CONVERGED, 1),
        ("chain, straighter than preferred", _long_chain, [2.2, 1.0, 0.5], {"swivel": 2.0}, Status.CONVERGED, None),
        ("chain, more bent than preferred", _long_chain, [0.6, 0.1, -0.2], {}, Status.CONVERGED, None),
        ("chain, out of reach", _long_chain, [4.0, 0.0, 0.0], {}, Status.UNREACHABLE, None),
        ("chain, at its preferred tip", _long_chain, None, {}, Status.CONVERGED, 0),
        ("chain, target on the start joint: curled", _long_chain, [0.0, 0.0, 0.0], {}, None, 0),
        ("mixed joints, rotated root, pole map", _mixed_chain, [1.5, 0.9, 0.6],
         {"zero_plane_map": "POLE_OBJECT", "pole": [1.0, 2.0, 0.0], "sphere_rotation": _TILT, "swivel": 0.2},
         Status.CONVERGED, None),
    ],
)
def test_each_branch_gives_the_batch_bits(name, make, target, kwargs, status, iterations):
    pref = make()
    target = pref.positions[-1] if target is None else np.asarray(target, dtype=float)
    one = _assert_same_bits(pref, target, **kwargs)
    assert status is None or one.status is status, name
    assert iterations is None or one.iterations == iterations, name
    if iterations is None and pref.chain.n_joints > 2 and one.status is Status.CONVERGED:
        assert one.iterations > 2, name  # the root finder ran


def test_custom_maps_and_missing_or_bad_inputs_are_left_to_solve_hi():
    pref = _arm()
    target = [0.9, 0.7, 0.3]
    register_zero_plane_map("TEST_ONE_TARGET_CUSTOM", lambda a0, n0: DefaultZeroPlaneMap(a0, n0))
    assert solve_hi_one(pref, target, zero_plane_map="TEST_ONE_TARGET_CUSTOM") is None
    assert solve_hi_one(pref, target, zero_plane_map=DefaultZeroPlaneMap) is None  # a factory
    assert solve_hi_one(pref, target, zero_plane_map="NO_SUCH_MAP") is None
    assert solve_hi_one(pref, target, zero_plane_map="POLE_OBJECT") is None  # no pole
    for bad in ({"target": [np.nan, 0.0, 0.0]}, {"swivel": np.inf}, {"pole": [0.0, np.inf, 0.0]},
                {"sphere_rotation": 2.0 * np.eye(3)}, {"sphere_rotation": -np.eye(3)}, {"sphere_rotation": np.eye(2)}):
        args = {"target": target, **bad}
        assert solve_hi_one(pref, **args) is None, bad
        batch = {"swivel": args.get("swivel", 0.0)}
        if "pole" in args:
            batch["poles"] = np.array([args["pole"]])
        if "sphere_rotation" in args:
            batch["sphere_rotations"] = args["sphere_rotation"]
        with pytest.raises(IKInputError):
            solve_hi(pref.chain, np.array([args["target"]]), pref, **batch)


def test_one_quaternion_from_a_matrix_and_one_product_give_the_batch_bits():
    """The Shepperd conversion and the Hamilton product (rotations) on Python floats against their batch
    use, with zero entries (signed zeros: the batch adds its zero padding) and every Shepperd branch:
    arithmetic and sqrt only, so the same bits on any platform."""
    rng = np.random.default_rng(21)
    quats = rng.normal(size=(4000, 4))
    quats[::3, rng.integers(4)] = 0.0
    quats[1::7, 1:] = 0.0  # the identity and half turns about the axes
    quats /= np.linalg.norm(quats, axis=1, keepdims=True)
    matrices = rotations.matrices_from_quaternions(quats)
    matrices[::5] = np.round(matrices[::5], 1)  # exact zeros and ties among the diagonal entries
    expected = rotations.quaternions_from_matrices(matrices)
    mine = np.array([rotations.quaternion_from_rows(SCALAR_OPS, m) for m in matrices.tolist()])
    assert mine.tobytes() == expected.tobytes()
    a, b = quats, np.roll(quats, 1, axis=0) * np.where(rng.random((4000, 1)) < 0.5, -1.0, 1.0)
    products = np.array([rotations.quaternion_product(x, y) for x, y in zip(a.tolist(), b.tolist())])
    assert products.tobytes() == rotations.quaternion_products(a, b).tobytes()


def test_the_scalar_namespace_gives_numpys_bits_for_the_functions_it_takes_from_numpy():
    """``SCALAR_OPS`` takes ``atan2`` and ``acos`` from numpy (``math``'s round differently); ``cos``
    and ``sin`` from ``math``: the one-target solve's bits rest on these agreeing with the batch's ufuncs."""
    rng = np.random.default_rng(3)
    y, x = rng.normal(size=(2, 20000)) * 10.0 ** rng.uniform(-8, 3, (2, 20000))
    y[:50], x[50:100] = 0.0, 0.0
    assert np.array(list(map(SCALAR_OPS.atan2, y.tolist(), x.tolist()))).tobytes() == np.arctan2(y, x).tobytes()
    c = np.clip(rng.uniform(-1.1, 1.1, 20000), -1.0, 1.0)
    assert np.array(list(map(SCALAR_OPS.acos, c.tolist()))).tobytes() == np.arccos(c).tobytes()
    angles = np.concatenate([rng.uniform(-8 * np.pi, 8 * np.pi, 20000), np.arange(-64, 65) * (np.pi / 4), [0.0, -0.0]])
    for mine, theirs in ((SCALAR_OPS.cos, np.cos), (SCALAR_OPS.sin, np.sin)):
        assert np.array(list(map(mine, angles.tolist()))).tobytes() == theirs(angles).tobytes()

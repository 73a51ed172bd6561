"""Rotation vectors ↔ quaternions on small stacks (the body trunk's joints on one frame) take fewer numpy
calls than component by component; the two ways give the same bits on every input, so a frame's
conversion does not depend on the batch it is in (history independence, SPEC §5)."""

from __future__ import annotations

import numpy as np

from ik_solvers.core.rotations import _STACKED_COMPONENTS, quaternions_from_rotvecs, rotvecs_from_quaternions


def _rotvecs(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rotation vectors of every kind the trunk meets: zero, −0.0, below the small angle, up to π and past it."""
    directions = rng.normal(size=(n, 3))
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    angles = rng.choice([0.0, 1e-9, 5e-7, 1e-6, 2e-6, 0.01, 0.7, 2.0, np.pi - 1e-9, np.pi, 3.5], size=(n, 1))
    out = directions * angles
    out[rng.random(n) < 0.1, 0] = -0.0
    return out


def test_small_and_large_stacks_give_the_same_bits():
    rng = np.random.default_rng(7)
    big = _rotvecs(rng, 4000)  # far above the stacked-components size: component by component
    assert big.size >= _STACKED_COMPONENTS
    whole = quaternions_from_rotvecs(big)
    quaternions = whole * rng.choice([-1.0, 1.0], size=(4000, 1))  # both hemispheres
    quaternions[rng.random(4000) < 0.05, 0] = 0.0  # half turns
    quaternions[rng.random(4000) < 0.05, 0] = -0.0
    back = rotvecs_from_quaternions(quaternions)
    for rows in (np.arange(1), np.arange(5), np.arange(7, 90), np.arange(3999, 3990, -1)):
        assert np.array_equal(quaternions_from_rotvecs(big[rows]), whole[rows])
        assert np.array_equal(rotvecs_from_quaternions(quaternions[rows]), back[rows])
        # A joint axis as a body's trunk has it ((1, J, 3)), and strided columns of a wider array.
        assert np.array_equal(quaternions_from_rotvecs(big[rows][None]), whole[rows][None])
        wide = np.zeros((rows.size, 9))
        wide[:, 3:6] = big[rows]
        assert np.array_equal(quaternions_from_rotvecs(wide[:, 3:6]), whole[rows])
        wide[:, 2:6] = quaternions[rows]
        assert np.array_equal(rotvecs_from_quaternions(wide[:, 2:6]), back[rows])


def test_stacked_conversions_round_trip():
    rng = np.random.default_rng(8)
    rotvecs = _rotvecs(rng, 40)
    rotvecs = rotvecs[np.linalg.norm(rotvecs, axis=1) < np.pi - 1e-6]  # below a half turn: one vector each
    assert np.allclose(rotvecs_from_quaternions(quaternions_from_rotvecs(rotvecs)), rotvecs, atol=1e-12)

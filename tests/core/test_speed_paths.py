"""The speed paths of issue 12 change no bit: the batch solved in cache-sized chunks, and rotation
matrices built entry by entry on large stacks, give exactly what one piece / the small path gives."""

import importlib

import numpy as np
import pytest

from ik_solvers.core import Chain, JointKind, SolveOptions, rotations, solve

solve_module = importlib.import_module("ik_solvers.core.solve")


@pytest.mark.parametrize("method", ["SDLS", "DLS", "CCD"])
def test_a_batch_larger_than_a_chunk_gets_the_bits_of_smaller_batches(method):
    chain = Chain.straight([0.12] * 5, JointKind.BALL)
    rng = np.random.default_rng(12)
    n = solve_module.CHUNK + 37
    targets = np.array([0.3, 0.1, 0.0]) + 0.25 * rng.normal(size=(n, 3))
    options = SolveOptions(reference_weight=0.1, max_iterations=30)
    whole = solve(chain, targets, method, options)
    picks = np.r_[0, 1, solve_module.CHUNK - 1, solve_module.CHUNK, n - 1]
    for pick in picks:
        alone = solve(chain, targets[pick], method, options)
        np.testing.assert_array_equal(whole.q[pick], alone.q[0])
        assert whole.status[pick] == alone.status[0] and whole.iterations[pick] == alone.iterations[0]
    pieces = [solve(chain, targets[start:start + 300], method, options) for start in range(0, n, 300)]
    np.testing.assert_array_equal(whole.q, np.concatenate([piece.q for piece in pieces]))
    np.testing.assert_array_equal(whole.error, np.concatenate([piece.error for piece in pieces]))


def test_rotation_matrices_entry_by_entry_match_the_small_stack_path():
    rng = np.random.default_rng(3)
    rotvecs = rng.normal(size=(400, 3)) * rng.choice([0.0, 1e-9, 1e-3, 1.0, 3.0], size=(400, 1))
    assert rotvecs.size >= rotations._ROTVEC_COMPONENTS
    large = rotations.matrices_from_rotvecs(rotvecs)
    small = np.concatenate([rotations.matrices_from_rotvecs(rotvecs[i:i + 1]) for i in range(400)])
    np.testing.assert_array_equal(large, small)
    angle = np.linalg.norm(rotvecs, axis=1)
    expected = np.array([np.eye(3) if a == 0 else _rodrigues(v / a, a) for v, a in zip(rotvecs, angle)])
    np.testing.assert_allclose(large, expected, atol=1e-12)


def _rodrigues(axis, angle):
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + np.sin(angle) * k + (1 - np.cos(angle)) * k @ k


def _loop_sum(terms):
    total = terms[0]
    for term in terms[1:]:
        total = total + term
    return total


@pytest.mark.parametrize("size", [6, 7, 30, 90])
def test_long_ordered_sums_give_the_bits_of_the_term_by_term_loop(size):
    from ik_solvers.core import vectors

    rng = np.random.default_rng(size)
    scale = 10.0 ** rng.integers(-8, 8, size=(50, 3, size))
    m, v, w = rng.normal(size=(50, 3, size)) * scale, rng.normal(size=(50, size)), rng.normal(size=(50, 3))
    np.testing.assert_array_equal(vectors.dot(m[:, 0], v), _loop_sum([m[:, 0, k] * v[:, k] for k in range(size)]))
    np.testing.assert_array_equal(vectors.matvec(m, v), _loop_sum([m[:, :, k] * v[:, None, k] for k in range(size)]))
    mt = np.swapaxes(m, 1, 2)  # (50, size, 3), strided
    np.testing.assert_array_equal(vectors.tmatvec(mt, v), _loop_sum([mt[:, k, :] * v[:, k, None] for k in range(size)]))
    np.testing.assert_array_equal(vectors.tmatvec(m, w), _loop_sum([m[:, k, :] * w[:, k, None] for k in range(3)]))


def test_quaternion_products_component_by_component_match_the_small_stack_path():
    rng = np.random.default_rng(5)
    a, b = rng.normal(size=(300, 4)), rng.normal(size=(300, 4))
    assert a.size >= rotations._PRODUCT_COMPONENTS
    large = rotations.quaternion_products(a, b)
    small = np.concatenate([rotations.quaternion_products(a[i:i + 1], b[i:i + 1]) for i in range(300)])
    np.testing.assert_array_equal(large, small)
    w = a[:, 0] * b[:, 0] - np.sum(a[:, 1:] * b[:, 1:], axis=1)
    np.testing.assert_allclose(large[:, 0], w, atol=1e-12)


@pytest.mark.parametrize("n_bones", [3, 5, 10, 30])
def test_the_one_target_root_finder_steps_as_the_batch_one(n_bones):
    """HI's in-plane root finder for one target (Python-float bookkeeping) gives the batch path's bits."""
    from ik_solvers.core.hi import plane_chain

    rng = np.random.default_rng(n_bones)
    lengths = rng.uniform(0.2, 1.5, n_bones)
    m = 400
    bases = np.where(rng.random((m, 1)) < 0.5, 0.0, rng.uniform(-0.5, 0.5, (m, n_bones - 1)))
    directions = rng.uniform(-1.0, 1.0, (m, n_bones - 1))
    ends = np.sort(np.stack([plane_chain.plane_distances(lengths, bases),
                             plane_chain.plane_distances(lengths, bases + directions)], 1), axis=1)
    # Inside the bracket, on its ends, and outside it (no step taken).
    r = ends[:, 0] + rng.choice([0.0, 0.3, 0.999, 1.0, 1.2], m) * (ends[:, 1] - ends[:, 0])
    swap = plane_chain.plane_distances(lengths, bases) < r  # the bracket needs distance(bases) ≥ r
    bases, directions = np.where(swap[:, None], bases + directions, bases), np.where(swap[:, None], -directions, directions)
    t, steps = plane_chain.solve_path_parameters(lengths, bases, directions, r)
    for row in range(m):
        t1, steps1 = plane_chain.solve_path_parameters(lengths, bases[row:row + 1], directions[row:row + 1], r[row:row + 1])
        assert t1.tobytes() == t[row:row + 1].tobytes() and steps1[0] == steps[row], row
    assert steps.max() > 3  # the iteration ran

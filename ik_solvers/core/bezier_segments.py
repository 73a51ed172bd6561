"""Candidate Bézier segments of key reduction (SPEC §9, :mod:`.key_reduction`): the handles of all
of a chain's channels between two exact keys, fitted together in the chain's world metric.

Handles sit at 1/3 and 2/3 of a segment in time, so a segment's value is the cubic Bernstein
polynomial of its four control values and linear in the two free slopes per channel. The sums and
the linear solve are written so that their last bits do not depend on the process (thread count,
memory alignment): the operator and ``ik_batch`` must write the same keys bit for bit.
"""

from __future__ import annotations

import functools

import numpy as np

SLOPE_REGULARISATION = 3e-5
"""Weight (per frame of segment length, relative to the world metric's mean) pulling a fitted slope
toward the finite-difference slope: decides what the samples leave free (segments with fewer than
two inner frames, a quaternion's length)."""


def solve_positive_definite(matrices: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solutions ``(k, n)`` of the positive definite systems ``matrices (k, n, n)`` · x = ``rhs (k, n)``.

    Gaussian elimination in numpy, not LAPACK: OpenBLAS's blocked, threaded factorisation changes
    the last bits with the thread count, and the keys must not depend on the process (the
    operator and ``ik_batch`` write the same keys bit for bit)."""
    k, n = rhs.shape
    augmented = np.empty((n, n + 1, k))
    augmented[:, :n] = matrices.transpose(1, 2, 0)
    augmented[:, n] = rhs.T
    return _eliminated(augmented)


def _eliminated(augmented: np.ndarray) -> np.ndarray:
    """The solutions ``(k, n)`` of the systems ``augmented (n, n + 1, k)`` (matrix and right-hand
    side, the systems on the last axis: each step's few operations then run over contiguous rows),
    by Gaussian elimination in place (no pivoting needed on positive definite systems), then back
    substitution on the right-hand sides.

    Eliminating below the pivot only (not above it too, as Gauss-Jordan does) is a third of the
    arithmetic less, ``n³/3`` instead of ``n³/2`` per system, for ``n`` more steps on one column
    (docs/key-reduction.md: the chains' reductions 0.93x the time, with the same keys)."""
    n = augmented.shape[0]
    for j in range(n - 1):  # columns up to j are done: never read again
        row = augmented[j, j + 1:] / augmented[j, j]
        augmented[j + 1:, j + 1:] -= augmented[j + 1:, j:j + 1] * row
        augmented[j, j + 1:] = row
    solution = augmented[:, n]
    solution[n - 1] /= augmented[n - 1, n - 1]
    for j in range(n - 1, 0, -1):  # rows above j hold unit pivots: x_i = b_i − Σ_{c>i} a_ic x_c
        solution[:j] -= augmented[:j, j] * solution[j]
    return solution.T


def last_axis_sums(terms: np.ndarray) -> np.ndarray:
    """``terms.sum(axis=-1)`` bit for bit, for a short last axis in fewer, longer numpy calls.

    numpy sums a contiguous last axis pairwise, one inner loop per sum (slow for many short sums):
    fewer than 8 terms in order; up to 128 in 8 running partial sums, combined pairwise, then the
    rest in order. Here every step runs over all the sums at once."""
    count = terms.shape[-1]
    if count < 8:
        total = terms[..., 0] + 0.0
        for index in range(1, count):
            total = total + terms[..., index]
        return total
    if count > 128:
        return terms.sum(axis=-1)
    whole = count - count % 8
    partial = terms[..., :8]
    for block in range(8, whole, 8):
        partial = partial + terms[..., block:block + 8]
    pairs = partial[..., 0::2] + partial[..., 1::2]  # r0 + r1, r2 + r3, r4 + r5, r6 + r7
    quads = pairs[..., 0::2] + pairs[..., 1::2]  # (r0 + r1) + (r2 + r3), (r4 + r5) + (r6 + r7)
    total = quads[..., 0] + quads[..., 1]
    for index in range(whole, count):
        total = total + terms[..., index]
    return total


@functools.lru_cache(maxsize=8)
def _upper_triangle(channels: int) -> tuple[np.ndarray, np.ndarray]:
    return np.triu_indices(channels)


@functools.lru_cache(maxsize=8)
def _normal_index(channels: int) -> np.ndarray:
    """Index ``(2C, 2C)`` of every entry of a segment's normal matrix (unknowns: the C start slopes,
    then the C end slopes) into its summed products: block d0², d0·d1, d1² (``C (C + 1) / 2``
    upper-triangle entries of the world metric each)."""
    upper = channels * (channels + 1) // 2
    triangle = np.zeros((channels, channels), dtype=int)
    triangle[_upper_triangle(channels)] = np.arange(upper)
    triangle = np.maximum(triangle, triangle.T)
    blocks = np.array([[0, 1], [1, 2]])
    return (blocks[:, None, :, None] * upper + triangle[None, :, None, :]).reshape(2 * channels, 2 * channels)


class SegmentBatch:
    """Candidate segments from sample ``starts[i]`` to ``ends[i]`` (``(k,)`` each; a candidate's
    rows are the samples between its keys) of channels ``values (N, C)``, whose handles :meth:`fit`
    fits in the world metric, as often as the weights change.

    The keys are the samples; the handles of all channels of a segment are fitted together, a
    least-squares fit of the samples between its keys in the world metric ``metric (N, C, C)``
    (``JᵀJ`` of the chain's points with respect to the channels at each frame: a channel error is
    weighed by how far it moves the joints and the tip, and errors that do not move them, such as
    a quaternion's length, cost nothing), pulled weakly toward the finite-difference ``slopes (N, C)``
    (which decides what the samples leave free). ``rows (R,)``: the samples between the keys of
    every candidate one after the other; ``segment (R,)``: each row's candidate; ``basis (R, 4)``:
    its Bernstein basis. Everything but the rows' weights is formed once per batch. A candidate's
    fit depends on its own rows only, not on the others in the batch (to the last bit).
    """

    def __init__(self, frames: np.ndarray, values: np.ndarray, slopes: np.ndarray, metric: np.ndarray,
                 metric_mean: float, starts: np.ndarray, ends: np.ndarray, metric_upper: np.ndarray | None = None
                 ) -> None:
        k, channels = len(ends), values.shape[1]
        self.channels = channels
        self.lengths = lengths = ends - starts - 1
        self.segment = segment = np.repeat(np.arange(k), lengths)
        self.starts = first = np.cumsum(lengths) - lengths
        self.rows = rows = np.repeat(starts - first + 1, lengths) + np.arange(segment.size)
        spans = frames[ends] - frames[starts]
        span = spans[segment]
        s = (frames[rows] - frames[starts][segment]) / span
        r = 1.0 - s
        self.basis = basis = np.stack([r * r * r, 3.0 * r * r * s, 3.0 * r * s * s, s * s * s], axis=1)
        y0, y1 = values[starts], values[ends]
        # value = (B0 + B1) y0 + (B2 + B3) y1 + B1 (Δ/3) m0 − B2 (Δ/3) m1: linear in the slopes m0, m1
        d = np.stack([basis[:, 1] * span / 3.0, -basis[:, 2] * span / 3.0], axis=1)
        residual = (values[rows] - (basis[:, 0] + basis[:, 1])[:, None] * y0[segment]
                    - (basis[:, 2] + basis[:, 3])[:, None] * y1[segment])
        g = metric[rows]
        # The normal matrix is symmetric, and so are its blocks: only the d0², d0·d1, d1² blocks'
        # upper triangles are summed (their entries bit for bit those of the full products);
        # ``metric_upper (N, C (C + 1) / 2)``: the metric's upper triangles, if already taken out.
        upper = g[(slice(None), *_upper_triangle(channels))] if metric_upper is None else metric_upper[rows]
        dd = np.stack([d[:, 0] * d[:, 0], d[:, 0] * d[:, 1], d[:, 1] * d[:, 1]], axis=1)
        # (einsum for the outer products: no sum, so the same bits as ``*``, in fewer inner loops)
        self.products = np.einsum("ra,rb->rab", dd, upper).reshape(len(rows), -1)
        self.normal_index = _normal_index(channels)
        # Not einsum (its sums' last bits may depend on memory alignment): numpy's own sum, bit for bit.
        gr = last_axis_sums(g * residual[:, None, :])
        self.pulls = np.einsum("ra,rb->rab", d, gr).reshape(len(rows), -1)
        weight = SLOPE_REGULARISATION * spans * max(metric_mean, 1e-300)
        regular_rhs = weight[:, None] * np.concatenate([slopes[starts], slopes[ends]], axis=1)
        # Per candidate, side by side (one gather for a round's candidates): its keys' values, plus
        # and minus a third of its span, the pull toward the slopes (right-hand side, then its weight).
        third = (spans / 3.0)[:, None]
        self.candidates = np.concatenate([y0, y1, third, -third, regular_rhs, weight[:, None]], axis=1)

    def fit(self, weights: np.ndarray | None = None, chosen: np.ndarray | None = None,
            mask: np.ndarray | None = None) -> np.ndarray:
        """Float32 control values ``(k', 4, C)`` (key, right handle, next left handle, next key) of
        the ``chosen`` candidates (indices, increasing; all by default; ``mask (R,)``: their rows),
        each row of theirs weighted by ``weights`` (one per row of theirs, in order; 1 by default)."""
        starts, products, pulls, candidates = self.starts, self.products, self.pulls, self.candidates
        if chosen is not None and mask is not None:
            lengths = self.lengths[chosen]
            starts = np.cumsum(lengths) - lengths
            products, pulls, candidates = products[mask], pulls[mask], candidates[chosen]
        if weights is not None:
            products, pulls = products * weights[:, None], pulls * weights[:, None]
        # Sums per candidate over its rows (contiguous): reduceat, not a matrix product, whose BLAS
        # blocking (thread count) would change the last bits and so the keys between processes.
        # The normal matrices and right-hand sides go straight into the elimination's layout.
        k, channels = len(candidates), self.channels
        n = 2 * channels
        augmented = np.empty((n, n + 1, k))
        augmented[:, :n] = np.add.reduceat(products, starts, axis=0).T[self.normal_index]
        augmented[:, n] = (np.add.reduceat(pulls, starts, axis=0) + candidates[:, n + 2:2 * n + 2]).T
        augmented.reshape(n * (n + 1), k)[::n + 2] += candidates[:, -1]  # the diagonal: the pull's weight
        # Controls: y0, y0 + m0 Δ/3, y1 + m1 (−Δ/3) (= y1 − m1 Δ/3 bit for bit), y1.
        keys, thirds = candidates[:, :n].reshape(k, 2, channels), candidates[:, n:n + 2, None]
        controls = np.empty((k, 4, channels))
        controls[:, ::3] = keys
        np.multiply(_eliminated(augmented).reshape(k, 2, channels), thirds, out=controls[:, 1:3])
        controls[:, 1:3] += keys
        return controls.astype(np.float32).astype(float)

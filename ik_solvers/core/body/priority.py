"""The trunk's lexicographic Gauss-Newton step: each priority level's least squares in the null space of
the levels above, exactly (SPEC §8; ``trunk.py`` iterates it).

Every operation is per frame (elementwise, term-by-term products in index order, numpy's stacked
``eigh``), so a frame's step is the same bits in any batch.
"""

from __future__ import annotations

import numpy as np

from ..vectors import dot, matvec, tmatvec

# Squared singular values (chain units² per unit of a scaled variable) below this count as no
# freedom at all: the direction is left out of the step and of the projection. Above it the
# projection is exact, so a lower goal cannot pull a higher one off (a damped projection leaks
# ~λ²/σ² of every lower step into the higher goals: 0.02 mm on a body, measured).
SINGULAR_SQUARED = 1e-8
# Damping (chain units²) added to every kept squared singular value: keeps steps bounded next to
# the threshold, and is small enough that a converging step is a Newton step.
DAMPING_SQUARED = 1e-7
# Damping per squared residual (chain units² per chain unit²) of a level (prioritised_step).
RESIDUAL_DAMPING = 100.0
# The lowest level's curvature floor (body scales per unit of its residual): its squared singular values
# count as at least this × the body scale × its residual norm (chain units²). A goal out of reach ends where
# its gradient vanishes, and the curvature of its residual there (the residual times the bones' reach per
# radian², more where the goals above bend the null space it moves in) is what the Gauss-Newton model leaves
# out: steps that ignore it overshoot, never settle, and the goal takes turns with the goals above it. On
# compare_body's look path (the left hand up to 140 mm out of reach, the head met) the largest joint step
# was 13.8× the largest goal step at 160 frames a path and 40× at 320; with a floor of 3, 4.9× and 7.3×
# (2: 7.0× and 10.1×; 5: 4.9× and 8.2×). The lowest level of a step alone: a floor slows a goal that can be met
# at the edge of its reach (one of 2 on every level left the look path's head 1.2 mm short where it is reached).
CURVATURE_FLOOR = 3.0
# Fraction of the way back to the reference pose taken per step, in the goals' null space.
PULL = 1.0

Level = tuple[np.ndarray, np.ndarray, "np.ndarray | None"]
"""A level's stacked rows: residuals ``(n, r)``, Jacobian ``(n, r, m)``, and which rows are held ``(n, r)``
(their step is zero: they constrain the levels below without moving themselves) or None (none)."""


def level_rows(level: Level, frames: np.ndarray) -> Level:
    """``level`` on the batch rows ``frames``."""
    residuals, jacobian, held = level
    return residuals[frames], jacobian[frames], None if held is None else held[frames]


# Up to this many entries of the result, :func:`products` accumulates every term in one call (fewest calls:
# one frame, live mode); above, term by term with the frames last (measured on 1-1,000 frames of the
# trunk's shapes, 2-24 terms: the accumulation along a short axis, or a loop over short rows with the
# frames first, costs up to 7x more there).
_ACCUMULATE_ENTRIES = 576


def products(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ bᵀ`` for stacks ``a (n, i, k)``, ``b (n, j, k)`` → ``(n, i, j)``, summed term by term in index
    order (elementwise: the same bits in any batch, and cheaper than one BLAS call per small matrix)."""
    if a.shape[0] * a.shape[1] * b.shape[1] <= _ACCUMULATE_ENTRIES:
        # The same sums in the same order in one accumulation.
        return np.add.accumulate(a[:, :, None, :] * b[:, None, :, :], axis=-1)[..., -1]
    # Frames last: every term multiplies unit-stride rows of n frames, the sums in the same order.
    a_t = np.ascontiguousarray(np.transpose(a, (1, 2, 0)))[:, None]  # (i, 1, k, n)
    b_t = np.ascontiguousarray(np.transpose(b, (1, 2, 0)))[None]  # (1, j, k, n)
    total = a_t[:, :, 0] * b_t[:, :, 0]
    term = np.empty_like(total)
    for k in range(1, a_t.shape[2]):
        total += np.multiply(a_t[:, :, k], b_t[:, :, k], out=term)
    return np.ascontiguousarray(np.transpose(total, (2, 0, 1)))


State = tuple[np.ndarray, np.ndarray, "np.ndarray | None", bool]
"""A :func:`prioritised_step` before one level: ``(dz, basis, pulled, stepped)`` (arrays never changed after)."""
Trail = list[State]
"""The state before each level: a second try that changes a lower level's rows resumes there (:func:`resumed`)."""


def combinations(weights: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``weights @ rows`` for stacks ``weights (n, i, l)``, ``rows (n, l, m)`` → ``(n, i, m)``: each output row the
    sum of ``rows`` weighted, term by term in index order (:func:`products` with ``rows`` transposed, the same
    bits), a term a product of whole rows (unit stride along ``m``: up to 4x faster than :func:`products` on
    24-1,000 frames)."""
    if weights.shape[0] * weights.shape[1] * weights.shape[2] <= 16:  # one frame: one accumulation
        return np.add.accumulate(weights[:, :, :, None] * rows[:, None, :, :], axis=2)[:, :, -1, :]
    total = weights[:, :, 0, None] * rows[:, None, 0, :]
    for k in range(1, weights.shape[2]):
        total += weights[:, :, k, None] * rows[:, None, k, :]
    return total


def prioritised_step(levels: list[Level], scales: np.ndarray, back: np.ndarray | None, body_scale: float,
                     trail: Trail | None = None, resume: tuple[int, State] | None = None) -> np.ndarray:
    """The lexicographic Gauss-Newton step ``(n, m)``: each level's least-squares step in the null space of
    the levels above, then ``PULL · back`` projected on what is left. Variables are scaled by
    ``scales (n, m)`` (``sqrt(weight)``, 0 for a variable held at a limit); ``body_scale``: the body's size
    (chain units), which sets the lowest level's curvature floor (:data:`CURVATURE_FLOOR`).

    The levels above are kept as an orthonormal basis of their rows (``basis (n, r, m)``, zero rows for
    directions dropped as singular), so a projection is two small products, never an ``m × m`` matrix.
    ``trail``: a list to which the state before each level is appended; ``resume``: :func:`resumed`'s
    ``(level, state)`` to start there instead (the levels above it as they were: the same bits).
    """
    n, m = scales.shape
    # Unit scales (every weight 1, nothing at a limit) change no bit: the products by them are left out.
    scaling: np.ndarray | None = scales if (scales != 1.0).any() else None
    if resume is not None:
        first, (dz, basis, pulled, stepped) = resume
    else:
        first, dz, basis = 0, np.zeros((n, m)), np.zeros((n, 0, m))
        stepped = False  # dz is exact zeros until a level steps (J dz adds exact zeros: left out too)
        pulled = None
        if back is not None:
            pulled = back if scaling is None and PULL == 1.0 else \
                PULL * np.where(scales > 0.0, back / np.where(scales > 0.0, scales, 1.0), 0.0)
    for k in range(first, len(levels)):
        if trail is not None:
            trail.append((dz, basis, pulled, stepped))
        residuals, jacobian, held = levels[k]
        # Frames where a level asks nothing (limbs within reach) add exact zeros: they are left out.
        on = np.nonzero(jacobian.any(axis=(1, 2)))[0]  # nonzero entries (NaN included), as != 0.0
        if on.size == 0:
            continue
        every = on.size == n
        sub = slice(None) if every else on
        step, free, vectors, exact = level_step(residuals[sub], jacobian[sub], None if scaling is None else scaling[sub],
                                                 dz[sub] if stepped else None, basis[sub],
                                                 CURVATURE_FLOOR * body_scale if k == len(levels) - 1 else 0.0,
                                                 None if held is None else held[sub])
        dz = dz.copy()  # fresh arrays: the trail keeps the old ones
        dz[sub] += step
        stepped = True
        # The last level's rows serve only to project the pull (which level is last is the problem's
        # structure, never the batch's: the two ways round differ in the last bit).
        if k == len(levels) - 1:
            if pulled is not None:
                pulled = pulled.copy()
                pulled[sub] -= tmatvec(free, matvec(vectors, exact * exact * tmatvec(vectors, matvec(free, pulled[sub]))))
            break
        part = combinations(np.swapaxes(vectors, 1, 2), free) * exact[:, :, None]  # Uᵀ F / σ
        rows = part if every else np.zeros((n,) + part.shape[1:])
        if not every:
            rows[on] = part
        basis = np.concatenate([basis, rows], 1)
    if pulled is not None:
        dz = dz + (pulled - tmatvec(basis, matvec(basis, pulled)) if basis.shape[1] else pulled)
    return dz if scaling is None else dz * scaling


def resumed(trail: Trail, level: int, frames: np.ndarray) -> tuple[int, State]:
    """The ``resume`` argument of :func:`prioritised_step` for the batch rows ``frames``, from ``level`` on."""
    dz, basis, pulled, stepped = trail[level]
    return level, (dz[frames], basis[frames], None if pulled is None else pulled[frames], stepped)


def level_step(residuals: np.ndarray, jacobian: np.ndarray, scales: np.ndarray | None, dz: np.ndarray | None,
               basis: np.ndarray, floor: float = 0.0, held: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One level's step ``(n, m)`` (scaled variables) in the null space of ``basis (n, r, m)``, from the steps
    of the levels above ``dz`` (None: none yet); and its rows there ``F (n, r_level, m)`` with the
    eigenvectors ``U`` and inverse singular values ``1/σ`` (0 for dropped directions) of ``F Fᵀ``: ``Uᵀ F / σ``
    are orthonormal. ``scales (n, m)``: None for all ones; ``floor``: the curvature floor per unit of the
    level's residual norm (chain units; 0 for none): see :data:`CURVATURE_FLOOR`."""
    scaled = jacobian if scales is None else jacobian * scales[:, None, :]
    free = scaled - combinations(products(scaled, basis), basis) if basis.shape[1] else scaled
    # Without steps above, J dz is exact zeros: a residual (never −0: a difference or a select of +0) stays.
    left = residuals if dz is None else residuals - matvec(scaled, dz)
    if held is not None:  # held rows ask this level's step to leave them where the steps above put them
        left = np.where(held, 0.0, left)
    values, vectors = np.linalg.eigh(products(free, free))
    kept = values > SINGULAR_SQUARED
    # Levenberg-Marquardt damping growing with the level's residual (Sugihara 2011): Newton steps as
    # a goal is met, short ones while it cannot be (a hand out of reach stops pushing the body).
    squared = dot(residuals, residuals)
    damping = DAMPING_SQUARED + RESIDUAL_DAMPING * squared
    safe = np.where(kept, values, 1.0)  # dropped directions: a harmless 1 (their entries are zeros below)
    curvature = safe
    if floor:
        lowest = floor * np.sqrt(squared)  # zero for a met level: the same bits
        if held is not None:  # a level holding its goals out of reach asks only what can be met: no floor
            lowest = np.where(held.any(axis=1), 0.0, lowest)
        curvature = np.maximum(safe, lowest[:, None])
    inverse = np.where(kept, 1.0 / (curvature + damping[:, None]), 0.0)
    exact = np.sqrt(np.where(kept, 1.0 / safe, 0.0))
    return tmatvec(free, matvec(vectors, tmatvec(vectors, left) * inverse)), free, vectors, exact

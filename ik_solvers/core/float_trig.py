"""Cosines and sines of Python floats with numpy's bits: ``math``'s where numpy's agree with them.

A one-target solve (live mode) must give the batch solve's bits, and the batch takes its cosines
and sines from numpy's ufuncs. A ufunc call costs ~0.5–1 µs, ``math.cos`` ~0.05 µs; over a 10-bone
HI solve's ~15 such calls that is ~20 µs of a live update. numpy does not promise ``math``'s
bits: some builds route float64 sin and cos to SIMD kernels that round differently on AVX-512
machines (numpy issue #23523), others call the C library's, as ``math`` does. So the first call
compares the two on :data:`PROBE_SIZE` probe angles, the way the batch calls numpy (contiguous,
strided, one element); ``math`` is used only if every one agrees, numpy's ufuncs otherwise.

A probe is not a proof: an implementation that differed from ``math``'s on fewer angles than the
probe can find would make a rare one-target result differ from the batch's in its last bits
(tests/core/test_float_trig.py: the probe rejects one that is one unit in the last place off on
one angle in 10,000; docs/performance.md, "Fifth round").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache

import numpy as np

PROBE_SIZE = 1 << 15
"""Probe angles: uniform in ±8π (headings and half-angles of chains), multiples of π/4 and their
neighbours (where range reduction is hardest), and a log-uniform spread of magnitudes to 1e6 rad
(a user's swivel may be any angle)."""


def _probe_angles() -> np.ndarray:
    rng = np.random.default_rng(20261201)
    quarter_turns = np.arange(-64, 65) * (np.pi / 4)
    near = np.concatenate([quarter_turns, np.nextafter(quarter_turns, np.inf), np.nextafter(quarter_turns, -np.inf)])
    spread = rng.choice((-1.0, 1.0), PROBE_SIZE // 4) * 10.0 ** rng.uniform(-12, 6, PROBE_SIZE // 4)
    uniform = rng.uniform(-8 * np.pi, 8 * np.pi, PROBE_SIZE - near.size - spread.size - 2)
    return np.concatenate([[0.0, -0.0], near, spread, uniform])


def agrees_on_probe(ufunc: np.ufunc, scalar, angles: np.ndarray) -> bool:
    """Whether ``scalar`` (a ``math`` function) gives ``ufunc``'s bits on every one of ``angles``, the
    ufunc called on the contiguous array, on a strided view and on one-element arrays."""
    expected = np.fromiter(map(scalar, angles.tolist()), float, angles.size)
    strided = np.repeat(angles, 2)[::2]
    singles = np.array([ufunc(angles[k : k + 1])[0] for k in range(min(angles.size, 256))])
    return (ufunc(angles).tobytes() == expected.tobytes() and ufunc(strided).tobytes() == expected.tobytes()
            and singles.tobytes() == expected[: singles.size].tobytes())


@cache
def math_matches_numpy() -> bool:
    """Whether ``math.cos`` and ``math.sin`` give numpy's float64 ufuncs' bits on every probe angle
    (decided once per process, ~15 ms)."""
    angles = _probe_angles()
    return agrees_on_probe(np.cos, math.cos, angles) and agrees_on_probe(np.sin, math.sin, angles)


def _numpy_cosines_sines(angles: Sequence[float]) -> tuple[list[float], list[float]]:
    values = np.array(angles, dtype=float)
    return np.cos(values).tolist(), np.sin(values).tolist()


def cosines_sines(angles: Sequence[float]) -> tuple[list[float], list[float]]:
    """Cosines and sines of ``angles`` (radians, Python floats), bit for bit ``np.cos`` and ``np.sin``
    of them as one float64 array (elementwise: as in any row of a batch)."""
    if math_matches_numpy():
        return list(map(math.cos, angles)), list(map(math.sin, angles))
    return _numpy_cosines_sines(angles)

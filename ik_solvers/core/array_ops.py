"""The two array namespaces HI's per-target math is written against: numpy for a batch, ``math`` for one target.

HI's math is written once, per target and in components (a vector is three values, a chain's
headings one value per joint): functions of plain arithmetic, which Python floats and ``(N,)``
numpy arrays both support, and of the few operations taken from an ``ArrayOps`` namespace —
transcendental functions, a select, the least and greatest of two values. The batch solve passes
:data:`NUMPY_OPS` and ``(N,)`` arrays, the one-target solve of live mode :data:`SCALAR_OPS` and
Python floats, so both run the same formulas in the same order.

What that gives: +, −, ×, ÷ and sqrt are correctly rounded in both, so only the transcendental
functions can round apart. ``math``'s ``atan2`` and ``acos`` differ from numpy's in the last bit on
~30 % of inputs here, so the scalar namespace takes those two from numpy (one scalar ufunc call,
~1 µs, a handful per solve); ``cos`` and ``sin``, called per joint and per root-finding step, come
from ``math`` (~0.05 µs), which gave numpy's bits on every input tried here — numpy does not promise
that on every build (SVML kernels on AVX-512, numpy issue #23523). Where they agree the one-target
result has the batch's bits (tests/core/test_hi_one_target.py checks every field); where a numpy
build rounds them otherwise, the two differ by a few float64 roundings, at most one float32 unit
in the channels Blender stores.

A batch's elementwise results never depend on its size as long as every transcendental input is
a unit-stride array (``vectors.unit_stride``): the batch entry points split their ``(N, 3)`` inputs
into contiguous components, and every later value is a fresh ufunc result.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import reduce
from operator import add, mul, sub
from typing import Any

import numpy as np

Real = Any
"""A Python float (one target) or an ``(N,)`` float array (a batch): the values HI's math runs on."""


def _select(condition: Any, if_true: Any, if_false: Any) -> Any:
    return if_true if condition else if_false


def _choose(condition: Any, if_true: tuple, if_false: tuple) -> tuple:
    return if_true if condition else if_false


def _numpy_choose(condition: np.ndarray, if_true: tuple, if_false: tuple) -> tuple:
    return tuple(np.where(condition, a, b) for a, b in zip(if_true, if_false))


def _numpy_atan2_all(ys: list, xs: list) -> list:
    return list(map(np.arctan2, ys, xs))


def _scalar_atan2_all(ys: list, xs: list) -> list:
    # Elementwise: each value as alone (and as in the batch's arrays). Lists made arrays first: a ufunc
    # converts list operands ~2× slower.
    return np.arctan2(np.array(ys, dtype=float), np.array(xs, dtype=float)).tolist()


def _scalar_divide(numerator: float, denominator: float) -> float:
    """numpy's IEEE division (``±inf``, or NaN for 0 / 0) where Python would raise."""
    if denominator != 0.0:
        return numerator / denominator
    if numerator == 0.0 or math.isnan(numerator):
        return math.nan
    return math.copysign(math.inf, numerator) * math.copysign(1.0, denominator)


@dataclass(frozen=True)
class JointOps:
    """Operations along a chain's joint axis: a list of floats (one target) or an ``(N, n)`` array with
    the joints last (a batch). Sums run in joint order (sequential) in both."""

    polar: Callable[[Any, Any], tuple[Any, Any]]  # lengths, headings → L cos ψ, L sin ψ
    cos: Callable[[Any], Any]
    sin: Callable[[Any], Any]
    dot: Callable[[Any, Any], Any]  # Σ a_j b_j in joint order, per target
    sub: Callable[[Any, Any], Any]
    cumsum: Callable[[Any], Any]
    total: Callable[[Any], Any]  # per target
    prepend: Callable[[float, Any], Any]  # one more joint first, the same value for every target
    lerp: Callable[[Any, Any, Any], Any]  # bases + t · directions, t per target
    where: Callable[[Any, Any, Any], Any]  # condition per target
    at: Callable[[Any, int], Any]  # one joint's values (a unit-stride array for a batch)
    pack: Callable[[list], Any]  # per-joint values (floats or (N,) arrays) → the joint axis


def _numpy_prepend(value: float, values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, dtype=float)
    out = np.empty(values.shape[:-1] + (values.shape[-1] + 1,))
    out[..., 0] = value
    out[..., 1:] = values
    return out


def _numpy_pack(values: list) -> np.ndarray:
    # Filled column by column: ~8× faster than stacking broadcast copies on one frame. The values are
    # floats and same-shaped arrays, so the longest shape is every value's broadcast.
    out = np.empty(max(map(np.shape, values), key=len) + (len(values),))
    for j, value in enumerate(values):
        out[..., j] = value
    return out


def _numpy_polar(lengths: Any, headings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.multiply(lengths, np.cos(headings)), np.multiply(lengths, np.sin(headings))


def _scalar_polar(lengths: Any, headings: list) -> tuple[list, list]:
    return list(map(mul, lengths, map(math.cos, headings))), list(map(mul, lengths, map(math.sin, headings)))


NUMPY_JOINTS = JointOps(
    _numpy_polar, np.cos, np.sin, lambda a, b: np.add.accumulate(a * b, axis=-1)[..., -1],
    np.subtract, lambda v: np.add.accumulate(v, axis=-1),
    lambda v: np.add.accumulate(v, axis=-1)[..., -1], _numpy_prepend,
    lambda bases, t, directions: bases + np.asarray(t)[..., None] * directions,
    lambda condition, a, b: np.where(np.asarray(condition)[..., None], a, b),
    lambda v, j: np.array(v[..., j], dtype=float, copy=True, order="C"), _numpy_pack)

SCALAR_JOINTS = JointOps(
    _scalar_polar, lambda v: list(map(math.cos, v)), lambda v: list(map(math.sin, v)),
    lambda a, b: reduce(add, map(mul, a, b)),
    lambda a, b: list(map(sub, a, b)), lambda v: list(itertools.accumulate(v)), lambda v: reduce(add, v),
    lambda value, v: [value, *v], lambda bases, t, directions: [b + t * d for b, d in zip(bases, directions)],
    _select, lambda v, j: v[j], list)


@dataclass(frozen=True)
class ArrayOps:
    """The operations HI's per-target math takes from its namespace (everything else is arithmetic).

    ``where(condition, a, b)`` selects per element (both sides are computed: guard divisions with a
    safe denominator, or use ``divide``, which gives IEEE ``±inf`` / NaN instead of raising — numpy
    warns unless its caller set ``np.errstate``);
    ``choose(condition, as, bs)`` is ``where`` on tuples of values alike (one test for one target);
    ``atan2_all(ys, xs)`` is ``atan2`` of each pair (one numpy call for one target's list).
    """

    cos: Callable[[Any], Any]
    sin: Callable[[Any], Any]
    sqrt: Callable[[Any], Any]
    atan2: Callable[[Any, Any], Any]
    acos: Callable[[Any], Any]
    where: Callable[[Any, Any, Any], Any]
    minimum: Callable[[Any, Any], Any]
    maximum: Callable[[Any, Any], Any]
    divide: Callable[[Any, Any], Any]
    choose: Callable[[Any, tuple, tuple], tuple]
    atan2_all: Callable[[list, list], list]
    joints: JointOps
    any: Callable[[Any], bool]  # whether any element is true (a rare case's values computed only then)


NUMPY_OPS = ArrayOps(np.cos, np.sin, np.sqrt, np.arctan2, np.arccos, np.where, np.minimum, np.maximum, np.divide,
                     _numpy_choose, _numpy_atan2_all, NUMPY_JOINTS, np.any)
"""The batch's namespace: numpy's ufuncs on ``(N,)`` arrays."""

def _numpy_atan2(y: float, x: float) -> float:
    return float(np.arctan2(y, x))


def _numpy_acos(x: float) -> float:
    return float(np.arccos(x))


SCALAR_OPS = ArrayOps(math.cos, math.sin, math.sqrt, _numpy_atan2, _numpy_acos, _select, min, max, _scalar_divide,
                      _choose, _scalar_atan2_all, SCALAR_JOINTS, bool)
"""One target's namespace on Python floats: ``math`` (a ufunc call costs ~0.5–1 µs, ``math``'s ~0.05 µs),
numpy's ``arctan2`` and ``arccos`` (``math``'s round differently)."""



def _row_polar(lengths: Any, headings: list) -> tuple[list, list]:
    # One numpy call per function on the row's unit-stride array: the batch's bits on any numpy build.
    values = np.array(headings, dtype=float)
    return list(map(mul, lengths, np.cos(values).tolist())), list(map(mul, lengths, np.sin(values).tolist()))


def _row_all(function: Callable[[np.ndarray], np.ndarray]) -> Callable[[list], list]:
    return lambda values: function(np.array(values, dtype=float)).tolist()


def _row_one(function: Callable[..., Any]) -> Callable[..., float]:
    # One-element arrays, not numpy scalars: a unit-stride operand takes the batch's kernel (a 0-d one
    # may take another loop, vectors.unit_stride).
    return lambda *values: function(*(np.array([value], dtype=float) for value in values)).item()


ROW_OPS = replace(SCALAR_OPS, cos=_row_one(np.cos), sin=_row_one(np.sin), atan2=_row_one(np.arctan2),
                  acos=_row_one(np.arccos),
                  joints=replace(SCALAR_JOINTS, polar=_row_polar, cos=_row_all(np.cos), sin=_row_all(np.sin)))
"""One batch row on Python floats, every transcendental function from numpy (a joint axis's in one call):
a batch of one computes what a batch of many does, whatever ``math``'s rounding. ~1 µs a numpy call
against ~0.5 µs an operation on one-element arrays: a one-frame batch runs its per-target functions
in this namespace (``hi.plane_chain.solve_path_parameters``, ``hi.placement.one_frame_pose``)."""

"""Cosines and sines on Python floats with numpy's bits (issue 12: live solves keep the batch's bits)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ik_solvers.core import float_trig
from ik_solvers.core.float_trig import agrees_on_probe, cosines_sines

_ANGLES = st.lists(st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
                   | st.floats(-8 * math.pi, 8 * math.pi, allow_nan=False), min_size=0, max_size=40)


@pytest.fixture(params=["as decided", "numpy forced"])
def decided(request, monkeypatch):
    """``cosines_sines`` as the probe decides on this machine, and with numpy's ufuncs forced."""
    if request.param == "numpy forced":
        monkeypatch.setattr(float_trig, "math_matches_numpy", lambda: False)
    return request.param


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(angles=_ANGLES)
def test_cosines_sines_give_numpy_bits(decided, angles):
    cos, sin = cosines_sines(angles)
    array = np.array(angles, dtype=float)
    assert np.array(cos, dtype=float).tobytes() == np.cos(array).tobytes()
    assert np.array(sin, dtype=float).tobytes() == np.sin(array).tobytes()
    assert all(type(v) is float for v in cos + sin)


def _rounding_differently(ufunc: np.ufunc, every: int):
    """``ufunc`` one unit in the last place off on one angle in ``every`` (by the angle's bits): an
    implementation that rounds as ``math`` does almost everywhere."""
    def computed(angles):
        values = ufunc(angles)
        odd = np.frombuffer(np.ascontiguousarray(angles).tobytes(), np.uint64) % np.uint64(every) == 0
        return np.where(odd, np.nextafter(values, np.inf), values)
    return computed


@pytest.mark.parametrize("every", [2, 100, 10_000])
def test_the_probe_sees_a_numpy_that_rounds_differently(every):
    angles = float_trig._probe_angles()
    assert agrees_on_probe(np.cos, lambda angle: float(np.cos(angle)), angles)  # numpy's own bits pass
    assert not agrees_on_probe(_rounding_differently(np.cos, every), math.cos, angles)
    assert not agrees_on_probe(_rounding_differently(np.sin, every), math.sin, angles)

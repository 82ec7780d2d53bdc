# SPDX-License-Identifier: Apache-2.0

"""The jerk stage: exact against a numerical double average, and within every limit."""

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.core.errors import InvalidInputError
from ik_node.core.kernels import limits
from ik_node.core.motion.jerk import check_jerk_limits, JerkFilter, smoothing_steps
import numpy as np
import pytest


def brute_force(xs, h, m, t):
    """z(t), z'(t) of the piecewise-linear input xs (grid h, xs[0] at t = 0), independently.

    The tests' own oracle: X(s) = integral of x from 0 (closed form, piecewise
    quadratic; x rests at xs[0] before 0 and at xs[-1] after the end),
    y(s) = (X(s) - X(s - h)) / h (a quadratic on each grid interval), z(t) the
    mean of y over [t - W, t] by Simpson's rule split at the grid instants
    (exact: y is one quadratic between them), z' by a central difference of z.
    """
    xs = np.asarray(xs, dtype=float)
    cumulative = np.concatenate([[0.0], np.cumsum(0.5 * (xs[:-1] + xs[1:]) * h)])

    def big_x(s):
        if s <= 0.0:
            return xs[0] * s
        i = min(int(s // h), len(xs) - 1)
        if i >= len(xs) - 1:
            return cumulative[-1] + xs[-1] * (s - (len(xs) - 1) * h)
        u = s - i * h
        return cumulative[i] + xs[i] * u + (xs[i + 1] - xs[i]) * u * u / (2 * h)

    def y_of(s):
        return (big_x(s) - big_x(s - h)) / h

    def z_of(s):
        total = 0.0
        lo = s - m * h
        inner = [k * h for k in range(int(np.floor(lo / h)) + 1, int(np.ceil(s / h)))]
        edges = [lo] + [e for e in inner if lo < e < s] + [s]
        for a, b in zip(edges[:-1], edges[1:]):
            total += (b - a) / 6 * (y_of(a) + 4 * y_of(0.5 * (a + b)) + y_of(b))
        return total / (m * h)

    e = 1e-4 * h
    return z_of(t), (z_of(t + e) - z_of(t - e)) / (2 * e)


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 4), steps=st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=9),
       h=st.sampled_from([0.01, 0.002]))
def test_grid_output_equals_the_double_average(m, steps, h):
    """Check z and z' at grid instants against the double moving average of the input.

    (z'' is pinned by the next test: the cubic it starts must meet the quadrature.)
    """
    xs = np.concatenate([[0.3], 0.3 + np.cumsum(np.array(steps) * h)])
    f = JerkFilter([0.3], h, m)
    for k, x in enumerate(xs[1:], start=1):
        z, dz, _ = f.push([x])
    want = brute_force(xs, h, m, k * h)
    assert z[0] == pytest.approx(want[0], abs=1e-12)
    assert dz[0] == pytest.approx(want[1], abs=1e-7)


def cubic(state, next_state, h, s):
    """Return the cubic from (z, z', z'') at a grid instant, constant jerk to the next, at s."""
    z, dz, ddz = state
    jerk = (next_state[2] - ddz) / h
    return z + dz * s + ddz * s * s / 2 + jerk * s ** 3 / 6


@settings(max_examples=10, deadline=None)
@given(m=st.integers(1, 3), steps=st.lists(st.floats(-1.0, 1.0), min_size=5, max_size=8),
       frac=st.floats(0.1, 0.9))
def test_between_grid_instants_the_output_is_one_cubic(m, steps, frac):
    """The cubic through both ends' (z, z', z'') is the output between them (quadrature)."""
    h = 0.01
    xs = np.concatenate([[0.0], np.cumsum(np.array(steps) * h)])
    f = JerkFilter([0.0], h, m)
    states = [f.output()]
    for x in xs[1:]:
        states.append(f.push([x]))
    k = len(xs) - 2
    mid = cubic([s[0] for s in states[k]], [s[0] for s in states[k + 1]], h, frac * h)
    nxt = cubic([s[0] for s in states[k]], [s[0] for s in states[k + 1]], h, h)
    assert mid == pytest.approx(brute_force(xs, h, m, (k + frac) * h)[0], abs=1e-12)
    # The cubic reaches the next grid state exactly: positions agree.
    assert nxt == pytest.approx(states[k + 1][0][0], abs=1e-12)


@st.composite
def limited_inputs(draw):
    """Positions from the real limiting step toward random goals (some beyond the limits)."""
    h = draw(st.sampled_from([0.001, 0.002, 0.01, 0.02]))
    v_max, a_max = draw(st.floats(0.1, 3.0)), draw(st.floats(0.5, 20.0))
    j_max = draw(st.floats(10.0, 10000.0))
    q, v = [draw(st.floats(-0.5, 0.5))], [0.0]
    xs = [q[0]]
    for _ in range(draw(st.integers(3, 8))):
        goal = [draw(st.floats(-1.5, 1.5))]
        for _ in range(draw(st.integers(1, 60))):
            q_out, v_out = [0.0], [0.0]
            limits.limited_step(q, v, goal, [0.0], h, [v_max], [a_max], [-1.0], [1.0],
                                q_out, v_out)
            q, v = q_out, v_out
            xs.append(q[0])
    return h, v_max, a_max, j_max, xs


@settings(max_examples=200, deadline=None)
@given(limited_inputs())
def test_output_keeps_speed_acceleration_jerk_and_positions(case):
    """Every grid output, and the cubic's jerk between, within the limits (relative 1e-9)."""
    h, v_max, a_max, j_max, xs = case
    m = smoothing_steps(h, [a_max], [j_max])
    f = JerkFilter([xs[0]], h, m)
    previous = f.output()
    slack = 1e-9
    for x in xs[1:]:
        z, dz, ddz = f.push([x])
        assert -1.0 - slack <= z[0] <= 1.0 + slack
        assert abs(dz[0]) <= v_max * (1 + slack) + 1e-12
        assert abs(ddz[0]) <= a_max * (1 + slack) + 1e-9
        jerk = (ddz[0] - previous[2][0]) / h
        assert abs(jerk) <= j_max * (1 + 1e-6) + 1e-6
        previous = (z, dz, ddz)


def test_reset_shows_the_given_state_and_a_steady_motion():
    """reset(q, v): the output is q with velocity v, and stays on that line as the input moves."""
    h, m = 0.01, 3
    f = JerkFilter([0.0, 0.0], h, m)
    q, v = np.array([0.2, -0.1]), np.array([0.5, -1.0])
    newest = f.reset(q, v)
    z, dz, ddz = f.output()
    np.testing.assert_allclose(z, q, atol=1e-15)
    np.testing.assert_allclose(dz, v, atol=1e-12)
    np.testing.assert_allclose(ddz, 0.0, atol=1e-9)
    z, dz, _ = f.push(newest + v * h)
    np.testing.assert_allclose(z, q + v * h, atol=1e-12)
    assert f.delay_s == pytest.approx(0.5 * h * (m + 1))


def test_rest_and_window_choice():
    """At rest after m + 2 equal inputs; the window is the smallest multiple of h above 2a/j."""
    f = JerkFilter([1.0], 0.01, 2)
    f.push([1.1])
    assert not f.at_rest()
    for _ in range(4):
        f.push([1.1])
    assert f.at_rest()
    assert smoothing_steps(0.01, [5.0], [1000.0]) == 1
    assert smoothing_steps(0.01, [5.0], [500.0]) == 2
    assert smoothing_steps(0.001, [5.0, 10.0], [500.0, 5000.0]) == 20
    assert smoothing_steps(0.01, [5.0], [np.inf]) == 1


def test_bad_jerk_limits_are_refused():
    """Zero, negative, non-finite, out of 1-1e6 or a wrong count: one clear error."""
    np.testing.assert_array_equal(check_jerk_limits(50.0, 3), [50.0] * 3)
    # Issue 21, defect 4: per-joint values have the scalar parameter's bounds (1 - 1e6).
    for bad in (0.0, -1.0, float('nan'), float('inf'), [1.0, 2.0], [500.0, 500.0, 1e9],
                [500.0, 1e-300, 500.0], 0.5):
        with pytest.raises(InvalidInputError, match='jerk limits'):
            check_jerk_limits(bad, 3)

# SPDX-License-Identifier: Apache-2.0

"""The limiting step: speed, acceleration and position limits for any elapsed time.

Every property runs on both backends: the kernel as CPython runs it and as
numba compiles it (one source); a test also pins the two together.
"""

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.core.kernels import limits
from ik_node.core.kernels.compile import L
from ik_node.core.kernels.limits import braking_speed
from ik_node.core.motion.limiting import step_along
import numpy as np
import pytest
from strategies import examples

BACKENDS = pytest.mark.parametrize('backend', ['numpy', 'numba'])


def step_on(backend):
    """limited_step(q, v, goal, dt, ..., goal_v=zeros) -> (q', v') lists, on one backend."""
    def step(q, v, goal, dt, v_max, a_max, lower, upper, goal_v=None):
        n = len(q)
        goal_v = [0.0] * n if goal_v is None else list(goal_v)
        if backend == 'numpy':
            q_out, v_out = [0.0] * n, [0.0] * n
            limits.limited_step(list(q), list(v), list(goal), goal_v, dt, list(v_max),
                                list(a_max), list(lower), list(upper), q_out, v_out)
            return q_out, v_out
        q_out, v_out = np.empty(n), np.empty(n)
        L.limited_step(*(np.asarray(x, dtype=float) for x in (q, v, goal, goal_v)), float(dt),
                       *(np.asarray(x, dtype=float) for x in (v_max, a_max, lower, upper)),
                       q_out, v_out)
        return q_out.tolist(), v_out.tolist()
    return step


# Relative slack for floating-point rounding of the limits (not a tolerance of the method).
EPS = 1e-9


def check_step(q, v, q2, v2, dt, v_max, a_max, lower, upper):
    """Assert every limit for one step (q, v) -> (q2, v2) of dt seconds.

    Velocities are position differences over dt, so they carry the rounding of
    the positions: up to ~eps |q| / dt (2e-11 rad/s at q = 1, dt = 10 us).
    """
    q, v, q2, v2 = (np.asarray(x) for x in (q, v, q2, v2))
    rounding = 4.0 * np.finfo(float).eps * np.maximum(1.0, np.abs(q2)) / dt
    assert np.all(np.isfinite(q2)) and np.all(np.isfinite(v2))
    assert np.all(q2 >= lower) and np.all(q2 <= upper)
    assert np.all(np.abs(v2) <= np.asarray(v_max) * (1 + EPS) + rounding)
    assert np.all(np.abs(v2 - v) <= np.asarray(a_max) * dt * (1 + EPS) + 2 * rounding)
    np.testing.assert_allclose(v2, (q2 - q) / dt, rtol=1e-12, atol=1e-12)


@st.composite
def joint_limits(draw, n=3):
    """(v_max, a_max, lower, upper) for n joints, some unbounded."""
    v_max = draw(st.lists(st.floats(0.1, 5.0), min_size=n, max_size=n))
    a_max = draw(st.lists(st.floats(0.5, 50.0), min_size=n, max_size=n))
    lower, upper = [], []
    for _ in range(n):
        if draw(st.booleans()):
            lo = draw(st.floats(-3.0, 0.0))
            lower.append(lo)
            upper.append(lo + draw(st.floats(0.05, 4.0)))
        else:
            lower.append(-math.inf)
            upper.append(math.inf)
    return v_max, a_max, lower, upper


def inside(lower, upper, fraction):
    """Points within the limits (0 where unbounded)."""
    return [lo + f * (hi - lo) if math.isfinite(lo) else 0.0
            for lo, hi, f in zip(lower, upper, fraction)]


GOALS = st.lists(st.floats(-0.5, 1.5), min_size=3, max_size=3)
# The goal's own velocity, as a fraction of the speed limit (0: a goal at rest).
GOAL_SPEEDS = st.one_of(st.just([0.0, 0.0, 0.0]),
                        st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3))


def planned_goal(where, speed, v_max, lower, upper):
    """Goal (where: fractions of the limits, or around 0 if unbounded) and its velocity."""
    goal = [lo + f * (hi - lo) if math.isfinite(lo) else 3.0 * (f - 0.5)
            for lo, hi, f in zip(lower, upper, where)]
    return goal, [f * vm for f, vm in zip(speed, v_max)]


@BACKENDS
@settings(max_examples=150)
@given(bounds=joint_limits(), start=st.lists(st.floats(0, 1), min_size=3, max_size=3),
       plan=st.lists(st.tuples(st.floats(1e-5, 0.05), GOALS, GOAL_SPEEDS), min_size=1,
                     max_size=60))
def test_every_step_respects_speed_acceleration_and_position_limits(
        backend, bounds, start, plan):
    step = step_on(backend)
    # Random goals, some beyond the limits (a solver never sends those, but a
    # goal near a limit with the joint moving fast toward it is the hard case),
    # at rest or moving up to the speed limits, random elapsed times from 10 us
    # to 50 ms.
    v_max, a_max, lower, upper = bounds
    q, v = inside(lower, upper, start), [0.0, 0.0, 0.0]
    for dt, where, speed in plan:
        goal, goal_v = planned_goal(where, speed, v_max, lower, upper)
        q2, v2 = step(q, v, goal, dt, v_max, a_max, lower, upper, goal_v)
        check_step(q, v, q2, v2, dt, v_max, a_max, lower, upper)
        q, v = q2, v2


@BACKENDS
# 20 per run (twice: numpy and numba); 100 fresh ones in scripts/sweep.sh.
@settings(max_examples=examples(20))
@given(bounds=joint_limits(), start=st.lists(st.floats(0, 1), min_size=3, max_size=3),
       end=st.lists(st.floats(0, 1), min_size=3, max_size=3), dt=st.floats(1e-3, 0.02))
def test_a_constant_goal_is_reached_exactly_at_rest_without_overshoot(
        backend, bounds, start, end, dt):
    step = step_on(backend)
    v_max, a_max, lower, upper = bounds
    q, v = inside(lower, upper, start), [0.0, 0.0, 0.0]
    goal = inside(lower, upper, end)
    direction = np.sign(np.subtract(goal, q))
    # Bound: accelerate, cruise, brake: distance / v_max + v_max / a_max + slack per step.
    bound = max(abs(g - x) / vm + vm / a for g, x, vm, a in zip(goal, q, v_max, a_max)) + 1.0
    for _ in range(int(bound / dt) + 10):
        q2, v2 = step(q, v, goal, dt, v_max, a_max, lower, upper)
        check_step(q, v, q2, v2, dt, v_max, a_max, lower, upper)
        # Never past the goal (from rest the braking cap prevents overshoot).
        assert np.all(direction * (np.subtract(goal, q2)) >= -1e-12)
        q, v = q2, v2
    assert np.allclose(q, goal, atol=1e-12, rtol=0) and np.all(np.array(v) == 0.0)


@BACKENDS
def test_direction_is_kept_while_not_accelerating(backend):
    step = step_on(backend)
    # Cruising: every joint scaled by one factor, so the joint-space path is straight.
    inf = [math.inf] * 3
    q, v = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]
    goal = [2.0, -1.0, 0.5]
    v_max = [1.0, 1.0, 1.0]
    for _ in range(100):  # 1 s: cruising (2 rad at 1 rad/s, braking takes 0.01 s)
        q, v = step(q, v, goal, 0.01, v_max, [100.0] * 3, [-x for x in inf], inf)
        assert abs(np.cross(q, goal)).max() < 1e-12
    assert abs(v[0] - 1.0) < 1e-12 and abs(v[1] / v[0] + 0.5) < 1e-12


@BACKENDS
# 20 per run (twice: numpy and numba); 100 fresh ones in scripts/sweep.sh.
@settings(max_examples=examples(20))
@given(speed=st.lists(st.floats(-0.9, 0.9), min_size=3, max_size=3),
       dt=st.floats(1e-3, 0.02), a_max=st.floats(1.0, 20.0))
def test_a_goal_moving_within_the_limits_is_followed_without_lag(backend, speed, dt, a_max):
    step = step_on(backend)
    # A goal moving at a constant velocity (90 % of the speed limits at most)
    # from where the joints rest: they accelerate, catch up and then move with
    # it exactly, position and velocity (without the goal's velocity they would
    # trail it by v^2 / (2 a)).
    v_max, inf = [1.0, 2.0, 0.5], [math.inf] * 3
    w = np.multiply(speed, v_max)
    # Bound: reach the goal's speed, then make up the lag v^2 / (2 a) with the
    # speed left to the limit, plus slack.
    headroom = np.subtract(v_max, np.abs(w))
    bound = np.max(np.abs(w) / a_max + w * w / (2.0 * a_max) / headroom + 2.0 * headroom / a_max)
    q, v, t = [0.0, 0.0, 0.0], [0.0, 0.0, 0.0], 0.0
    for _ in range(int((bound + 0.5) / dt)):
        t += dt
        q2, v2 = step(q, v, (w * t).tolist(), dt, v_max, [a_max] * 3, [-x for x in inf], inf,
                      w.tolist())
        check_step(q, v, q2, v2, dt, v_max, [a_max] * 3, [-x for x in inf], inf)
        q, v = q2, v2
    np.testing.assert_allclose(q, w * t, rtol=0, atol=1e-12)
    np.testing.assert_allclose(v, w, rtol=0, atol=1e-9)


@BACKENDS
def test_a_non_finite_goal_brakes_to_rest_within_the_limits(backend):
    step = step_on(backend)
    q, v = [0.0], [1.0]
    for _ in range(100):
        q2, v2 = step(q, v, [math.nan], 0.01, [2.0], [10.0], [-5.0], [5.0])
        check_step(q, v, q2, v2, 0.01, [2.0], [10.0], [-5.0], [5.0])
        q, v = q2, v2
    assert v == [0.0] and abs(q[0] - 0.05) < 0.01  # 1 m/s braked at 10 m/s^2: ~5 cm


@BACKENDS
@settings(max_examples=examples(60), deadline=None)
@given(speeds=st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3),
       accels=st.lists(st.floats(0.5, 50.0), min_size=3, max_size=3),
       dt=st.sampled_from([0.001, 0.002, 0.004, 0.01]))
def test_braking_in_steps_puts_every_position_on_one_continuous_braking_curve(
        backend, speeds, accels, dt):
    """Each joint after k braking steps is where ``x(t) = w t - a t^2 / 2`` is at t = k dt.

    The curve is the one the collision guard judges (w: its speed less a dt / 2,
    guard.stepped_braking_velocity), computed here from its formula; the steps keep
    the acceleration limit, and the last one lands on the curve's end (a
    step to v = 0 ended up to a dt^2 / 8 short of it in each joint).
    """
    step = step_on(backend)
    n = len(speeds)
    v_max, lower, upper = [10.0] * n, [-50.0] * n, [50.0] * n
    w = [math.copysign(max(abs(v) - 0.5 * a * dt, 0.0), v) for v, a in zip(speeds, accels)]
    q, v = [0.0] * n, list(speeds)
    for k in range(1, 10000):
        q2, v2 = step(q, v, [math.nan] * n, dt, v_max, accels, lower, upper)
        check_step(q, v, q2, v2, dt, [10.0] * n, accels, lower, upper)
        q, v = q2, v2
        for j in range(n):
            t = min(k * dt, abs(w[j]) / accels[j])
            curve = w[j] * t - math.copysign(0.5 * accels[j] * t * t, w[j])
            assert abs(q[j] - curve) <= 1e-9 * max(1.0, abs(curve)), (j, k, q[j], curve)
        if not any(v):
            break
    assert not any(v)


@BACKENDS
def test_a_lowered_acceleration_limit_still_keeps_the_position_limits(backend):
    step = step_on(backend)
    # Moving fast toward the limit, then the acceleration limit drops 100x: the
    # constraints contradict each other; the step brakes as hard as the new limit
    # allows and the position limit holds (the speed comes down over the steps).
    q, v = [0.0], [0.0]
    for _ in range(300):
        q, v = step(q, v, [1.0], 0.01, [3.0], [50.0], [-1.0], [1.0])
        if q[0] > 0.5:
            break
    assert v[0] > 1.0
    for _ in range(1000):
        q2, v2 = step(q, v, [1.0], 0.01, [3.0], [0.5], [-1.0], [1.0])
        assert -1.0 <= q2[0] <= 1.0 and math.isfinite(v2[0])
        q, v = q2, v2
    assert q == [1.0] and v == [0.0]


@given(st.floats(0.0, 10.0), st.floats(0.01, 100.0), st.floats(1e-5, 0.1))
def test_braking_speed_stops_within_the_distance(distance, accel, dt):
    v = braking_speed(distance, accel, dt)
    assert v >= 0.0
    # Held for dt, then braked at accel: travels exactly the distance.
    assert v * dt + v * v / (2.0 * accel) <= distance * (1 + 1e-12) + 1e-15
    assert braking_speed(-1.0, accel, dt) == 0.0


@settings(max_examples=100)
@given(bounds=joint_limits(), start=st.lists(st.floats(0, 1), min_size=3, max_size=3),
       plan=st.lists(st.tuples(st.floats(1e-5, 0.05), GOALS, GOAL_SPEEDS), min_size=1,
                     max_size=30))
def test_compiled_and_interpreted_steps_agree(bounds, start, plan):
    v_max, a_max, lower, upper = bounds
    q, v = inside(lower, upper, start), [0.0, 0.0, 0.0]
    for dt, where, speed in plan:
        goal, goal_v = planned_goal(where, speed, v_max, lower, upper)
        a = step_on('numpy')(q, v, goal, dt, v_max, a_max, lower, upper, goal_v)
        b = step_on('numba')(q, v, goal, dt, v_max, a_max, lower, upper, goal_v)
        np.testing.assert_allclose(b[0], a[0], rtol=0, atol=1e-15)
        np.testing.assert_allclose(b[1], a[1], rtol=1e-12, atol=1e-12)
        q, v = a


@settings(max_examples=examples(200))
@given(bounds=joint_limits(), start=st.lists(st.floats(0, 1), min_size=3, max_size=3),
       speed=st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3),
       aim=st.lists(st.floats(0, 1), min_size=3, max_size=3), dt=st.floats(1e-4, 0.02),
       resting=st.booleans())
def test_a_step_along_keeps_its_line_and_every_limit_and_can_stop_by_the_aim(
        bounds, start, speed, aim, dt, resting):
    v_max, a_max, lower, upper = (np.array(x) for x in bounds)
    q, aim = np.array(inside(lower, upper, start)), np.array(inside(lower, upper, aim))
    v = np.zeros(3) if resting else np.array(speed) * v_max
    step = step_along(q, v, aim, dt, v_max, a_max)
    if step is None:
        # Refused only where no speed along the line is one step's
        # acceleration from v: from rest every aim has one.
        assert not resting or np.all(aim == q)
        return
    q2, v2 = step
    check_step(q, v, q2, v2, dt, v_max, a_max, lower, upper)
    x = aim - q
    scale = np.max(np.abs(x))   # x @ x underflows to 0 for an aim 1e-313 away
    s = ((q2 - q) / scale) @ (x / scale) / ((x / scale) @ (x / scale))
    assert 0.0 < s <= 1.0 + EPS
    np.testing.assert_allclose(q2 - q, s * x, atol=1e-15)   # on the line
    # Braking at the limits from v2 stops each joint by the aim.
    travel = v2 * np.abs(v2) / (2.0 * a_max)
    assert np.all(np.abs(q2 + travel - q) <= np.abs(x) * (1 + 1e-9) + 1e-15)

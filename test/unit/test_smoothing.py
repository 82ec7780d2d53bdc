# SPDX-License-Identifier: Apache-2.0

"""Scalar and spherical cubic interpolation in time (seed 002, Godot 4)."""

import math

from hypothesis import assume
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node import spherical_cubic_interpolate_in_time
from ik_node.core import rotations as rot
from ik_node.core.motion import smoothing as sm
import numpy as np
import pytest
from strategies import unit_quaternions
import transforms3d

times = st.tuples(st.floats(0.05, 3.0), st.floats(0.05, 3.0), st.floats(0.05, 3.0))
weights = st.floats(0.0, 1.0)


def key_times(spans):
    """pre_t, to_t, post_t relative to from, from three positive spans."""
    a, b, c = spans
    return -a, b, b + c


@given(times, weights, st.floats(-5, 5), st.floats(-5, 5), st.floats(-5, 5))
def test_polynomials_up_to_degree_two_are_reproduced(spans, w, c0, c1, c2):
    # Barry-Goldman's pyramid is exact for quadratics at any key spacing.
    pre_t, to_t, post_t = key_times(spans)

    def f(t):
        return c0 + c1 * t + c2 * t * t

    value = sm.cubic_interpolate_in_time(f(0.0), f(to_t), f(pre_t), f(post_t), w, to_t, pre_t,
                                         post_t)
    assert value == pytest.approx(f(w * to_t), abs=1e-9 * (1 + abs(c0) + abs(c1) + abs(c2)))


@given(st.floats(-5, 5), st.floats(-5, 5), st.floats(-5, 5), st.floats(-5, 5), weights)
def test_uniform_keys_give_the_classic_catmull_rom(p0, p1, p2, p3, w):
    classic = 0.5 * ((2 * p1) + (-p0 + p2) * w + (2 * p0 - 5 * p1 + 4 * p2 - p3) * w * w
                     + (-p0 + 3 * p1 - 3 * p2 + p3) * w ** 3)
    assert sm.cubic_interpolate_in_time(p1, p2, p0, p3, w, 1.0, -1.0, 2.0) == \
        pytest.approx(classic, abs=1e-12)


def test_keys_and_zero_length_spans():
    args = (1.0, 3.0, 0.0, 4.0)
    assert sm.cubic_interpolate_in_time(*args, 0.0, 1.0, -1.0, 2.0) == 1.0
    assert sm.cubic_interpolate_in_time(*args, 1.0, 1.0, -1.0, 2.0) == 3.0
    h = 1e-7
    # A zero-length span means the neighbour key coincides: pre = from at
    # pre_t = 0 leaves from at rest; post = to at post_t = to_t arrives at rest.
    start = (sm.cubic_interpolate_in_time(1.0, 3.0, 1.0, 4.0, h, 1.0, 0.0, 2.0) - 1.0) / h
    end = (3.0 - sm.cubic_interpolate_in_time(1.0, 3.0, 0.0, 3.0, 1 - h, 1.0, -1.0, 1.0)) / h
    assert abs(start) < 1e-5 and abs(end) < 1e-5
    # ... and without overshoot: monotone between the keys.
    path = [sm.cubic_interpolate_in_time(1.0, 3.0, 1.0, 3.0, w, 1.0, 0.0, 1.0)
            for w in np.linspace(0, 1, 101)]
    assert np.all(np.diff(path) >= 0.0) and max(path) == 3.0
    # to_t == 0: Godot's rule gives the midpoint, no division by zero.
    assert sm.cubic_interpolate_in_time(1.0, 3.0, 1.0, 3.0, 0.3, 0.0, 0.0, 0.0) == 2.0


def godot_reference(q_from, q_to, q_pre, q_post, w, to_t, pre_t, post_t):
    """Godot's algorithm with its own full-angle log/exp, written with transforms3d.

    Independent of ik_node.rotations: transforms3d quaternions are (w, x, y, z);
    Godot's log is the rotation vector (2 x the half-angle log), here by atan2.
    """
    tq = transforms3d.quaternions

    def wxyz(q):
        return np.array([q[3], q[0], q[1], q[2]])

    def log_full(q):
        # Rotation vector by atan2: transforms3d's qlog takes acos of w, which
        # loses ~sqrt(eps) near the identity (1e-9 differences seen).
        s = np.linalg.norm(q[1:])
        return q[1:] * (2.0 * math.atan2(s, q[0]) / s) if s > 0.0 else np.zeros(3)

    def exp_full(v):
        return tq.qexp(np.concatenate(([0.0], v / 2.0)))

    f, t, pre, post = (wxyz(np.asarray(q) / np.linalg.norm(q)) for q in
                       (q_from, q_to, q_pre, q_post))
    f, t, pre, post = (q if q[0] >= 0 else -q for q in (f, t, pre, post))
    pre = -pre if np.signbit(f @ pre) else pre
    flip2 = np.signbit(f @ t)
    t = -t if flip2 else t
    flip3 = (t @ post <= 0) if flip2 else np.signbit(t @ post)
    post = -post if flip3 else post

    def cubic(a, b, c, d):
        return np.array([sm.cubic_interpolate_in_time(a[i], b[i], c[i], d[i], w, to_t, pre_t,
                                                      post_t) for i in range(3)])

    inv = tq.qinverse
    zero = np.zeros(3)
    q1 = tq.qmult(f, exp_full(cubic(zero, log_full(tq.qmult(inv(f), t)),
                                    log_full(tq.qmult(inv(f), pre)),
                                    log_full(tq.qmult(inv(f), post)))))
    q2 = tq.qmult(t, exp_full(cubic(log_full(tq.qmult(inv(t), f)), zero,
                                    log_full(tq.qmult(inv(t), pre)),
                                    log_full(tq.qmult(inv(t), post)))))
    out = rot.slerp(np.array([q1[1], q1[2], q1[3], q1[0]]), np.array([q2[1], q2[2], q2[3], q2[0]]),
                    w)
    return out


@settings(max_examples=200)
@given(unit_quaternions(), unit_quaternions(), unit_quaternions(), unit_quaternions(), weights,
       times)
def test_spherical_rule_matches_godots_algorithm(qf, qt, qpre, qpost, w, spans):
    pre_t, to_t, post_t = key_times(spans)
    ours = spherical_cubic_interpolate_in_time(qf, qt, qpre, qpost, w, to_t, pre_t, post_t)
    ref = godot_reference(qf, qt, qpre, qpost, w, to_t, pre_t, post_t)
    assert np.linalg.norm(ours) == pytest.approx(1.0, abs=1e-12)
    assert min(np.abs(ours - ref).max(), np.abs(ours + ref).max()) < 1e-9


@given(st.lists(st.floats(-3.0, 3.0), min_size=4, max_size=4), weights, times,
       st.tuples(st.floats(-1, 1), st.floats(-1, 1), st.floats(0.1, 1)))
def test_single_axis_keys_follow_the_scalar_rule_on_the_angle(angles, w, spans, axis):
    pre_t, to_t, post_t = key_times(spans)
    a_pre, a_from, a_to, a_post = angles
    # Keep consecutive keys within a half turn so the shortest path is the angle itself.
    a_from = a_pre + np.clip(a_from - a_pre, -2.5, 2.5)
    a_to = a_from + np.clip(a_to - a_from, -2.5, 2.5)
    a_post = a_to + np.clip(a_post - a_to, -2.5, 2.5)
    keys = [rot.axis_angle_to_quaternion(axis, a) for a in (a_pre, a_from, a_to, a_post)]
    q = spherical_cubic_interpolate_in_time(keys[1], keys[2], keys[0], keys[3], w, to_t, pre_t,
                                            post_t)
    angle = sm.cubic_interpolate_in_time(a_from, a_to, a_pre, a_post, w, to_t, pre_t, post_t)
    expected = rot.axis_angle_to_quaternion(axis, angle)
    assert min(np.abs(q - expected).max(), np.abs(q + expected).max()) < 1e-9


@given(unit_quaternions(), unit_quaternions(), unit_quaternions(), unit_quaternions(), weights,
       times, st.lists(st.booleans(), min_size=4, max_size=4))
def test_q_and_minus_q_keys_give_the_same_curve(qf, qt, qpre, qpost, w, spans, flips):
    # Exactly a half turn between consecutive keys has two shortest paths; the
    # sign of the key decides (as in Godot), so those keys are excluded.
    assume(min(abs(qf @ qpre), abs(qf @ qt), abs(qt @ qpost)) > 1e-9)
    pre_t, to_t, post_t = key_times(spans)
    keys = [qf, qt, qpre, qpost]
    flipped = [-k if f else k for k, f in zip(keys, flips)]
    a = spherical_cubic_interpolate_in_time(*keys, w, to_t, pre_t, post_t)
    b = spherical_cubic_interpolate_in_time(*flipped, w, to_t, pre_t, post_t)
    assert min(np.abs(a - b).max(), np.abs(a + b).max()) < 1e-9


@given(unit_quaternions(), unit_quaternions(), unit_quaternions(), unit_quaternions(), times)
def test_keys_are_reproduced_exactly(qf, qt, qpre, qpost, spans):
    pre_t, to_t, post_t = key_times(spans)
    for w, key in ((0.0, qf), (1.0, qt)):
        q = spherical_cubic_interpolate_in_time(qf, qt, qpre, qpost, w, to_t, pre_t, post_t)
        assert min(np.abs(q - key).max(), np.abs(q + key).max()) < 1e-9


def test_degenerate_keys_give_no_nan():
    q = rot.axis_angle_to_quaternion([0, 0, 1], 0.4)
    half = rot.axis_angle_to_quaternion([1, 0, 0], np.pi)  # a 180-degree step
    for args in ((q, q, q, q, 0.3, 1.0, -1.0, 2.0),         # identical keys
                 (q, half, q, half, 0.5, 1.0, -1.0, 2.0),   # half turns
                 (q, half, q, half, 0.5, 1.0, 0.0, 1.0),    # zero-length pre and post
                 (q, half, q, half, 0.5, 0.0, 0.0, 0.0)):   # everything at one instant
        for variant in sm.SPHERICAL_VARIANTS.values():
            out = variant(*args)
            assert np.all(np.isfinite(out)) and np.linalg.norm(out) == pytest.approx(1.0)


def test_batch_axis_equals_single_calls():
    rng = np.random.default_rng(3)
    keys = rng.normal(size=(4, 40, 4))
    w = rng.uniform(0, 1, 40)
    pre_t, to_t, post_t = -rng.uniform(0.1, 1, 40), rng.uniform(0.1, 1, 40), 0.0
    post_t = to_t + rng.uniform(0.1, 1, 40)
    batch = spherical_cubic_interpolate_in_time(keys[0], keys[1], keys[2], keys[3], w, to_t,
                                                pre_t, post_t)
    for i in range(40):
        one = spherical_cubic_interpolate_in_time(keys[0, i], keys[1, i], keys[2, i],
                                                  keys[3, i], w[i], to_t[i], pre_t[i],
                                                  post_t[i])
        np.testing.assert_allclose(batch[i], one, atol=1e-14)


def random_key_sequence(seed, count=30, step=0.8, uniform=False):
    """Quaternion keys by random rotations of about ``step`` rad, and their times."""
    rng = np.random.default_rng(seed)
    qs = [np.array([0.0, 0.0, 0.0, 1.0])]
    for _ in range(count - 1):
        qs.append(rot.multiply(rot.exp(rng.normal(size=3) * step / 2), qs[-1]))
    spans = np.full(count, 0.5) if uniform else rng.uniform(0.1, 1.0, size=count)
    return np.array(qs), np.cumsum(spans)


@pytest.mark.parametrize('uniform', [True, False])
@pytest.mark.parametrize('seed', range(4))
def test_implementation_3_is_c1_at_keys_and_1_2_are_not(seed, uniform):
    # Steps of ~1.5 rad make the orientation wander past half turns, where
    # implementation 1's absolute logs change hemisphere between segments.
    qs, t = random_key_sequence(seed, step=1.5, uniform=uniform)
    jumps = {v: sm.key_crossing_jumps(v, qs, t) for v in (1, 2, 3)}
    assert jumps[3].max() < 1e-6                 # velocity continuous across keys
    assert jumps[2].max() > 1e3 * jumps[3].max()  # implementation 2 jumps at key changes
    assert jumps[1].max() > 1e3 * jumps[3].max()  # implementation 1 where a key flips
    assert np.all(jumps[1] >= jumps[3] - 1e-6) and np.all(jumps[2] >= jumps[3] - 1e-6)

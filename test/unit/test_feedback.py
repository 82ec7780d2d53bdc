# SPDX-License-Identifier: Apache-2.0

"""Measured joint states: one bad state is never followed, a real one always is."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.core.motion.feedback import CONFIRMATIONS, FeedbackFilter
import numpy as np
import pytest

NAMES = ['j1', 'j2', 'j3']
LOWER, UPPER = np.full(3, -2.0), np.full(3, 2.0)
SPEED = np.array([1.5, 1.5, 2.0])


def fresh():
    """Return a filter for three joints within +-2 rad, speed limits 1.5, 1.5, 2 rad/s."""
    return FeedbackFilter(NAMES, LOWER, UPPER, SPEED)


@st.composite
def servo_streams(draw):
    """Draw a lagging servo's states (first order, random tau) after a speed-limited command."""
    tau = draw(st.floats(0.02, 0.15))
    rate = draw(st.sampled_from([50.0, 100.0, 250.0, 500.0]))
    command = np.array([draw(st.floats(-1.5, 1.5)) for _ in range(3)])
    q, goal = command.copy(), command.copy()
    states = []
    for k in range(draw(st.integers(20, 150))):
        if k % 25 == 0:
            goal = np.array([draw(st.floats(-1.8, 1.8)) for _ in range(3)])
        command = command + np.clip(goal - command, -SPEED / rate, SPEED / rate)
        q = command + (q - command) * math.exp(-1.0 / (rate * tau))
        states.append((k / rate, q.copy()))
    return states


@settings(max_examples=150, deadline=None)
@given(servo_streams(), st.booleans())
def test_a_servo_following_its_limits_is_never_rejected(states, stamped):
    """No false positives: every state of a physical arm is accepted, stamped or not."""
    f = fresh()
    for t, q in states:
        assert f.take(NAMES, q.tolist(), [], t if stamped else None, t + 0.003) == ''
    np.testing.assert_array_equal(f.q, states[-1][1])


@settings(max_examples=150, deadline=None)
@given(servo_streams(), st.data())
def test_a_single_glitch_is_never_followed(states, data):
    """One state displaced by 0.1-3 rad (or past a limit) is rejected; the stream goes on."""
    f = fresh()
    k = data.draw(st.integers(1, len(states) - 1))
    joint = data.draw(st.integers(0, 2))
    size = data.draw(st.floats(0.1, 3.0)) * data.draw(st.sampled_from([-1.0, 1.0]))
    for i, (t, q) in enumerate(states):
        sent = q.copy()
        if i == k:
            sent[joint] += size
        verdict = f.take(NAMES, sent.tolist(), [], t, t)
        if i == k:
            assert verdict in ('implausible_jump', 'out_of_limits')
        else:
            assert verdict == ''
        assert np.array_equal(f.q, states[i - 1][1] if i == k else q)


def test_a_real_displacement_is_followed_after_confirmations():
    """The arm pushed by 0.3 rad and staying there: taken at the CONFIRMATIONS-th state."""
    f = fresh()
    assert f.take(NAMES, [0.0, 0.0, 0.0], [], 0.0, 0.0) == ''
    for k in range(1, CONFIRMATIONS):
        assert f.take(NAMES, [0.3, 0.0, 0.0], [], 0.01 * k, 0.01 * k) == 'implausible_jump'
    assert f.take(NAMES, [0.3, 0.0, 0.0], [], 0.01 * CONFIRMATIONS, 0.01 * CONFIRMATIONS) == ''
    assert f.q.tolist() == [0.3, 0.0, 0.0]
    # Two glitches that disagree with each other never confirm.
    g = fresh()
    g.take(NAMES, [0.0, 0.0, 0.0], [], 0.0, 0.0)
    for k in range(1, 8):
        value = 0.5 if k % 2 else -0.5
        assert g.take(NAMES, [value, 0.0, 0.0], [], 0.01 * k, 0.01 * k) == 'implausible_jump'


@pytest.mark.parametrize('names, positions, velocities, reason', [
    (['j1', 'j2'], [0.0, 0.0], [], 'incomplete'),
    (NAMES, [0.0, 0.0], [], 'incomplete'),
    (NAMES, [0.0, 0.0, 0.0], [0.0], 'incomplete'),
    (NAMES + ['j1'], [0.0, 0.0, 0.0, 1.0], [], 'duplicate_joint'),
    (NAMES, [0.0, math.nan, 0.0], [], 'not_finite'),
    (NAMES, [0.0, 0.0, 0.0], [0.0, math.inf, 0.0], 'not_finite'),
    (NAMES, [0.0, 2.5, 0.0], [], 'out_of_limits'),
])
def test_malformed_states_are_rejected_with_their_reason(names, positions, velocities, reason):
    """Each kind of bad state: rejected, counted by reason, nothing accepted."""
    f = fresh()
    assert f.take(names, positions, velocities, None, 0.0) == reason
    assert f.rejected[reason] == 1 and f.q is None


def test_order_extra_joints_velocities_and_stamps():
    """Any order, other joints ignored, velocities kept; an older stamp is out of order."""
    f = fresh()
    assert f.take(['gripper', 'j3', 'j1', 'j2'], [9.0, 0.3, 0.1, 0.2], [0.0, 3.0, 1.0, 2.0],
                  5.0, 0.0) == ''
    assert f.q.tolist() == [0.1, 0.2, 0.3] and f.v.tolist() == [1.0, 2.0, 3.0]
    assert f.take(NAMES, [0.1, 0.2, 0.3], [], 4.99, 0.01) == 'out_of_order'
    assert f.age(0.5) == pytest.approx(0.5) and fresh().age(1.0) == math.inf


def test_a_clock_going_back_forgets_the_old_clocks_states():
    """A simulator reset (arrival 100 s -> 5 s): the next state is taken, not 'out_of_order'."""
    fb = fresh()
    assert fb.take(NAMES, [0.1, 0.2, 0.3], [], 100.0, 100.001) == ''
    assert fb.take(NAMES, [0.5, -0.2, 0.3], [], 5.0, 5.001) == ''
    np.testing.assert_array_equal(fb.q, [0.5, -0.2, 0.3])
    assert fb.stamp == 5.0 and not fb.rejected

# SPDX-License-Identifier: Apache-2.0

"""The online Cartesian trajectory: keys, rest, streams, latency, limits."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node.core import rotations as rot
from ik_node.core.errors import InvalidInputError, ZeroNormError
from ik_node.core.motion.trajectory import CartesianTrajectory, SPEED_MARGIN
import numpy as np
import pytest

V_MAX, W_MAX = 0.5, 1.0
IDENTITY = np.array([0.0, 0.0, 0.0, 1.0])


def play(traj, keys, end_time, dt):
    """Feed keys (time, p, q) at their times while sampling every dt; return samples."""
    samples, k, t = [], 0, 0.0
    while t <= end_time + 1e-12:
        while k < len(keys) and keys[k][0] <= t + 1e-12:
            traj.add_key(*keys[k])
            k += 1
        samples.append((t, traj.sample(t)))
        t += dt
    return samples


def stream(seed, count=25, period=0.1, step=0.02):
    """Return a random-walk stream of keys (time, position, quaternion)."""
    rng = np.random.default_rng(seed)
    p, q, keys = np.zeros(3), IDENTITY, []
    for k in range(1, count + 1):
        p = p + rng.normal(size=3) * step
        q = rot.multiply(rot.exp(rng.normal(size=3) * step), q)
        keys.append((k * period, p.copy(), q))
    return keys


def speeds(samples):
    """Largest reported linear and angular speeds, m/s and rad/s."""
    v = max(np.linalg.norm(s.linear_velocity) for _, s in samples)
    w = max(np.linalg.norm(s.angular_velocity) for _, s in samples)
    return v, w


def test_single_key_after_rest_is_a_smooth_move_timed_by_the_limits():
    traj = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, max_linear_speed=V_MAX,
                               max_angular_speed=W_MAX)
    goal_p = np.array([0.3, -0.1, 0.2])
    goal_q = rot.axis_angle_to_quaternion([0, 1, 0], 0.4)
    samples = play(traj, [(0.0, goal_p, goal_q)], 3.0, 0.002)
    last = samples[-1][1]
    np.testing.assert_allclose(last.position, goal_p, atol=1e-15)
    assert last.at_rest and np.all(last.linear_velocity == 0.0)
    v, w = speeds(samples)
    assert v <= V_MAX * (1 + 1e-9) and w <= W_MAX * (1 + 1e-9)
    # Timed by the speed limits: the move takes at least margin * distance / limit.
    moving = [t for t, s in samples if np.linalg.norm(s.linear_velocity) > 0]
    assert moving[-1] - moving[0] >= SPEED_MARGIN * np.linalg.norm(goal_p) / V_MAX - 0.004
    # No overshoot: the progress along the chord never decreases nor passes the goal.
    chord = goal_p / np.linalg.norm(goal_p)
    progress = np.array([s.position @ chord for _, s in samples])
    # 1e-12: the dot product and the norm round differently (1 ulp seen).
    assert np.all(np.diff(progress) >= -1e-12) and \
        progress.max() <= np.linalg.norm(goal_p) + 1e-12
    # Starts and ends at rest.
    assert np.linalg.norm(samples[1][1].linear_velocity) < 0.02


@pytest.mark.parametrize('seed', range(3))
def test_stream_passes_through_every_key_and_ends_at_rest(seed):
    keys = stream(seed)
    traj = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, max_linear_speed=V_MAX,
                               max_angular_speed=W_MAX)
    dt = 0.001
    samples = play(traj, keys, 6.0, dt)
    positions = np.array([s.position for _, s in samples])
    for _, p, q in keys:
        assert np.min(np.linalg.norm(positions - p, axis=1)) <= V_MAX * dt
    last = samples[-1][1]
    np.testing.assert_allclose(last.position, keys[-1][1], atol=1e-12)
    assert last.at_rest and traj.pending == 0


@pytest.mark.parametrize('seed', range(2))
def test_motion_is_c1_through_the_stream(seed):
    # A velocity jump keeps max |dv| between samples fixed as dt shrinks; a
    # continuous velocity makes it shrink in proportion.
    keys = stream(seed, count=8)

    def max_dv(dt):
        traj = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, max_linear_speed=V_MAX,
                                   max_angular_speed=W_MAX)
        samples = play(traj, keys, 1.6, dt)
        v = np.array([np.concatenate((s.linear_velocity, s.angular_velocity))
                      for _, s in samples])
        return np.max(np.linalg.norm(np.diff(v, axis=0), axis=1))

    coarse, fine = max_dv(1e-3), max_dv(1e-4)
    assert fine < 0.2 * coarse


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), period=st.floats(0.01, 0.5),
       step=st.floats(0.0, 0.3), smooth=st.booleans())
def test_speed_limits_hold_for_any_stream(seed, period, step, smooth):
    keys = stream(seed, count=12, period=period, step=step)
    traj = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, max_linear_speed=V_MAX,
                               max_angular_speed=W_MAX, smooth=smooth)
    dt = 0.005
    samples = play(traj, keys, 12 * period + 1.0, dt)
    v, w = speeds(samples)
    assert v <= V_MAX * (1 + 1e-6) and w <= W_MAX * (1 + 1e-6)
    positions = np.array([s.position for _, s in samples])
    # Also between samples (what a follower actually sees).
    assert np.max(np.linalg.norm(np.diff(positions, axis=0), axis=1)) <= V_MAX * dt * 1.01
    assert all(np.all(np.isfinite(s.position)) for _, s in samples)


def test_duplicates_late_keys_and_bounded_queue():
    traj = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, max_pending=8)
    assert traj.add_key(0.0, [0.1, 0, 0], IDENTITY) == 'accepted'
    assert traj.add_key(0.05, [0.1, 0, 0], IDENTITY) == 'duplicate'
    assert traj.duplicates == 1
    # Older than the newest key: re-timed after it, never into the past.
    status = traj.add_key(-5.0, [0.2, 0, 0], IDENTITY)
    assert status == 'retimed'
    times = [k.t for k in traj._keys]
    assert times == sorted(times)
    # A flood: the queue stays bounded, the oldest waiting keys are dropped,
    # and the last key is still reached.
    for i in range(500):
        traj.add_key(0.1 + i * 1e-4, [0.2 + 1e-4 * i, 0, 0], IDENTITY)
    assert traj.pending <= 8 and traj.dropped >= 490
    t = 0.0
    while not traj.at_rest and t < 60.0:
        traj.sample(t)
        t += 0.01
    np.testing.assert_allclose(traj.sample(t).position, [0.2 + 1e-4 * 499, 0, 0], atol=1e-12)


def test_latency_is_bounded_and_optional():
    keys = stream(1, count=10, period=0.1)
    smooth = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, max_latency_s=0.5)
    fast = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, smooth=False)
    play(smooth, keys, 1.0, 0.01)
    play(fast, keys, 1.0, 0.01)
    assert smooth.latency_s == pytest.approx(0.2)  # two key intervals
    assert fast.latency_s == 0.0
    slow_keys = stream(1, count=5, period=1.0)
    capped = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, max_latency_s=0.5)
    play(capped, slow_keys, 5.0, 0.01)
    assert capped.latency_s == 0.5


def test_reset_and_invalid_input():
    traj = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0)
    traj.add_key(0.0, [1.0, 0, 0], IDENTITY)
    traj.reset([0, 0, 1.0], IDENTITY, 2.0)
    assert traj.at_rest
    np.testing.assert_array_equal(traj.sample(3.0).position, [0, 0, 1.0])
    with pytest.raises(InvalidInputError, match='finite'):
        traj.add_key(1.0, [np.nan, 0, 0], IDENTITY)
    with pytest.raises(ZeroNormError):
        traj.add_key(1.0, [0, 0, 0], [0, 0, 0, 0])
    with pytest.raises(InvalidInputError, match='time'):
        traj.sample(float('inf'))
    with pytest.raises(InvalidInputError, match='max_linear_speed'):
        CartesianTrajectory(np.zeros(3), IDENTITY, max_linear_speed=0.0)


def test_planned_positions_run_from_the_current_segment_to_the_newest_key():
    traj = CartesianTrajectory(np.zeros(3), IDENTITY, 0.0, max_linear_speed=V_MAX,
                               max_angular_speed=W_MAX, smooth=False)
    np.testing.assert_array_equal(traj.planned_positions(), [[0.0, 0.0, 0.0]])
    keys = [np.array([0.01 * k, 0.0, 0.0]) for k in range(1, 4)]
    for k, p in enumerate(keys, start=1):
        traj.add_key(0.01 * k, p, IDENTITY)
    np.testing.assert_array_equal(traj.planned_positions(), [np.zeros(3)] + keys)
    t, known = 0.0, [np.zeros(3)] + keys
    while not traj.at_rest and t < 5.0:
        t += 0.005
        traj.sample(t)
        planned = traj.planned_positions()
        # A shrinking suffix of the keys: passed keys leave, the newest stays.
        assert len(planned) <= len(known)
        np.testing.assert_array_equal(planned, known[len(known) - len(planned):])
        known = list(planned)
    np.testing.assert_array_equal(traj.planned_positions(), [keys[-1]])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=4, max_size=4).filter(
    lambda v: np.linalg.norm(v) > 0.1), st.booleans())
def test_a_key_where_the_trajectory_rests_is_a_duplicate_whatever_its_orientation(v, flip):
    """The key the pose at rest is: no move (a 3e-8 rad rounding once made it a 0.2 s one).

    A tracker restarting a lane at rest at its target adds such a key; as a
    move it held the lane's verdict at 'moving' for 0.2 s (issue 52's poles).
    """
    q = np.array(v) / np.linalg.norm(v)
    p = np.array([0.3, -0.2, 0.5])
    traj = CartesianTrajectory(p, q, 0.0)
    assert traj.add_key(0.1, p, -q if flip else q) == 'duplicate'
    assert traj.sample(0.1).at_rest

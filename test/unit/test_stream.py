# SPDX-License-Identifier: Apache-2.0

"""The command stream: committed points, message shape, restarts, idle time."""

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.core.errors import InvalidInputError
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.stream import CATCH_UP_S, CommandStream
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.description.urdf import bundled_urdf
import numpy as np
import pytest

Q0 = [0.1, 0.6, -0.1, -1.3, 0.2, 0.8, 0.3]


def make(period=0.01, lead=0.05, jerk=500.0, time=0.0):
    """Return a tracker on the bundled iiwa14 and its stream."""
    chain = Chain.from_urdf_file(bundled_urdf('iiwa14.urdf'), 'iiwa_link_0', 'tool0')
    tracker = MotionTracker(chain, make_solver(chain, 'auto'), TrackerConfig(), Q0, time)
    return tracker, CommandStream(tracker, period, lead, jerk, budget_s=0.03)


def target(tracker, offset):
    """Return the start pose moved by offset (3,) metres."""
    pose = tracker.chain.forward(np.array(Q0))
    pose[:3, 3] += offset
    return pose


@settings(max_examples=20, deadline=None)
@given(offset=st.tuples(*[st.floats(-0.15, 0.15)] * 3),
       gaps=st.lists(st.floats(0.005, 0.013), min_size=20, max_size=60))
def test_every_message_holds_the_same_command_for_the_same_instant(offset, gaps):
    """Consecutive horizons agree exactly where they overlap (committed part)."""
    tracker, stream = make()
    tracker.add_target(stream.lead_s, target(tracker, offset))
    now, previous = 0.0, None
    for gap in gaps:
        now += gap
        stream.advance(now)
        points = stream.horizon(now)
        times = [p.time for p in points]
        assert times[0] <= now and all(b > a for a, b in zip(times, times[1:]))
        assert np.all(points[-1].v == 0.0) and np.all(points[-1].a == 0.0)
        committed = {p.time: p for p in points if p.time <= stream.end_time}
        if previous is not None:
            for t, p in previous.items():
                if t in committed:
                    np.testing.assert_array_equal(p.q, committed[t].q)
                    np.testing.assert_array_equal(p.a, committed[t].a)
        previous = committed


def test_restart_commits_the_measured_state():
    """restart(q, v): the next message starts at exactly that state."""
    tracker, stream = make()
    q = np.array(Q0) + 0.05
    v = np.full(7, 0.2)
    stream.restart(1.0, q, v)
    stream.advance(1.0)
    first = stream.horizon(1.0)[0]
    assert first.time == 1.0
    np.testing.assert_array_equal(first.q, q)
    np.testing.assert_array_equal(first.v, v)


@settings(max_examples=20, deadline=None)
@given(joint=st.integers(0, 6), side=st.sampled_from([-1.0, 1.0]),
       room=st.floats(0.0, 0.3), speed=st.floats(0.0, 1.0), others=st.floats(-1.0, 1.0))
def test_a_restart_moving_toward_a_limit_keeps_every_limit_after_it(
        joint, side, room, speed, others):
    """restart(q, v) from any state within the limits: every command after it keeps them all.

    Issue 30 (the loaded pass's 1.24 x the acceleration limit over DDS): the
    node's own robot, its tick a second late, restarts the plan from the
    state it had (ClockWatch); 6 mrad from the iiwa's last joint limit at
    0.12 rad/s the limiting step could not stop before it at the
    acceleration limit, clamped at the limit, and the plan's acceleration
    reached 12.9 rad/s^2 (limit 5). Judged from samples of the plan at
    random instants (as joint_states ticks late by any amount see it),
    independently of the stream: positions within the limits, and the
    velocity change between samples within the limit times the time between.
    """
    tracker, stream = make()
    chain = tracker.chain
    limit = TrackerConfig().max_joint_acceleration
    q = np.array(Q0)
    edge = chain.upper[joint] if side > 0 else chain.lower[joint]
    q[joint] = edge - side * room
    v = np.clip(np.full(7, others) * chain.velocity, -chain.velocity, chain.velocity)
    v[joint] = side * speed * chain.velocity[joint]   # toward the limit
    stream.restart(0.0, q, v)
    tracker.add_target(stream.lead_s, chain.forward(np.array(Q0)))
    times = np.concatenate(([0.0], np.sort(np.random.default_rng(joint).uniform(0.0, 0.8, 150))))
    samples = []
    for now in times:
        stream.advance(now)
        samples.append(stream.sample(now)[:2])
    qs = np.array([s[0] for s in samples])
    vs = np.array([s[1] for s in samples])
    assert all(chain.within_limits(x) for x in qs)
    dt = np.diff(times)[:, None]
    change = np.abs(np.diff(vs, axis=0))
    assert np.all(change <= limit * dt * (1 + 1e-6) + 1e-9), \
        float(np.max(change / (limit * dt)))


@settings(max_examples=10, deadline=None)
@given(stall=st.floats(0.01, 0.95), moving_for=st.floats(0.05, 0.6),
       deltas=st.lists(st.floats(-0.5, 0.5), min_size=7, max_size=7).filter(
           lambda d: max(map(abs, d)) > 0.05))
def test_a_late_tick_plans_a_bounded_motion_and_brakes_over_the_rest(stall, moving_for, deltas):
    """A tick ``stall`` s after the last plans at most lead + CATCH_UP_S of motion; brakes before.

    The cause (ci71): each late tick planned every grid point it missed with the
    guarded limiting step, so on a loaded machine a costly step (the iiwa held
    at the floor: ~2.5 ms) made the next tick later still, down to 2 joint
    states a second. Judged by counting the tracker's motion steps in the late
    tick, and on the committed points: within the position limits, the
    velocity changing by at most the acceleration limit times the time between
    points, not faster after the stall than before it (braked); the target is
    still reached.
    """
    tracker, stream = make()
    chain = tracker.chain
    # A reachable goal: the pose of joints within the limits, away from the start.
    goal = chain.forward(np.clip(np.array(Q0) + deltas, chain.lower, chain.upper))
    tracker.add_target(stream.lead_s, goal)
    now = 0.0
    while now < moving_for:
        now += stream.h
        stream.advance(now)
    moving = bool(np.any(tracker.v))
    steps, braking = [], []
    command, brake = tracker.command, tracker.brake

    def counted_command(t, reference=None):
        steps.append(t)
        return command(t, reference)

    def watched_brake(t):
        out = brake(t)
        braking.append((t, np.abs(tracker.v).copy()))
        return out
    tracker.command, tracker.brake = counted_command, watched_brake
    now += stall
    braked = stream.tails_adopted
    stream.advance(now)
    tracker.command, tracker.brake = command, brake
    assert len(steps) <= round((stream.lead_s + CATCH_UP_S) / stream.h) + 1, len(steps)
    if stall < stream.lead_s + CATCH_UP_S:      # the tick planned all of it
        assert stream.tails_adopted == braked and not braking
    elif moving and stall > stream.lead_s + CATCH_UP_S + 2 * stream.h:
        assert stream.tails_adopted == braked + 1 and braking
    # Braked up to the motion planned (or to rest, then skipped): each joint slower
    # at every braking step, never faster.
    for (_, a), (_, b) in zip(braking, braking[1:]):
        assert np.all(b <= a + 1e-12)
    if braking and steps:
        assert braking[-1][0] < min(steps)
    points = list(stream._points)
    limit = TrackerConfig().max_joint_acceleration
    for a, b in zip(points, points[1:]):
        assert chain.within_limits(b.q)
        assert np.all(np.abs(b.v - a.v) <= limit * (b.time - a.time) * (1 + 1e-6) + 1e-9)
    for _ in range(1000):
        now += stream.h
        stream.advance(now)
    reached = chain.forward(stream.sample(now)[0])
    assert np.linalg.norm(reached[:3, 3] - goal[:3, 3]) <= 1e-4


def test_idle_time_is_skipped_in_one_point():
    """At rest for 10 s with ticks missing: one point, not a thousand."""
    tracker, stream = make()
    stream.advance(0.0)
    stream.advance(10.0)
    assert len(stream.horizon(10.0)) <= 10 and stream.idle_skips == 2   # start, and 10 s


def test_jerk_change_waits_for_rest():
    """A new jerk limit changes the window only at rest (a window change mid-motion jumps)."""
    tracker, stream = make(jerk=1000.0)
    tracker.add_target(stream.lead_s, target(tracker, [0.1, 0.0, 0.0]))
    stream.advance(0.05)
    assert stream.filter.m == 1
    stream.set_jerk(100.0)
    assert stream.filter.m == 1
    now = 0.05
    while not stream.at_rest():
        now += 0.01
        stream.advance(now)
    stream.advance(now + 0.01)
    assert stream.filter.m == 10


def test_bad_options_are_refused():
    """Period, lead, budget and jerk limits are checked."""
    tracker, _ = make()
    for kwargs in ({'period': 0.0, 'lead_s': 0.05, 'jerk': 1.0},
                   {'period': 0.01, 'lead_s': -1.0, 'jerk': 1.0},
                   {'period': 0.01, 'lead_s': 0.05, 'jerk': 0.0},
                   {'period': 0.01, 'lead_s': 0.05, 'jerk': [1.0, 2.0]}):
        with pytest.raises(InvalidInputError):
            CommandStream(tracker, **kwargs)


def test_a_new_model_of_the_same_joints_continues_the_plan_without_a_seam():
    """use_tracker(carried_over(...)): every committed point kept, the next ones follow on."""
    from ik_node.core.motion.carry import carried_over
    tracker, stream = make()
    tracker.add_target(stream.lead_s, target(tracker, [0.1, -0.1, 0.05]))
    now = 0.0
    for _ in range(15):
        now += 0.01
        stream.advance(now)
    before = {p.time: p for p in stream.horizon(now) if p.time <= stream.end_time}
    moving = np.max(np.abs(stream.sample(now)[1]))
    assert moving > 0.01
    chain = tracker.chain
    stream.use_tracker(carried_over(tracker, chain, make_solver(chain, 'auto'), Q0, now))
    now += 0.01
    stream.advance(now)
    after = stream.horizon(now)
    shared = [p for p in after if p.time in before]
    assert len(shared) >= 3
    for p in shared:
        np.testing.assert_array_equal(p.q, before[p.time].q)
        np.testing.assert_array_equal(p.a, before[p.time].a)
    # The steps after the old plan are one grid step of the same stage: accelerations
    # change by at most the jerk limit over a period (500 rad/s^3 x 10 ms).
    accel = [p.a for p in after if p.time <= stream.end_time]
    assert max(np.max(np.abs(b - a)) for a, b in zip(accel, accel[1:])) <= 500.0 * 0.01 + 1e-9
    with pytest.raises(InvalidInputError, match='other joints'):
        other = Chain.from_urdf_file(bundled_urdf('ur5e.urdf'), 'base_link', 'tool0')
        stream.use_tracker(MotionTracker(other, make_solver(other, 'auto'), TrackerConfig(),
                                         other.mid_limits(), now))


def test_commands_at_a_limit_stay_within_it_exactly():
    """A joint driven to its limit: every point and sample within the limits (no rounding past).

    The stage's mean of positions at a limit can round 2-4e-16 past it.
    """
    tracker, stream = make(jerk=50.0)    # a wide window (m = 20): many terms in the mean
    chain = tracker.chain
    q_far = np.array(Q0)
    q_far[1] = chain.upper[1] + 1.0      # beyond: the solver's goal is clipped to the limit
    tracker.q0 = np.clip(q_far, chain.lower, chain.upper)
    tracker.reset(0.0)
    now = 0.0
    for _ in range(300):
        now += 0.01
        stream.advance(now)
        for p in stream.horizon(now):
            assert chain.within_limits(p.q)
        assert chain.within_limits(stream.sample(now - 0.003)[0])
    assert stream.sample(now)[0][1] == chain.upper[1]


def _hardware_commands(stream, tracker, goal, jump_at, back, arrays, seconds):
    """Run ticks (10 ms) and, with ``arrays``, sends (2 ms) on a clock going back at ``jump_at``.

    Returns (commands (k, n) on the real-time grid, grid step s, index of the
    first command after the jump). The clock reads real time until
    ``jump_at``, then real time - ``back``.
    """
    step = 0.002 if arrays else 0.01
    tracker.add_target(stream.lead_s, goal)
    out, first_after = [], None
    for k in range(1, int(round(seconds / step)) + 1):
        real = k * step
        clock = real if real < jump_at else real - back
        if first_after is None and real >= jump_at:
            first_after = len(out)
        if k % int(round(0.01 / step)) == 0:
            stream.advance(clock)
        out.append(stream.send(clock) if arrays else stream.sample(clock)[0])
    return np.array(out), step, first_after


DELTAS = st.lists(st.floats(-0.6, 0.6), min_size=7, max_size=7).filter(
    lambda d: max(abs(x) for x in d) > 0.3)   # joint moves from Q0, rad


@settings(max_examples=25, deadline=None)
@given(delta=DELTAS, jump_at=st.floats(0.15, 0.5), back=st.floats(0.02, 100.0),
       arrays=st.booleans())
def test_a_clock_going_back_stops_the_arm_within_limits_then_goes_on(
        delta, jump_at, back, arrays):
    """Issue 21, defect 5: a simulator reset mid-motion (the clock back by up to 100 s).

    What the hardware gets, on its own (real-time) grid, never breaks the
    speed, acceleration or jerk limits across the jump (divided differences);
    the joints come to rest after the jump, then the target is still reached.
    Before, the plan went on at full speed on the new clock (no stop).
    """
    tracker, stream = make(jerk=500.0)
    chain = tracker.chain
    goal = chain.forward(np.clip(np.array(Q0) + delta, chain.lower, chain.upper))
    q, step, first_after = _hardware_commands(stream, tracker, goal, jump_at, back, arrays, 6.0)
    v = np.diff(q, axis=0) / step
    a = np.diff(v, axis=0) / step
    j = np.diff(a, axis=0) / step
    eps = 1e-6
    assert np.all(np.abs(v) <= chain.velocity * (1 + eps) + eps)
    assert np.all(np.abs(a) <= np.array(tracker.accelerations) * (1 + eps) + eps)
    assert np.all(np.abs(j) <= 500.0 * (1 + eps) + 1e-3)
    assert stream.clock_jumps_back == 1
    moving = np.max(np.abs(v), axis=1) > 1e-9
    assert moving[first_after - 1], 'the arm was moving at the jump'
    rest = next((k for k in range(first_after, len(moving)) if not moving[k]), None)
    assert rest is not None, 'no stop after the jump'
    assert np.max(np.abs(q[rest] - q[-1])) > 1e-3, 'stopped at the target: not a stop'
    assert moving[rest:].any(), 'it did not go on after the stop'
    assert np.max(np.abs(chain.forward(q[-1])[:3, 3] - goal[:3, 3])) < 1e-6


def test_a_clock_going_back_releases_a_twist_whose_dead_man_ran_on_the_old_clock():
    """Twist at 100 s, clock back to 5 s: without new twists the arm stops (the dead-man)."""
    tracker, stream = make(time=100.0)
    now = 100.0
    for _ in range(20):
        now += 0.01
        tracker.set_twist(now + stream.lead_s, [0.05, 0.0, 0.0], [0.0, 0.0, 0.0])
        stream.advance(now)
    assert not stream.at_rest()
    now = 5.0
    for _ in range(200):
        now += 0.01
        stream.advance(now)
    assert stream.at_rest() and tracker.twists.timeouts == 0 and tracker.twists.twist is None
    tracker.set_twist(now, [0.05, 0.0, 0.0], [0.0, 0.0, 0.0])   # a new twist moves it again
    stream.advance(now + 0.1)
    assert not stream.at_rest()


def test_an_array_sent_late_carries_the_plan_at_its_due_instant_and_is_no_clock_jump():
    """position_array: the timer due at 0.052 s runs at 0.0535 s, after a tick at 0.053 s.

    It sends the plan at 0.052 s (what an on-time callback would have sent),
    and the stream's clock watch sees 0.0535 s: no clock jump back, no stall.
    """
    tracker, stream = make()
    tracker.add_target(0.0, target(tracker, [0.1, 0.0, -0.1]))
    for k in range(1, 6):
        stream.advance(0.01 * k)
        stream.send(0.01 * k, 0.01 * k)
    stream.advance(0.053)
    sent = stream.send(0.0535, due=0.052)
    np.testing.assert_array_equal(sent, stream.sample(0.052)[0])
    assert np.any(sent != stream.sample(0.0535)[0])      # the arm moves: the instant matters
    assert (stream.clock_jumps_back, stream.stalls) == (0, 0)

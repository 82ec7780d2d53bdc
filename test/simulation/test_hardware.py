# SPDX-License-Identifier: Apache-2.0

"""What reaches the hardware: the node's stream through controller stand-ins, no DDS.

The stand-ins (ik_node.bench.standins) are first checked against the
documented behaviour of the real controllers, with the tests' own
polynomials; then the stream is judged by what the controller writes, at
its rate, by differences: speed, acceleration and jerk against the node's
limits (5 % tolerance: differences of a cubic sampled at the controller's
period), no stalled tick, no rejected message within the latency budget, a
smooth stop when the node is killed. The previous release's stream fails
the same checks (the stand-ins can tell).
"""

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.bench.hardware import simulate
from ik_node.bench.standins import ForwardController, LagServo, MockHardware, Point, \
    Trajectory, TrajectoryController
import numpy as np
import pytest

JOINTS = ['a', 'b']
TOLERANCE = 1.05


def jtc(rate=1000.0, hw=None, **kwargs):
    """Return a trajectory controller stand-in on mock hardware at (0, 0)."""
    return TrajectoryController(JOINTS, rate, hw or MockHardware([0.0, 0.0]), **kwargs)


# -- the trajectory controller stand-in --------------------------------------------------

@pytest.mark.parametrize('msg, reason', [
    (Trajectory(['a'], 0.0, [Point(0.1, [1.0])]), "don't match"),
    (Trajectory(['a', 'c'], 0.0, [Point(0.1, [1.0, 1.0])]), "doesn't match"),
    (Trajectory(JOINTS, 0.0, []), 'empty'),
    (Trajectory(JOINTS, 0.0, [Point(0.1, [1.0, 1.0], [0.5, 0.0])]), 'not zero'),
    (Trajectory(JOINTS, 0.5, [Point(0.1, [1.0, 1.0])]), 'ends in the past'),
    (Trajectory(JOINTS, 0.0, [Point(0.2, [1.0, 1.0]), Point(0.2, [2.0, 2.0])]),
     'strictly increasing'),
    (Trajectory(JOINTS, 0.0, [Point(0.1, [1.0, 1.0], [0.0])]), 'mismatch'),
])
def test_invalid_messages_are_rejected(msg, reason):
    """Each rule of the controller's validation refuses the message, with its reason."""
    c = jtc()
    assert not c.receive(msg, now=1.0)
    assert reason in c.rejected[-1]


def test_a_stamped_message_ending_now_or_later_is_accepted():
    """Compare stamp + last time_from_start with the controller's clock ('ends in the past')."""
    c = jtc()
    assert c.receive(Trajectory(JOINTS, 0.9, [Point(0.1, [1.0, 1.0])]), now=1.0)
    assert c.receive(Trajectory(JOINTS, 0.9, [Point(0.1, [1.0, 1.0], [0.5, 0.0])]), now=1.0) \
        is False
    assert jtc(allow_nonzero_velocity_at_trajectory_end=True).receive(
        Trajectory(JOINTS, 0.9, [Point(0.1, [1.0, 1.0], [0.5, 0.0])]), now=1.0)


def polynomial(coefficients, t):
    """(p, v, a) of sum c_k t^k."""
    c = np.array(coefficients, float)
    k = np.arange(len(c))
    p = float((t ** k) @ c)
    v = float((k[1:] * t ** (k[1:] - 1)) @ c[1:])
    a = float((k[2:] * (k[2:] - 1) * t ** (k[2:] - 2)) @ c[2:]) if len(c) > 2 else 0.0
    return p, v, a


@pytest.mark.parametrize('fields, coefficients', [
    ('p', [0.1, 2.0]),                                   # linear
    ('pv', [0.1, 2.0, -3.0, 40.0]),                      # cubic
    ('pva', [0.1, 2.0, -3.0, 40.0, -200.0, 900.0]),      # quintic
])
def test_spline_degree_follows_the_fields_of_both_ends(fields, coefficients):
    """Points sampled from a polynomial of that degree are reproduced between them exactly."""
    c = jtc(rate=1000.0, allow_nonzero_velocity_at_trajectory_end=True)
    points = []
    for t in (0.0, 0.1):
        p, v, a = polynomial(coefficients, t)
        points.append(Point(t, [p, -p], [v, -v] if 'v' in fields else [],
                            [a, -a] if 'a' in fields else []))
    assert c.receive(Trajectory(JOINTS, 1.0, points), now=1.0)
    for k in range(60):
        c.update(1.0 + k * 0.001)
    # The command written at tick k is the sample one period ahead.
    for k in (3, 20, 57):
        want = polynomial(coefficients, (k + 1) * 0.001)[0]
        assert c.commands[k][0] == pytest.approx(want, abs=1e-12)
        assert c.commands[k][1] == pytest.approx(-want, abs=1e-12)


def test_first_point_in_the_future_starts_from_the_measured_state():
    """Before the first point the spline starts at the measured state, velocity 0 on mock hw."""
    hw = MockHardware([0.0, 0.0])
    c = jtc(hw=hw)
    c.receive(Trajectory(JOINTS, 1.0, [Point(0.05, [1.0, 1.0], [1.0, 1.0], [0.0, 0.0]),
                                       Point(0.1, [1.05, 1.05], [0.0, 0.0], [0.0, 0.0])]),
              now=1.0)
    c.update(1.0)
    # A quintic from rest at 0 to (1, 1 rad/s) in 50 ms, sampled 1 ms in: tiny, not the point.
    assert 0.0 < c.commands[0][0] < 1e-3


def test_interpolate_from_desired_state_starts_from_the_last_command():
    """With the parameter, the state before a message is the last command at its tick."""
    c = jtc(interpolate_from_desired_state=True, hw=MockHardware([0.0, 0.0]))
    c.receive(Trajectory(JOINTS, 0.0, [Point(0.01, [0.5, 0.5])]), now=0.0)
    for k in range(20):
        c.update(k * 0.001)
    c.hw.q = np.array([0.2, 0.2])   # the arm is elsewhere: not used with this parameter
    c.receive(Trajectory(JOINTS, 0.0, [Point(0.01, [0.7, 0.7])]), now=0.0205)
    c.update(0.021)
    # Linear from the last command (0.5 at its tick, 0.019) to the point (0.7 at
    # 0.021 + 0.01), sampled one period ahead (0.022): 3/12 of the way.
    assert c.commands[-1][0] == pytest.approx(0.5 + 0.2 * 3 / 12, abs=1e-9)


def test_replacement_at_the_next_update_and_hold_after_the_end():
    """A new message replaces the old at the next update; after its last point, its values hold."""
    c = jtc()
    c.receive(Trajectory(JOINTS, 0.0, [Point(0.005, [1.0, 1.0])]), now=0.0)
    for k in range(10):
        c.update(k * 0.001)
    assert c.commands[-1].tolist() == [1.0, 1.0]
    c.receive(Trajectory(JOINTS, 0.0, [Point(0.002, [2.0, 3.0])]), now=0.0095)
    for k in range(10, 15):
        c.update(k * 0.001)
    assert c.commands[10][0] == pytest.approx(1.5)     # linear from 1 to 2 in 2 ms, 1 ms in
    assert c.commands[-1].tolist() == [2.0, 3.0]


def test_forward_controller_newest_array_nan_and_wrong_size():
    """Newest array each update; all NaN means no command; a wrong size deactivates it."""
    f = ForwardController(JOINTS, 500.0, MockHardware([0.0, 0.0]))
    f.receive([math.nan, math.nan], 0.0)
    assert f.update(0.0) is None
    f.receive([0.1, 0.2], 0.001)
    f.receive([0.3, 0.4], 0.0015)
    assert f.update(0.002).tolist() == [0.3, 0.4]
    assert f.update(0.004).tolist() == [0.3, 0.4]     # nothing new: held
    f.receive([1.0], 0.005)
    assert f.update(0.006) is None and not f.active
    f.receive([0.5, 0.5], 0.007)
    assert f.update(0.008) is None


def test_lag_servo_reaches_63_percent_in_one_time_constant():
    """The first-order servo: 1 - 1/e of a step after tau."""
    s = LagServo([0.0], 0.05)
    for _ in range(50):
        s.write([1.0], 0.001)
    assert s.q[0] == pytest.approx(1.0 - math.exp(-1.0), abs=1e-9)


# -- the node's stream at the hardware ---------------------------------------------------

def judge(run, killed=False):
    """Assert the hardware's commands keep the limits, never stall, and no message was refused."""
    ratios = run.peak_ratios()
    assert ratios['speed'] <= 1.0 + 1e-6, ratios
    assert ratios['accel'] <= TOLERANCE, ratios
    assert ratios['jerk'] <= TOLERANCE, ratios
    assert run.stalled_ticks() == 0
    assert run.rejected == []
    if killed:
        q, v, _, _ = run.derivatives()
        assert np.max(np.abs(v[-int(0.3 / run.period):])) == 0.0   # at rest, holding
    return ratios


@pytest.mark.parametrize('scenario', ['move', 'figure8', 'twist', 'kill'])
@pytest.mark.parametrize('output', ['joint_trajectory', 'position_array'])
@pytest.mark.parametrize('arm', ['iiwa14', 'panda'])
@pytest.mark.parametrize('rate, latency, tau', [(500.0, 0.025, 0.0), (1000.0, 0.001, 0.15)])
def test_hardware_keeps_the_limits(scenario, output, arm, rate, latency, tau):
    """Every scenario, both outputs and arms: the limits hold where the arm feels them."""
    judge(simulate(arm, scenario, output, controller_rate=rate, latency=latency,
                   servo_tau=tau, duration=2.5), killed=scenario == 'kill')


def test_the_previous_stream_fails_the_same_checks():
    """The stand-ins can tell: one point per message spikes, stalls, and is refused when late."""
    old = simulate('iiwa14', 'figure8', legacy=True, latency=0.005, duration=2.0)
    assert old.peak_ratios()['accel'] > 10.0
    assert old.stalled_ticks() > 0
    late = simulate('iiwa14', 'figure8', legacy=True, latency=0.02, duration=1.0)
    assert len(late.rejected) > 0.9 * late.messages


def test_a_stall_brakes_along_the_tail_and_resumes():
    """A 0.25 s stall mid-motion: the controller plays the tail; the plan adopts it; no jump."""
    seen = []
    run = simulate('iiwa14', 'figure8', latency=0.02, stall=(0.6, 0.25), duration=2.0,
                   on_tick=lambda t, tracker, stream: seen.append(stream.tails_adopted))
    ratios = run.peak_ratios()
    assert ratios['accel'] <= TOLERANCE and ratios['jerk'] <= TOLERANCE
    assert run.rejected == [] and max(seen) >= 1


@pytest.mark.parametrize('offset', [-0.03, -0.012, -0.005, 0.005, 0.012, 0.025])
@pytest.mark.parametrize('scenario', ['move', 'figure8', 'kill'])
def test_a_controller_clock_behind_or_ahead_within_the_budget_keeps_the_limits(offset, scenario):
    """The controller on another machine: its clock off by up to the 30 ms budget, either sign.

    Behind: each message starts at the committed point at or before the
    node's now - budget, so the controller's own now lies inside it. Ahead:
    the commands are committed the budget ahead (latency 5 ms + 25 ms ahead
    is the budget spent).
    """
    latency = 0.005 if offset > 0.0 else 0.001
    judge(simulate('iiwa14', scenario, 'joint_trajectory', controller_rate=1000.0,
                   latency=latency, clock_offset=offset, duration=2.0),
          killed=scenario == 'kill')


def test_a_controller_clock_behind_by_more_than_the_budget_is_seen_at_the_hardware():
    """The stand-in can tell: with no budget, a clock 12 ms behind splines from its own state.

    (joint_trajectory_controller meets a first point in its future and
    interpolates from the measured state, velocity 0 on mock hardware: the
    spikes issue 29 measured, 90-360x the acceleration limit.)
    """
    run = simulate('iiwa14', 'figure8', 'joint_trajectory', controller_rate=1000.0,
                   latency=0.001, budget=0.0, clock_offset=-0.012, duration=2.0)
    assert run.peak_ratios()['accel'] > 10.0


@pytest.mark.parametrize('rate', [500.0, 1000.0])
@pytest.mark.parametrize('arm', ['iiwa14', 'panda'])
def test_a_forward_controller_on_its_own_clock_gets_the_plan_at_its_timers_instants(arm, rate):
    """Its own loop (phase 0.37 period, 50 us jitter), the node's array timer up to 0.2 ms late.

    Each array samples the plan at the instant its timer callback was due,
    so the scheduler's lateness moves no position: while every array
    arrives between the same two controller updates as its due instant
    would, the hardware keeps the limits. Sampled when the callback ran (as
    before issue 29), the same run is 10-100x the acceleration limit.
    """
    kwargs = {'controller_rate': rate, 'latency': 0.0005, 'duration': 2.0,
              'array_jitter': 0.0002, 'controller_phase': 0.37 / rate,
              'controller_jitter': 0.00005, 'seed': 3}
    run = simulate(arm, 'figure8', 'position_array', **kwargs)
    assert run.array_ticks() == {'reused': 0.0, 'skipped': 0.0}
    judge(run)
    ran = simulate(arm, 'figure8', 'position_array', array_sample='actual', **kwargs)
    assert ran.peak_ratios()['accel'] > 5.0


@pytest.mark.parametrize('lateness', [0.0005, 0.002])
def test_arrays_that_cross_the_controllers_updates_give_the_staircase_the_readme_warns_of(
        lateness):
    """forward_position_controller takes the newest array at each update: no clock, no queue.

    When an array arrives after the update it was meant for (scheduler
    lateness beyond the phase margin), that update writes the previous array
    again and the next one skips one: a staircase no sender can remove
    without the controller's phase. What still holds, and what the README
    says: positions finite and within the limits, the motion ends at rest
    where the plan does; the accelerations at the hardware do not (the README
    and the parameter file send users to joint_trajectory_controller).
    """
    run = simulate('panda', 'move', 'position_array', controller_rate=500.0,
                   latency=0.0005, duration=3.0, array_jitter=lateness,
                   controller_phase=0.37 / 500.0, seed=3)
    ticks = run.array_ticks()
    assert ticks['reused'] > 0.05 and ticks['skipped'] > 0.0
    assert run.peak_ratios()['accel'] > 10.0       # the staircase at the hardware
    q, v, _, _ = run.derivatives()
    chain_limits = simulate_limits('panda')
    assert np.all(np.isfinite(q)) and np.all(q >= chain_limits[0]) and \
        np.all(q <= chain_limits[1])
    assert np.max(np.abs(v[-int(0.2 / run.period):])) == 0.0   # at rest at the end


def simulate_limits(arm):
    """Return the (lower, upper) joint limits of a simulated arm."""
    from ik_node import Chain
    from ik_node.bench.hardware import ARMS
    from ik_node.description.urdf import bundled_urdf
    urdf, base, tip = ARMS[arm][:3]
    chain = Chain.from_urdf_file(bundled_urdf(urdf), base, tip)
    return chain.lower, chain.upper


@settings(max_examples=12, deadline=None)
@given(arm=st.sampled_from(['iiwa14', 'panda']),
       scenario=st.sampled_from(['move', 'figure8', 'twist', 'kill']),
       rate=st.sampled_from([500.0, 1000.0]), latency=st.floats(0.0, 0.03),
       tau=st.sampled_from([0.0, 0.02, 0.15]), jitter=st.floats(0.0, 0.03),
       stall=st.one_of(st.none(), st.tuples(st.floats(0.2, 1.0), st.floats(0.02, 0.4))),
       seed=st.integers(0, 1000), offset=st.floats(-0.03, 0.03))
def test_random_latency_jitter_and_stalls_keep_the_limits(
        arm, scenario, rate, latency, tau, jitter, stall, seed, offset):
    """joint_trajectory: latency and clock offset within the budget, any jitter or stall.

    The budget covers latency plus a controller clock ahead, and a clock
    behind up to the budget on its own. Beyond what the lead covers, ticks
    come late: the plan brakes along the tail the controller plays and
    picks up again (stalled ticks allowed here).
    """
    latency = min(latency, 0.03 - max(offset, 0.0))
    run = simulate(arm, scenario, 'joint_trajectory', controller_rate=rate, latency=latency,
                   servo_tau=tau, jitter=jitter, stall=stall, seed=seed, duration=2.0,
                   clock_offset=offset)
    ratios = run.peak_ratios()
    assert ratios['speed'] <= 1.0 + 1e-6 and ratios['accel'] <= TOLERANCE and \
        ratios['jerk'] <= TOLERANCE, ratios
    assert run.rejected == []

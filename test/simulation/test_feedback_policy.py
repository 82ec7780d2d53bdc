# SPDX-License-Identifier: Apache-2.0

"""The feedback policy closed around simulated position servos, as plain Python.

The loop of ``ik_bench feedback`` (ik_node.bench.feedback.closed_loop): the
node's tick (FeedbackPolicy.decide, then CommandStream.advance at 100 Hz) and
a servo simulated at 500 Hz that follows the command a controller plays (the
stream sampled at the servo's time), publishing stamped states at 50-500 Hz
that arrive 0-5 ms later. Servos: first order
(time constant 0.02-0.15 s) and second order (a PD loop, damping ratio
0.8-1.5, lag 2 zeta / omega_n of 0.02-0.15 s). Issue 21, defect 1: the old
rule (|measured - command now| > 0.1 rad) re-synced on lag alone.
"""

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.bench.events import EVENTS, run_event
from ik_node.bench.feedback import closed_loop as bench_loop
from ik_node.bench.feedback import iiwa14, PERIOD, Q0, Servo, SERVO_DT, SERVO_LAG, TOLERANCE
from ik_node.core.motion.feedback import CONFIRMATIONS
import numpy as np
from oracle import pose_errors
from strategies import examples, sweeping

CHAIN = iiwa14()


def closed_loop(servo, targets, rate, latency, seconds, push=None):
    """Run ik_bench feedback's loop; return (policy, stream, servo, push detection delay).

    Every state is accepted, but a push's first states (a jump, taken once
    CONFIRMATIONS agree); after a re-sync the plan starts at the measured joints.
    """
    def check_take(verdict, stamp, pushed_at):
        assert verdict == '' or (verdict == 'implausible_jump' and pushed_at is not None
                                 and stamp >= pushed_at), verdict
    run = bench_loop(CHAIN, servo, targets, rate, latency, seconds, push=push,
                     check_take=check_take)
    if run.detected is not None:
        assert run.policy.resyncs >= 1 and run.restart_gap == 0.0, run.restart_gap
    return run.policy, run.stream, run.servo, run.detected


@st.composite
def servos(draw):
    """Draw a servo model: first order, or second order with damping ratio 0.8-1.5."""
    lag = draw(st.floats(0.02, SERVO_LAG))
    zeta = draw(st.one_of(st.none(), st.floats(0.8, 1.5)))
    return Servo(Q0, lag, zeta)


def far_targets(data, count):
    """Reachable targets: FK of joints 0.3-0.8 rad from the start, 1.5 s apart."""
    out = []
    for i in range(count):
        delta = np.array([data.draw(st.floats(0.3, 0.8)) * data.draw(st.sampled_from([-1, 1]))
                          for _ in range(7)])
        q = np.clip(Q0 + delta, CHAIN.lower + 0.1, CHAIN.upper - 0.1)
        out.append((0.05 + 1.5 * i, CHAIN.forward(q)))
    return out


# 8 per run; 40 fresh ones in scripts/sweep.sh.
@settings(max_examples=examples(8), deadline=None)
@given(servos(), st.sampled_from([50.0, 100.0, 250.0, 500.0]), st.floats(0.0, 0.005),
       st.data())
def test_servo_lag_never_resyncs_and_targets_are_reached(servo, rate, latency, data):
    """Defect 1: moves at the joints' full speed, any servo within the assumed lag: no re-sync."""
    targets = far_targets(data, 2)
    policy, stream, servo, _ = closed_loop(servo, targets, rate, latency, 3.0)
    assert policy.resyncs == 0, (servo.lag, servo.zeta)
    pos, ang = pose_errors(CHAIN, servo.q, targets[-1][1])
    assert pos < 1e-3 and ang < 1e-2, (pos, ang)


# 10 per run; 50 fresh ones in scripts/sweep.sh.
@settings(max_examples=examples(10), deadline=None)
@given(servos(), st.sampled_from([50.0, 100.0, 250.0, 500.0]), st.floats(0.2, 1.0),
       st.integers(0, 6), st.floats(0.15, 0.6), st.sampled_from([-1.0, 1.0]), st.data())
def test_a_push_is_detected_at_once_and_the_target_still_reached(servo, rate, when, joint,
                                                                 size, sign, data):
    """An arm holding still pushed by more than the tolerance (and held there).

    Detected once the push is confirmed (CONFIRMATIONS states: a jump is
    taken only then) at the next tick; the new plan starts at the measured
    joints (closed_loop checks); a target sent afterwards is reached.
    """
    push = np.zeros(7)
    push[joint] = sign * size
    moved = abs(np.clip(Q0[joint] + push[joint], CHAIN.lower[joint], CHAIN.upper[joint])
                - Q0[joint])
    targets = [(when + 0.5, far_targets(data, 1)[0][1])]
    policy, stream, servo, detected = closed_loop(servo, targets, rate, 0.002, 3.0,
                                                  push=(when, push))
    if moved > TOLERANCE + 0.01:
        bound = CONFIRMATIONS / rate + PERIOD + 0.002 + 1e-9
        assert detected is not None and detected <= bound, (detected, bound)
    assert policy.resyncs == (detected is not None)
    pos, ang = pose_errors(CHAIN, servo.q, targets[-1][1])
    assert pos < 1e-3 and ang < 1e-2, (pos, ang)


def test_a_push_ahead_of_the_motion_is_detected_at_once():
    """Lag explains a joint behind its commands, never one ahead of them."""
    target = CHAIN.forward(Q0 + np.array([0.6, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]))
    policy, stream, servo, _ = closed_loop(Servo(Q0, 0.15), [(0.05, target)], 100.0, 0.0, 0.6)
    moving = stream.sample(0.6)[1]
    ahead = np.zeros(7)
    ahead[np.argmax(np.abs(moving))] = 0.2 * np.sign(moving[np.argmax(np.abs(moving))])
    _, _, _, detected = closed_loop(Servo(Q0, 0.15), [(0.05, target)], 100.0, 0.0, 1.5,
                                    push=(0.6, ahead))
    assert detected is not None and detected <= CONFIRMATIONS * 0.01 + PERIOD + 1e-9, detected


def test_a_push_on_an_arm_holding_still_is_detected_at_the_next_state():
    """At rest the range is one point: the push confirmed (3 states at 100 Hz) re-syncs."""
    push = np.zeros(7)
    push[2] = 0.12
    policy, _, _, detected = closed_loop(Servo(Q0, 0.05), [], 100.0, 0.0, 1.0,
                                         push=(0.5, push))
    assert detected is not None and detected <= CONFIRMATIONS * 0.01 + PERIOD + 1e-9, detected


# What the node cannot keep at the hardware (ik_bench events, README): with
# position_array a stalled node sends nothing and the forward controller holds
# the last array; joint_trajectory_controller samples its own trajectory on a
# clock that jumped, before any message of the node can reach it.
NOT_THE_NODES = {('position_array', 'node stalled 0.3 s'),
                 ('joint_trajectory', 'clock back 10 s'),
                 ('joint_trajectory', 'clock forward 5 s')}


# joint_trajectory_controller on a clock that jumped forward plays the rest of
# the last message at once: the arm leaves the plan by a whole tail's worth of
# motion, more the faster it moved and the more its servo lags (seen at
# at=0.75 s, tau >= 0.1 s). That is a real disturbance, not a bad state: the
# node re-syncs to the arm (a plan that kept its own joints would command a
# jump back). One re-sync at most.
RESYNC_ALLOWED = {('joint_trajectory', 'clock forward 5 s'): 1}


# The event whose runs cost most: the limit drops 500-fold mid-motion.
SLOW_EVENT = 'acceleration 5 -> 0.01'


# 20 per run; 100 fresh ones in scripts/sweep.sh.
@settings(max_examples=examples(20), deadline=None)
@given(output=st.sampled_from(['position_array', 'joint_trajectory']),
       event=st.sampled_from(EVENTS), tau=st.floats(0.02, 0.15), at=st.floats(0.15, 0.9))
def test_what_the_controller_writes_keeps_the_limits_through_every_event(output, event, tau,
                                                                         at):
    """Issue 21: glitches, late states, lost feedback, clock jumps, parameter and model changes.

    Mid-motion at a random instant, a lagging servo of random time constant
    behind a controller stand-in: the commands the controller writes keep the
    speed, acceleration and jerk limits in force before the event (differences
    on its grid), no bad state is followed (no re-sync) and the target is
    reached (but at 0.01 rad/s^2, which takes minutes). Where the
    controller itself moved the arm off the plan (RESYNC_ALLOWED) the node
    re-syncs to where it is, once.

    The 0.01 rad/s^2 run ends 2 s after the change here (the change and the
    slow start that follows it; every message then carries a braking tail
    hundreds of points long, 50 s of a worker for the whole 10 s), and runs
    the whole 10 s in scripts/sweep.sh.
    """
    seconds = 10.0 if sweeping() or event != SLOW_EVENT else at + 2.0
    row = run_event(CHAIN, output, event, tau=tau, at=at, seconds=seconds)
    eps = 1e-6
    if (output, event) not in NOT_THE_NODES:
        assert row['speed_over_limit'] <= 1 + eps
        assert row['accel_over_limit'] <= 1 + eps, row
        assert row['jerk_over_limit'] <= 1 + eps, row
    assert row['resyncs'] <= RESYNC_ALLOWED.get((output, event), 0), row
    assert row['reached'] or event == SLOW_EVENT, row


def test_a_controller_clock_jumping_forward_mid_move_is_one_resync_then_the_limits_hold():
    """Issue 30: the example pinned suites never drew (tau 0.125 s, the jump at 0.75 s).

    joint_trajectory_controller plays the rest of its trajectory at once (not
    the node's commands); the measured arm is then off the plan by more than
    the servo lag explains. The node re-syncs once, and the target is reached.
    """
    row = run_event(CHAIN, 'joint_trajectory', 'clock forward 5 s', tau=0.125, at=0.75)
    assert row['resyncs'] == 1 and row['reached'], row
    calm = run_event(CHAIN, 'joint_trajectory', 'clock forward 5 s', tau=0.05, at=0.3)
    assert calm['resyncs'] == 0 and calm['reached'], calm


def run_with_lost_feedback(push):
    """Run a move with the joint states lost 0.5-0.8 s; a nonzero ``push`` (n,) held from 0.7 s.

    Returns (policy, [(tick time, decision)], plan minus measured joints at the sync).
    """
    goal = CHAIN.forward(Q0 + np.array([0.6, -0.5, 0.4, 0.5, -0.4, 0.3, 0.5]))
    decisions, gaps = [], []

    def on_tick(t, policy, stream):
        decisions.append((t, policy.last))
        if policy.last == 'sync' and t > 0.75:
            gaps.append(np.abs(stream.sample(t)[0] - policy.filter.q))

    def check_take(verdict, stamp, pushed_at):
        assert verdict in ('', 'implausible_jump')

    run = bench_loop(CHAIN, Servo(Q0, 0.05), [(0.1, goal)], 250.0, 0.0, 1.5,
                     push=(0.7, push) if np.any(push) else None, check_take=check_take,
                     lost=(0.5, 0.8), on_tick=on_tick)
    return run.policy, decisions, gaps[0] if gaps else None


def test_a_push_while_the_feedback_is_lost_is_followed_and_counted_when_it_comes_back():
    """The hold ends at the first fresh state: a push during it is a disturbance (re-synced).

    The plan restarts where the arm is held, and ``resyncs`` counts it as any
    other disturbance (before, only a push found while the feedback flowed was
    counted: a busy node that missed the states of a push reported none). The
    same loss with no push: the arm is where the braking tail put it, no re-sync.
    """
    push = np.zeros(CHAIN.n)
    push[1] = -0.3
    policy, decisions, gap = run_with_lost_feedback(push)
    held = [t for t, d in decisions if d == 'hold' and t > 0.5]
    assert held and min(held) < 0.7 and max(held) < 0.8 + CONFIRMATIONS * SERVO_DT * 2, held
    assert policy.resyncs == 1
    assert gap is not None and np.max(gap) == 0.0, gap   # the plan starts at the held joints
    policy, decisions, _ = run_with_lost_feedback(np.zeros(CHAIN.n))
    assert [d for t, d in decisions if t > 0.5].count('sync') == 1
    assert policy.resyncs == 0

# SPDX-License-Identifier: Apache-2.0

"""The motion session: the one owner of the tick (inputs in, the committed plan out)."""

from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.carry import carried_over
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.description.urdf import bundled_urdf
import numpy as np

Q0 = np.array([0.1, 0.6, -0.1, -1.3, 0.2, 0.8, 0.3])
PERIOD = 0.01


def chain():
    """Return the bundled iiwa14's chain."""
    return Chain.from_urdf_file(bundled_urdf('iiwa14.urdf'), 'iiwa_link_0', 'tool0')


def session(feedback=False, own_robot=False, config=TrackerConfig()):
    """Return a session on the iiwa14 at rest at Q0, clock 0 (lead 5 periods)."""
    arm = chain()
    tracker = MotionTracker(arm, make_solver(arm, 'auto'), config, Q0, 0.0)
    policy = FeedbackPolicy(arm.joint_names, arm.lower, arm.upper, arm.velocity, timeout=0.1,
                            tolerance=0.05, servo_lag=0.05) if feedback else None
    return MotionSession(tracker, PERIOD, 5 * PERIOD, 500.0, budget_s=0.03, feedback=policy,
                         own_robot=own_robot)


def moved(arm, dq):
    """Return the pose of Q0 + dq (rad), within the limits."""
    return arm.forward(np.clip(Q0 + dq, arm.lower, arm.upper))


def run(s, start, end):
    """Tick ``s`` every period over [start, end), s; return the last instant ticked."""
    now = start
    for k in range(int(round((end - start) / PERIOD))):
        now = start + k * PERIOD
        s.tick(now)
    return now


def test_a_target_is_committed_from_now_plus_the_lead_and_reached():
    s = session()
    arm = s.tracker.chain
    goal = moved(arm, np.array([0.3, -0.2, 0.2, 0.3, -0.2, 0.2, 0.3]))
    s.target(0.0, goal)
    first = s.tick(0.0)
    assert first.planned and abs(s.plan.end_time - s.lead_s) < 1e-12
    # Nothing moves before the instant the target was given plus the lead.
    q, v, _ = s.plan.sample(s.lead_s - PERIOD)
    assert np.array_equal(q, Q0) and np.all(v == 0.0)
    assert np.any(s.plan.sample(s.lead_s)[1] != 0.0)
    now = run(s, PERIOD, 6.0)
    q = s.plan.sample(now)[0]
    err = np.linalg.norm(arm.forward(q)[:3, 3] - goal[:3, 3])
    assert err < 1e-6 and s.plan.at_rest()


def test_without_a_measured_state_nothing_is_planned_and_the_tracker_is_not_stepped():
    s = session(feedback=True)
    s.target(0.0, moved(s.tracker.chain, np.full(7, 0.2)))
    for k in range(10):
        tick = s.tick(k * PERIOD)
        assert not tick.planned and tick.added == 0
    assert s.tracker.time == 0.0 and s.plan.end_time == 0.0


@settings(max_examples=15, deadline=None)
@given(offset=st.lists(st.floats(-0.3, 0.3), min_size=7, max_size=7))
def test_the_first_measured_state_starts_the_plan_there(offset):
    s = session(feedback=True)
    arm = s.tracker.chain
    measured = np.clip(Q0 + np.array(offset), arm.lower, arm.upper)
    assert s.measured(arm.joint_names, measured.tolist(), [0.0] * 7, 0.2, 0.2) == ''
    tick = s.tick(0.2)
    assert tick.planned and not tick.resynced
    assert np.allclose(s.plan.sample(0.2)[0], measured, atol=1e-12)


def test_a_pushed_arm_is_followed_from_where_it_is_and_the_tick_says_so():
    s = session(feedback=True)
    arm = s.tracker.chain
    now = 0.0
    for k in range(30):   # the arm holds still where the commands are
        now = k * PERIOD
        s.measured(arm.joint_names, Q0.tolist(), [0.0] * 7, now, now)
        assert not s.tick(now).resynced
    pushed = Q0 + np.array([0.0, 0.0, 0.0, 0.3, 0.0, 0.0, 0.0])
    # A jump that fast is taken once confirmed by the next states (FeedbackFilter).
    for k in range(1, 10):
        now += PERIOD
        s.measured(arm.joint_names, pushed.tolist(), [0.0] * 7, now, now)
        tick = s.tick(now)
        assert tick.planned
        if tick.resynced:
            break
    assert tick.resynced
    assert np.allclose(s.plan.sample(now)[0], pushed, atol=1e-12)


def test_a_bad_measured_state_is_refused_with_a_reason_and_never_planned_from():
    s = session(feedback=True)
    arm = s.tracker.chain
    bad = Q0.copy()
    bad[2] = np.nan
    assert s.measured(arm.joint_names, bad.tolist(), [0.0] * 7, 0.1, 0.1) != ''
    assert not s.tick(0.1).planned


def test_without_feedback_measured_states_are_ignored():
    s = session()
    assert s.measured(['a'], [np.nan], [], None, 0.0) == ''
    assert s.tick(0.0).planned


def test_own_robot_does_not_move_through_a_forward_clock_jump():
    """joint_states: the arm the node simulates continues from the state it had."""
    s = session(own_robot=True)
    s.target(0.0, moved(s.tracker.chain, np.full(7, 0.4)))
    last = run(s, 0.0, 0.5)   # in motion at ``last``
    q_before, v_before, _ = s.plan.sample(last + PERIOD)
    assert np.any(v_before != 0.0)
    s.tick(last + 5.0)
    q_after, v_after, _ = s.plan.sample(last + 5.0)
    assert np.allclose(q_after, q_before, atol=1e-12)
    assert np.allclose(v_after, v_before, atol=1e-12)


def test_with_a_controller_a_forward_clock_jump_brakes_along_the_tail():
    """The plan the controller played through the gap: no restart at the old state."""
    s = session(own_robot=False)
    s.target(0.0, moved(s.tracker.chain, np.full(7, 0.4)))
    last = run(s, 0.0, 0.5)
    q_before = s.plan.sample(last + PERIOD)[0]
    s.tick(last + 5.0)
    q_after, v_after, _ = s.plan.sample(last + 5.0)
    assert not np.allclose(q_after, q_before, atol=1e-3)   # it went on braking
    assert np.all(np.abs(v_after) <= s.tracker.chain.velocity)


def test_settings_reach_the_tracker_the_plan_and_the_feedback_policy():
    s = session(feedback=True)
    s.configure(0.0, config=TrackerConfig(max_linear_speed=0.1), jerk=50.0,
                feedback=(0.4, 0.2, 0.3))
    assert s.tracker.config.max_linear_speed == 0.1
    assert s.feedback.timeout == 0.4 and s.feedback.tolerance == 0.2 \
        and s.feedback.servo_lag == 0.3
    # The jerk stage of a plan at rest takes the new limit at once: a longer window.
    window = s.plan.filter.m
    s.configure(0.0, jerk=5.0)
    assert s.plan.filter.m > window


def test_a_new_model_of_the_same_arm_keeps_the_committed_plan():
    s = session()
    arm = s.tracker.chain
    s.target(0.0, moved(arm, np.full(7, 0.4)))
    last = run(s, 0.0, 0.3)
    committed = [s.plan.sample(last + k * PERIOD)[0] for k in range(5)]
    new_arm = chain()
    tracker = carried_over(s.tracker, new_arm, make_solver(new_arm, 'auto'), Q0,
                           s.tracker.time)
    s.use_model(tracker, 500.0)
    assert s.tracker is tracker
    for k, q in enumerate(committed):
        assert np.array_equal(s.plan.sample(last + k * PERIOD)[0], q)

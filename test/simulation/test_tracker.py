# SPDX-License-Identifier: Apache-2.0

"""The motion tracker, without ROS: every command within the limits, whatever arrives.

Random streams of targets (reachable and not), bursts, resets, mode switches,
poles and parameter changes, on both bundled arms (analytic and Jacobian
solver); between every two commands the speed and acceleration limits hold
for the real time between them, nothing is NaN or outside the limits, and
the arm still arrives at the last reachable target (judged by the
independent FK of the tests).
"""

import math

from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from ik_node import Chain
from ik_node.core import rotations as rot
from ik_node.core.errors import InvalidInputError, ModelError
from ik_node.core.ik.factory import make_solver
from ik_node.core.motion.carry import carried_over
from ik_node.core.motion.paths import figure_eight, play_demo
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.core.poses import pose_matrix
import numpy as np
from oracle import pose_errors
import pytest
from strategies import examples
from tracking import ARMS, arrives, BUDGET, CHAINS, EPS, Judge, reachable_target, ROOT, tracker_for

EVENTS = st.lists(st.one_of(
    st.tuples(st.just('target'), st.floats(0.0, 0.3)),
    st.tuples(st.just('far'), st.floats(0.0, 0.3)),      # out of reach
    st.tuples(st.just('burst'), st.integers(2, 60)),     # many targets within 1 ms
    st.tuples(st.just('wait'), st.floats(0.001, 0.5)),   # ticks at a jittery ~100 Hz
    st.tuples(st.just('reset'), st.just(0)),
    st.tuples(st.just('smoothing'), st.booleans()),
    st.tuples(st.just('speeds'), st.floats(0.05, 2.0)),  # tip speed limits
    st.tuples(st.just('accel'), st.floats(1.0, 3.0)),    # raise the joint acceleration
    st.tuples(st.just('pole'), st.booleans()),
    st.tuples(st.just('budget'), st.floats(0.5, 2.0)),
    st.tuples(st.just('posture'), st.floats(0.0, 2.0)),  # rate, rad/s; 0: no posture
), min_size=1, max_size=25)


def play(tracker, judge, events, rng, t):
    """Feed events, commanding in between as a node would; return the clock."""
    chain = tracker.chain
    q0 = tracker.q0
    for kind, arg in events:
        if kind == 'target':
            tracker.add_target(t, reachable_target(chain, rng, q0, 0.2 + arg))
            judge(tracker.command(t))  # the node publishes on arrival without smoothing
        elif kind == 'far':
            far = reachable_target(chain, rng, q0, arg)
            far[:3, 3] *= 3.0
            tracker.add_target(t, far)
        elif kind == 'burst':
            target = reachable_target(chain, rng, q0, 0.4)
            for _ in range(arg):
                t += 1e-3 / arg
                tracker.add_target(t, target)
                judge(tracker.command(t))
        elif kind == 'wait':
            end = t + arg
            while t < end:
                t += rng.uniform(0.002, 0.02)
                judge(tracker.command(t))
                tracker.check_reachability()
        elif kind == 'reset':
            tracker.reset(t)
        elif kind == 'smoothing':
            tracker.configure(_with(tracker.config, smoothing=arg), t)
        elif kind == 'speeds':
            tracker.configure(_with(tracker.config, max_linear_speed=arg,
                                    max_angular_speed=2.0 * arg), t)
        elif kind == 'accel':
            tracker.configure(_with(tracker.config, max_joint_acceleration=arg
                                    * tracker.config.max_joint_acceleration), t)
        elif kind == 'pole':
            tracker.set_pole(np.array([0.0, 1.0, 0.8]) if arg else None)
        elif kind == 'budget':
            tracker.configure(_with(tracker.config, ik_timeout=arg), t)
        elif kind == 'posture':   # a random preferred posture within the limits, or none
            chain = tracker.chain
            posture = tuple(rng.uniform(np.maximum(chain.lower, -3.0),
                                        np.minimum(chain.upper, 3.0))) if arg > 0.0 else ()
            tracker.configure(_with(tracker.config, posture=posture,
                                    posture_rate=max(arg, 0.01)), t)
    return t


def _with(config, **changes):
    fields = {f: getattr(config, f) for f in config.__dataclass_fields__}
    fields.update(changes)
    return TrackerConfig(**fields)


@pytest.mark.slow
@pytest.mark.parametrize('name', sorted(ARMS))
# 20 per run on each arm; 100 fresh ones in scripts/sweep.sh.
@settings(max_examples=examples(20))
@given(events=EVENTS, seed=st.integers(0, 2**32 - 1), smoothing=st.booleans())
# Issue 30: a posture at the lowest rate (0.01 rad/s) drifts on for minutes in
# the null space after the tip arrived; arrival allows it (helpers/tracking.arrives).
@example(events=[('posture', 6.08e-310)], seed=0, smoothing=False)
def test_random_streams_respect_the_limits_and_end_on_the_last_target(
        name, events, seed, smoothing):
    chain, xml, q0 = CHAINS[name]
    tracker = tracker_for(name, smoothing=smoothing)
    judge = Judge(tracker)
    rng = np.random.default_rng(seed)
    t = play(tracker, judge, events, rng, 0.0)
    final = reachable_target(chain, rng, q0, 0.3)
    tracker.add_target(t, final)
    _, base, tip, _ = ARMS[name]
    assert arrives(tracker, judge, final, xml, base, tip, t) is not None
    assert tracker.target_result is not None and tracker.target_result.success


@pytest.mark.parametrize('name', sorted(ARMS))
def test_a_burst_without_smoothing_moves_no_faster_than_the_real_time_allows(name):
    # Defect 1 of the motion-policy issue: 50 targets in 8.7 ms, a command each.
    chain, _, q0 = CHAINS[name]
    tracker = tracker_for(name, smoothing=False)
    judge = Judge(tracker)
    target = reachable_target(chain, np.random.default_rng(5), q0, 0.8)
    t = 0.0
    for _ in range(50):
        t += 8.7e-3 / 50
        tracker.add_target(t, target)
        judge(tracker.command(t))
    moved = np.abs(judge.last.q - q0)
    assert np.all(moved <= chain.velocity * t * (1 + EPS))
    assert judge.count == 50


def test_turning_smoothing_back_on_keeps_the_newest_target():
    # Defect 2: with smoothing off targets never reached the trajectory, so
    # turning it on drove the arm back to where it was before.
    chain, xml, q0 = CHAINS['iiwa14']
    tracker = tracker_for('iiwa14')
    judge = Judge(tracker)
    rng = np.random.default_rng(2)
    first, second = (reachable_target(chain, rng, q0, 0.3) for _ in range(2))
    tracker.add_target(0.0, first)
    assert arrives(tracker, judge, first, xml, 'iiwa_link_0', 'tool0', 0.0) is not None
    t = judge.last.time
    tracker.configure(_with(tracker.config, smoothing=False), t)
    tracker.add_target(t, second)
    assert arrives(tracker, judge, second, xml, 'iiwa_link_0', 'tool0', t) is not None
    t = judge.last.time
    tracker.configure(_with(tracker.config, smoothing=True), t)
    # Still at the second target a while later.
    assert arrives(tracker, judge, second, xml, 'iiwa_link_0', 'tool0', t, timeout_s=2.0) \
        is not None
    for _ in range(100):
        t += 0.01
        judge(tracker.command(t))
    assert np.linalg.norm(chain.forward(judge.last.q)[:3, 3] - second[:3, 3]) < 1e-9


def test_a_new_ik_timeout_reaches_the_solver():
    # Defect 3: a run-time ik_timeout was accepted and had no effect.
    tracker = tracker_for('ur5e')
    tracker.configure(_with(tracker.config, ik_timeout=0.02), 0.0)
    assert tracker.solver.budget_s == 0.02
    # And it is what the solver uses: an unreachable target's restarts stop there.
    far = np.eye(4)
    far[:3, 3] = [1.1, 0.0, 0.1625]   # out of reach, inside Chain.reach_sphere: restarts run
    short = _with(tracker.config, ik_timeout=1e-4)
    tracker.configure(short, 0.0)
    tracker.add_target(0.0, far)
    res = tracker.check_reachability()
    assert not res.success and res.elapsed_s < 0.02 and res.restarts < 200


@pytest.mark.parametrize('name', sorted(ARMS))
def test_reset_goes_back_within_the_speed_and_acceleration_limits(name):
    # Defect 4: ~/reset jumped to the initial positions in one message.
    chain, xml, q0 = CHAINS[name]
    tracker = tracker_for(name)
    judge = Judge(tracker)
    far = reachable_target(chain, np.random.default_rng(9), q0, 0.6)
    tracker.add_target(0.0, far)
    _, base, tip, _ = ARMS[name]
    assert arrives(tracker, judge, far, xml, base, tip, 0.0) is not None
    t = judge.last.time
    tracker.reset(t)
    # Within ARRIVED (1e-12 rad) of q0 and at rest: the reset is over.
    while np.max(np.abs(judge.last.q - q0)) > 1e-12 or np.any(judge.last.v != 0.0):
        t += 0.01
        judge(tracker.command(t))
        assert t < 60.0
    t += 0.01
    judge(tracker.command(t))
    assert tracker.mode in ('trajectory', 'direct')
    # After the reset the arm holds there.
    held = judge.last.q
    for _ in range(50):
        t += 0.01
        judge(tracker.command(t))
    np.testing.assert_array_equal(judge.last.q, held)


def test_a_command_at_the_same_time_repeats_the_last_one():
    tracker = tracker_for('iiwa14')
    tracker.add_target(0.0, reachable_target(tracker.chain, np.random.default_rng(1),
                                             tracker.q0, 0.5))
    a = tracker.command(0.1)
    b = tracker.command(0.1)
    c = tracker.command(0.05)  # the clock went back: no motion either
    for later in (b, c):
        np.testing.assert_array_equal(later.q, a.q)
        np.testing.assert_array_equal(later.v, a.v)


def moving(seed, spread, ticks, **config):
    """Return a tracker on the iiwa14 headed for a target, after ``ticks`` commands 10 ms apart.

    Returns (chain, q0, tracker, judge, time of the last command).
    """
    chain, _, q0 = CHAINS['iiwa14']
    tracker = tracker_for('iiwa14', smoothing=False, **config)
    judge = Judge(tracker)
    tracker.add_target(0.0, reachable_target(chain, np.random.default_rng(seed), q0, spread))
    t = 0.0
    for _ in range(ticks):
        t += 0.01
        judge(tracker.command(t))
    return chain, q0, tracker, judge, t


def test_a_lowered_acceleration_limit_brakes_as_fast_as_the_old_one_allowed():
    chain, _, tracker, judge, t = moving(4, 0.9, 30, max_joint_acceleration=20.0)
    assert np.max(np.abs(judge.last.v)) > 0.5
    tracker.configure(_with(tracker.config, max_joint_acceleration=0.5), t)
    for _ in range(2000):
        t += 0.01
        judge(tracker.command(t), accel=np.full(chain.n, 20.0))  # never above the old limit
    assert np.all(judge.last.v == 0.0)


@pytest.mark.parametrize('seed', [4, 7, 11])
def test_a_tiny_acceleration_limit_mid_motion_stops_at_the_old_one_then_applies(seed):
    """Issue 21, defect 4: 0.01 rad/s^2 set at full motion drove a joint into its limit.

    Every command keeps the old limit while the joints brake; no joint passes
    its goal into a position limit; once at rest the new limit holds, and the
    target is still reached (slowly).
    """
    chain, _, tracker, judge, t = moving(seed, 0.9, 40)
    assert np.max(np.abs(judge.last.v)) > 0.5
    old = np.array(tracker.config.accelerations(chain.n))
    tracker.configure(_with(tracker.config, max_joint_acceleration=0.01), t)
    goal = tracker.target_result.q if tracker.target_result is not None else None
    while not np.all(judge.last.v == 0.0):
        t += 0.01
        judge(tracker.command(t), accel=old)
        margin = np.minimum(judge.last.q - chain.lower, chain.upper - judge.last.q)
        assert np.all(margin > 1e-3), 'a joint braked into its position limit'
        assert t < 10.0
    assert not tracker.braking
    for _ in range(300):
        t += 0.01
        judge(tracker.command(t), accel=np.full(chain.n, 0.01))
    assert goal is None or np.max(np.abs(judge.last.v)) > 0.0, 'it does go on'


def test_a_speed_restored_after_a_tiny_one_applies_at_once():
    """Issue 21, defect 4: max_linear_speed 0.001 for 0.5 s then restored left the arm crawling."""
    chain, xml, q0 = CHAINS['iiwa14']
    tracker = tracker_for('iiwa14')
    judge = Judge(tracker)
    target = reachable_target(chain, np.random.default_rng(3), q0, 0.4)
    config = tracker.config
    tracker.configure(_with(config, max_linear_speed=0.001), 0.0)
    tracker.add_target(0.0, target)   # timed for 1 mm/s
    t = 0.0
    for _ in range(50):
        t += 0.01
        judge(tracker.command(t))
    tracker.configure(config, t)
    took = arrives(tracker, judge, target, xml, 'iiwa_link_0', 'tool0', t, timeout_s=10.0)
    assert took is not None, 'still crawling 10 s after the speed was restored'
    assert tracker.target_result is not None and tracker.target_result.success


@pytest.mark.parametrize('change', [{'max_joint_acceleration': 1e9},
                                    {'max_joint_acceleration': 1e-300},
                                    {'joint_acceleration_limits': (5.0,) * 6 + (1e9,)},
                                    {'joint_acceleration_limits': (5.0,) * 6 + (1e-300,)},
                                    {'joint_acceleration_limits': (5.0,) * 6 + (1001.0,)}])
def test_per_joint_acceleration_limits_have_the_scalars_bounds(change):
    """Issue 21, defect 4: 1e9 and 1e-300 in the list were accepted (scalar: 0.01-1000)."""
    tracker = tracker_for('iiwa14')
    with pytest.raises(InvalidInputError, match=r'\[0.01, 1000\]'):
        tracker.configure(_with(tracker.config, **change), 0.0)
    tracker.configure(_with(tracker.config, joint_acceleration_limits=(0.01,) * 6 + (1000.0,)),
                      0.0)


def test_a_new_model_with_a_limit_inside_the_braking_distance_is_refused():
    """Issue 21, defect 4: such a model was accepted; the joint stopped at the limit at 12-27x."""
    chain, xml, q0 = CHAINS['iiwa14']
    tracker = tracker_for('iiwa14', smoothing=False)
    judge = Judge(tracker)
    tracker.add_target(0.0, chain.forward(q0 + np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 1.5])))
    t = 0.0
    while abs(judge.last.v[6]) < 1.0:
        t += 0.01
        judge(tracker.command(t))
    q7, v7 = judge.last.q[6], judge.last.v[6]
    stop = q7 + v7 * abs(v7) / (2.0 * tracker.config.accelerations(7)[6])
    assert stop > q7 + 0.05
    limit = f'{0.5 * (q7 + stop):.6f}'  # between here and where braking ends
    narrow_xml = xml.replace('lower="-3.054326" upper="3.054326"',
                             f'lower="-3.054326" upper="{limit}"', 1)
    narrow = Chain.from_urdf_string(narrow_xml, 'iiwa_link_0', 'tool0')
    assert narrow.upper[6] == float(limit)
    with pytest.raises(ModelError, match='beyond the new model'):
        carried_over(tracker, narrow, make_solver(narrow, 'auto'), q0, t)
    # Beyond the braking distance it is taken, and the joint stops within it.
    wide_xml = xml.replace('lower="-3.054326" upper="3.054326"',
                           f'lower="-3.054326" upper="{stop + 0.01:.6f}"', 1)
    wide = Chain.from_urdf_string(wide_xml, 'iiwa_link_0', 'tool0')
    new = carried_over(tracker, wide, make_solver(wide, 'auto'), q0, t)
    judge.tracker, judge.chain = new, wide
    for _ in range(300):
        t += 0.01
        judge(new.command(t))


def test_invalid_configurations_are_refused_and_change_nothing():
    tracker = tracker_for('iiwa14')
    before = tracker.config
    for bad in ({'max_joint_acceleration': 0.0}, {'max_linear_speed': math.nan},
                {'ik_timeout': -1.0}, {'joint_acceleration_limits': (1.0, 2.0)},
                {'joint_acceleration_limits': (1.0,) * 6 + (math.inf,)}):
        with pytest.raises(InvalidInputError):
            tracker.configure(_with(before, **bad), 0.0)
        assert tracker.config == before
    tracker.configure(_with(before, joint_acceleration_limits=(1.0,) * 7), 0.0)
    assert tracker.config.accelerations(7) == [1.0] * 7


def test_a_new_model_of_the_same_arm_continues_without_a_jump():
    chain, q0, tracker, judge, t = moving(6, 0.8, 20)
    before = judge.last
    same = Chain.from_urdf_file(str(ROOT / 'urdf' / 'iiwa14.urdf'), 'iiwa_link_0', 'tool0')
    new = carried_over(tracker, same, make_solver(same, 'auto'), q0, t)
    judge.tracker = new
    np.testing.assert_array_equal(new.command_now().v, before.v)
    for _ in range(300):
        t += 0.01
        judge(new.command(t))
    # Other joints: another robot, at rest at its own q0.
    ur, _, ur_q0 = CHAINS['ur5e']
    other = carried_over(new, ur, make_solver(ur, 'auto'), ur_q0, t)
    assert other.joint_names == ur.joint_names and np.all(other.command_now().v == 0.0)


def test_a_new_model_whose_limits_exclude_the_current_joints_is_refused():
    chain, xml, q0 = CHAINS['iiwa14']
    tracker = tracker_for('iiwa14')  # at q0: joint 2 at 0.5 rad
    narrow_xml = xml.replace('lower="-2.094395" upper="2.094395"',
                             'lower="-2.094395" upper="0.4"', 1)
    narrow = Chain.from_urdf_string(narrow_xml, 'iiwa_link_0', 'tool0')
    assert narrow.upper[1] == 0.4
    with pytest.raises(ModelError, match='outside the new model'):
        carried_over(tracker, narrow, make_solver(narrow, 'auto'), np.zeros(7), 0.0)


# -- preferred posture ----------------------------------------------------------------------

READY = (0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0)   # the iiwa14's config and demo posture


def _demo_posture_gap(posture):
    """Run the demo's sequence in plain Python; return max |joints at its start, before - after|.

    To the start, 16 s of the figure-eight at 20 Hz, 1 s toward a target 2 m
    away (unreachable), back to the start; each stay long enough to settle.
    """
    chain = CHAINS['iiwa14'][0]
    tracker = MotionTracker(chain, make_solver(chain, 'auto'),
                            TrackerConfig(max_linear_speed=0.4, posture=posture),
                            np.array(READY), 0.0)
    judge = Judge(tracker)
    center, size, period = np.array([0.55, 0.0, 0.55]), 0.18, 8.0

    def target(t):
        p, q = figure_eight(t, center, size, period)
        return pose_matrix(tuple(rot.quaternion_to_matrix(q).ravel()), p)

    def run(t, seconds):
        for _ in range(int(round(seconds * 100))):
            t += 0.01
            judge(tracker.command(t))
        return t

    settled = []
    play_demo(target, tracker.add_target, run, settle_s=10.0, back_s=15.0,
              settled=lambda: settled.append(tracker.q.copy()))
    before, start = settled[0], target(0.0)
    assert max(pose_errors(chain, before, start)) < 1e-9
    assert max(pose_errors(chain, tracker.q, start)) < 1e-9
    return float(np.max(np.abs(tracker.q - before)))


@pytest.mark.slow
def test_the_demo_start_gets_the_same_posture_after_the_unreachable_target():
    # Without a posture the elbow came back swung once (the issue saw ~1 rad through the
    # node, 0.3 rad here), when every tick solved the pose afresh from where the arm
    # was; since issue 50 a pose at rest gets one goal, held, and the way back retraces
    # the way out: the same posture with no posture set as well.
    assert _demo_posture_gap(()) <= 1e-3
    assert _demo_posture_gap(READY) <= 1e-3


@pytest.mark.slow
@settings(max_examples=examples(5), deadline=None)
@given(elbow=st.sampled_from([-1.0, 1.0]), azimuth=st.floats(-np.pi, np.pi),
       elevation=st.floats(-0.2, 1.0), distance=st.floats(0.83, 2.5),
       back_after=st.floats(0.2, 4.0))
def test_out_of_reach_the_elbow_stays_bent_on_its_side_and_comes_back(elbow, azimuth, elevation,
                                                                      distance, back_after):
    """Along a path out of reach and back: the elbow never changes side; back exactly.

    Issue 30: the arm stretched straight toward a target out of reach, where
    the elbow's side is undefined, and the side it came back on depended on
    rounding and tick timing. Now motion along a path (smoothing on, as the
    demo runs) heads for the elbow OUT_OF_REACH_BEND from straight (the iiwa
    is straight at q4 = 0), on its side, and returns to its start exactly.
    Without smoothing the arm moves straight in joint space to each solution
    (test/unit/test_srs.py checks the pose it aims at out of reach).
    """
    from ik_node.core.ik.closed_form.srs import OUT_OF_REACH_BEND
    chain = CHAINS['iiwa14'][0]
    q_start = np.array([0.0, 0.5, 0.0, elbow * 1.2, 0.0, 0.9, 0.0])
    tracker = MotionTracker(chain, make_solver(chain, 'auto'), TrackerConfig(), q_start, 0.0)
    judge = Judge(tracker)
    start = chain.forward(q_start)
    far = start.copy()
    # Elevation up to 1 rad, not above the shoulder: there q1 and q3 turn about one
    # line (a shoulder singularity) and the solution nearest the start can be on
    # the other side.
    u = np.array([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                  np.sin(elevation)])
    far[:3, 3] = np.array([0.0, 0.0, 0.36]) + distance * u   # from the iiwa's shoulder
    t, bent = 0.0, np.inf
    tracker.add_target(t, far)
    while t < back_after + 30.0 and (t < back_after or max(pose_errors(chain, tracker.q, start))
                                     > 1e-9):
        if t < back_after <= t + 0.01:
            tracker.add_target(t, start)
        t += 0.01
        judge(tracker.command(t))
        # The bend itself is where the arm heads for out of reach: lagging behind a
        # path the arm passes by other configurations (0.096 rad drawn, near q2 = 0).
        assert elbow * tracker.q[3] > 0.0, (t, tracker.q)
        bent = min(bent, elbow * tracker.q[3])
    assert max(pose_errors(chain, tracker.q, start)) < 1e-9
    assert elbow * tracker.q[3] > 0.5
    event(f'least bend {min(bent, OUT_OF_REACH_BEND):.2f} rad')


def _starved_demo_posture_gap(seed):
    """Run the demo's sequence through the node's stream, starved ticks; max joint gap, rad.

    As the node runs it for joint_states (its MotionSession, own robot, lead
    two periods): half the ticks come late by up to 1.5 s, and a gap over 1 s
    restarts the plan from where it was (the session's clock rule); targets
    queue between ticks and are taken at the next one. Returns inf when the first pass had
    not settled on its target (the comparison would mean nothing).
    """
    from ik_node.core.motion.paths import FAR_POSITION
    from ik_node.core.motion.session import MotionSession
    rng = np.random.default_rng(seed)
    chain = CHAINS['iiwa14'][0]
    tracker = MotionTracker(chain, make_solver(chain, 'auto'),
                            TrackerConfig(max_linear_speed=0.4, posture=READY),
                            np.array(READY), 0.0)
    period = 0.01
    session = MotionSession(tracker, period, 2.0 * period, [500.0], own_robot=True)
    stream = session.plan
    center, size = np.array([0.55, 0.0, 0.55]), 0.18

    def target(t):
        p, q = figure_eight(t, center, size, 8.0)
        return pose_matrix(tuple(rot.quaternion_to_matrix(q).ravel()), p)
    # The first pass settles before the figure starts: a starved node brakes over
    # its stalls (CommandStream.CATCH_UP_S), and some schedules took over 10 s.
    schedule, t = [(0.0, target(0.0))], 30.0 + rng.uniform(0.0, 2.0)
    t0 = t
    while t - t0 < 10.0:
        schedule.append((t, target(t - t0)))
        t += 0.05 if rng.random() > 0.5 else rng.uniform(0.05, 1.5)
    far = schedule[-1][1].copy()   # the last orientation, 2 m ahead (as the demo sends it)
    far[:3, 3] = FAR_POSITION
    schedule.append((t, far))
    t += 1.0 + (0.0 if rng.random() > 0.5 else rng.uniform(0.0, 1.5))
    schedule.append((t, target(0.0)))
    now, before, taken = 0.0, None, 0
    while now < t + 120.0:
        now += period if rng.random() > 0.5 else rng.uniform(period, 1.5)
        while schedule and schedule[0][0] <= now:
            if taken == 1:
                before = stream.sample(now)[0].copy()   # the first pass, settled
                if not stream.at_rest() or \
                        np.linalg.norm(chain.forward(before)[:3, 3] - target(0.0)[:3, 3]) > 1e-6:
                    return math.inf
            session.target(now, schedule.pop(0)[1])
            taken += 1
        session.tick(now)
    return float(np.max(np.abs(stream.sample(now)[0] - before)))


@pytest.mark.slow
@pytest.mark.parametrize('seed', [1, 8, 53])
def test_the_demo_start_gets_the_same_posture_with_starved_ticks(seed):
    """The demo's posture check beside CPU hogs (issue 30), in plain Python.

    Seed 1 came back, before the elbow was kept bent out of reach, in the
    very configuration the node came back in beside two hogs (1 run in 5:
    [0.68, 1.29, 1.08, 1.37, -1.78, 2.09, -0.82], 2.7 rad away). Since a late
    tick brakes over its stall (CommandStream.CATCH_UP_S) these schedules no
    longer flip the elbow without the bent aim either (60 seeds);
    test_out_of_reach_the_elbow_stays_bent_on_its_side_and_comes_back pins
    the aim. The drift back is slower when stalls brake: seed 53 took over
    40 s of the 120 s allowed (every one of seeds 1-60 is back within it).
    """
    assert _starved_demo_posture_gap(seed) <= 1e-3


@pytest.mark.parametrize('pole', [False, True])
def test_the_posture_drift_keeps_the_tip_on_its_target_and_a_pole_wins(pole):
    chain = CHAINS['iiwa14'][0]
    q_start = np.array([0.6, 0.7, -0.8, -1.0, 0.5, 1.0, -0.4])   # elbow swung off READY
    tracker = MotionTracker(chain, make_solver(chain, 'auto'),
                            TrackerConfig(posture=READY, posture_rate=0.5), q_start, 0.0)
    judge = Judge(tracker)
    target = chain.forward(q_start)
    tracker.add_target(0.0, target)
    t, held = 0.0, q_start
    if pole:   # the elbow turns to the pole first (that move is the pole's, not tested here)
        tracker.set_pole(np.array([0.0, 1.0, 0.8]))
        for _ in range(300):
            t += 0.01
            judge(tracker.command(t))
        held = tracker.q.copy()
        assert np.max(np.abs(held - q_start)) > 0.01
    for _ in range(800):
        t += 0.01
        judge(tracker.command(t))
        pos, ang = pose_errors(chain, tracker.q, target)
        assert pos <= 1e-6 and ang <= 1e-6, (t, pos, ang)   # the tip stays (null space)
    jac = chain.jacobian(tracker.q)
    free = np.asarray(READY) - tracker.q
    free -= np.linalg.pinv(jac) @ (jac @ free)
    if pole:   # the pole sets the elbow: no drift toward the posture
        assert np.max(np.abs(tracker.q - held)) < 1e-9
    else:      # drifted until no null-space move toward READY is left
        assert np.max(np.abs(free)) < 1e-6 and np.max(np.abs(tracker.q - q_start)) > 0.1


def _unit(v):
    v = np.array(v, dtype=float)
    return v / np.linalg.norm(v)


@settings(max_examples=25, deadline=None)
@given(linear=st.floats(0.0, 2.0), angular=st.floats(0.0, 5.0),
       direction=st.tuples(*[st.floats(-1, 1)] * 3).filter(lambda d: np.linalg.norm(d) > 0.1),
       axis=st.tuples(*[st.floats(-1, 1)] * 3).filter(lambda d: np.linalg.norm(d) > 0.1),
       body=st.booleans())
def test_a_twist_never_moves_the_tip_faster_than_its_limits(linear, angular, direction, axis,
                                                            body):
    """Issue 21, defect 6: a 0.9 m/s twist moved the tip at 1.3x max_linear_speed.

    Any twist, from rest (the arm catching up with the twist's target is where
    it went faster): the commanded tip, sampled every 2 ms from the stream,
    stays within max_linear_speed and max_angular_speed (0.1 % for the jerk
    stage's mean of joint positions).
    """
    from ik_node.bench.events import iiwa14, twist_tip_speeds
    row = twist_tip_speeds(iiwa14(), linear, angular, 0.6, _unit(direction), _unit(axis), body)
    assert row['linear_over_limit'] <= 1.001 and row['angular_over_limit'] <= 1.001, row


def test_the_status_snapshot_counts_what_happened_and_does_not_change_afterwards():
    tracker = tracker_for('ur5e', max_linear_speed=0.2)
    before = tracker.status()
    assert (before.mode, before.last_result, before.target_result) == ('trajectory', None, None)
    assert before.solve_time_percentiles is None
    assert (before.twists_scaled, before.twist_timeouts, before.targets_clamped) == (0, 0, 0)
    far = np.eye(4)
    far[:3, 3] = [100.0, 0.0, 0.0]          # pulled onto the workspace sphere
    tracker.add_target(0.0, far)
    tracker.command(0.01)
    tracker.check_reachability()
    tracker.set_twist(0.02, [1.0, 0.0, 0.0], [0.0, 0.0, 0.0])    # 5x the speed limit: scaled
    for k in range(3, 80):                  # the twist expires after twist_timeout (0.2 s)
        tracker.command(0.01 * k)
    status = tracker.status()
    assert status.mode == 'twist' and status.solver == 'jacobian'
    assert status.backend in ('numpy', 'numba') and status.ik_budget_s == BUDGET
    assert (status.targets_clamped, status.twists_scaled, status.twist_timeouts) == (1, 1, 1)
    assert status.target_result is None     # a twist has no target to check
    assert status.last_result is not None and status.last_solve_s > 0.0
    p50, p99, top = status.solve_time_percentiles
    assert 0.0 < p50 <= p99 <= top
    assert status.local_solves > 0
    # A snapshot: what happens next does not change one already taken.
    tracker.set_twist(0.9, [0.1, 0.0, 0.0], [0.0, 0.0, 0.0])
    tracker.command(1.5)
    assert tracker.status().twist_timeouts == 2 and status.twist_timeouts == 1
    with pytest.raises(AttributeError):
        status.mode = 'reset'

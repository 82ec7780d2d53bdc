# SPDX-License-Identifier: Apache-2.0

"""Several end effectors in motion (issue 52): GroupTracker through a MotionSession, plain Python.

Two arms on a shared torso written by others (PR2, TIAGo dual: a prismatic
torso; the Unitree G1: a waist of three joints), driven at both hands at
once by one session, as the node drives them. What must hold, judged by the
raw descriptions' own forward kinematics (oracle.RawModel) and by every
command the limiting step gives:

* random reachable pairs of targets are reached together (both hands
  within 10 µm and 10 µrad), every command within the position, speed and
  acceleration limits;
* a locked torso never moves; targets that cannot both be met (hands 3 m
  apart) end at rest with each hand's verdict 'unreachable' and its
  distance, and nothing moves afterwards (no humming);
* per end effector tasks (a pose for one hand, a position for the other);
* reset, a measured state far from the plan, a clock that goes back: the
  limits hold and the hands still arrive;
* a twist moves its hand at the twist (within the tip speed limits) while
  the other hand holds its pose, and the dead-man stops it;
* an elbow pole per end effector turns that arm's spare freedom toward it
  while both hands hold their poses: on a near shoulder-elbow-wrist arm
  (KUKA's iiwa14 description, its axes 0.4 mm off) the elbow ends in the
  plane of the shoulder-wrist line and the pole, and on two arms with a torso
  the elbows end where no motion that keeps both hands (found from the
  oracle's own finite differences) brings them nearer their poles;
* poles sent with targets, or during a twist, turn the elbows while the
  hands move (a quick pole step per tick: nearer than without, the hands on
  their way);
* a stall of the local steps short of reachable targets is solved in the
  worker's thread, not the tick's, and the hands arrive;
* bad input (an unknown end effector, a twist to a look-at, a pole not a
  finite point) is refused with the reason.
"""

import threading

from hypothesis import given, HealthCheck, settings
from hypothesis import strategies as st
from ik_node import InvalidInputError
from ik_node.core.ik.stacked import EndEffector, StackedIK
from ik_node.core.ik.task import Task
from ik_node.core.motion import group_route
from ik_node.core.motion.config import TrackerConfig
from ik_node.core.motion.group import GroupTracker
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.worker import ThreadWorker
from ik_node.description.urdf import chain_from_urdf_string
from models import URDF_CORPUS
import numpy as np
from oracle import RawModel
import pytest

ROBOTS = {'pr2': ('base_footprint', 'l_gripper_tool_frame', 'r_gripper_tool_frame'),
          'tiago_dual': ('base_footprint', 'hand_left_tool_link', 'hand_right_tool_link'),
          'g1_29dof_rev_1_0': ('pelvis', 'left_rubber_hand', 'right_rubber_hand')}
TORSO = {'pr2': ['torso_lift_joint'], 'tiago_dual': ['torso_lift_joint'],
         'g1_29dof_rev_1_0': ['waist_yaw_joint', 'waist_roll_joint', 'waist_pitch_joint']}
XML = {name: (URDF_CORPUS / 'external' / f'{name}.urdf').read_text() for name in ROBOTS}
RAW = {name: RawModel(xml) for name, xml in XML.items()}
CHAINS = {name: [chain_from_urdf_string(XML[name], base, tip) for tip in tips]
          for name, (base, *tips) in ROBOTS.items()}
PERIOD = 0.01
# Arrived: by the oracle's FK (m, rad).
MET = 1e-5
# Float slack of a limit check (the limiting step keeps them exactly, up to rounding).
SLACK = 1e-9


def stacked(name, tasks=(None, None), **options):
    left, right = CHAINS[name]
    return StackedIK([EndEffector('left', left, tasks[0] or Task('pose')),
                      EndEffector('right', right, tasks[1] or Task('pose'))],
                     backend='numba', **options)


class Recorder:
    """Every command the tracker's limiting step gives, checked against the union's limits."""

    def __init__(self, tracker):
        """Wrap ``tracker``'s command and brake (what its stream calls)."""
        self.tracker = tracker
        self.commands = []
        self.worst = 0.0   # the largest limit excess seen (0: none)
        self._command = tracker.command
        tracker.command = self.command
        self._brake = tracker.brake
        tracker.brake = self.brake

    def _check(self, c):
        u, t = self.tracker.chain, self.tracker
        over = max(float(np.max(u.lower - c.q)), float(np.max(c.q - u.upper)),
                   float(np.max(np.abs(c.v) - u.velocity)), 0.0)
        if self.commands:
            last = self.commands[-1]
            dt = c.time - last.time
            if dt > 0.0:
                accel = np.abs(c.v - last.v) / dt
                over = max(over, float(np.max(accel - t.stepper.a_max * (1 + 1e-9))) * dt)
        self.worst = max(self.worst, over)
        self.commands.append(c)
        return c

    def command(self, time, reference=None):
        """Return the tracker's command, checked."""
        return self._check(self._command(time, reference))

    def brake(self, time):
        """Return the tracker's braking step, checked."""
        return self._check(self._brake(time))

    def forget_last(self):
        """Start anew (a re-sync: the acceleration is from the measured state)."""
        self.commands.clear()


def session_of(name, q0=None, tasks=(None, None), worker=None, **options):
    solver = stacked(name, tasks, **options)
    q0 = solver.union.mid_limits() if q0 is None else q0
    tracker = GroupTracker(solver, TrackerConfig(), q0, 0.0, worker=worker)
    return MotionSession(tracker, PERIOD, 2 * PERIOD, 500.0), Recorder(tracker)


def run_until_rest(session, now, seconds):
    """Tick until the arm rests with its targets judged (or ``seconds`` pass); return the clock."""
    end = now + seconds
    while now < end:
        now += PERIOD
        session.tick(now)
        if session.arrival(now).state in ('arrived', 'unreachable') and \
                session.arrival(now + 0.2).state != 'moving':
            break
    return now


def oracle_tips(name, union, q):
    base, *tips = ROBOTS[name]
    values = dict(zip(union.names, q))
    return [RAW[name].pose(base, tip, values) for tip in tips]


def angle(a, b):
    r = a[:3, :3].T @ b[:3, :3]
    return float(np.arccos(np.clip(0.5 * (np.trace(r) - 1.0), -1.0, 1.0)))


def reachable_pair(name, rng):
    """Return (union q, the two tips' poses there) for a random q away from the limits."""
    union = stacked(name).union
    lo = np.where(np.isfinite(union.lower), union.lower, -np.pi)
    hi = np.where(np.isfinite(union.upper), union.upper, np.pi)
    q = rng.uniform(lo + 0.15 * (hi - lo), hi - 0.15 * (hi - lo))
    return q, oracle_tips(name, union, q)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(ROBOTS)), seed=st.integers(0, 2**31 - 1))
def test_random_reachable_pairs_are_reached_together_within_every_limit(name, seed):
    rng = np.random.default_rng(seed)
    session, record = session_of(name)
    union = session.chain
    _, (left, right) = reachable_pair(name, rng)
    session.target_of('left', 0.0, left)
    session.target_of('right', 0.0, right)
    now = run_until_rest(session, 0.0, 30.0)
    arrival = session.arrival(now + 0.2)
    assert arrival.state == 'arrived', arrival
    tips = oracle_tips(name, union, session.q)
    for tip, target in zip(tips, (left, right)):
        assert np.linalg.norm(tip[:3, 3] - target[:3, 3]) < MET
        assert angle(tip, target) < MET
    assert record.worst <= SLACK
    assert len(record.commands) > 10


def test_a_locked_torso_never_moves_and_the_hands_still_arrive_where_they_can():
    rng = np.random.default_rng(5)
    name = 'pr2'
    q_target, (left, right) = reachable_pair(name, rng)
    session, record = session_of(name, locked=TORSO[name])
    union = session.chain
    torso = union.names.index(TORSO[name][0])
    q0 = session.q.copy()
    q_target[torso] = q0[torso]   # a pair the arms reach with the torso where it is
    left, right = oracle_tips(name, union, q_target)
    session.target_of('left', 0.0, left)
    session.target_of('right', 0.0, right)
    run_until_rest(session, 0.0, 30.0)
    assert all(c.q[torso] == q0[torso] for c in record.commands)
    tips = oracle_tips(name, union, session.q)
    assert max(np.linalg.norm(t[:3, 3] - g[:3, 3]) for t, g in zip(tips, (left, right))) < MET
    assert record.worst <= SLACK


@pytest.mark.parametrize('name', ['pr2', 'g1_29dof_rev_1_0'])
def test_hands_asked_to_be_3_m_apart_rest_and_each_says_how_far_it_is(name):
    session, record = session_of(name)
    union = session.chain
    left, right = oracle_tips(name, union, session.q)
    left, right = left.copy(), right.copy()
    left[1, 3] += 1.5
    right[1, 3] -= 1.5
    session.target_of('left', 0.0, left)
    session.target_of('right', 0.0, right)
    now = run_until_rest(session, 0.0, 30.0)
    arrival = session.arrival(now)
    assert arrival.state == 'unreachable', arrival
    assert [e.state for e in arrival.effectors] == ['unreachable', 'unreachable']
    # The distance each reports is the oracle's distance to its target.
    tips = oracle_tips(name, union, session.q)
    for e, tip, target in zip(arrival.effectors, tips, (left, right)):
        assert e.position_error == pytest.approx(np.linalg.norm(tip[:3, 3] - target[:3, 3]),
                                                 abs=1e-9)
        assert e.position_error > 0.3
        assert e.reason.startswith(f'{e.position_error:.3g} m and '), e.reason
    # At rest, nothing moves afterwards: no humming.
    q_rest = session.q.copy()
    for _ in range(200):
        now += PERIOD
        session.tick(now)
    assert np.array_equal(session.q, q_rest)
    assert np.all(session.tracker.v == 0.0)
    assert record.worst <= SLACK


def test_each_end_effector_has_its_own_task():
    """The left hand a full pose, the right a position: its orientation left free."""
    name = 'tiago_dual'
    rng = np.random.default_rng(11)
    session, record = session_of(name, tasks=(Task('pose'), Task('position')))
    union = session.chain
    _, (left, right) = reachable_pair(name, rng)
    twisted = right.copy()
    twisted[:3, :3] = np.diag([1.0, -1.0, -1.0]) @ right[:3, :3]   # an orientation not asked
    session.target_of('left', 0.0, left)
    session.target_of('right', 0.0, twisted)
    now = run_until_rest(session, 0.0, 30.0)
    assert session.arrival(now + 0.2).state == 'arrived'
    tip_left, tip_right = oracle_tips(name, union, session.q)
    assert np.linalg.norm(tip_left[:3, 3] - left[:3, 3]) < MET and angle(tip_left, left) < MET
    assert np.linalg.norm(tip_right[:3, 3] - right[:3, 3]) < MET
    assert record.worst <= SLACK


def test_reset_goes_back_to_the_initial_joints_within_the_limits():
    name = 'pr2'
    rng = np.random.default_rng(2)
    session, record = session_of(name)
    q0 = session.q.copy()
    _, (left, right) = reachable_pair(name, rng)
    session.target_of('left', 0.0, left)
    session.target_of('right', 0.0, right)
    now = run_until_rest(session, 0.0, 30.0)
    assert not np.allclose(session.q, q0)
    session.reset(now)
    now = run_until_rest(session, now, 30.0)
    assert np.allclose(session.q, q0, rtol=0.0, atol=1e-12)
    assert session.arrival(now + 0.2).state == 'arrived'
    assert record.worst <= SLACK


def test_a_measured_state_far_from_the_plan_and_a_clock_that_goes_back():
    """A re-sync continues from the measured joints; a clock back brakes, then goes on."""
    name = 'pr2'
    rng = np.random.default_rng(8)
    session, record = session_of(name)
    union = session.chain
    _, (left, right) = reachable_pair(name, rng)
    session.target_of('left', 0.0, left)
    session.target_of('right', 0.0, right)
    now = 0.0
    for _ in range(30):
        now += PERIOD
        session.tick(now)
    measured, _ = reachable_pair(name, rng)
    session.plan.restart(now, measured)   # what the feedback policy does on a re-sync
    record.forget_last()
    assert np.allclose(session.q, np.clip(measured, union.lower, union.upper))
    for _ in range(30):
        now += PERIOD
        session.tick(now)
    now -= 1.0   # the clock goes back (a simulator reset)
    now = run_until_rest(session, now, 40.0)
    assert session.arrival(now + 0.2).state == 'arrived'
    tips = oracle_tips(name, union, session.q)
    assert max(np.linalg.norm(t[:3, 3] - g[:3, 3]) for t, g in zip(tips, (left, right))) < MET
    assert record.worst <= SLACK


def test_bad_input_is_refused_with_the_reason():
    session, _ = session_of('pr2')
    pose = np.eye(4)
    with pytest.raises(InvalidInputError, match="end effector 'middle'"):
        session.target_of('middle', 0.0, pose)
    with pytest.raises(InvalidInputError, match="end effector 'middle'"):
        session.twist_of('middle', 0.0, [0.1, 0, 0], [0, 0, 0])
    looking, _ = session_of('pr2', tasks=(Task('pose'), Task('look_at')))
    with pytest.raises(InvalidInputError, match='right/target_twist: a twist moves the tip'):
        looking.twist_of('right', 0.0, [0.1, 0, 0], [0, 0, 0])
    with pytest.raises(InvalidInputError, match='left/pole_target: expected a finite point'):
        session.pole_of('left', np.array([0.0, np.nan, 1.0]))
    with pytest.raises(InvalidInputError, match="end effector 'middle'"):
        session.pole_of('middle', np.zeros(3))
    with pytest.raises(InvalidInputError, match='outside the joint limits'):
        solver = stacked('pr2')
        GroupTracker(solver, TrackerConfig(), np.where(np.isfinite(solver.union.upper),
                                                       solver.union.upper + 1.0, 0.0), 0.0)
    assert not session.has_target


def test_a_twist_moves_one_hand_while_the_other_holds_and_the_dead_man_stops_it():
    """The PR2's left hand teleoperated at 0.1 m/s along y (base frame) for 1 s, then let go.

    From joints away from the limits and singular wrists (mid-limits is a
    wrist singularity of these arms).
    """
    name = 'pr2'
    q0, _ = reachable_pair(name, np.random.default_rng(3))
    session, record = session_of(name, q0=q0)
    union = session.chain
    config = session.tracker.config
    left0, right0 = oracle_tips(name, union, session.q)
    now, speed = 0.0, 0.1
    # A teleoperation device sends at 50 Hz; the node ticks at 100 Hz.
    tips = []
    for k in range(100):
        if k % 2 == 0:
            session.twist_of('left', now, [0.0, speed, 0.0], [0.0, 0.0, 0.0])
        now += PERIOD
        session.tick(now)
        q, _, _ = session.plan.sample(now)
        tips.append(oracle_tips(name, union, q))
    # Nothing more is sent: after twist_timeout the hand brakes to rest.
    for _ in range(300):
        now += PERIOD
        session.tick(now)
    left1, right1 = oracle_tips(name, union, session.q)
    moved = left1[:3, 3] - left0[:3, 3]
    assert 0.09 < moved[1] < speed * (1.0 + config.twist_timeout) + 0.01, moved
    off_axis = max(max(abs(t[0][0, 3] - left0[0, 3]), abs(t[0][2, 3] - left0[2, 3]))
                   for t in tips)
    assert off_axis < 5e-3, off_axis
    assert angle(left1, left0) < 1e-2
    # The other hand held its pose all along.
    worst = max(np.linalg.norm(r[:3, 3] - right0[:3, 3]) for _, r in tips)
    assert worst < 1e-3, worst
    # The tip never faster than the limit (the committed plan, sampled each tick).
    steps = [np.linalg.norm(b[0][:3, 3] - a[0][:3, 3]) / PERIOD for a, b in zip(tips, tips[1:])]
    assert max(steps) <= config.max_linear_speed * 1.001, max(steps)
    assert np.all(session.tracker.v == 0.0)
    assert record.worst <= SLACK


# -- elbow poles ---------------------------------------------------------------------------

KUKA = (URDF_CORPUS / 'external' / 'kuka_iiwa14_r820.urdf').read_text()
KUKA_RAW = RawModel(KUKA)
KUKA_CHAIN = chain_from_urdf_string(KUKA, 'base_link', 'tool0')
# Elbow points: the origin of the fourth joint from the tip (the elbow flexion), per robot.
ELBOW_LINKS = {'pr2': ('l_elbow_flex_link', 'r_elbow_flex_link'),
               'tiago_dual': ('arm_left_4_link', 'arm_right_4_link'),
               'g1_29dof_rev_1_0': ('left_elbow_link', 'right_elbow_link')}


def follow_to_rest(solver, targets, q, poles, ticks=400):
    """Return (q, ticks) after task and pole steps until neither moves q."""
    for k in range(ticks):
        nxt = solver.toward_poles(targets, solver.follow(targets, q, 3), poles)
        if np.array_equal(nxt, q):
            return q, k
        q = nxt
    return q, ticks


def test_the_default_elbow_is_each_arms_elbow_flexion():
    """The fourth free joint from the tip: each description's elbow joint, torso or not."""
    for name, links in ELBOW_LINKS.items():
        solver = stacked(name)
        for elbow, link in zip(solver.elbows, links):
            child = next(child for child, j in RAW[name].joints.items()
                         if j['name'] == elbow.joint)
            assert child == link, (name, elbow.joint)
    with pytest.raises(InvalidInputError, match="elbow: 'joint_b4' is not a free joint"):
        StackedIK([EndEffector('arm', KUKA_CHAIN, elbow='joint_b4')])


# The KUKA description's joint offsets (joint_a2 and joint_a4: 0.44 mm off the SRS axes).
KUKA_OFFSET_M = 0.00044


def swivel_gap(q, pole):
    """Return the angle (rad) between the elbow and the pole about the KUKA's S-W line, or None.

    None: the pole is within 5 cm of the line (every swivel is then as near),
    or the elbow within 1 cm (a nearly stretched arm: its swivel hardly moves
    the elbow, a step's joints move 0.1 rad per 0.4 mm of it, and the tasks'
    corrections take back what a step gains).
    Less the share the description's offsets may bend it by (3 x offset /
    the elbow's distance from the line: a nearly stretched arm's elbow
    circles 8 mm from it, and 0.44 mm is then 0.06 rad).
    """
    values = dict(zip(KUKA_CHAIN.joint_names, q))
    s, e, w = (KUKA_RAW.pose('base_link', link, values)[:3, 3]
               for link in ('link_2', 'link_4', 'link_6'))
    u = (w - s) / np.linalg.norm(w - s)

    def across(x):
        return (x - s) - ((x - s) @ u) * u

    side, wanted = across(e), across(pole)
    if np.linalg.norm(wanted) < 0.05 or np.linalg.norm(side) < 0.01:
        return None
    gap = float(np.arccos(np.clip(side @ wanted / np.linalg.norm(side) /
                                  np.linalg.norm(wanted), -1.0, 1.0)))
    return max(gap - 3.0 * KUKA_OFFSET_M / float(np.linalg.norm(side)), 0.0)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1))
def test_a_pole_turns_a_shoulder_elbow_wrist_arm_into_the_plane_of_its_pole(seed):
    """The KUKA iiwa14 of ROS-Industrial: the elbow ends on the pole's side of the S-W line.

    Shoulder S, elbow E, wrist W are the origins of link_2, link_4 and
    link_6 by the oracle's FK. With the hand held, E moves on a circle about
    S-W; its point nearest the pole P lies in the plane of S-W and P (within
    10 mrad, and the share the description's 0.44 mm offsets may bend it:
    swivel_gap); a joint at its limit may stop the elbow short (then it must
    be within 1 mrad of it).
    """
    rng = np.random.default_rng(seed)
    solver = StackedIK([EndEffector('arm', KUKA_CHAIN)], backend='numba')
    lo, hi = KUKA_CHAIN.lower, KUKA_CHAIN.upper
    q0 = rng.uniform(lo + 0.2 * (hi - lo), hi - 0.2 * (hi - lo))
    values = dict(zip(KUKA_CHAIN.joint_names, q0))
    target = KUKA_RAW.pose('base_link', 'tool0', values)
    pole = KUKA_RAW.pose('base_link', 'link_2', values)[:3, 3] + rng.normal(size=3)
    q, ticks = follow_to_rest(solver, [target], q0, [pole])
    assert ticks < 400
    values = dict(zip(KUKA_CHAIN.joint_names, q))
    tip = KUKA_RAW.pose('base_link', 'tool0', values)
    assert np.linalg.norm(tip[:3, 3] - target[:3, 3]) < MET and angle(tip, target) < MET
    gap = swivel_gap(q, pole)
    at_limit = np.any(np.minimum(q - lo, hi - q) < 1e-3)
    assert gap is None or gap < 0.01 or at_limit, (gap, q)
    assert np.all(q >= lo) and np.all(q <= hi)
    # A full solve from mid-limits with the pole ends on the pole's side as well (a budget
    # no busy machine runs out of: its refinement stops at the budget, 20 ms by default).
    result = StackedIK([EndEffector('arm', KUKA_CHAIN)], backend='numba',
                       timeout_s=30.0).solve([target], poles=[pole])
    assert result.success
    gap = swivel_gap(result.q, pole)
    assert gap is None or gap < 0.01 or np.any(np.minimum(result.q - lo, hi - result.q) < 1e-3)


def elbow_gaps(name, union, q, poles):
    base = ROBOTS[name][0]
    values = dict(zip(union.names, q))
    return sum(float(np.sum((RAW[name].pose(base, link, values)[:3, 3] - p) ** 2))
               for link, p in zip(ELBOW_LINKS[name], poles))


def hands_error(name, union, q, targets):
    """Return the (12,) errors of both hands at q: positions, rotation vectors (oracle's FK)."""
    out = []
    for tip, target in zip(oracle_tips(name, union, q), targets):
        r = target[:3, :3].T @ tip[:3, :3]
        rotvec = 0.5 * np.array([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
        out.extend([*(tip[:3, 3] - target[:3, 3]), *rotvec])
    return np.array(out)


def oracle_jacobian(name, union, q, targets, h=1e-6):
    base = hands_error(name, union, q, targets)
    return np.array([(hands_error(name, union, q + h * np.eye(len(q))[k], targets) - base) / h
                     for k in range(len(q))]).T


def keep_hands(name, union, q, targets):
    """Return q moved back onto both hands' poses (Newton steps on the oracle's Jacobian)."""
    for _ in range(4):
        q = q - np.linalg.pinv(oracle_jacobian(name, union, q, targets)) @ \
            hands_error(name, union, q, targets)
    return q


@pytest.mark.parametrize('name', ['pr2', 'tiago_dual'])
def test_poles_turn_two_elbows_as_far_as_both_hands_leave_them_free(name):
    """Two arms and a torso through a session: each elbow toward its own pole, hands held.

    The hands hold their poses (within 1 mm while the joints move, to 10 µm
    at rest), every command keeps the limits, the torso does not move (a
    pole turns its own arm), and at rest no motion of the arms' joints that
    keeps both hands (the null space of the oracle's finite-difference
    Jacobian, each direction both ways, the hands put back by Newton steps)
    brings the elbows nearer their poles, unless it leaves the joint limits.
    """
    rng = np.random.default_rng(3)
    q0, targets = reachable_pair(name, rng)
    session, record = session_of(name, q0=q0)
    union = session.chain
    base = ROBOTS[name][0]
    values = dict(zip(union.names, q0))
    # Poles 1 m below each elbow and 0.5 m out to its side: the elbows drop and open.
    poles = []
    for link, side in zip(ELBOW_LINKS[name], (1.0, -1.0)):
        poles.append(RAW[name].pose(base, link, values)[:3, 3] + np.array([0.0, 0.5 * side, -1.0]))
    before = elbow_gaps(name, union, q0, poles)
    session.pole_of('left', poles[0])
    session.pole_of('right', poles[1])
    now, worst_hand, quiet = 0.0, 0.0, 0
    while quiet < 50 and now < 15.0:   # until the joints rest for 0.5 s
        now += PERIOD
        session.tick(now)
        worst_hand = max(worst_hand, float(np.max(np.abs(hands_error(name, union, session.q,
                                                                     targets)))))
        quiet = quiet + 1 if np.all(session.tracker.v == 0.0) else 0
    assert quiet == 50
    q = session.q.copy()
    torso = [union.names.index(n) for n in TORSO[name]]
    # The torso moves only by the tasks' corrections of the command's lag (rounding-sized).
    assert np.max(np.abs(q[torso] - q0[torso])) < 1e-6, q[torso] - q0[torso]
    assert [e.state for e in session.arrival(now).effectors] == ['holding', 'holding']
    assert np.max(np.abs(hands_error(name, union, q, targets))) < MET
    assert worst_hand < 2e-4
    assert record.worst <= SLACK
    rest = elbow_gaps(name, union, q, poles)
    assert rest < before - 0.01
    # Directions of the arms' own joints: a pole does not move the torso both arms share.
    own = np.array([n not in TORSO[name] for n in union.names])
    _, sv, vt = np.linalg.svd(oracle_jacobian(name, union, q, targets)[:, own])
    for part in vt[int(np.sum(sv > 1e-6)):]:
        direction = np.zeros(len(q))
        direction[own] = part
        for sign in (1.0, -1.0):
            moved = keep_hands(name, union, q + sign * 0.02 * direction, targets)
            if union.within_limits(moved):
                assert elbow_gaps(name, union, moved, poles) > rest - 1e-6
    # At rest nothing hums.
    for _ in range(100):
        now += PERIOD
        session.tick(now)
    assert np.array_equal(session.q, q)
    # New targets midway through the elbows' way: the hands go there and arrive.
    session.pole_of('left', poles[1])
    session.pole_of('right', poles[0])
    for _ in range(30):
        now += PERIOD
        session.tick(now)
    _, (left, right) = reachable_pair(name, np.random.default_rng(4))
    session.target_of('left', now, left)
    session.target_of('right', now, right)
    now = run_until_rest(session, now, 30.0)
    assert session.arrival(now + 0.2).state == 'arrived'
    tips = oracle_tips(name, union, session.q)
    assert max(np.linalg.norm(t[:3, 3] - g[:3, 3]) for t, g in zip(tips, (left, right))) < MET
    assert record.worst <= SLACK


def run_a_move(name, seed, with_poles):
    """Move both hands of ``name`` to a pair of targets 0.3 rad of joints away, poles or not.

    Returns (the elbows' summed squared gaps to the poles when the hands'
    trajectories end, the farthest either hand was from its trajectory's
    sample on the way (m), the recorder, the session, the clock at rest).
    """
    rng = np.random.default_rng(seed)
    q0, _ = reachable_pair(name, rng)
    session, record = session_of(name, q0=q0)
    union, base = session.chain, ROBOTS[name][0]
    q1 = np.clip(q0 + rng.uniform(-0.3, 0.3, len(q0)), union.lower, union.upper)
    targets = oracle_tips(name, union, q1)
    values = dict(zip(union.names, q0))
    poles = [RAW[name].pose(base, link, values)[:3, 3] + np.array([0.0, 0.5 * side, -1.0])
             for link, side in zip(ELBOW_LINKS[name], (1.0, -1.0))]
    if with_poles:
        session.pole_of('left', poles[0])
        session.pole_of('right', poles[1])
    session.target_of('left', 0.0, targets[0])
    session.target_of('right', 0.0, targets[1])
    now, off_the_way, at_the_end = 0.0, 0.0, None
    while at_the_end is None and now < 10.0:
        now += PERIOD
        session.tick(now)
        samples = [lane.sample(now, True) for lane in session.tracker.lanes]
        tips = oracle_tips(name, union, session.q)
        off_the_way = max(off_the_way, *(float(np.linalg.norm(t[:3, 3] - s[:3, 3]))
                                         for t, (s, _) in zip(tips, samples)))
        if all(final for _, final in samples):
            at_the_end = elbow_gaps(name, union, session.q, poles)
    now = run_until_rest(session, now, 20.0)
    assert session.arrival(now + 0.2).state == 'arrived'
    tips = oracle_tips(name, union, session.q)
    assert max(np.linalg.norm(t[:3, 3] - g[:3, 3]) for t, g in zip(tips, targets)) < MET
    return at_the_end, off_the_way, record


@pytest.mark.parametrize('name', ['pr2', 'tiago_dual'])
def test_poles_turn_the_elbows_while_the_hands_move(name):
    """Targets and poles sent together: the elbows turn on the hands' way, not after it.

    The same move (seed 1: hands that keep up with their trajectories)
    without poles is the reference: with them, the elbows are nearer their
    poles when the hands' trajectories end (by 0.02 m² of summed squared
    gaps: 0.04-0.05 measured), the hands keep to their way within 2 mm of
    how they keep to it without, both arrive, and every command keeps the
    limits. Before the elbows turned only at final targets: the same gaps.
    """
    turned, way, record = run_a_move(name, 1, True)
    plain, plain_way, plain_record = run_a_move(name, 1, False)
    assert turned < plain - 0.02, (turned, plain)
    assert way < plain_way + 2e-3, (way, plain_way)
    assert record.worst <= SLACK and plain_record.worst <= SLACK


def test_a_pole_turns_the_elbow_while_a_twist_moves_the_hand():
    """The PR2's left hand teleoperated at 5 cm/s for 2 s with a pole for its elbow.

    By the twist's end the elbow is within 1 cm of as near its pole as it
    rests once the hand stops (the elbows' way at final targets adds that
    much at most); the hand moved at the twist (off its line by 5 mm at
    most), the right hand held, every command within the limits. Before, a
    twist's hand left its pole aside: 6 cm short.
    """
    name = 'pr2'
    q0, _ = reachable_pair(name, np.random.default_rng(3))
    session, record = session_of(name, q0=q0)
    union, base = session.chain, ROBOTS[name][0]
    left0, right0 = oracle_tips(name, union, q0)

    def elbow_to_pole(q):
        values = dict(zip(union.names, q))
        return float(np.linalg.norm(RAW[name].pose(base, ELBOW_LINKS[name][0], values)[:3, 3]
                                    - pole))

    values = dict(zip(union.names, q0))
    pole = RAW[name].pose(base, ELBOW_LINKS[name][0], values)[:3, 3] + np.array([0, 0.5, -1.0])
    session.pole_of('left', pole)
    now, tips = 0.0, []
    for k in range(200):
        if k % 2 == 0:
            session.twist_of('left', now, [0.0, 0.05, 0.0], [0.0, 0.0, 0.0])
        now += PERIOD
        session.tick(now)
        tips.append(oracle_tips(name, union, session.q))
    on_the_way = elbow_to_pole(session.q)
    for _ in range(600):   # the dead-man stops the hand; the elbow's way ends there
        now += PERIOD
        session.tick(now)
    assert np.all(session.tracker.v == 0.0)
    at_rest = elbow_to_pole(session.q)
    assert on_the_way < at_rest + 0.01, (on_the_way, at_rest)
    assert at_rest < elbow_to_pole(q0) - 0.05
    moved = tips[-1][0][:3, 3] - left0[:3, 3]
    assert 0.09 < moved[1] < 0.11, moved
    assert max(max(abs(t[0][0, 3] - left0[0, 3]), abs(t[0][2, 3] - left0[2, 3]))
               for t in tips) < 5e-3
    assert max(np.linalg.norm(r[:3, 3] - right0[:3, 3]) for _, r in tips) < 1e-3
    assert record.worst <= SLACK


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(['pr2', 'tiago_dual']), seed=st.integers(0, 2**31 - 1))
def test_a_quick_pole_step_keeps_the_hands_and_brings_the_elbows_nearer(name, seed):
    """StackedIK.toward_poles(quick=True), a moving goal's pole step, judged by the oracle.

    From random joints with both hands met there and random poles: the step
    is q itself, or it brings the elbows nearer their poles (summed squared
    gaps, the oracle's elbow points), keeps both hands within the solver's
    tolerance, moves no joint shared by the arms, and stays within the limits.
    """
    rng = np.random.default_rng(seed)
    q, targets = reachable_pair(name, rng)
    solver = stacked(name)
    union, base = solver.union, ROBOTS[name][0]
    values = dict(zip(union.names, q))
    poles = [RAW[name].pose(base, link, values)[:3, 3] + rng.normal(size=3)
             for link in ELBOW_LINKS[name]]
    step = np.full(union.n, 0.01)
    nxt = solver.toward_poles(targets, q, poles, 0.005, timed=True, joint_step=step, quick=True)
    if nxt is q:
        return
    assert elbow_gaps(name, union, nxt, poles) < elbow_gaps(name, union, q, poles)
    assert np.max(np.abs(hands_error(name, union, nxt, targets))) < solver.tolerance * 1.01
    torso = [union.names.index(n) for n in TORSO[name]]
    assert np.array_equal(nxt[torso], q[torso])
    assert union.within_limits(nxt)


@pytest.mark.parametrize('name, seed', [('tiago_dual', 3), ('g1_29dof_rev_1_0', 3)])
def test_a_stall_of_the_local_steps_is_solved_in_the_worker_thread(name, seed, monkeypatch):
    """Targets across the joints' whole range, where the local steps stall short of them.

    The full stacked solve that takes the arm on (once per set of targets)
    runs in the worker's thread, as the node's, not in the tick: the
    tick's cost stays a few local steps. The hands arrive, every command
    within the limits. (These seeds' local steps stall: the solve is asked.)
    """
    threads = []
    answer_with = group_route.StallQuestion.answer_with

    def answered_where(question, engine):
        threads.append(threading.current_thread().name)
        return answer_with(question, engine)

    monkeypatch.setattr(group_route.StallQuestion, 'answer_with', answered_where)
    rng = np.random.default_rng(seed)
    union = stacked(name).union
    lo = np.where(np.isfinite(union.lower), union.lower, -np.pi)
    hi = np.where(np.isfinite(union.upper), union.upper, np.pi)
    q0 = rng.uniform(lo + 0.02 * (hi - lo), hi - 0.02 * (hi - lo))
    targets = oracle_tips(name, union, rng.uniform(lo + 0.02 * (hi - lo), hi - 0.02 * (hi - lo)))
    worker = ThreadWorker()
    try:
        session, record = session_of(name, q0=q0, worker=worker)
        session.target_of('left', 0.0, targets[0])
        session.target_of('right', 0.0, targets[1])
        now = run_until_rest(session, 0.0, 30.0)
    finally:
        worker.stop()
    assert threads and all(t == 'ik_node worker' for t in threads), threads
    assert threading.current_thread().name not in threads
    assert session.arrival(now + 0.2).state == 'arrived'
    tips = oracle_tips(name, union, session.q)
    for tip, target in zip(tips, targets):
        assert np.linalg.norm(tip[:3, 3] - target[:3, 3]) < MET
        assert angle(tip, target) < MET
    assert record.worst <= SLACK

# SPDX-License-Identifier: Apache-2.0

"""Solver edge cases through the whole node, over DDS: singular, at reach, at limits.

Each arm (and solver) is driven through a sequence of awkward targets: the
stretched arm (all joints zero: also the aligned shoulder and wrist axes
of the iiwa), a wrist with aligned axes, a joint exactly at its limit, a
180-degree rotation about the last joint with the position unchanged, a
point beyond the arm's reach bound, the base origin, and back home.

Judged independently of the node's own numbers: every step between two
published joint states is within the joint's speed limit times the time
between their stamps (positions, not the velocities the node reports), the
velocity changes within the acceleration limit, nothing is NaN or outside
the limits, and the node's reachability report agrees with the independent
FK: a target it calls reachable is arrived at (<= 1e-4 m, 1e-3 rad); one it
calls unreachable is not; targets built by FK within the limits must be
called reachable, targets beyond the reach bound unreachable.

Over DDS the iiwa14 with both solvers (the node's whole path: stream, jerk
stage, the switch from numpy to the compiled kernels). The same sequences on
the iiwa14 and the UR5e (Jacobian) run in-process on every command, with the
same reachability report, in test_the_tracker_never_stalls_mid_trajectory_\
through_the_edge_cases (before issue 30 the UR5e also ran over DDS).
"""

import math
import os

from ik_node.core.ik.base import IKResult
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.core.motion.worker import GoalEngine, Question
from ik_node.core.poses import pose_matrix, rotation9
from node_process import ARMS, model_params, NodeUnderTest
import numpy as np
from oracle import pose_errors
import pytest
from ros_helpers import check_joint_stream

PUBLISH_RATE = 100.0
# A target is settled when the arm is at it or has stood still this long, s.
# Longer than a trajectory of these cases lasts: folded where an unreachable
# target left it, the arm may hold while the solves of the trajectory's
# first poses miss (over a second on a busy machine) and move on after; the
# end of the trajectory is solved with the target's known solution.
STILL_S = 4.0
# The arm is at rest when its joint states of this long are all equal, s.
AT_REST_S = 0.3
DEFAULT_ACCELERATION = TrackerConfig().max_joint_acceleration
# Home, and the joints that make each case: (wrist joint whose zero aligns
# the axes around it, joint sent to its lower limit, last joint turned by pi).
SETUPS = {
    'iiwa14': ([0.2, 0.5, 0.1, -1.2, 0.3, 0.9, -1.4], 5, 3, 6),
    'ur5e': ([0.3, -1.2, 1.5, -1.6, -1.4, -1.0], 4, 2, 5),
}


def edge_cases(chain, home, wrist, limit, roll):
    """(name, 4x4 target, truly reachable: True / False / None when not known)."""
    home = np.array(home)
    stretched = chain.forward(np.zeros(chain.n))
    beyond = stretched.copy()
    p = stretched[:3, 3]
    beyond[:3, 3] = p * (1.01 * chain.reach_bound() / np.linalg.norm(p))
    aligned = home.copy()
    aligned[wrist] = 0.0
    at_limit = home.copy()
    at_limit[limit] = chain.lower[limit]
    turned = home.copy()
    turned[roll] += math.pi
    assert chain.within_limits(turned)
    base = np.diag([1.0, -1.0, -1.0, 1.0])   # tool pointing down, at the base origin
    return [
        ('aligned wrist', chain.forward(aligned), True),
        ('joint at its lower limit', chain.forward(at_limit), True),
        ('180 degrees about the last joint', chain.forward(turned), True),
        ('stretched', stretched, True),
        # |FK(q)| <= reach_bound for every q (property-tested in test_chain).
        ('beyond the reach bound', beyond, False),
        ('at the base origin', base, None),
        ('home again', chain.forward(home), True),
    ]


def settle(node, chain, target, timeout_s=30.0, still_s=STILL_S):
    """Wait until the arm is at rest at the target, or has stopped moving for ``still_s``.

    ``still_s`` None: only at rest at the target settles it.

    At rest: the last AT_REST_S of joint states are equal. The tip passes
    within the tolerance of the target before the arm stops (0.03-1 s before,
    in-process; test_the_tracker_never_stalls_mid_trajectory_through_the_edge_cases):
    judged in that transit, an arm still turning about the stretched arm's
    aligned axes was once reported 1.35 mrad away (issue 30, the flake of the
    iiwa14 with the Jacobian solver, reproduced over DDS beside a CPU hog).
    """
    def at_rest(seconds):
        count = int(seconds * PUBLISH_RATE)
        if len(node.joints) < count:
            return False
        recent = np.array([m.position for m in node.joints[-count:]])
        return float(np.ptp(recent, axis=0).max()) <= 1e-9

    def arrived_or_still():
        if not at_rest(AT_REST_S):
            return False
        pos, ang = pose_errors(chain, np.array(node.joints[-1].position), target)
        return (pos <= 1e-4 and ang <= 1e-3) or (still_s is not None and at_rest(still_s))
    return node.wait(arrived_or_still, timeout_s)


def unsettled(node):
    """Return what the node did while it did not settle (the report of a failure).

    ci78, beside four CPU hogs: 'beyond the reach bound' was not still for
    4 s within 90 s, and the report said nothing more.
    """
    recent = np.array([m.position for m in node.joints[-200:]]) if node.joints else None
    moved = None if recent is None else float(np.ptp(recent, axis=0).max())
    keys = ('mode', 'late_ticks_braked', 'ticks_late', 'clock_jumps_forward', 'arrival',
            'arrival_reason', 'target_reason', 'distance_to_target_m', 'callback_errors')
    return (f'{len(node.joints)} states, the last {0 if recent is None else len(recent)} '
            f'moved up to {moved} rad, last {None if recent is None else recent[-1].tolist()}; '
            + ', '.join(f'{k}={node.diagnostic(k)}' for k in keys))


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.wallclock
@pytest.mark.parametrize('arm, solver', [('iiwa14', 'analytic'), ('iiwa14', 'jacobian')])
def test_edge_cases_keep_speeds_bounded_and_reports_truthful(arm, solver):
    path, base, tip = ARMS[arm]
    chain = Chain.from_urdf_file(str(path), base, tip)
    home, wrist, limit, roll = SETUPS[arm]
    params = dict(model_params(arm), solver=solver, publish_rate=PUBLISH_RATE,
                  initial_positions='[' + ', '.join(str(v) for v in home) + ']')
    node = NodeUnderTest(params)
    try:
        node.ready()
        for name, target, truly_reachable in edge_cases(chain, home, wrist, limit, roll):
            node.joints.clear()
            node.send(target)
            # A target known reachable must be arrived at: standing still
            # does not settle it (on a busy machine a starved solver can pause
            # the arm mid-way for seconds, then it goes on; issue 30).
            still_s = None if truly_reachable else STILL_S
            timeout_s = 90.0 if os.environ.get('IK_NODE_BUSY_MACHINE') == '1' else 30.0
            assert settle(node, chain, target, timeout_s=timeout_s, still_s=still_s), \
                f'{name}: the arm never settled; {unsettled(node)}'
            node.diagnostics.clear()
            assert node.wait(lambda: node.diagnostic('target_reachable') is not None, 5.0)
            said = node.diagnostic('target_reachable') == 'true'
            pos, ang = pose_errors(chain, np.array(node.joints[-1].position), target)
            arrived = pos <= 1e-4 and ang <= 1e-3
            assert said == arrived, (name, said, pos, ang, node.diagnostic('target_reason'))
            if truly_reachable is not None:
                assert said == truly_reachable, (name, node.diagnostic('target_reason'))
            check_joint_stream(chain, node.joints, accel=DEFAULT_ACCELERATION)
    finally:
        assert node.stop() == 0


def _failed(q, squared_residual):
    return IKResult(q=np.asarray(q, dtype=float), success=False,
                    position_error=math.sqrt(squared_residual), orientation_error=0.0,
                    iterations=1, restarts=1, elapsed_s=0.0, reason='test')


class _FailingSolver:
    """Wraps a solver: every solve fails with the next of ``answers`` (q, squared residual)."""

    def __init__(self, solver, answers):
        self._solver, self._answers, self.calls = solver, list(answers), 0
        self.name, self.backend, self.uses_pole = solver.name, solver.backend, solver.uses_pole

    def solve(self, target, q_reference=None, *, pole=None):
        q, squared = self._answers[min(self.calls, len(self._answers) - 1)]
        self.calls += 1
        return _failed(q, squared)

    def __getattr__(self, name):
        return getattr(self._solver, name)


def test_a_failed_solve_is_followed_only_when_it_beats_holding_and_the_goal_never_wanders():
    """An unreachable pose: the worker's goal is the solve's only when closer than holding.

    Issue 50: once answered, the pose's goal is held; the solver is not asked
    again at every tick (its restarts once made the arm wander among the
    closest poses they found), so later, different answers change nothing.
    """
    path, base, tip = ARMS['ur5e']
    chain = Chain.from_urdf_file(str(path), base, tip)
    q_now = np.array(SETUPS['ur5e'][0])
    pose = chain.forward(q_now + 0.3)
    pos, ang = pose_errors(chain, q_now, pose)     # independent FK
    held = pos * pos + ang * ang
    a, b = q_now + 0.01, q_now + 0.02
    engine = GoalEngine()
    for answer, expected in (((a, 1.5 * held), q_now), ((b, 0.5 * held), b)):
        solver = _FailingSolver(make_solver(chain, 'jacobian'), [answer])
        got = engine.answer(Question(('k',), pose, pose, q_now, None, solver))
        np.testing.assert_array_equal(got.goal, expected)
        assert not got.solves and solver.calls == 1
    # In the tracker, a pose 2 m out of reach: asked once, then the arm comes to rest and
    # stays, whatever the solver would answer later.
    far = chain.forward(q_now)
    far[:3, 3] *= 2.0 / np.linalg.norm(far[:3, 3])
    closest = [(q_now + 0.05 * k, 0.5 * held / k) for k in range(1, 50)]
    solver = _FailingSolver(make_solver(chain, 'jacobian'), closest)
    tracker = MotionTracker(chain, solver, TrackerConfig(smoothing=False), q_now, 0.0)
    tracker.add_target(0.0, far)
    rested = None
    for k in range(600):
        tracker.command(0.01 * (k + 1))
        if k == 400:
            rested = tracker.q.copy()
    assert solver.calls == 1 and not np.any(tracker.v)
    np.testing.assert_array_equal(tracker.q, rested)


# With the node's 5 ms wall-clock solver budget: on a machine busy with other
# tests the starved solver misses and the arm pauses mid-way (seen at 'home
# again' with three test workers on two cores, issue 30), and with a budget
# of 1 s the iiwa14's Jacobian solver finds a far branch there that the step
# rule declines (the arm stands 0.5 s): this runs alone, on a quiet machine.
@pytest.mark.timely
@pytest.mark.parametrize('arm, solver', [('iiwa14', 'analytic'), ('iiwa14', 'jacobian'),
                                         ('ur5e', 'jacobian')])
def test_the_tracker_never_stalls_mid_trajectory_through_the_edge_cases(arm, solver):
    """Plain Python, same sequence: the arm keeps moving while it can, then arrives.

    A case seen over DDS: after the unreachable target at the base origin,
    the way home started where the damped local steps were at a local
    minimum of the error; the arm stood still for seconds while the
    trajectory moved on through poses the solver could reach. Here, when
    the arm has stood still for 0.5 s while the trajectory's pose moved, the
    pose it is at must have no solution (a fresh Jacobian solve from the
    arm, checked by independent FK, finds none); and every reachable target
    is arrived at; at rest, the reachability the node would report (the
    check after each command) says whether the arm is there, as the DDS run
    checks on the iiwa14.
    """
    path, base, tip = ARMS[arm]
    chain = Chain.from_urdf_file(str(path), base, tip)
    home, wrist, limit, roll = SETUPS[arm]
    tracker = MotionTracker(chain, make_solver(chain, solver), TrackerConfig(),
                            np.array(home), 0.0)
    probe = make_solver(chain, 'jacobian')
    dt, window, t = 1.0 / PUBLISH_RATE, int(0.5 * PUBLISH_RATE), 0.0
    for name, target, truly_reachable in edge_cases(chain, home, wrist, limit, roll):
        tracker.add_target(t, target)
        positions, samples = [], []
        for _ in range(int((20.0 if truly_reachable else 6.0) * PUBLISH_RATE)):
            t += dt
            positions.append(tracker.command(t).q)
            tracker.check_reachability()     # as the node does after each command
            sample = tracker.trajectory.sample(t)
            samples.append(np.concatenate((sample.position, sample.quaternion)))
            if len(positions) >= window and \
                    np.ptp(np.array(positions[-window:]), axis=0).max() <= 1e-9 and \
                    np.ptp(np.array(samples[-window:]), axis=0).max() > 1e-6:
                pose = pose_matrix(rotation9(sample.quaternion), sample.position)
                found = probe.solve(pose, positions[-1])
                pos, ang = pose_errors(chain, found.q, pose)
                assert not (found.success and pos <= 1e-5 and ang <= 1e-5), \
                    f'{name}: the arm stood still, the trajectory moved through a reachable pose'
            pos, ang = pose_errors(chain, positions[-1], target)
            if sample.at_rest and pos <= 1e-4 and ang <= 1e-3:
                break
        if truly_reachable:
            assert pos <= 1e-4 and ang <= 1e-3, (name, pos, ang)
        if np.ptp(np.array(positions[-window:]), axis=0).max() <= 1e-9:   # at rest: truthful
            said = tracker.target_result is not None and tracker.target_result.success
            assert said == (pos <= 1e-4 and ang <= 1e-3), (name, said, pos, ang)


class _SolverThatMissesAfterTheCheck:
    """Wraps a solver: the first solve (the reachability check) is real, later ones fail."""

    def __init__(self, solver):
        self._solver, self.calls = solver, 0
        self.name, self.backend, self.uses_pole = solver.name, solver.backend, solver.uses_pole

    def solve(self, target, q_reference=None, *, pole=None):
        self.calls += 1
        if self.calls == 1:
            return self._solver.solve(target, q_reference, pole=pole)
        q = np.asarray(q_reference, dtype=float)
        return IKResult(q=q, success=False, position_error=1.0, orientation_error=1.0,
                        iterations=1, restarts=0, elapsed_s=0.0, reason='budget ran out')

    @property
    def budget_s(self):
        return self._solver.budget_s

    def set_budget(self, seconds):
        self._solver.set_budget(seconds)

    def __getattr__(self, name):
        # The rest of the solver interface is the wrapped solver's
        # (aim_within_reach, warm_up, ...): only solve misses.
        return getattr(self._solver, name)


@pytest.mark.parametrize('smoothing', [False, True])
def test_a_target_reported_reachable_is_arrived_at_when_later_solves_miss(smoothing):
    """Seen over DDS under load: 'stretched' reported reachable, the arm settled 3 mrad short.

    The Jacobian solver's later solves from near the singular pose ran out of
    budget and the fallback held. A target whose check found a solution is
    now headed for with that solution when the solver misses.
    """
    path, base, tip = ARMS['iiwa14']
    chain = Chain.from_urdf_file(str(path), base, tip)
    home = np.array(SETUPS['iiwa14'][0])
    solver = _SolverThatMissesAfterTheCheck(make_solver(chain, 'jacobian'))
    tracker = MotionTracker(chain, solver, TrackerConfig(smoothing=smoothing), home, 0.0)
    target = chain.forward(np.zeros(chain.n))        # the stretched arm
    tracker.add_target(0.0, target)
    assert tracker.check_reachability().success and solver.calls == 1
    t = 0.0
    for _ in range(1500):
        t += 0.01
        tracker.command(t)
    # Issue 50: the target is solved by the worker, at most once more from where the
    # trajectory ended (the first answer stays when that solve misses); the goal is
    # held. Arrival is what must hold either way.
    assert solver.calls <= 2
    pos, ang = pose_errors(chain, tracker.q, target)
    assert pos <= 1e-6 and ang <= 1e-6, (pos, ang)
